//! The `eager` strategy: everything whose dependencies are done starts, up to
//! `max_concurrency` and each parallel group's limit, the longest remaining chain first.
//!
//! Invariants: at most `max_concurrency` attempts in flight and at most a group's
//! `max_concurrency` of its members; a queued member of a full group is parked (off the ready
//! queue) until a member of its group ends (or a start takes no slot), then the best parked
//! one goes back.

use manifest::TaskGraph;
use manifest::plan::TaskKind;

use crate::event::Event;
use crate::run_status::RunStatus;
use crate::state::RunState;
use crate::state::queue::entry;
use crate::tokens::TokenCounter;

/// The longest chain of dependents left below task `i` first.
pub(super) fn priority(graph: &TaskGraph, i: usize) -> u32 {
    u32::try_from(graph.height(i)).unwrap_or(u32::MAX)
}

/// Starts queued tasks, best first, while the limits allow.
pub(super) fn round<C: TokenCounter>(run: &mut RunState<C>, out: &mut Vec<Event>) {
    while run.tally.running < run.limit() && run.status == RunStatus::Running && run.exhausted.is_none() {
        let Some((priority, i)) = run.next_ready() else { break };
        if run.plan.tasks[i].kind != TaskKind::HumanReview && !run.group_allows(i) {
            // Parked until a member of its group finishes.
            if let Some(group) = &run.plan.tasks[i].extras().parallel_group {
                run.queue.parked.entry(group.value.clone()).or_default().push(entry(priority, i));
            }
            continue;
        }
        let plan = std::sync::Arc::clone(&run.plan);
        let group = plan.tasks[i].extras().parallel_group.as_ref();
        let running = run.tally.running;
        run.start_task(i, out);
        // A start that took no slot (a map collecting its items, a false condition) leaves the
        // group's room to its best parked member, which would otherwise wait for an attempt
        // of the group to end, and wait for ever when none is running.
        if run.tally.running == running
            && let Some(group) = group
        {
            run.unpark(&group.value);
        }
    }
}
