//! `RunState::limit_dispatches`: a layer wider than a slice is dispatched a slice at a time, in
//! the order one unlimited batch dispatches it, and the run neither pauses nor ends meanwhile.

mod support;

use std::sync::Arc;

use machine::{Command, Event, Handler, RunStatus, Start};
use support::RunState;

/// root -> t0..t9 -> sink.
fn fan() -> Arc<manifest::Plan> {
    let mut yaml = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: fan}\nspec:\n  agent_definitions:\n    \
         m: {runtime: mock}\n  workflow:\n    - {id: root, agent: m, input: x}\n",
    );
    for i in 0..10 {
        yaml.push_str(&format!("    - {{id: t{i}, agent: m, input: x, depends_on: [root]}}\n"));
    }
    let middle: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    yaml.push_str(&format!("    - {{id: sink, agent: m, input: x, depends_on: [{}]}}\n", middle.join(", ")));
    Arc::new(manifest::load_str("fan.yaml", "fan", &yaml, &|_| true).plan.expect("the plan loads"))
}

fn succeeded(task: &str) -> Command {
    Command::Succeeded { task: task.into(), attempt: 1, output: "ok".into(), tokens: None, duration_ms: 0 }
}

fn dispatched(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TaskDispatched { task, .. } => Some(task.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_wide_layer_is_dispatched_a_slice_at_a_time_in_one_batchs_order() {
    let mut whole = RunState::new();
    whole.process(Command::Start(Start::plan(fan()))).expect("the run starts");
    let expected = dispatched(&whole.process(succeeded("root")).expect("the result is taken"));
    assert_eq!(expected.len(), 10);

    let mut sliced = RunState::new();
    sliced.limit_dispatches(4);
    sliced.process(Command::Start(Start::plan(fan()))).expect("the run starts");
    // A driver opens a slice with each batch.
    sliced.next_slice(&mut Vec::new());
    let mut order = dispatched(&sliced.process(succeeded("root")).expect("the result is taken"));
    assert_eq!(order.len(), 4);
    assert!(sliced.held_back());
    // While the slice is full, a result starts nothing more, and the run goes on.
    let events = sliced.process(succeeded(&order[0])).expect("the result is taken");
    assert!(dispatched(&events).is_empty(), "{events:?}");
    assert_eq!(sliced.status, RunStatus::Running);
    assert!(sliced.held_back());
    while sliced.held_back() {
        let mut events = Vec::new();
        sliced.next_slice(&mut events);
        assert!(dispatched(&events).len() <= 4);
        assert_eq!(sliced.last_dispatched().len(), dispatched(&events).len());
        order.extend(dispatched(&events));
    }
    assert_eq!(order, expected);
    // A new slice with nothing held back starts nothing.
    let mut events = Vec::new();
    sliced.next_slice(&mut events);
    assert!(events.is_empty());
    let mut last = Vec::new();
    for task in &order[1..] {
        last = sliced.process(succeeded(task)).expect("the result is taken");
    }
    assert_eq!(dispatched(&last), ["sink"]);
    let events = sliced.process(succeeded("sink")).expect("the sink was dispatched");
    assert!(matches!(events.last(), Some(Event::RunCompleted { .. })), "{events:?}");
}
