//! `RUNNER_HOME` and the run folders under it: `runs/<id>/events.jsonl` (the log), `lock`
//! (locked by the process driving the run, which writes its pid in it) and `cancel` (a request
//! from `runner cancel`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use engine::store::{JsonlStore, Loaded, StoreError};
use engine::{Event, Handler, Record, RunState};

/// The folder that holds every run: `$RUNNER_HOME`, or `.runner` in the current directory.
pub fn home() -> PathBuf {
    match std::env::var_os("RUNNER_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home),
        _ => PathBuf::from(".runner"),
    }
}

/// The folder that holds the run folders.
pub fn runs_dir() -> PathBuf {
    home().join("runs")
}

/// One run's folder and the files in it.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The run id.
    pub id: String,
    /// `$RUNNER_HOME/runs/<id>`.
    pub dir: PathBuf,
}

impl RunDir {
    /// The folder of a run that may not exist yet; the id must be a plain file name.
    pub fn new(id: &str) -> anyhow::Result<Self> {
        check_id(id)?;
        Ok(RunDir { id: id.to_owned(), dir: runs_dir().join(id) })
    }

    /// Starts a new run: its lock and log go into a hidden staging folder beside the run
    /// folders, which becomes the run's folder once the first records are durable. A run that
    /// never started thus leaves no folder and its id can be used again. An existing id is
    /// refused.
    pub fn create(id: &str) -> anyhow::Result<(Self, Lock, JsonlStore)> {
        let run = RunDir::new(id)?;
        let runs = runs_dir();
        std::fs::create_dir_all(&runs).with_context(|| format!("cannot create {}", runs.display()))?;
        if run.dir.exists() {
            bail!("a run `{id}` already exists in {}; choose another --run-id", runs.display());
        }
        // Run ids never start with a dot, so `runner runs` does not list staging folders. One
        // of this name can only be left by a dead process that had our pid.
        let staging = runs.join(format!(".{id}.{}.new", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir(&staging).with_context(|| format!("cannot create {}", staging.display()))?;
        let started = Lock::take(&staging.join(LOCK), id).and_then(|lock| {
            let store = JsonlStore::stage(&staging.join(LOG), &run.dir).map_err(store_error)?;
            Ok((lock, store))
        });
        match started {
            Ok((lock, store)) => Ok((run, lock, store)),
            Err(error) => {
                let _ = std::fs::remove_dir_all(&staging);
                Err(error)
            }
        }
    }

    /// The folder of an existing run. A run folder whose log is missing is a run all the same:
    /// reading its log says what is wrong with it.
    pub fn existing(id: &str) -> anyhow::Result<Self> {
        let run = RunDir::new(id)?;
        if !run.dir.is_dir() {
            bail!("no run `{id}` in {} (`runner runs` lists the runs)", runs_dir().display());
        }
        Ok(run)
    }

    /// The event log.
    pub fn log(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    /// The lock file: locked by the process driving the run, which writes its pid in it.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK)
    }

    /// The file `runner cancel` writes to ask the driving process to stop.
    pub fn cancel_path(&self) -> PathBuf {
        self.dir.join("cancel")
    }

    /// The pid of the live process that drives the run (or records into it), if any. Whether
    /// one does is the OS lock's answer, never the pid's: a lock file left by a dead process
    /// is free. The pid is the one the holder wrote (0 in the instant before it has).
    pub fn driver_pid(&self) -> Option<u32> {
        let file = File::open(self.lock_path()).ok()?;
        match file.try_lock_shared() {
            Ok(()) => None,
            Err(TryLockError::WouldBlock) => Some(read_pid(&self.lock_path()).unwrap_or(0)),
            Err(TryLockError::Error(_)) => None,
        }
    }

    /// Takes the run's lock, or says which live process holds it.
    pub fn lock(&self) -> anyhow::Result<Lock> {
        Lock::take(&self.lock_path(), &self.id)
    }

    /// The records of the log, read-only, with the warning about a torn last line if any.
    pub fn load(&self) -> anyhow::Result<(Vec<Record>, Option<String>)> {
        let loaded =
            self.log_file().and_then(|log| JsonlStore::load(&log)).and_then(|l| self.owns(l)).map_err(store_error)?;
        Ok((loaded.records, loaded.warning))
    }

    /// Opens the log for appending, cutting a torn last line; only under the run's lock.
    pub fn open(&self) -> anyhow::Result<(JsonlStore, Loaded)> {
        let (store, loaded) = self.log_file().and_then(|log| JsonlStore::open(&log)).map_err(store_error)?;
        let loaded = self.owns(loaded).map_err(store_error)?;
        Ok((store, loaded))
    }

    /// The log, or why the run's folder holds none to read: a run folder appears only once its
    /// log holds the first records, so one whose log is missing, or is not a file, is damaged.
    fn log_file(&self) -> Result<PathBuf, StoreError> {
        let log = self.log();
        let reason = match std::fs::metadata(&log) {
            Ok(meta) if meta.is_file() => return Ok(log),
            Ok(_) => "the run's log is not a file",
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => "the run's folder has no log",
            Err(error) => {
                return Err(StoreError::Io {
                    action: "open",
                    path: log.display().to_string(),
                    reason: error.to_string(),
                });
            }
        };
        Err(StoreError::Corrupt {
            path: log.display().to_string(),
            line: 1,
            reason: reason.to_owned(),
            hint: "restore the log from a copy, or remove the run's folder to forget the run",
        })
    }

    /// Refuses a log whose records are of another run (a copied log or a renamed folder):
    /// records appended under this id would break it.
    fn owns(&self, loaded: Loaded) -> Result<Loaded, StoreError> {
        match loaded.records.first() {
            Some(first) if *first.run_id != *self.id => Err(StoreError::Corrupt {
                path: self.log().display().to_string(),
                line: 1,
                reason: format!("the log is of run `{}`, not `{}`", first.run_id, self.id),
                hint: "a run's log must stay in the folder named after its run id: move it back",
            }),
            _ => Ok(loaded),
        }
    }
}

/// The log's file name in a run folder.
const LOG: &str = "events.jsonl";
/// The lock's file name in a run folder.
const LOCK: &str = "lock";
/// How many times taking a lock is tried, and the pause between tries: a command that only
/// looks whether a run is driven holds the lock for an instant.
const LOCK_TRIES: u32 = 5;
const LOCK_PAUSE: Duration = Duration::from_millis(20);

/// A held run lock: an OS lock on the run's `lock` file, released when this is dropped or the
/// process ends, however it ends. The file itself stays: removing it would let a process that
/// opened it just before lock a file nobody else sees.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Locks `path` (created if missing) and writes this process's pid in it.
    fn take(path: &Path, run_id: &str) -> anyhow::Result<Lock> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        for _ in 0..LOCK_TRIES {
            match file.try_lock() {
                Ok(()) => {
                    // Always the same width, so a reader never sees a mix of two pids.
                    let pid = format!("{:<10}\n", std::process::id());
                    file.seek(SeekFrom::Start(0))
                        .and_then(|_| file.write_all(pid.as_bytes()))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    return Ok(Lock { _file: file });
                }
                Err(TryLockError::WouldBlock) => std::thread::sleep(LOCK_PAUSE),
                Err(TryLockError::Error(error)) => {
                    return Err(error).with_context(|| format!("cannot lock {}", path.display()));
                }
            }
        }
        let holder = read_pid(path).map_or_else(|| "another process".to_owned(), |pid| format!("process {pid}"));
        bail!(
            "run `{run_id}` is being driven by {holder} (it holds {}); wait for it to end, or stop it with \
             `runner cancel {run_id}`",
            path.display()
        )
    }
}

