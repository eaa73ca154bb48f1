//! The workers that are up (`runner_workers`): each renews its row while it runs and deletes it
//! when it stops, so a coordinator can tell whether any worker takes `llm` attempts before it
//! hands one that calls tools to the queue.

use std::time::Duration;

use super::ClusterError;
use crate::store::postgres::Database;

/// Records worker `id`, taking `runtimes`, as up for `lease` from now.
pub(crate) async fn announce(
    db: &Database,
    id: &str,
    runtimes: &[String],
    lease: Duration,
) -> Result<(), ClusterError> {
    let sql = "INSERT INTO runner_workers (id, runtimes, seen_until) VALUES ($1, $2, now() + make_interval(secs => $3)) \
               ON CONFLICT (id) DO UPDATE SET runtimes = EXCLUDED.runtimes, seen_until = EXCLUDED.seen_until";
    db.execute("announce a worker", sql, &[&id, &runtimes, &lease.as_secs_f64()]).await?;
    Ok(())
}

/// Removes worker `id`: it stopped.
pub(crate) async fn leave(db: &Database, id: &str) -> Result<(), ClusterError> {
    db.execute("remove a worker", "DELETE FROM runner_workers WHERE id = $1", &[&id]).await?;
    Ok(())
}

/// Whether a worker that is up takes attempts of `runtime`.
pub(crate) async fn offered(db: &Database, runtime: &str) -> Result<bool, ClusterError> {
    let sql = "SELECT EXISTS (SELECT 1 FROM runner_workers WHERE $1 = ANY(runtimes) AND seen_until >= now())";
    let rows = db.query("look for workers", sql, &[&runtime]).await?;
    Ok(rows.first().is_some_and(|row| row.get(0)))
}
