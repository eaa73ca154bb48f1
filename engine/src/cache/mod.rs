//! The task cache: outputs of successful, verified attempts stored under a key that hashes
//! everything that decides a task's result (`key.rs`), so a later run can take an output instead
//! of running the task again. `files.rs` keeps entries (`entry.rs`) on one machine, `table.rs` in
//! PostgreSQL for every process that uses it, and `task_cache.rs` is either; `policy.rs` says
//! which tasks' outputs are stored and used; `resolve.rs` decides, before a run, which tasks will
//! be reused and why the others run, and `recall.rs` looks the others up as they are dispatched.

mod entry;
mod files;
pub mod key;
mod policy;
mod recall;
mod resolve;
mod table;
mod task_cache;

pub use crate::Reuse;
pub use entry::Entry;
pub use files::{FileCache, Listed, Pruned, now};
pub use key::{Key, Keyer, Parts};
pub use policy::{never_reused, setting, storable};
pub use recall::CacheRecall;
pub use resolve::{Found, Lookup, Resolution, Stored, Verdict, resolve};
pub use table::TableCache;
pub use task_cache::{Listing, TaskCache};

use std::path::Path;

/// Why the task cache could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum CacheError {
    /// The file system refused.
    #[error("cannot {action} {path}: {reason}")]
    #[diagnostic(code(cache::io))]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// A stored entry is not what its index says; it is ignored.
    #[error("the cache entry {key} is damaged: {reason}; it is ignored and the task runs")]
    #[diagnostic(code(cache::damaged), help("`runner cache prune` rewrites the cache without entries it cannot read"))]
    Damaged {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An entry could not be written as JSON.
    #[error("cannot encode a cache entry: {0}")]
    #[diagnostic(code(cache::io))]
    Encode(String),
}

impl CacheError {
    /// An IO error on `path`.
    pub(crate) fn io(action: &'static str, path: &Path, error: &std::io::Error) -> Self {
        CacheError::Io { action, path: path.display().to_string(), reason: error.to_string() }
    }
}
