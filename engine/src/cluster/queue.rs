//! The statements on `runner_attempts`. A row is queued by a coordinator, claimed by a worker
//! (`FOR UPDATE SKIP LOCKED`, with a new claim token from a sequence), renewed while it runs,
//! and done when the worker's reply is accepted; the coordinator then takes the reply and
//! deletes the row. Every write of a worker names its claim token and a lease that has not run
//! out, so a worker whose claim expired or was taken over can change nothing (fencing).
//!
//! Every statement goes through [`Database::retrying`], so a connection the server drops is
//! made again and the statement run again. Each may run twice: a second enqueue finds the
//! rows of a first that committed before its answer was lost; a claim whose answer was lost
//! runs out and is claimed again; collecting reads the replies, and deletes them only once
//! they are in the coordinator's hands.

use std::time::Duration;

use super::ClusterError;
use crate::runtime::{Attempt, Reply};
use crate::store::postgres::Database;

/// The channel a queued (or released) attempt is announced on; the payload is its runtime.
pub(crate) const QUEUED: &str = "runner_attempts";
/// The channel an accepted reply is announced on; the payload is its run id.
pub(crate) const DONE: &str = "runner_results";

/// An attempt a worker claimed.
pub(crate) struct Claimed {
    /// The row.
    pub id: i64,
    /// The claim token every later write of this worker names.
    pub claim: i64,
    /// The run the attempt belongs to.
    pub run_id: String,
    /// The agent that carries it out.
    pub agent: String,
    /// What the agent is given.
    pub request: Attempt,
    /// Whether another worker held it before and its lease expired.
    pub reclaimed: bool,
    /// Whether the attempt's journal goes to its coordinator (an `llm` attempt).
    pub journaled: bool,
}

/// An attempt to queue: its agent, the agent's runtime, the attempt, and whether it keeps a
/// journal.
pub(crate) struct Queued<'a> {
    pub agent: &'a str,
    pub runtime: &'a str,
    pub attempt: &'a Attempt,
    pub journaled: bool,
}

/// Queues attempts of `run_id` in one statement and announces them; returns their rows in
/// the order given (ids come from one sequence in insertion order, and the rows are inserted
/// in the order given). Run again after a lost connection, it first looks for the rows a
/// first run may have committed: one coordinator queues a run's attempts, and each
/// `(task, attempt)` once.
pub(crate) async fn enqueue(db: &Database, run_id: &str, batch: &[Queued<'_>]) -> Result<Vec<i64>, ClusterError> {
    let mut requests = Vec::with_capacity(batch.len());
    for queued in batch {
        requests.push(serde_json::to_string(queued.attempt).map_err(|error| ClusterError::Query(error.to_string()))?);
    }
    let tasks: Vec<&str> = batch.iter().map(|q| q.attempt.task.as_str()).collect();
    let attempts: Vec<i32> = batch.iter().map(|q| q.attempt.attempt as i32).collect();
    let agents: Vec<&str> = batch.iter().map(|q| q.agent).collect();
    let runtimes: Vec<&str> = batch.iter().map(|q| q.runtime).collect();
    let journaled: Vec<bool> = batch.iter().map(|q| q.journaled).collect();
    let (tasks, attempts, agents, runtimes, requests, journaled) =
        (&tasks, &attempts, &agents, &runtimes, &requests, &journaled);
    let mut tries = 0;
    let ids = db
        .retrying("queue attempts", |client| {
            tries += 1;
            let again = tries > 1;
            async move {
                if again {
                    let found = client
                        .query(
                            "SELECT a.id FROM runner_attempts a \
                             JOIN unnest($2::text[], $3::int[]) WITH ORDINALITY AS b (task, attempt, n) \
                               ON a.task = b.task AND a.attempt = b.attempt \
                             WHERE a.run_id = $1 ORDER BY b.n",
                            &[&run_id, tasks, attempts],
                        )
                        .await?;
                    if found.len() == tasks.len() {
                        return Ok(found.iter().map(|row| row.get(0)).collect());
                    }
                }
                let rows = client
                    .query(
                        "WITH queued AS (INSERT INTO runner_attempts \
                           (run_id, task, attempt, agent, runtime, request, journaled) \
                           SELECT $1, b.task, b.attempt, b.agent, b.runtime, b.request, b.journaled \
                           FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::bool[]) \
                             WITH ORDINALITY AS b (task, attempt, agent, runtime, request, journaled, n) \
                           ORDER BY b.n RETURNING id, runtime), \
                         told AS (SELECT count(pg_notify($8, runtime)) FROM (SELECT DISTINCT runtime FROM queued) r) \
                         SELECT id FROM queued, told ORDER BY id",
                        &[&run_id, tasks, attempts, agents, runtimes, requests, journaled, &QUEUED],
                    )
                    .await?;
                Ok(rows.iter().map(|row| row.get(0)).collect())
            }
        })
        .await?;
    Ok(ids)
}

/// Claims at most `limit` attempts whose runtime is one of `runtimes`: queued ones, and claimed
/// ones whose lease ran out. Each gets a new claim token and a lease of `lease`.
pub(crate) async fn claim(
    db: &Database,
    worker: &str,
    limit: usize,
    runtimes: &[String],
    lease: Duration,
) -> Result<Vec<Claimed>, ClusterError> {
    let sql = "WITH c AS (SELECT id, claim AS old FROM runner_attempts \
                 WHERE runtime = ANY($3) AND (state = 'queued' OR (state = 'claimed' AND lease_until < now())) \
                 ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED) \
               UPDATE runner_attempts a SET state = 'claimed', worker = $1, \
                 claim = nextval('runner_attempt_claims'), lease_until = now() + make_interval(secs => $2) \
               FROM c WHERE a.id = c.id \
               RETURNING a.id, a.claim, a.run_id, a.agent, a.request, c.old IS NOT NULL, a.journaled";
    let rows = db.query("claim attempts", sql, &[&worker, &lease.as_secs_f64(), &runtimes, &(limit as i64)]).await?;
    rows.iter()
        .map(|row| {
            let request: &str = row.get(4);
            let request = serde_json::from_str(request).map_err(|error| {
                ClusterError::Query(format!("attempt {} is not readable: {error}", row.get::<_, i64>(0)))
            })?;
            Ok(Claimed {
                id: row.get(0),
                claim: row.get(1),
                run_id: row.get(2),
                agent: row.get(3),
                request,
                reclaimed: row.get(5),
                journaled: row.get(6),
            })
        })
        .collect()
}

/// Extends a claim by `lease`, unless the claim is no longer current (expired, taken over, or
/// the attempt withdrawn).
pub(crate) async fn renew(db: &Database, id: i64, claim: i64, lease: Duration) -> Result<Renewal, ClusterError> {
    let sql = "UPDATE runner_attempts SET lease_until = now() + make_interval(secs => $3) \
               WHERE id = $1 AND claim = $2 AND state = 'claimed' AND lease_until >= now()";
    if db.execute("renew a claim", sql, &[&id, &claim, &lease.as_secs_f64()]).await? == 1 {
        return Ok(Renewal::Renewed);
    }
    let present = db.query("renew a claim", "SELECT 1 FROM runner_attempts WHERE id = $1", &[&id]).await?;
    Ok(if present.is_empty() { Renewal::Withdrawn } else { Renewal::Lost })
}

/// What renewing a claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease runs on.
    Renewed,
    /// The lease ran out or another worker claimed the attempt since.
    Lost,
    /// The coordinator withdrew the attempt: it was cancelled, or its run ended.
    Withdrawn,
}

