//! The `phased` strategy (the seed's phases): topological levels one after another; inside a
//! phase, one parallel group (all its members together, within limits) or one ungrouped task
//! at a time, in list order.
//!
//! Invariants: no task of a later phase starts while an earlier phase has a task that is not
//! final (`phase_left`); a new unit starts only when the phase has nothing in flight and no
//! retry waiting (`phase_busy`); the group unit in progress (`Queue::unit`) is finished
//! before another starts.

use manifest::TaskGraph;
use manifest::plan::TaskKind;

use crate::event::Event;
use crate::run_status::RunStatus;
use crate::state::RunState;
use crate::state::queue::entry;
use crate::tokens::TokenCounter;

/// The earliest phase first, then list order.
pub(super) fn priority(graph: &TaskGraph, i: usize) -> u32 {
    u32::MAX - u32::try_from(graph.level(i)).unwrap_or(u32::MAX)
}

/// Moves to the first phase with work left and starts its next unit.
pub(super) fn round<C: TokenCounter>(run: &mut RunState<C>, out: &mut Vec<Event>) {
    let phases = run.graph.phases().len();
    while run.queue.phase < phases && run.tally.phase_left[run.queue.phase] == 0 {
        run.queue.phase += 1;
        run.queue.unit = None;
    }
    if run.queue.phase >= phases {
        return;
    }
    if continue_unit(run, out) || run.tally.phase_busy[run.queue.phase] > 0 {
        return;
    }
    let Some((priority, i)) = run.next_ready() else { return };
    if run.graph.level(i) != run.queue.phase {
        // Only later phases have queued tasks: this phase waits for a person.
        run.queue.ready.push(entry(priority, i));
        return;
    }
    match run.plan.tasks[i].extras().parallel_group.as_ref().map(|g| g.value.clone()) {
        Some(group) => {
            run.queue.ready.push(entry(priority, i));
            run.queue.unit = Some((run.queue.phase, group, 0));
            continue_unit(run, out);
        }
        None => run.start_task(i, out),
    }
}

/// Starts further members of the group unit in progress; true while some remain.
fn continue_unit<C: TokenCounter>(run: &mut RunState<C>, out: &mut Vec<Event>) -> bool {
    let Some((phase, group, mut next)) = run.queue.unit.take() else { return false };
    let members = run.queue.units.get(&(phase, group.clone())).cloned().unwrap_or_default();
    while next < members.len() && run.status == RunStatus::Running && run.exhausted.is_none() {
        let i = members[next];
        if !run.tasks[i].queued {
            next += 1;
            continue;
        }
        let review = run.plan.tasks[i].kind == TaskKind::HumanReview;
        if !review && (run.tally.running >= run.limit() || !run.group_allows(i)) {
            break;
        }
        let plan = std::sync::Arc::clone(&run.plan);
        run.start_task(i, out);
        if !std::sync::Arc::ptr_eq(&plan, &run.plan) {
            // A map expanded: the plan, its phases and their units are new; the next round
            // starts from them.
            return true;
        }
        next += 1;
    }
    let remaining = next < members.len();
    if remaining {
        run.queue.unit = Some((phase, group, next));
    }
    remaining
}
