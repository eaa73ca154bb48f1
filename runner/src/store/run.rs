//! One run, in a folder or in the database: its records, who drives it, its lock or lease,
//! appending, cancel requests and the mark its programs carry.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use engine::store::postgres::{PgStore, RunLease, this_process};
use engine::store::{Durable, EventStore, JsonlStore, Loaded};
use engine::{Handler, Record, RunState};

use super::{Postgres, Tail, leases};
use crate::home::{Lock, RunDir, fold, records_after, refused, store_error};

/// One run, in a folder or in the database.
#[derive(Debug, Clone)]
pub enum Run {
    /// A run folder under `$RUNNER_HOME`.
    Dir(RunDir),
    /// A run in PostgreSQL.
    Pg {
        /// The run id.
        id: String,
        /// The database.
        pg: Arc<Postgres>,
    },
}

/// A run's lock while this process drives or records into it; dropping it lets the run go.
#[derive(Debug)]
pub enum Held {
    /// The OS lock on the run folder's `lock` file.
    Lock(Lock),
    /// The run's lease in the database, renewed in the background.
    Lease(Lease),
}

/// A held lease, released when dropped (on every path, errors included), so the next command
/// finds the run free at once rather than after the lease runs out.
#[derive(Debug)]
pub struct Lease {
    lease: Option<RunLease>,
    pg: Arc<Postgres>,
}

impl Lease {
    /// Holds `lease` until dropped.
    pub(super) fn new(lease: RunLease, pg: Arc<Postgres>) -> Self {
        Lease { lease: Some(lease), pg }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let _ = self.pg.block_on(lease.release());
        }
    }
}

impl Held {
    /// Lets the run go now.
    pub fn release(self) {
        match self {
            Held::Lock(lock) => drop(lock),
            Held::Lease(lease) => drop(lease),
        }
    }
}

/// The store a run appends to.
#[derive(Debug)]
pub enum RunStore {
    /// The run folder's JSONL log.
    Jsonl(JsonlStore),
    /// The run's rows in PostgreSQL.
    Pg(PgStore),
}

impl EventStore for RunStore {
    fn summarize(&self, summary: engine::store::Summary) {
        match self {
            RunStore::Jsonl(store) => store.summarize(summary),
            RunStore::Pg(store) => store.summarize(summary),
        }
    }

    fn append(&self, records: Vec<Record>) -> Durable {
        match self {
            RunStore::Jsonl(store) => store.append(records),
            RunStore::Pg(store) => store.append(records),
        }
    }

    fn append_returning(&self, records: Vec<Record>) -> engine::store::Returned {
        match self {
            RunStore::Jsonl(store) => store.append_returning(records),
            RunStore::Pg(store) => store.append_returning(records),
        }
    }
}

/// How often a driving process looks for a run folder's `cancel` file.
const CANCEL_FILE_POLL: Duration = Duration::from_millis(200);
/// How often a driving process looks for a cancel request in the database when no notification
/// came.
const CANCEL_ROW_POLL: Duration = Duration::from_secs(1);

impl Run {
    /// The store the run is in, to reach the other runs there (its sub-plans' child runs).
    pub fn runs(&self) -> super::Runs {
        match self {
            Run::Dir(_) => super::Runs::Home,
            Run::Pg { pg, .. } => super::Runs::Postgres(Arc::clone(pg)),
        }
    }

    /// The run id.
    pub fn id(&self) -> &str {
        match self {
            Run::Dir(run) => &run.id,
            Run::Pg { id, .. } => id,
        }
    }

    /// Where its records are, for messages: `log <path>` or `in <database URL>`.
    pub fn place(&self) -> String {
        match self {
            Run::Dir(run) => format!("log {}", run.log().display()),
            Run::Pg { pg, .. } => format!("in {}", pg.db.url()),
        }
    }

    /// The records, read-only, with the warning about a torn last line if any.
    pub fn load(&self) -> anyhow::Result<(Vec<Record>, Option<String>)> {
        match self {
            Run::Dir(run) => run.load(),
            Run::Pg { id, pg } => {
                let loaded = pg.block_on(pg.db.load(id)).map_err(store_error)?;
                Ok((loaded.records, loaded.warning))
            }
        }
    }

    /// The records after `seq`, for following a live run.
    pub fn records_after(&self, tail: &mut Tail, seq: u64) -> anyhow::Result<Vec<Record>> {
        match self {
            Run::Dir(run) => tail.read(run),
            Run::Pg { id, pg } => pg.block_on(pg.db.records_after(id, seq)).map_err(store_error),
        }
    }

    /// Who drives the run now, if a live process does: `process <pid>` or the lease's holder.
    pub fn driver(&self) -> Option<String> {
        match self {
            Run::Dir(run) => run.driver_pid().map(|pid| format!("process {pid}")),
            Run::Pg { id, pg } => {
                let row = pg.block_on(pg.db.run(id)).ok()?;
                if row.leased { row.owner.or_else(|| Some("another process".to_owned())) } else { None }
            }
        }
    }

