//! The `sequential` strategy: one attempt at a time, in list order.
//!
//! Invariants: at most one attempt in flight, and none while a retry's timer runs (the retry
//! comes first); a review starts only when nothing else runs either.

use manifest::TaskGraph;

use crate::event::Event;
use crate::state::RunState;
use crate::tokens::TokenCounter;

/// Every task the same: the ready queue falls back to list order.
pub(super) fn priority(_graph: &TaskGraph, _i: usize) -> u32 {
    0
}

/// Starts the first queued task when nothing runs or waits.
pub(super) fn round<C: TokenCounter>(run: &mut RunState<C>, out: &mut Vec<Event>) {
    if run.tally.running > 0 || run.tally.waiting > 0 {
        return;
    }
    if let Some((_, i)) = run.next_ready() {
        run.start_task(i, out);
    }
}