/// The pid written in a lock file.
fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A store error as the command line shows it: its message, then its hint.
#[derive(Debug)]
pub struct LogError(pub StoreError);

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use miette::Diagnostic as _;
        write!(f, "{}", self.0)?;
        if let Some(help) = self.0.help() {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LogError {}

/// Wraps a store error for the command line; the `StoreError` stays reachable through
/// `downcast_ref::<LogError>()`.
pub fn store_error(error: StoreError) -> anyhow::Error {
    anyhow::Error::new(LogError(error))
}

/// Refuses ids that are not plain, portable file names.
pub fn check_id(id: &str) -> anyhow::Result<()> {
    let plain = id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if id.is_empty() || id.len() > 128 || id.starts_with('.') || !plain {
        bail!("`{id}` is not a valid run id: use letters, digits, `-`, `_` and `.` (not first), at most 128");
    }
    Ok(())
}

/// A new run id: `<plan-name>-<YYYYMMDD-HHMMSS>-<4 hex>` (UTC).
pub fn new_run_id(plan_name: &str) -> String {
    let mut name: String =
        plan_name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    name.truncate(80);
    let name = name.trim_matches('-');
    let name = if name.is_empty() { "run" } else { name };
    // `2026-11-22T12:45:03.123Z` -> `20261122-124503`.
    let now = engine::clock::now();
    let digits: String = now.chars().take(19).filter(char::is_ascii_digit).collect();
    let stamp = format!("{}-{}", &digits[..8.min(digits.len())], digits.get(8..).unwrap_or_default());
    format!("{name}-{stamp}-{:04x}", random16())
}

/// Sixteen bits that differ between processes and calls; enough to tell apart runs of one
/// plan started in the same second.
fn random16() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(nanos.as_nanos());
    (hasher.finish() & 0xffff) as u16
}

