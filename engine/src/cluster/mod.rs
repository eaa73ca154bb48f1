//! Running attempts on other machines (docs/workers.md): the attempts queue in PostgreSQL
//! (`runner_attempts`), the [`Remote`] runtimes a coordinator hands attempts to, and the
//! [`Worker`] that claims attempts, holds a lease on each while it runs, and writes the reply
//! back only while its claim is still current (fencing).

mod connection;
mod queue;
mod remote;
mod worker;

pub use connection::Leases;
pub use queue::MIGRATION;
pub use remote::Remote;
pub use worker::{Plans, Tally, Worker};

/// The runtimes whose attempts go to workers; `mock` agents and gates stay with the coordinator.
pub const REMOTE_RUNTIMES: [&str; 3] = ["command", "llm", "http"];

/// Why the attempts queue could not be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ClusterError {
    /// The database did not answer or refused the connection.
    #[error("cannot connect to the attempts queue: {0}")]
    #[diagnostic(code(cluster::connect), help("check the --store URL and that PostgreSQL is running"))]
    Connect(String),
    /// A statement on the queue failed.
    #[error("the attempts queue failed: {0}")]
    #[diagnostic(code(cluster::query))]
    Query(String),
}

impl From<tokio_postgres::Error> for ClusterError {
    fn from(error: tokio_postgres::Error) -> Self {
        ClusterError::Query(error.to_string())
    }
}
