-- The runs list as a query (docs/events.md): each run's row keeps what the list shows, written
-- by the same statement as the records it follows from. Rows of runs recorded before this
-- migration have none (NULL) until their next write; readers fold those runs' records instead.
ALTER TABLE runner_runs
    ADD COLUMN tasks             bigint,
    ADD COLUMN succeeded         bigint,
    ADD COLUMN prompt_tokens     bigint,
    ADD COLUMN completion_tokens bigint,
    ADD COLUMN updated           text;
-- Newest first, as `runner runs` and the web view list them.
CREATE INDEX runner_runs_newest ON runner_runs (created DESC, run_id DESC);
-- The runs a worker may take over: under way, their lease run out.
CREATE INDEX runner_runs_running ON runner_runs (lease_until) WHERE status = 'running';
