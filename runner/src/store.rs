//! Where runs live: the folders under `$RUNNER_HOME` (the default: `home.rs`), or a PostgreSQL
//! database that every machine reaches (`--store postgres://...` or `RUNNER_STORE`). The
//! commands see one [`Run`] whichever it is: its records, who drives it, its lock (a file lock,
//! or a lease in the database), its store for appending, and cancel requests.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use engine::store::postgres::{Database, PgStore, RunLease, RunRow, redact, this_process};
use engine::store::{Durable, EventStore, JsonlStore, Loaded, StoreError};
use engine::{Handler, Record, RunState};

use crate::home::{Lock, RunDir, fold, records_after, refused, store_error};

/// Where the runs of this command live.
#[derive(Debug, Clone)]
pub enum Runs {
    /// The run folders under `$RUNNER_HOME`.
    Home,
    /// A PostgreSQL database.
    Postgres(Arc<Postgres>),
}

/// A connected database and a runtime to wait for it from synchronous code.
pub struct Postgres {
    db: Database,
    runtime: tokio::runtime::Runtime,
    /// The URL as given, password included: only ever handed to a child process's environment.
    url: String,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres").field("db", &self.db).finish_non_exhaustive()
    }
}

impl Postgres {
    /// Waits for `future` (the database's work happens on its own thread).
    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }

    /// The database (for the attempts queue).
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The URL as given, password included, for the environment of a child `runner` (never
    /// for a message: [`Database::url`] hides the password).
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Runs {
    /// The store `--store` names, else `RUNNER_STORE`, else `$RUNNER_HOME`. A `postgres://` or
    /// `postgresql://` URL connects to it; any other is a usage error.
    pub fn choose(flag: Option<&str>) -> anyhow::Result<Runs> {
        let from_env = std::env::var("RUNNER_STORE").ok().filter(|url| !url.trim().is_empty());
        let Some(url) = flag.map(str::to_owned).or(from_env) else { return Ok(Runs::Home) };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            bail!(
                "--store `{}` is not a store runner knows: give a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE), \
                 or leave --store and RUNNER_STORE unset for the run folders under RUNNER_HOME",
                redact(&url)
            );
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let window = reconnect_window()?;
        let db = runtime.block_on(Database::connect(&url)).map_err(store_error)?;
        if let Some(window) = window {
            db.set_reconnect_window(window);
        }
        Ok(Runs::Postgres(Arc::new(Postgres { db, runtime, url })))
    }

    /// Where the runs are, for messages: a folder or a database URL (without its password).
    pub fn place(&self) -> String {
        match self {
            Runs::Home => crate::home::runs_dir().display().to_string(),
            Runs::Postgres(pg) => pg.db.url().to_owned(),
        }
    }

    /// An existing run.
    pub fn existing(&self, id: &str) -> anyhow::Result<Run> {
        match self {
            Runs::Home => Ok(Run::Dir(RunDir::existing(id)?)),
            Runs::Postgres(pg) => {
                crate::home::check_id(id)?;
                match pg.block_on(pg.db.run(id)) {
                    Ok(_) => Ok(Run::Pg { id: id.to_owned(), pg: Arc::clone(pg) }),
                    Err(StoreError::NotFound { .. }) => {
                        bail!("no run `{id}` in {} (`runner runs --store URL` lists the runs)", pg.db.url())
                    }
                    Err(error) => Err(store_error(error)),
                }
            }
        }
    }

    /// Refuses an id that cannot name a run, before anything is done.
    pub fn check_id(&self, id: &str) -> anyhow::Result<()> {
        crate::home::check_id(id)
    }

    /// Starts a new run of the plan `plan`: the run, its lock and its empty store. An existing
    /// id is refused.
    pub fn create(&self, id: &str, plan: &str) -> anyhow::Result<(Run, Held, RunStore)> {
        match self {
            Runs::Home => {
                let (run, lock, store) = RunDir::create(id)?;
                Ok((Run::Dir(run), Held::Lock(lock), RunStore::Jsonl(store)))
            }
            Runs::Postgres(pg) => {
                crate::home::check_id(id)?;
                let lease = pg
                    .block_on(pg.db.create_run(id, plan, &this_process(), crate::worker::leases().1))
                    .map_err(store_error)?;
                let store = pg.db.store(&lease);
                let held = Held::Lease(Lease { lease: Some(lease), pg: Arc::clone(pg) });
                Ok((Run::Pg { id: id.to_owned(), pg: Arc::clone(pg) }, held, RunStore::Pg(store)))
            }
        }
    }

    /// Every run with its row, newest first (PostgreSQL only: the run folders have no rows).
    pub fn rows(&self) -> anyhow::Result<Vec<(Run, RunRow)>> {
        match self {
            Runs::Home => Ok(Vec::new()),
            Runs::Postgres(pg) => {
                let rows = pg.block_on(pg.db.runs()).map_err(store_error)?;
                Ok(rows.into_iter().map(|row| (Run::Pg { id: row.run_id.clone(), pg: Arc::clone(pg) }, row)).collect())
            }
        }
    }
}

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

/// How often a driving process looks for a cancel request when no notification came.
const CANCEL_POLL: Duration = Duration::from_secs(1);

impl Run {
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
    pub fn records_after(&self, tail: &mut crate::logs::Tail, seq: u64) -> anyhow::Result<Vec<Record>> {
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
                let lease = pg
                    .block_on(pg.db.take_lease(id, &this_process(), crate::worker::leases().1))
                    .map_err(store_error)?;
                Ok(Held::Lease(Lease { lease: Some(lease), pg: Arc::clone(pg) }))
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
                        tokio::time::sleep(crate::drive::CANCEL_POLL).await;
                    }
                })
            }
            Run::Pg { id, pg } => {
                let (db, id) = (pg.db.clone(), id.clone());
                Box::pin(async move {
                    // A database that fails while it is watched is reported by the run's own writes.
                    if db.cancel_requested(&id, CANCEL_POLL).await.is_err() {
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
            Run::Dir(run) => crate::survivors::mark(run),
            Run::Pg { id, pg } => format!("{}/{id}", pg.db.url()),
        }
    }
}

/// The variable that sets how long a statement waits for a lost database connection to be made
/// again, in whole seconds.
const RECONNECT_SECS: &str = "RUNNER_DB_RECONNECT_SECS";

/// The window [`RECONNECT_SECS`] sets, `None` when it is unset or empty (the engine's 60 s).
fn reconnect_window() -> anyhow::Result<Option<Duration>> {
    let Some(value) = std::env::var_os(RECONNECT_SECS) else { return Ok(None) };
    let value = value.to_string_lossy();
    let text = value.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<u64>() {
        Ok(secs) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(Duration::from_secs(secs))),
        _ => bail!("{RECONNECT_SECS}={value:?} is not a whole number of seconds, e.g. `{RECONNECT_SECS}=120`"),
    }
}
