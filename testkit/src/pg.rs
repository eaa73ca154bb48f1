//! A schema of its own in the test database for each test that uses PostgreSQL.
//!
//! The server is `RUNNER_TEST_DATABASE_URL` (default [`DEFAULT_URL`]). [`TestDatabase::new`]
//! creates a schema with a fresh name and gives a URL whose connections use it
//! (`options=-csearch_path=<schema>`); the schema is dropped with everything in it when the
//! value is dropped. When the server does not answer, the test is skipped with a message,
//! unless `RUNNER_REQUIRE_POSTGRES=1` (which `.ci/run` sets when the server answers), where
//! it fails.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_postgres::NoTls;

/// The server the tests use when `RUNNER_TEST_DATABASE_URL` is unset.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A schema of one test: its URL, and the schema dropped on drop.
#[derive(Debug)]
pub struct TestDatabase {
    /// A URL whose connections create and find tables in this test's schema.
    pub url: String,
    /// The schema's name.
    pub schema: String,
    base: String,
}

impl TestDatabase {
    /// A fresh schema, or `None` when the server does not answer and is not required.
    ///
    /// # Panics
    /// When the server does not answer and `RUNNER_REQUIRE_POSTGRES=1`, or refuses to create
    /// the schema.
    pub fn new(test: &str) -> Option<TestDatabase> {
        let base = base_url();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let schema = format!(
            "runner_test_{}_{}_{:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            nanos.subsec_nanos()
        );
        if let Err(error) = execute(&base, &format!("CREATE SCHEMA {schema}")) {
            assert!(
                std::env::var("RUNNER_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "{test}: RUNNER_REQUIRE_POSTGRES=1 but the database {base} does not answer: {error}"
            );
            eprintln!("{test}: skipped, no PostgreSQL at {base} ({error}; set RUNNER_TEST_DATABASE_URL)");
            return None;
        }
        let separator = if base.contains('?') { '&' } else { '?' };
        // The application name tells this test's connections apart, so a test can end them.
        let url = format!("{base}{separator}options=-csearch_path%3D{schema}&application_name={schema}");
        Some(TestDatabase { url, schema, base })
    }

    /// Runs SQL statements in this test's schema (to look at or damage its tables).
    ///
    /// # Panics
    /// When the database refuses them.
    pub fn execute(&self, sql: &str) {
        if let Err(error) = execute(&self.url, sql) {
            panic!("{sql}: {error}");
        }
    }

    /// Ends every connection of this test's schema but the caller's (as a database restart or
    /// failover would, with `pg_terminate_backend`); returns how many there were.
    ///
    /// # Panics
    /// When the database refuses the query.
    pub fn terminate_connections(&self) -> usize {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{}' AND pid <> pg_backend_pid()",
            self.schema
        );
        let counted = self.column(&sql).into_iter().flatten().next().and_then(|n| n.parse().ok());
        counted.unwrap_or_else(|| panic!("{sql}: no count"))
    }

    /// The first column of every row `sql` returns, as text.
    ///
    /// # Panics
    /// When the database refuses the query.
    pub fn column(&self, sql: &str) -> Vec<Option<String>> {
        let url = self.url.clone();
        let sql = sql.to_owned();
        let rows = on_own_thread(move || async move {
            let client = connect(&url).await?;
            let rows = client.simple_query(&sql).await.map_err(|e| shown(&e))?;
            Ok(rows
                .into_iter()
                .filter_map(|message| match message {
                    tokio_postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
                    _ => None,
                })
                .collect())
        });
        rows.unwrap_or_else(|error| panic!("{error}"))
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let _ = execute(&self.base, &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
    }
}

/// The server's URL.
pub fn base_url() -> String {
    match std::env::var("RUNNER_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
        _ => DEFAULT_URL.to_owned(),
    }
}

fn execute(url: &str, sql: &str) -> Result<(), String> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    on_own_thread(move || async move {
        let client = connect(&url).await?;
        client.batch_execute(&sql).await.map_err(|e| shown(&e))
    })
}

/// A database error with the server's message, when it sent one.
fn shown(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{error}: {}", db.message()),
        None => error.to_string(),
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| e.to_string())?;
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(client)
}

/// Runs `work` on a thread with a runtime of its own, so synchronous tests and tests on any
/// runtime (a paused clock included) can call it.
fn on_own_thread<T, F, W>(work: W) -> Result<T, String>
where
    T: Send + 'static,
    F: Future<Output = Result<T, String>>,
    W: FnOnce() -> F + Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        runtime.block_on(work())
    })
    .join()
    .unwrap_or_else(|_| Err("the database thread panicked".to_owned()))
}
