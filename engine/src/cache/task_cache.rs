//! The task cache a process uses: the files under the runner home for runs kept there, the
//! database's table for runs kept in PostgreSQL. Both answer the same calls.

use std::sync::{Mutex, PoisonError};

use super::resolve::{Found, Lookup, Stored};
use super::{CacheError, Entry, FileCache, Key, Listed, Pruned, TableCache};

/// Every key's newest entry with its size and time, or why it cannot be read.
pub type Listing = Vec<(Listed, Result<Entry, CacheError>)>;

/// Where stored outputs are kept.
pub enum TaskCache {
    /// Packs of files in a folder.
    Files(Box<FileCache>),
    /// The `runner_cache` table.
    Table(TableCache),
}

impl TaskCache {
    /// Problems met while opening it, each reported once.
    pub fn problems(&self) -> &[String] {
        match self {
            TaskCache::Files(files) => files.problems(),
            TaskCache::Table(_) => &[],
        }
    }

    /// Stores entries (written in batches; [`TaskCache::flush`] writes the rest).
    pub fn put(&mut self, entries: &[Entry]) -> Result<(), CacheError> {
        match self {
            TaskCache::Files(files) => files.put(entries),
            TaskCache::Table(table) => {
                table.put(entries);
                Ok(())
            }
        }
    }

    /// Writes every entry stored so far.
    pub fn flush(&mut self) -> Result<(), CacheError> {
        match self {
            TaskCache::Files(files) => files.flush(),
            TaskCache::Table(table) => table.flush(),
        }
    }

    /// The newest entry stored under `key` (by run `run` only, when given).
    pub fn get(&self, key: &Key, run: Option<&str>) -> Result<Option<Entry>, CacheError> {
        match (self, run) {
            (TaskCache::Files(files), Some(run)) => files.get_from(key, run),
            (TaskCache::Files(files), None) => files.get(key),
            (TaskCache::Table(table), run) => table.get(key, run),
        }
    }

    /// Every key's newest entry, newest first, with what it holds.
    pub fn list(&self) -> Result<Listing, CacheError> {
        match self {
            TaskCache::Files(files) => Ok(files
                .list()
                .into_iter()
                .filter_map(|listed| match files.get(&listed.key) {
                    Ok(Some(entry)) => Some((listed, Ok(entry))),
                    Ok(None) => None,
                    Err(error) => Some((listed, Err(error))),
                })
                .collect()),
            TaskCache::Table(table) => table.list(),
        }
    }

    /// The bytes it holds.
    pub fn bytes(&self) -> Result<u64, CacheError> {
        match self {
            TaskCache::Files(files) => Ok(files.bytes()),
            TaskCache::Table(table) => table.bytes(),
        }
    }

    /// Removes entries stored before `before` (seconds since the epoch), then the oldest until
    /// it holds at most `max_bytes`.
    pub fn prune(&mut self, before: Option<u64>, max_bytes: Option<u64>) -> Result<Pruned, CacheError> {
        match self {
            TaskCache::Files(files) => files.prune(before, max_bytes),
            TaskCache::Table(table) => table.prune(before, max_bytes),
        }
    }
}

impl Lookup for TaskCache {
    fn find(&self, wanted: &[(&str, Key)], run: Option<&str>) -> Result<Vec<Found>, CacheError> {
        match self {
            TaskCache::Files(files) => Ok(wanted.iter().map(|(_, key)| in_files(files, key, run)).collect()),
            TaskCache::Table(table) => table.find(&wanted.iter().map(|(_, key)| *key).collect::<Vec<_>>(), run),
        }
    }

    fn latest(&self, plan: &str, tasks: &[&str]) -> Vec<Option<Entry>> {
        match self {
            TaskCache::Files(files) => tasks.iter().map(|task| files.latest(plan, task)).collect(),
            // Only the reasons a task runs need these: a table that cannot say gives none.
            TaskCache::Table(table) => table.latest(plan, tasks).unwrap_or_else(|_| vec![None; tasks.len()]),
        }
    }
}

impl Lookup for Mutex<TaskCache> {
    fn find(&self, wanted: &[(&str, Key)], run: Option<&str>) -> Result<Vec<Found>, CacheError> {
        self.lock().unwrap_or_else(PoisonError::into_inner).find(wanted, run)
    }

    fn latest(&self, plan: &str, tasks: &[&str]) -> Vec<Option<Entry>> {
        self.lock().unwrap_or_else(PoisonError::into_inner).latest(plan, tasks)
    }
}

/// What the files hold under `key`.
fn in_files(files: &FileCache, key: &Key, run: Option<&str>) -> Found {
    let found = match run {
        Some(run) => files.get_from(key, run)?,
        None => files.get(key)?,
    };
    Ok(match found {
        Some(entry) => Stored::Entry(Box::new(entry)),
        None if run.is_some() && files.contains(key) => Stored::OtherRuns,
        None => Stored::Nothing,
    })
}
