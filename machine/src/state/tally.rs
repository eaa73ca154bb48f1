//! The tally: counts derived from the task states, kept up to date where the states change
//! (`transitions.rs`), so that no scheduling decision scans every task.
//!
//! Invariants, after every event (and rebuilt from the task states by `rebuild` whenever a
//! plan is installed):
//! - `running`: tasks with an attempt in flight; `group_running[g]`: those of parallel group `g`.
//! - `waiting`: tasks whose retry timer runs.
//! - `paused`: tasks `Paused`; `finished`: tasks whose status is final (so `finished ==
//!   tasks.len()` means the run can end); `succeeded`: tasks `Succeeded`.
//! - `phase_left[l]`: tasks of topological level `l` that are not final.
//! - `phase_busy[l]`: tasks of level `l` in flight or waiting for a retry timer.
//! - `turns[l]`: attempts dispatched in level `l` (for `max_turns_per_phase`).
//!
//! Order matters where one event changes several: a status changes through `set_status`,
//! which moves `finished`, `paused` and `phase_left` together; an attempt ends through
//! `end_attempt` before the task's new status is set.

use std::collections::HashMap;

/// The counters of a run (see the module doc for what each one counts).
#[derive(Debug, Clone, Default)]
pub(super) struct Tally {
    /// Attempts in flight.
    pub(super) running: usize,
    /// Attempts in flight per parallel group.
    pub(super) group_running: HashMap<String, usize>,
    /// Tasks whose retry timer runs.
    pub(super) waiting: usize,
    /// Tasks waiting for a person.
    pub(super) paused: usize,
    /// Tasks whose status is final.
    pub(super) finished: usize,
    /// Tasks that succeeded.
    pub(super) succeeded: usize,
    /// Per phase: tasks not final yet.
    pub(super) phase_left: Vec<usize>,
    /// Per phase: attempts in flight and retries waiting.
    pub(super) phase_busy: Vec<usize>,
    /// Per phase: attempts dispatched (for `max_turns_per_phase`).
    pub(super) turns: Vec<u32>,
}

impl Tally {
    /// Zero counts for a plan with `phases` topological levels.
    pub(super) fn new(phases: usize) -> Self {
        Tally { phase_left: vec![0; phases], phase_busy: vec![0; phases], turns: vec![0; phases], ..Tally::default() }
    }
}
