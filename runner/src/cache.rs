//! The task cache from the command line: opening the one of the store in use (files under the
//! runner home, or the database's table), the list of what a run will reuse that
//! `apply --reuse` shows before it runs, and `runner cache`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Subcommand;
use engine::cache::{FileCache, Key, Resolution, TableCache, TaskCache, Verdict};
use manifest::Plan;

use crate::live::say;
use crate::store::Runs;

/// How many tasks the reuse review names one by one; the rest are counted.
const LISTED: usize = 20;

/// The variable that caps the cache's size: a byte count, as `RUNNER_MAX_PLAN_BYTES` takes one.
pub const MAX_BYTES_VARIABLE: &str = "RUNNER_CACHE_MAX_BYTES";

/// The cap when [`MAX_BYTES_VARIABLE`] is not set: 1 GiB.
const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The most bytes the cache may hold after a run: [`MAX_BYTES_VARIABLE`], else 1 GiB (with a
/// warning when the variable is not a byte count).
fn max_bytes() -> u64 {
    let Some(value) = std::env::var_os(MAX_BYTES_VARIABLE).filter(|v| !v.is_empty()) else { return DEFAULT_MAX_BYTES };
    let value = value.to_string_lossy();
    crate::plan_limit::parse(&value).unwrap_or_else(|_| {
        eprintln!(
            "warning: {MAX_BYTES_VARIABLE}={value:?} is not a byte count (such as 512MiB); the cache keeps its default cap of 1 GiB"
        );
        DEFAULT_MAX_BYTES
    })
}

/// After a run: writes the outputs it stored, then removes the oldest while the cache holds more
/// than its cap.
pub fn keep_under_cap(cache: &Mutex<TaskCache>) {
    let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Err(error) = cache.flush() {
        eprintln!("warning: the outputs of this run were not stored in the task cache: {error}");
        return;
    }
    let cap = max_bytes();
    match cache.bytes() {
        Ok(bytes) if bytes <= cap => return,
        Ok(_) => {}
        Err(error) => {
            eprintln!("warning: the task cache's size cannot be measured: {error}");
            return;
        }
    }
    match cache.prune(None, Some(cap)) {
        Ok(pruned) => eprintln!(
            "note: the task cache was over {MAX_BYTES_VARIABLE} ({cap} bytes): removed its {} oldest outputs",
            pruned.removed
        ),
        Err(error) => eprintln!("warning: the task cache is over its cap and cannot be pruned: {error}"),
    }
}

/// The cache's folder for runs under the runner home: `$RUNNER_HOME/cache`.
pub fn dir() -> PathBuf {
    crate::home::home().join("cache")
}

/// The task cache of the runs of this store: the files under the runner home, or the database's
/// `runner_cache` table.
fn open(runs: &Runs) -> Result<TaskCache, engine::cache::CacheError> {
    Ok(match runs {
        Runs::Home => TaskCache::Files(Box::new(FileCache::open(&dir())?)),
        Runs::Postgres(pg) => TaskCache::Table(TableCache::new(pg.db().clone())),
    })
}

/// Where the cache of this store is, for messages.
fn place(runs: &Runs) -> String {
    match runs {
        Runs::Home => dir().display().to_string(),
        Runs::Postgres(_) => format!("the runner_cache table of {}", runs.place()),
    }
}

/// The task cache runs of this store use. A cache that cannot be opened is reported and left
/// out: runs work without it.
pub fn open_for(runs: &Runs) -> Option<Arc<Mutex<TaskCache>>> {
    match open(runs) {
        Ok(cache) => {
            for problem in cache.problems() {
                eprintln!("warning: task cache: {problem}; that entry is ignored");
            }
            Some(Arc::new(Mutex::new(cache)))
        }
        Err(error) => {
            eprintln!("warning: the task cache is not used: {error}");
            None
        }
    }
}

/// What `apply` shows before a run that may reuse outputs: how many tasks the cache gives, then
/// each task that runs with why, then the ones reused (all named up to [`LISTED`] lines).
pub fn review(plan: &Plan, resolution: &Resolution) -> String {
    for problem in &resolution.problems {
        eprintln!("warning: {problem}");
        if let Some(code) = miette::Diagnostic::code(problem) {
            eprint!("{}", crate::explain::hint(&code.to_string()));
        }
    }
    let reused = resolution.reused();
    let total = plan.tasks.len();
    let saved: u64 = resolution
        .verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Reused(entry) => entry.tokens.map(|t| t.prompt + t.completion),
            Verdict::Runs(_) => None,
        })
        .sum();
    let mut text =
        format!("Reuse: {reused} of {total} tasks from the cache (saving {saved} tokens), {} to run\n", total - reused);
    let mut lines = 0;
    for (task, verdict) in plan.tasks.iter().zip(&resolution.verdicts) {
        if let Verdict::Runs(why) = verdict {
            if lines < LISTED {
                text.push_str(&format!("  run    {}: {why}\n", task.id.value));
            }
            lines += 1;
        }
    }
    for (task, verdict) in plan.tasks.iter().zip(&resolution.verdicts) {
        if let Verdict::Reused(entry) = verdict {
            if lines < LISTED {
                text.push_str(&format!(
                    "  reuse  {}: from run `{}`, attempt {}\n",
                    task.id.value, entry.run, entry.attempt
                ));
            }
            lines += 1;
        }
    }
    if lines > LISTED {
        text.push_str(&format!("  ... and {} more\n", lines - LISTED));
    }
    text
}

