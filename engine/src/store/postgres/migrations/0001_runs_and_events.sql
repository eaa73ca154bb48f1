-- Runs and their event records. A run's records are append-only: the trigger refuses every
-- change but an insert, so a log read back is always the log that was written.
CREATE TABLE runner_runs (
    run_id text PRIMARY KEY,
    plan text NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    status text NOT NULL DEFAULT 'new',
    owner text,
    lease_until timestamptz,
    fence bigint NOT NULL DEFAULT 0,
    cancel_request text
);

CREATE TABLE runner_events (
    run_id text NOT NULL REFERENCES runner_runs (run_id),
    seq bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE FUNCTION runner_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'runner_events is append-only: % refused', TG_OP;
END;
$$;

CREATE TRIGGER runner_events_append_only BEFORE UPDATE OR DELETE ON runner_events
    FOR EACH ROW EXECUTE FUNCTION runner_events_append_only();