    /// Takes the run's lock (or lease), or says which live process holds it.
    pub fn lock(&self) -> anyhow::Result<Held> {
        match self {
            Run::Dir(run) => Ok(Held::Lock(run.lock()?)),
            Run::Pg { id, pg } => {
                let lease = pg.block_on(pg.db.take_lease(id, &this_process(), leases().1)).map_err(store_error)?;
                Ok(Held::Lease(Lease::new(lease, Arc::clone(pg))))
            }
        }
    }

    /// Opens the run for appending under `held`, with the records so far.
    pub fn open(&self, held: &Held) -> anyhow::Result<(RunStore, Loaded)> {
        match (self, held) {
            (Run::Dir(run), _) => {
                let (store, loaded) = run.open()?;
                Ok((RunStore::Jsonl(store), loaded))
            }
            (Run::Pg { id, pg }, Held::Lease(Lease { lease: Some(lease), .. })) => {
                let loaded = pg.block_on(pg.db.load(id)).map_err(store_error)?;
                Ok((RunStore::Pg(pg.db.store(lease)), loaded))
            }
            (Run::Pg { id, .. }, _) => {
                bail!("run `{id}` is in a database: its lease, not a file lock, opens it")
            }
        }
    }

    /// Records what a command given on the command line means (an answer, a decision, a
    /// cancellation) without driving the run: under the run's lock, folds the log, lets the
    /// engine decide and appends its events. Returns the state after them and the new records.
    pub fn record(&self, command: engine::Command) -> anyhow::Result<(RunState, Vec<Record>)> {
        let held = self.lock()?;
        let (store, loaded) = self.open(&held)?;
        if let Some(warning) = &loaded.warning {
            eprintln!("warning: {warning}");
        }
        let mut state = fold(&loaded.records);
        let events = state.process(command).map_err(|e| refused(self.id(), &e))?;
        let records = records_after(&loaded.records, self.id(), events);
        store.summarize(engine::store::Summary::of(&state));
        self.append(&store, records.clone())?;
        held.release();
        Ok((state, records))
    }

    /// Appends records durably (for commands that record without driving).
    pub fn append(&self, store: &RunStore, records: Vec<Record>) -> anyhow::Result<()> {
        let durable = store.append(records);
        match self {
            Run::Dir(_) => {
                let runtime =
                    tokio::runtime::Builder::new_current_thread().build().context("start the async runtime")?;
                runtime.block_on(durable).map_err(store_error)
            }
            Run::Pg { pg, .. } => pg.block_on(durable).map_err(store_error),
        }
    }

    /// Asks the process that drives the run to cancel it.
    pub fn request_cancel(&self) -> anyhow::Result<()> {
        match self {
            Run::Dir(run) => std::fs::write(run.cancel_path(), format!("{}\n", std::process::id()))
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", run.cancel_path().display())),
            Run::Pg { id, pg } => {
                pg.block_on(pg.db.request_cancel(id, "cancelled by runner cancel")).map_err(store_error)
            }
        }
    }

    /// Forgets an earlier cancel request (a process that starts or ends driving the run does).
    pub fn clear_cancel(&self) {
        match self {
            Run::Dir(run) => {
                let _ = std::fs::remove_file(run.cancel_path());
            }
            Run::Pg { id, pg } => {
                let _ = pg.block_on(pg.db.clear_cancel(id));
            }
        }
    }

    /// Resolves when someone asks to cancel the run (`runner cancel`), on any runtime.
    pub fn cancel_requested(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        match self {
            Run::Dir(run) => {
                let path = run.cancel_path();
                Box::pin(async move {
                    while !path.exists() {
                        tokio::time::sleep(CANCEL_FILE_POLL).await;
                    }
                })
            }
            Run::Pg { id, pg } => {
                let (db, id) = (pg.db.clone(), id.clone());
                Box::pin(async move {
                    // A database that fails while it is watched is reported by the run's own writes.
                    if db.cancel_requested(&id, CANCEL_ROW_POLL).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                })
            }
        }
    }

    /// The mark this run's programs carry, so a later process can end the ones a dead runner
    /// left (`survivors.rs`): the run folder, or the database and the run id.
    pub fn mark(&self) -> String {
        match self {
            Run::Dir(run) => folder_mark(run),
            Run::Pg { id, pg } => format!("{}/{id}", pg.db.url()),
        }
    }
}

/// A run folder's part of the mark its programs carry: the folder, made absolute, so runs of the
/// same id under two `RUNNER_HOME`s are never taken for each other.
fn folder_mark(run: &RunDir) -> String {
    std::fs::canonicalize(&run.dir)
        .or_else(|_| std::path::absolute(&run.dir))
        .unwrap_or_else(|_| run.dir.clone())
        .display()
        .to_string()
}
