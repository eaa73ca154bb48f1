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

fn succeeded(task: &str) -> Command {
    Command::Succeeded { task: task.into(), attempt: 1, output: "ok".into(), tokens: None, duration_ms: 0 }
}

#[test]
fn each_process_reports_the_attempts_its_events_dispatch() {
    let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: fan}\nspec:\n  agent_definitions:\n    \
                m: {runtime: mock}\n  workflow:\n    - {id: root, agent: m, input: x}\n    \
                - {id: b, agent: m, input: x, depends_on: [root]}\n    \
                - {id: a, agent: m, input: x, depends_on: [root]}\n    \
                - {id: sink, agent: m, input: x, depends_on: [a, b]}\n";
    let loaded = manifest::load_str("fan.yaml", "fan", yaml, &|_| true);
    let mut state = RunState::new();
    let plan = Arc::new(loaded.plan.expect("the plan loads"));
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
