//! Event stores: where a run's records go. The core only sees the [`EventStore`] trait: the
//! JSONL files of one machine, PostgreSQL for several, or memory.

mod check;
mod jsonl;
mod memory;
pub mod postgres;

pub use jsonl::{JsonlStore, Loaded, record_of_line};
pub use memory::MemoryStore;

use std::future::Future;
use std::pin::Pin;

use tokio::sync::oneshot;

use crate::event::Record;

/// A future that resolves when appended records are durable.
pub type Durable = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

/// A future that resolves, with the records given back, when they are durable.
pub type Returned = Pin<Box<dyn Future<Output = Result<Vec<Record>, StoreError>> + Send>>;

/// How a writer acknowledges a batch: a batch appended with
/// [`EventStore::append_returning`] gets its records back, the others are dropped where they
/// were written.
pub(crate) enum Ack {
    /// Only says whether the records are durable.
    Durable(oneshot::Sender<Result<(), StoreError>>),
    /// Gives the records back once they are durable.
    Returned(oneshot::Sender<Result<Vec<Record>, StoreError>>),
}

impl Ack {
    /// Acknowledges `records` with the batch's `result`.
    pub(crate) fn send(self, records: Vec<Record>, result: &Result<(), StoreError>) {
        match self {
            Ack::Durable(ack) => {
                let _ = ack.send(result.clone());
            }
            Ack::Returned(ack) => {
                let _ = ack.send(result.clone().map(|()| records));
            }
        }
    }

    /// Queues records for a writer with an ack that says only whether they are durable;
    /// `queue` sends the ack with the records and tells whether the writer took them.
    pub(crate) fn durable(queue: impl FnOnce(Ack) -> bool) -> Durable {
        let (ack, done) = oneshot::channel();
        Box::pin(Ack::wait(queue(Ack::Durable(ack)), done))
    }

    /// As [`Ack::durable`], with an ack that gives the records back.
    pub(crate) fn returned(queue: impl FnOnce(Ack) -> bool) -> Returned {
        let (ack, done) = oneshot::channel();
        Box::pin(Ack::wait(queue(Ack::Returned(ack)), done))
    }

    async fn wait<T>(queued: bool, done: oneshot::Receiver<Result<T, StoreError>>) -> Result<T, StoreError> {
        if !queued {
            return Err(StoreError::Closed);
        }
        done.await.unwrap_or(Err(StoreError::Closed))
    }
}

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
    /// event record, a checksum that does not match, a `seq` out of order, a record of another
    /// run, a task no plan of the run has, a record after the run's end, an unknown event type
    /// or schema version, no record at all. Only a torn last line is dropped instead.
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
    /// The database could not be reached, or refused a statement.
    #[error("{action} ({url}): {reason}")]
    #[diagnostic(code(store::database))]
    Database {
        /// What was being done.
        action: &'static str,
        /// The database's URL, its password replaced by `***`.
        url: String,
        /// The database's or the network's reason.
        reason: String,
    },
    /// Another process took the run's lease over: this one may no longer record into the run.
    #[error("run `{run_id}`: another process took the run over (its lease is no longer this process's)")]
    #[diagnostic(
        code(store::fenced),
        help("this process stopped recording; `runner status {run_id}` shows who drives the run now")
    )]
    Fenced {
        /// The run.
        run_id: String,
    },
    /// Records of these sequence numbers are in the store already: another writer recorded
    /// into the run. Refused, never ignored.
    #[error("run `{run_id}`: a record with seq {seq} is in the store already")]
    #[diagnostic(code(store::conflict), help("another process recorded into this run; read it again"))]
    Conflict {
        /// The run.
        run_id: String,
        /// The first sequence number of the refused batch.
        seq: u64,
    },
    /// A live process holds the run's lease.
    #[error("run `{run_id}` is being driven by {owner} (its lease runs until {until})")]
    #[diagnostic(
        code(store::leased),
        help(
            "wait for it to end, or stop it with `runner cancel {run_id}`; a lease of a process that died ends by itself"
        )
    )]
    Leased {
        /// The run.
        run_id: String,
        /// The holder: host and process.
        owner: String,
        /// When its lease ends unless renewed.
        until: String,
    },
    /// No run of this id.
    #[error("no run `{run_id}` in {url}")]
    #[diagnostic(code(store::not_found), help("`runner runs` lists the runs"))]
    NotFound {
        /// The run.
        run_id: String,
        /// The database's URL, its password replaced by `***`.
        url: String,
    },
    /// A run of this id exists already.
    #[error("a run `{run_id}` already exists in {url}")]
    #[diagnostic(code(store::exists), help("choose another --run-id"))]
    Exists {
        /// The run.
        run_id: String,
        /// The database's URL, its password replaced by `***`.
        url: String,
    },
}

/// What a run's state says after some records: what a store that keeps a summary beside the
/// records (PostgreSQL, for the runs list) records with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// The plan's tasks, items of maps and tasks planned while running included.
    pub tasks: u64,
    /// Those that succeeded (reused outputs count).
    pub succeeded: u64,
    /// The tokens the run used.
    pub tokens: crate::event::Tokens,
}

impl Summary {
    /// The summary of `state`, in constant time.
    pub fn of(state: &crate::RunState) -> Self {
        Summary { tasks: state.tasks.len() as u64, succeeded: state.succeeded_tasks() as u64, tokens: state.tokens }
    }
}

/// Appends a run's records durably, in order.
pub trait EventStore: Send + Sync {
    /// Tells the store the run's summary once the records of its next append are applied; the
    /// next append carries it. A store that keeps no summary ignores it (the default).
    fn summarize(&self, summary: Summary) {
        let _ = summary;
    }

    /// Queues records for writing; the future resolves once they (and everything queued
    /// before them) are durable. Records queued while an earlier write is being synced are
    /// written and synced together with the next one (group commit).
    fn append(&self, records: Vec<Record>) -> Durable;

    /// As [`EventStore::append`], giving the records back once they are durable, for somebody
    /// to be shown them without a copy being made first. By default a copy is appended.
    fn append_returning(&self, records: Vec<Record>) -> Returned {
        let durable = self.append(records.clone());
        Box::pin(async move { durable.await.map(|()| records) })
    }
}
