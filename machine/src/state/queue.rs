//! The scheduling caches: the ready queue and what the strategies keep beside it.
//!
//! All of it is derived (rebuilt with the tally when a plan is installed, and left out of a
//! run's equality): a queued task (`TaskState::queued`) has an entry in `ready` unless it is
//! `held` for the summary or `parked` behind its full group; entries of tasks no longer
//! queued are stale and skipped when popped; `blocked[i]` counts task `i`'s dependencies
//! that are neither succeeded nor skipped, and a task is queued only once it is 0.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// A task's place in a queue: its priority (higher first), then its index (lower first).
pub(super) type Entry = (u64, Reverse<usize>);

/// The ready queue and the strategies' caches.
#[derive(Debug, Clone, Default)]
pub(super) struct Queue {
    /// Per task: dependencies neither succeeded nor skipped. Kept apart from the task states,
    /// so that releasing a task's dependents reads one small array rather than each state.
    pub(super) blocked: Vec<u32>,
    /// The queued tasks by priority (see `schedule::priority`).
    pub(super) ready: BinaryHeap<Entry>,
    /// Tasks taken off the ready queue to wait for the summary.
    pub(super) held: Vec<usize>,
    /// Queued tasks of groups that were full when their turn came, best first (eager).
    pub(super) parked: HashMap<String, BinaryHeap<Entry>>,
    /// For `phased`: phases before it are all final.
    pub(super) phase: usize,
    /// Per phase and parallel group: the members, in list order (for `phased`).
    pub(super) units: HashMap<(usize, String), Vec<usize>>,
    /// The group unit `phased` is starting, and the next member to start.
    pub(super) unit: Option<(usize, String, usize)>,
}
