//! Running attempts on other machines (docs/workers.md): the attempts queue in PostgreSQL
//! (`runner_attempts`), the [`Remote`] runtimes a coordinator hands attempts to, and the
//! [`Worker`] that claims attempts, holds a lease on each while it runs, and writes the reply
//! back only while its claim is still current (fencing). An `llm` attempt on a worker writes
//! its journal through the database to the coordinator's driver under the same fence. A
//! provider's `requests_per_minute` is counted in the database, by the run's coordinator and
//! workers together.

mod leases;
mod presence;
mod queue;
mod relay;
mod remote;
mod requests;
mod worker;

pub use leases::Leases;
pub use remote::Remote;
pub use worker::{Plans, Tally, Worker};

/// The runtimes whose attempts go to workers; `mock` agents and gates stay with the coordinator.
pub const REMOTE_RUNTIMES: [&str; 3] = ["command", "llm", "http"];

/// Why the attempts queue could not be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ClusterError {
    /// The connection to the database was lost.
    #[error("the connection to the attempts queue was lost")]
    #[diagnostic(code(cluster::lost))]
    Lost,
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

impl From<crate::store::StoreError> for ClusterError {
    fn from(error: crate::store::StoreError) -> Self {
        ClusterError::Query(error.to_string())
    }
}
