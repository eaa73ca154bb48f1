//! `RUNNER_HOME` and the run folders under it: `runs/<id>/events.jsonl` (the log), `lock`
//! (the pid of the process driving the run) and `cancel` (a request from `runner cancel`).

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use engine::store::JsonlStore;
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

    /// Creates the folder of a new run; an existing id is refused.
    pub fn create(id: &str) -> anyhow::Result<Self> {
        let run = RunDir::new(id)?;
        let runs = runs_dir();
        std::fs::create_dir_all(&runs).with_context(|| format!("cannot create {}", runs.display()))?;
        match std::fs::create_dir(&run.dir) {
            Ok(()) => Ok(run),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                bail!("a run `{id}` already exists in {}; choose another --run-id", runs.display())
            }
            Err(error) => Err(error).with_context(|| format!("cannot create {}", run.dir.display())),
        }
    }

    /// The folder of an existing run.
    pub fn existing(id: &str) -> anyhow::Result<Self> {
        let run = RunDir::new(id)?;
        if !run.log().is_file() {
            bail!("no run `{id}` in {} (`runner runs` lists the runs)", runs_dir().display());
        }
        Ok(run)
    }

    /// The event log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("events.jsonl")
    }

    /// The lock file: the pid of the process driving the run.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("lock")
    }

    /// The file `runner cancel` writes to ask the driving process to stop.
    pub fn cancel_path(&self) -> PathBuf {
        self.dir.join("cancel")
    }

    /// The pid of the live process that drives the run, if any; a lock left by a dead process
    /// is stale and ignored.
    pub fn driver_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.lock_path()).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        is_alive(pid).then_some(pid)
    }

    /// Takes the lock, or says which live process holds it.
    pub fn lock(&self) -> anyhow::Result<Lock> {
        let path = self.lock_path();
        for _ in 0..3 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    writeln!(file, "{}", std::process::id()).with_context(|| format!("write {}", path.display()))?;
                    return Ok(Lock { path });
                }
                Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                    if let Some(pid) = self.driver_pid() {
                        bail!("run `{}` is being driven by process {pid} (its lock is {})", self.id, path.display());
                    }
                    // Stale: the process that wrote it is gone.
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(error) if error.kind() == ErrorKind::NotFound => {}
                        Err(error) => return Err(error).with_context(|| format!("remove {}", path.display())),
                    }
                }
                Err(error) => return Err(error).with_context(|| format!("create {}", path.display())),
            }
        }
        bail!("cannot take the lock {}: another process keeps taking it", path.display())
    }

    /// The records of the log, read-only, with the warning about a torn last line if any.
    pub fn load(&self) -> anyhow::Result<(Vec<Record>, Option<String>)> {
        let loaded = JsonlStore::load(&self.log())?;
        Ok((loaded.records, loaded.warning))
    }
}

/// A held run lock; dropping it removes the file.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a process is alive, per `/proc/<pid>` (a zombie counts as dead).
pub fn is_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat.rsplit_once(')').is_none_or(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Refuses ids that are not plain, portable file names.
fn check_id(id: &str) -> anyhow::Result<()> {
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
    pub vars: std::collections::BTreeMap<String, String>,
    /// The strategy in force.
    pub strategy: manifest::plan::Strategy,
    /// The plan file, absolute.
    pub source: Option<String>,
    /// When the run was created.
    pub at: String,
}

impl Created {
    /// The `RunCreated` of a log.
    pub fn of(records: &[Record]) -> Option<Self> {
        records.iter().find_map(|record| match &record.event {
            Event::RunCreated { plan, vars, strategy, source, .. } => Some(Created {
                plan: (**plan).clone(),
                vars: vars.clone(),
                strategy: *strategy,
                source: source.clone(),
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
    runtime.block_on(engine::store::EventStore::append(store, records)).map_err(anyhow::Error::new)
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

/// Records what a command given on the command line means (an answer, a decision, a
/// cancellation) without driving the run: under the run's lock, folds the log, lets the engine
/// decide and appends its events. Returns the state after them and the new records.
pub fn record(run: &RunDir, command: engine::Command) -> anyhow::Result<(RunState, Vec<Record>)> {
    let _lock = run.lock()?;
    let (store, loaded) = JsonlStore::open(&run.log())?;
    if let Some(warning) = &loaded.warning {
        eprintln!("warning: {warning}");
    }
    let mut state = fold(&loaded.records);
    let events = state.process(command).map_err(|e| refused(&run.id, &e))?;
    let records = records_after(&loaded.records, &run.id, events);
    append(&store, records.clone())?;
    Ok((state, records))
}

/// An engine refusal as a one-line error, with its help when it has one.
pub fn refused(run_id: &str, error: &engine::EngineError) -> anyhow::Error {
    use miette::Diagnostic as _;
    match error.help() {
        Some(help) => anyhow::anyhow!("run `{run_id}`: {error} ({help})"),
        None => anyhow::anyhow!("run `{run_id}`: {error}"),
    }
}
