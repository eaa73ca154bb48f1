//! The scheduling caches: the ready queue and what the strategies keep beside it.
//!
//! All of it is derived (rebuilt with the tally when a plan is installed, and left out of a
//! run's equality): a queued task (`TaskState::queued`) has an entry in `ready` unless it is
//! `held` for the summary or `parked` behind its full group; entries of tasks no longer
//! queued are stale and skipped when popped; `blocked[i]` counts task `i`'s dependencies
//! that are neither succeeded nor skipped, and a task is queued only once it is 0.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// A task's place in a queue: its priority (higher first), then its index (lower first), in 8
/// bytes (a fan-out queues 100,000 tasks at once; a plan has far fewer than 2^32).
pub(super) type Entry = (u32, Reverse<u32>);

/// Task `i`'s entry at `priority`.
pub(super) fn entry(priority: u32, i: usize) -> Entry {
    (priority, Reverse(u32::try_from(i).unwrap_or(u32::MAX)))
}

/// The ready queue and the strategies' caches.
#[derive(Debug, Clone, Default)]
pub(super) struct Queue {
    /// Per task: dependencies neither succeeded nor skipped. Kept apart from the task states,
    /// so that releasing a task's dependents reads one small array rather than each state.
    pub(super) blocked: Vec<u32>,
    /// The queued tasks by priority (see `schedule::priority`).
    pub(super) ready: Ready,
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

/// The ready queue, best entry first. Entries that come in order (each no better than the one
/// before, as the dependents a task releases mostly do) join a sorted run at its end; the
/// rest go to a heap, and a pop takes the better of the two fronts. A fan-out's 100,000
/// dependents so cost a push and a pop at the ends of a deque rather than a heap's sifts.
#[derive(Debug, Clone, Default)]
pub(super) struct Ready {
    /// Entries in the order they will be taken.
    run: VecDeque<Entry>,
    /// Entries that came out of order.
    heap: BinaryHeap<Entry>,
}

impl Ready {
    /// Adds an entry.
    pub(super) fn push(&mut self, entry: Entry) {
        if self.run.back().is_none_or(|&last| entry <= last) {
            self.run.push_back(entry);
        } else {
            self.heap.push(entry);
        }
    }

    /// Takes the best entry.
    pub(super) fn pop(&mut self) -> Option<Entry> {
        match (self.run.front(), self.heap.peek()) {
            (Some(first), Some(top)) if top > first => self.heap.pop(),
            (Some(_), _) => self.run.pop_front(),
            (None, _) => self.heap.pop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pushes and pops in any order take entries exactly as a binary heap would.
        #[test]
        fn ready_takes_entries_as_a_heap_does(steps in proptest::collection::vec(proptest::option::of((0u32..4, 0u32..50)), 0..200)) {
            let (mut ready, mut heap) = (Ready::default(), BinaryHeap::new());
            for step in steps {
                match step {
                    Some((priority, i)) => {
                        ready.push((priority, Reverse(i)));
                        heap.push((priority, Reverse(i)));
                    }
                    None => prop_assert_eq!(ready.pop(), heap.pop()),
                }
            }
            while let Some(entry) = heap.pop() {
                prop_assert_eq!(ready.pop(), Some(entry));
            }
            prop_assert_eq!(ready.pop(), None);
        }
    }
}