/// What a run's `RunCreated` recorded.
#[derive(Debug, Clone)]
pub struct Created {
    /// The normalised plan.
    pub plan: manifest::Plan,
    /// `--var` values.
    pub vars: manifest::plan::Vars,
    /// The strategy in force.
    pub strategy: manifest::plan::Strategy,
    /// The plan file, absolute.
    pub source: Option<String>,
    /// The `traceparent` of the run's span, when its spans were exported.
    pub trace: Option<String>,
    /// Tools whose calls need no approval in the run.
    pub approved_tools: Vec<String>,
    /// The run and task that started it as a sub-plan.
    pub parent: Option<engine::child::Parent>,
    /// When the run was created.
    pub at: String,
}

impl Created {
    /// The `RunCreated` of a log.
    pub fn of(records: &[Record]) -> Option<Self> {
        records.iter().find_map(|record| match &record.event {
            Event::RunCreated(created) => Some(Created {
                plan: (*created.plan).clone(),
                vars: created.vars.clone(),
                strategy: created.strategy,
                source: created.source.clone(),
                trace: created.trace.clone(),
                approved_tools: created.approved_tools.clone(),
                parent: created.parent.clone(),
                at: record.at.to_string(),
            }),
            _ => None,
        })
    }

    /// The folder commands run in: the plan file's, else the current one.
    pub fn workdir(&self) -> PathBuf {
        self.source
            .as_deref()
            .and_then(|source| Path::new(source).parent())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }
}

/// The state a log folds to.
pub fn fold(records: &[Record]) -> RunState {
    let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    RunState::fold(&events)
}

/// Appends records durably to a run's log (for commands that record without driving).
pub fn append(store: &JsonlStore, records: Vec<Record>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().context("start the async runtime")?;
    runtime.block_on(engine::store::EventStore::append(store, records)).map_err(store_error)
}

/// Records for events that follow `records`: the next sequence numbers, now, this run.
pub fn records_after(records: &[Record], run_id: &str, events: Vec<Event>) -> Vec<Record> {
    let at: Arc<str> = engine::clock::now().into();
    let run_id: Arc<str> = run_id.into();
    let last = records.last().map_or(0, |r| r.seq);
    events
        .into_iter()
        .zip(last + 1..)
        .map(|(event, seq)| Record { seq, at: Arc::clone(&at), run_id: Arc::clone(&run_id), event })
        .collect()
}

/// An engine refusal as a one-line error, with its help when it has one.
pub fn refused(run_id: &str, error: &engine::EngineError) -> anyhow::Error {
    use miette::Diagnostic as _;
    match error.help() {
        Some(help) => anyhow::anyhow!("run `{run_id}`: {error} ({help})"),
        None => anyhow::anyhow!("run `{run_id}`: {error}"),
    }
}
