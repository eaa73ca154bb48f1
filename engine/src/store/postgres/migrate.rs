//! The tables' migrations, embedded in the binary and applied on connecting: each runs once,
//! in order, recorded in `runner_schema_version`. All of them run in one transaction under an
//! advisory lock, so two processes that start at once do not both apply one, and a failed
//! migration leaves nothing half done.

use tokio_postgres::Client;

/// Every migration: its version and its SQL. A new one goes at the end with the next version.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_runs_and_events.sql")),
    (2, include_str!("migrations/0002_attempts.sql")),
    (3, include_str!("migrations/0003_request_starts.sql")),
    (4, include_str!("migrations/0004_task_cache.sql")),
    (5, include_str!("migrations/0005_journal.sql")),
    (6, include_str!("migrations/0006_run_summary.sql")),
];

/// Brings the current schema's tables up to date.
pub(super) async fn apply(client: &mut Client) -> Result<(), tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    // One lock per schema, so tests in schemas of their own do not wait for each other.
    transaction
        .execute(
            "SELECT pg_advisory_xact_lock(hashtext('runner_schema'), hashtext(coalesce(current_schema(), '')))",
            &[],
        )
        .await?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS runner_schema_version \
             (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
    let current: i32 =
        transaction.query_one("SELECT coalesce(max(version), 0) FROM runner_schema_version", &[]).await?.get(0);
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > current) {
        transaction.batch_execute(sql).await?;
        transaction.execute("INSERT INTO runner_schema_version (version) VALUES ($1)", &[version]).await?;
    }
    transaction.commit().await
}