/// `runner cache` subcommands.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List the stored outputs, newest first: key, task, plan, run and size.
    List,
    /// Print one stored output's entry as JSON: its output, provenance and key parts.
    Show {
        /// The key (64 hex digits), or a prefix of it that names one entry.
        key: String,
    },
    /// Remove every stored output (packs a running process writes to are left).
    Clear,
    /// Remove stored outputs older than a duration, and the oldest beyond a size.
    Prune {
        /// Remove outputs stored longer ago than this, such as `30d`.
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// Then remove the oldest until the cache holds at most this many bytes (a count, or
        /// with a unit: 500MB, 1GiB).
        #[arg(long, value_name = "BYTES", value_parser = |text: &str| crate::plan_limit::parse(text).map_err(|_| format!("`{text}` is not a byte count (such as 512MiB)")))]
        max_bytes: Option<u64>,
    },
}

/// Runs a `runner cache` subcommand.
pub fn run(runs: &Runs, command: &CacheCommand) -> anyhow::Result<u8> {
    let mut cache = open(runs)?;
    for problem in cache.problems() {
        eprintln!("warning: {problem}");
    }
    match command {
        CacheCommand::List => {
            let listed = cache.list()?;
            for (item, entry) in &listed {
                match entry {
                    Ok(entry) => say(&format!(
                        "{}  {}  {}  run {}  {} bytes  {}",
                        item.key,
                        entry.task,
                        entry.plan,
                        entry.run,
                        item.bytes,
                        engine::clock::format_millis(i64::try_from(item.stored_at).unwrap_or(i64::MAX / 1000) * 1000)
                    )),
                    Err(error) => eprintln!("warning: {error}"),
                }
            }
            eprintln!("{} stored outputs, {} bytes in {}", listed.len(), cache.bytes()?, place(runs));
            Ok(0)
        }
        CacheCommand::Show { key } => {
            let matching: Vec<Key> = cache
                .list()?
                .into_iter()
                .map(|(item, _)| item.key)
                .filter(|k| k.to_string().starts_with(key.as_str()))
                .collect();
            let [found] = matching.as_slice() else {
                eprintln!(
                    "error: {} stored outputs have a key starting with `{key}`; `runner cache list` shows the keys",
                    matching.len()
                );
                return Ok(crate::exit::EXIT_USAGE);
            };
            match cache.get(found, None)? {
                Some(entry) => {
                    say(&serde_json::to_string_pretty(&entry)?);
                    Ok(0)
                }
                None => {
                    eprintln!("error: the entry {found} was removed meanwhile");
                    Ok(crate::exit::EXIT_USAGE)
                }
            }
        }
        CacheCommand::Clear => {
            let pruned = cache.prune(None, Some(0))?;
            report("cleared", &pruned);
            Ok(0)
        }
        CacheCommand::Prune { older_than, max_bytes } => {
            let before = match older_than.as_deref().map(manifest::Duration::parse).transpose() {
                Ok(age) => age.map(|age| engine::cache::now().saturating_sub(age.as_millis() / 1000)),
                Err(error) => {
                    eprintln!("error: --older-than: {error}");
                    return Ok(crate::exit::EXIT_USAGE);
                }
            };
            if before.is_none() && max_bytes.is_none() {
                eprintln!("error: say what to prune: --older-than DURATION (such as 30d), --max-bytes N, or both");
                return Ok(crate::exit::EXIT_USAGE);
            }
            let pruned = cache.prune(before, *max_bytes)?;
            report("pruned", &pruned);
            Ok(0)
        }
    }
}

/// Says what `clear` or `prune` did.
fn report(done: &str, pruned: &engine::cache::Pruned) {
    say(&format!("{done}: removed {} stored outputs, kept {} ({} bytes)", pruned.removed, pruned.kept, pruned.bytes));
    if pruned.in_use > 0 {
        eprintln!("note: {} packs were left as they are: a running process writes to them", pruned.in_use);
    }
}