/// Records the reply of a claimed attempt and tells its coordinator; false (nothing written)
/// when the claim is no longer current. Run again after a lost connection, a reply the first
/// run recorded under this claim counts as recorded.
pub(crate) async fn finish(db: &Database, id: i64, claim: i64, reply: &Reply) -> Result<bool, ClusterError> {
    let result = serde_json::to_string(reply).map_err(|error| ClusterError::Query(error.to_string()))?;
    let sql = "WITH done AS (UPDATE runner_attempts SET state = 'done', result = $3 \
                 WHERE id = $1 AND claim = $2 AND state = 'claimed' AND lease_until >= now() RETURNING run_id), \
               told AS (SELECT pg_notify($4, run_id) FROM done) \
               SELECT 1 FROM told UNION ALL \
               SELECT 1 FROM runner_attempts WHERE id = $1 AND claim = $2 AND state = 'done' AND result = $3";
    let rows = db.query("record an attempt's reply", sql, &[&id, &claim, &result, &DONE]).await?;
    Ok(!rows.is_empty())
}

/// Gives a claimed attempt back to the queue at once (a worker that stops), if the claim is
/// still current.
pub(crate) async fn release(db: &Database, id: i64, claim: i64) -> Result<(), ClusterError> {
    let sql = "WITH released AS (UPDATE runner_attempts SET state = 'queued', worker = NULL, claim = NULL, \
                 lease_until = NULL WHERE id = $1 AND claim = $2 AND state = 'claimed' RETURNING runtime) \
               SELECT pg_notify($3, runtime) FROM released";
    db.query("give an attempt back", sql, &[&id, &claim, &QUEUED]).await?;
    Ok(())
}

/// Takes the replies of those of `ids` (attempts of `run_id`) that are done: reads them, then
/// deletes their rows, so a connection lost between the two loses no reply (the caller asks
/// only for attempts it still waits for). The done rows of the run are found by an index of
/// their own.
pub(crate) async fn collect(db: &Database, run_id: &str, ids: &[i64]) -> Result<Vec<(i64, Reply)>, ClusterError> {
    let sql = "SELECT id, result FROM runner_attempts WHERE run_id = $1 AND state = 'done' AND id = ANY($2)";
    let rows = db.query("read the replies of workers", sql, &[&run_id, &ids]).await?;
    let replies: Vec<(i64, Reply)> = rows
        .iter()
        .map(|row| {
            let id: i64 = row.get(0);
            let result: Option<&str> = row.get(1);
            let reply = result
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or_else(|| Reply::failed(format!("the reply of attempt {id} in the queue is not readable")));
            (id, reply)
        })
        .collect();
    if !replies.is_empty() {
        let taken: Vec<i64> = replies.iter().map(|(id, _)| *id).collect();
        db.execute("delete the replies taken", "DELETE FROM runner_attempts WHERE id = ANY($1)", &[&taken]).await?;
    }
    Ok(replies)
}

/// Withdraws an attempt the coordinator no longer waits for; a worker running it loses its
/// claim at its next renewal and stops it.
pub(crate) async fn withdraw(db: &Database, id: i64) -> Result<(), ClusterError> {
    db.execute("withdraw an attempt", "DELETE FROM runner_attempts WHERE id = $1", &[&id]).await?;
    Ok(())
}

/// Withdraws every attempt of a run: what a coordinator that takes a run over does first, as
/// the fold of the log dispatches anything unfinished again. Returns how many there were.
pub(crate) async fn withdraw_run(db: &Database, run_id: &str) -> Result<u64, ClusterError> {
    Ok(db.execute("withdraw a run's attempts", "DELETE FROM runner_attempts WHERE run_id = $1", &[&run_id]).await?)
}
