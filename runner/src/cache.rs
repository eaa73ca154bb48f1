//! The task cache from the command line: opening the one under the runner home, the list of
//! what a run will reuse that `apply --reuse` shows before it runs, and `runner cache`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Subcommand;
use engine::cache::{FileCache, Key, Resolution, Verdict};
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
pub fn keep_under_cap(cache: &Mutex<FileCache>) {
    let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Err(error) = cache.flush() {
        eprintln!("warning: the outputs of this run were not stored in the task cache: {error}");
        return;
    }
    let cap = max_bytes();
    if cache.bytes() <= cap {
        return;
    }
    match cache.prune(None, Some(cap)) {
        Ok(pruned) => eprintln!(
            "note: the task cache was over {MAX_BYTES_VARIABLE} ({cap} bytes): removed its {} oldest outputs",
            pruned.removed
        ),
        Err(error) => eprintln!("warning: the task cache is over its cap and cannot be pruned: {error}"),
    }
}

/// The cache's folder: `$RUNNER_HOME/cache`.
pub fn dir() -> PathBuf {
    crate::home::home().join("cache")
}

/// The cache runs of this store use: the one under the runner home for the JSONL store, none for
/// PostgreSQL (whose runs do not use the cache yet). A cache that cannot be opened is reported
/// and left out: runs work without it.
pub fn open_for(runs: &Runs) -> Option<Arc<Mutex<FileCache>>> {
    if !matches!(runs, Runs::Home) {
        return None;
    }
    match FileCache::open(&dir()) {
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
    if !matches!(runs, Runs::Home) {
        eprintln!("error: the task cache is kept under RUNNER_HOME; runs in PostgreSQL do not use it yet");
        return Ok(crate::exit::EXIT_USAGE);
    }
    let mut cache = FileCache::open(&dir())?;
    for problem in cache.problems() {
        eprintln!("warning: {problem}");
    }
    match command {
        CacheCommand::List => {
            let listed = cache.list();
            for item in &listed {
                match cache.get(&item.key) {
                    Ok(Some(entry)) => say(&format!(
                        "{}  {}  {}  run {}  {} bytes  {}",
                        item.key,
                        entry.task,
                        entry.plan,
                        entry.run,
                        item.bytes,
                        engine::clock::format_millis(i64::try_from(item.stored_at).unwrap_or(i64::MAX / 1000) * 1000)
                    )),
                    Ok(None) => {}
                    Err(error) => eprintln!("warning: {error}"),
                }
            }
            eprintln!("{} stored outputs, {} bytes in {}", listed.len(), cache.bytes(), dir().display());
            Ok(0)
        }
        CacheCommand::Show { key } => {
            let matching: Vec<Key> = cache
                .list()
                .into_iter()
                .map(|item| item.key)
                .filter(|k| k.to_string().starts_with(key.as_str()))
                .collect();
            let [found] = matching.as_slice() else {
                eprintln!(
                    "error: {} stored outputs have a key starting with `{key}`; `runner cache list` shows the keys",
                    matching.len()
                );
                return Ok(crate::exit::EXIT_USAGE);
            };
            match cache.get(found)? {
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
