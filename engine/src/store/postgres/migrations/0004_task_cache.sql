-- The task cache of runs in the database, shared by every process that uses it: one row per
-- output a run stored under a key (docs/running.md, "Reusing outputs: the task cache"). `entry`
-- is the entry as JSON, checked against its key and output digest when read, as the files under
-- RUNNER_HOME are; `bytes` is its length, for the size cap.
CREATE TABLE runner_cache (
    key       text   NOT NULL,
    run_id    text   NOT NULL,
    plan      text   NOT NULL,
    task      text   NOT NULL,
    entry     text   NOT NULL,
    bytes     bigint NOT NULL,
    stored_at bigint NOT NULL,
    PRIMARY KEY (key, run_id)
);
-- What changed since the last output of a task: its newest entry.
CREATE INDEX runner_cache_task ON runner_cache (plan, task, stored_at DESC);
-- Pruning by age and by size, oldest first.
CREATE INDEX runner_cache_age ON runner_cache (stored_at);
