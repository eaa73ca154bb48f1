//! Where runs live: the folders under `$RUNNER_HOME` (the default: `home.rs`), or a PostgreSQL
//! database that every machine reaches (`--store postgres://...` or `RUNNER_STORE`). The
//! commands see one [`Run`] whichever it is: its records, who drives it, its lock (a file lock,
//! or a lease in the database), its store for appending, and cancel requests.
//!
//! This folder and `home.rs` are the store layer: they import no command module
//! (`runner/tests/layout.rs` holds this), so what they need lives here: the lease timings
//! (`leases.rs`), following a log as it grows (`tail.rs`), and a run's locks, appending and
//! cancel requests (`run.rs`).

mod leases;
mod run;
mod tail;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use engine::store::StoreError;
use engine::store::postgres::{Database, RunRow, redact, this_process};

use crate::home::{RunDir, store_error};
pub use leases::leases;
pub use run::{Held, Lease, Run, RunStore};
pub use tail::Tail;

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

    /// An existing run, or `None` when there is no run `id` (a sub-plan's child not started yet).
    pub fn find(&self, id: &str) -> anyhow::Result<Option<Run>> {
        match self {
            Runs::Home => {
                let run = RunDir::new(id)?;
                Ok(run.dir.is_dir().then_some(Run::Dir(run)))
            }
            Runs::Postgres(pg) => {
                crate::home::check_id(id)?;
                match pg.block_on(pg.db.run(id)) {
                    Ok(_) => Ok(Some(Run::Pg { id: id.to_owned(), pg: Arc::clone(pg) })),
                    Err(StoreError::NotFound { .. }) => Ok(None),
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
                let lease =
                    pg.block_on(pg.db.create_run(id, plan, &this_process(), leases().1)).map_err(store_error)?;
                let store = pg.db.store(&lease);
                let held = Held::Lease(Lease::new(lease, Arc::clone(pg)));
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
