//! The task cache as the state machine sees it: how a run reuses stored outputs (recorded in
//! `RunCreated`), and the [`Recall`] it asks, as a task is about to be dispatched, for an output
//! stored under the task's key. Its answers become `TaskReused` events, so a log replays them
//! without asking, and a resumed run never decides one twice.

use std::sync::Arc;

use manifest::Plan;
use serde::{Deserialize, Serialize};

use crate::Recalled;

/// How a run uses stored outputs beyond what each task's `cache` says (`runner apply --reuse`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reuse {
    /// Every task whose key matches a stored success is reused, whatever its `cache`.
    #[serde(default)]
    pub all: bool,
    /// Only outputs this run stored are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

impl Reuse {
    /// Whether it says nothing beyond the tasks' `cache` (what a run records when it is).
    pub fn is_default(&self) -> bool {
        *self == Reuse::default()
    }
}

/// Where a run looks for a stored output before it dispatches a task's first attempt.
pub trait Recall: Send + Sync {
    /// The output stored for task `task` of `plan` with input `input`, when the run (reusing as
    /// `reuse` says) may take it instead of running the task.
    fn recall(&self, plan: &Arc<Plan>, task: usize, input: &str, reuse: &Reuse) -> Option<Recalled>;
}

/// A [`Recall`] held by a run's state (derived: never compared or recorded).
#[derive(Clone)]
pub(crate) struct Held(pub(crate) Arc<dyn Recall>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recall")
    }
}
