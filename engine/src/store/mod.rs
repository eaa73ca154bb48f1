//! Event stores: where a run's records go. The core only sees the [`EventStore`] trait, so a
//! database-backed store can be added without touching it.

mod jsonl;
mod memory;

pub use jsonl::{JsonlStore, Loaded};
pub use memory::MemoryStore;

use std::future::Future;
use std::pin::Pin;

use crate::event::Record;

/// A future that resolves when appended records are durable.
pub type Durable = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

/// Why a store could not read or write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum StoreError {
    /// The file system refused.
    #[error("{action} {path}: {reason}")]
    #[diagnostic(code(store::io))]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A log breaks what it promises (docs/events.md): a line in the middle that is not an
    /// event record, a `seq` out of order, a record of another run, an unknown event type or
    /// schema version. Only a torn last line is dropped instead.
    #[error("{path}:{line}: {reason}")]
    #[diagnostic(code(store::corrupt), help("{hint}"))]
    Corrupt {
        /// The log.
        path: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// The writer stopped (after an earlier error).
    #[error("the event writer has stopped")]
    #[diagnostic(code(store::closed))]
    Closed,
}

/// Appends a run's records durably, in order.
pub trait EventStore: Send + Sync {
    /// Queues records for writing; the future resolves once they (and everything queued
    /// before them) are durable. Records queued while an earlier write is being synced are
    /// written and synced together with the next one (group commit).
    fn append(&self, records: Vec<Record>) -> Durable;
}
