-- The attempts queue: one row per attempt a coordinator hands to the workers (docs/workers.md).
CREATE SEQUENCE runner_attempt_claims;
CREATE TABLE runner_attempts (
    id          bigserial PRIMARY KEY,
    run_id      text        NOT NULL,
    task        text        NOT NULL,
    attempt     integer     NOT NULL,
    agent       text        NOT NULL,
    runtime     text        NOT NULL,
    request     text        NOT NULL,
    state       text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'done')),
    worker      text,
    claim       bigint,
    lease_until timestamptz,
    result      text,
    queued_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runner_attempts_open ON runner_attempts (runtime, id) WHERE state <> 'done';
CREATE INDEX runner_attempts_run ON runner_attempts (run_id);
-- A coordinator takes the replies of its run, done rows only.
CREATE INDEX runner_attempts_done ON runner_attempts (run_id) WHERE state = 'done';
