//! One stored output: what a successful, verified attempt produced, under its key, with where it
//! came from and the digests of its key's parts.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Key;
use crate::Recalled;
use crate::event::{Origin, Tokens};

/// A stored output and its provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The key, hex.
    pub key: String,
    /// The name of the plan whose run stored it.
    pub plan: String,
    /// The task.
    pub task: String,
    /// The run whose attempt produced it.
    pub run: String,
    /// That attempt.
    pub attempt: u32,
    /// The output.
    pub output: String,
    /// The tokens the attempt used: what a run that reuses the output saves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// How long the attempt took.
    pub duration_ms: u64,
    /// When it was stored, in seconds since the Unix epoch.
    pub stored_at: u64,
    /// The key's parts, each digest shortened (see [`super::key::Parts::short`]).
    pub parts: String,
    /// The digest of the output, shortened: a damaged entry does not match it.
    pub sum: String,
}

impl Entry {
    /// The digest an output is stored with.
    pub fn sum_of(output: &str) -> String {
        super::key::hex(&Sha256::digest(output.as_bytes())[..8])
    }

    /// The entry as the output a run takes for task `task` (whose key it matches, whatever
    /// task stored it), naming where it came from.
    pub fn recalled(self, task: &str) -> Recalled {
        let from = Origin { run: self.run, attempt: self.attempt, key: self.key, tokens: self.tokens };
        Recalled { task: task.to_owned(), output: self.output, from }
    }

    /// Why the entry cannot be trusted as the output stored under `key`, if it cannot.
    pub fn damage(&self, key: &Key) -> Option<String> {
        if self.key.parse::<Key>().as_ref() != Ok(key) {
            return Some(format!("it holds key {} instead", self.key));
        }
        if Entry::sum_of(&self.output) != self.sum {
            return Some("its output does not match its digest".to_owned());
        }
        None
    }
}
