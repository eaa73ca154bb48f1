-- A provider's `requests_per_minute` across the cluster: the start of each model request of a
-- run's provider, kept for a minute. `runner_request_start` is called before every request by
-- whichever process sends it (a worker or the run's coordinator).
CREATE TABLE runner_request_starts (
    run_id     text        NOT NULL,
    provider   text        NOT NULL,
    started_at timestamptz NOT NULL
);
CREATE INDEX runner_request_starts_key ON runner_request_starts (run_id, provider, started_at);
CREATE INDEX runner_request_starts_age ON runner_request_starts (started_at);

-- Records a request start of `p_provider` in run `p_run` when fewer than `p_limit` started in
-- the last 60 seconds, and returns 0; otherwise records nothing and returns the seconds until
-- the oldest of them leaves the window. Starts of one run and provider are decided one at a
-- time (an advisory lock for the transaction), by the database's clock, so processes whose
-- clocks differ still agree.
CREATE FUNCTION runner_request_start(p_run text, p_provider text, p_limit integer)
RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := clock_timestamp();
    recent integer;
    oldest timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('runner_request_start'), hashtext(p_run || '/' || p_provider));
    -- Starts out of the window are of no use to anyone; rows another caller is deleting are
    -- left to it.
    DELETE FROM runner_request_starts WHERE ctid IN (
        SELECT ctid FROM runner_request_starts WHERE started_at <= now_at - interval '60 seconds'
        FOR UPDATE SKIP LOCKED);
    SELECT count(*), min(started_at) INTO recent, oldest FROM runner_request_starts
        WHERE run_id = p_run AND provider = p_provider AND started_at > now_at - interval '60 seconds';
    IF recent < p_limit THEN
        INSERT INTO runner_request_starts (run_id, provider, started_at) VALUES (p_run, p_provider, now_at);
        RETURN 0;
    END IF;
    RETURN greatest(extract(epoch FROM oldest + interval '60 seconds' - now_at), 0.001);
END;
$$;
