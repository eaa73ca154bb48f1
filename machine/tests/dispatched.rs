//! `RunState::last_dispatched`: the attempts the latest `process` dispatched, by task index,
//! always the same attempts as its `TaskDispatched` events and in their order.

mod support;

use std::sync::Arc;

use machine::{Command, Event, Handler, Start};
use support::RunState;

/// The dispatched attempts among `events`, as task index and attempt number.
fn dispatched(state: &RunState, events: &[Event]) -> Vec<(usize, u32)> {
    let index = |task: &str| state.index_of(task).expect("a dispatched task is in the plan");
    events
        .iter()
        .filter_map(|e| match e {
            Event::TaskDispatched { task, attempt, .. } => Some((index(task), *attempt)),
            _ => None,
        })
        .collect()
}

/// root -> (b, a) -> sink, b listed before a.
fn fan() -> Arc<manifest::Plan> {
    let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: fan}\nspec:\n  agent_definitions:\n    \
                m: {runtime: mock}\n  workflow:\n    - {id: root, agent: m, input: x}\n    \
                - {id: b, agent: m, input: x, depends_on: [root]}\n    \
                - {id: a, agent: m, input: x, depends_on: [root]}\n    \
                - {id: sink, agent: m, input: x, depends_on: [a, b]}\n";
    Arc::new(manifest::load_str("fan.yaml", "fan", yaml, &|_| true).plan.expect("the plan loads"))
}

fn succeeded(task: &str) -> Command {
    Command::Succeeded { task: task.into(), attempt: 1, output: "ok".into(), tokens: None, duration_ms: 0 }
}

#[test]
fn each_process_reports_the_attempts_its_events_dispatch() {
    let mut state = RunState::new();
    let plan = fan();
    let events = state.process(Command::Start(Start::plan(plan))).expect("the run starts");
    assert_eq!(state.last_dispatched(), [(0, 1)]);
    assert_eq!(dispatched(&state, &events), state.last_dispatched());
    let events = state.process(succeeded("root")).expect("the result is taken");
    assert_eq!(state.last_dispatched().len(), 2);
    assert_eq!(dispatched(&state, &events), state.last_dispatched());
    // A result that dispatches nothing, and a refused one, report nothing.
    let events = state.process(succeeded("a")).expect("the result is taken");
    assert!(dispatched(&state, &events).is_empty() && state.last_dispatched().is_empty());
    assert!(state.process(succeeded("nope")).is_err());
    assert!(state.last_dispatched().is_empty());
    let events = state.process(succeeded("b")).expect("the result is taken");
    assert_eq!(state.last_dispatched(), [(3, 1)]);
    assert_eq!(dispatched(&state, &events), state.last_dispatched());
}

#[test]
fn a_result_processed_at_a_wrong_index_still_goes_to_its_task() {
    let plan = fan();
    let (mut at, mut by_id) = (RunState::new(), RunState::new());
    for state in [&mut at, &mut by_id] {
        state.process(Command::Start(Start::plan(Arc::clone(&plan)))).expect("the run starts");
    }
    // The right index, another task's, one past the end: each takes the result as `process` does.
    for (i, task) in [(0, "root"), (1, "a"), (99, "b"), (3, "sink")] {
        let mut events = vec![Event::RunResumed];
        at.process_at(i, succeeded(task), &mut events).expect("the result is taken");
        let expected = by_id.process(succeeded(task)).expect("the result is taken");
        assert_eq!(events[1..], expected, "{task} at {i}: appended after what `out` held");
        assert_eq!(at.last_dispatched(), by_id.last_dispatched(), "{task} at {i}");
        assert_eq!(at, by_id, "{task} at {i}");
    }
    let mut events = Vec::new();
    assert!(at.process_at(0, succeeded("nope"), &mut events).is_err());
    assert!(events.is_empty(), "a refused command appends nothing");
}
