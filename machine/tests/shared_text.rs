//! A task's input and output are held once: the state shares the text of the events that
//! recorded them, and those events are recorded exactly as before.

mod support;

use std::sync::Arc;

use machine::{Command, Event, Handler, Start};
use support::RunState;

fn one_task() -> Arc<manifest::Plan> {
    let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: one}\nspec:\n  agent_definitions:\n    \
                m: {runtime: mock}\n  workflow:\n    - {id: a, agent: m, input: the brief}\n";
    Arc::new(manifest::load_str("one.yaml", "one", yaml, &|_| true).plan.expect("the plan loads"))
}

#[test]
fn the_state_shares_the_recorded_input_and_output() {
    let mut state = RunState::new();
    let events = state.process(Command::Start(Start::plan(one_task()))).expect("the run starts");
    let Some(Event::TaskDispatched { input, .. }) = events.last() else { panic!("a is dispatched: {events:?}") };
    assert!(Arc::ptr_eq(input, state.tasks[0].input.as_ref().expect("a has an input")));
    let result =
        Command::Succeeded { task: "a".into(), attempt: 1, output: "done".into(), tokens: None, duration_ms: 0 };
    let events = state.process(result).expect("the result is taken");
    let Some(Event::TaskSucceeded { output, .. }) = events.first() else { panic!("a succeeded: {events:?}") };
    assert!(Arc::ptr_eq(output, state.tasks[0].output.as_ref().expect("a has an output")));
}

#[test]
fn shared_text_is_recorded_as_a_plain_string() {
    let dispatched = Event::TaskDispatched { task: "a".into(), attempt: 1, input: "the \"brief\"".into() };
    let succeeded = Event::TaskSucceeded {
        task: "a".into(),
        attempt: 1,
        dispatched_seq: Some(2),
        output: "done".into(),
        tokens: None,
        duration_ms: 5,
    };
    let json = |event: &Event| serde_json::to_string(event).expect("an event encodes");
    assert_eq!(json(&dispatched), r#"{"type":"TaskDispatched","task":"a","attempt":1,"input":"the \"brief\""}"#);
    assert_eq!(
        json(&succeeded),
        r#"{"type":"TaskSucceeded","task":"a","attempt":1,"dispatched_seq":2,"output":"done","duration_ms":5}"#
    );
    for event in [dispatched, succeeded] {
        assert_eq!(serde_json::from_str::<Event>(&json(&event)).expect("an event decodes"), event);
    }
}
