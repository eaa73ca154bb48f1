//! The cap on rendered inputs: a template that would grow past it fails its attempt with an
//! error that names the cap, and nothing that large reaches the log.

mod support;

use std::sync::Arc;

use machine::template::MAX_INPUT_BYTES;
use machine::{Command, Event, Handler, Start};
use support::RunState;

fn start(input: &str) -> Vec<Event> {
    let yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: big}}\nspec:\n  agent_definitions:\n    echo: {{runtime: mock}}\n  \
         workflow:\n    - id: big\n      agent: echo\n      input: \"{input}\"\n      on_failure: skip\n"
    );
    let loaded = manifest::load_str("big.yaml", "big", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let plan = Arc::new(loaded.plan.expect("the plan loads"));
    RunState::new().process(Command::Start(Start::plan(plan))).expect("the run starts")
}

#[test]
fn an_input_over_the_cap_fails_the_attempt_and_names_the_cap() {
    let events = start(&format!("{{{{ 'x' * {} }}}}", MAX_INPUT_BYTES + 1));
    let dispatched = events.iter().find_map(|e| match e {
        Event::TaskDispatched { task, input, .. } => Some((task.as_str(), input.len())),
        _ => None,
    });
    assert_eq!(dispatched, Some(("big", 0)), "the attempt is recorded without the input");
    let error = events
        .iter()
        .find_map(|e| match e {
            Event::TaskFailed { task, error, .. } if task == "big" => Some(error.clone()),
            _ => None,
        })
        .expect("the attempt fails");
    assert!(error.contains(&MAX_INPUT_BYTES.to_string()) && error.contains("cap"), "{error}");
}

#[test]
fn an_input_at_the_cap_is_dispatched() {
    let events = start(&format!("{{{{ 'x' * {MAX_INPUT_BYTES} }}}}"));
    let input = events.iter().find_map(|e| match e {
        Event::TaskDispatched { input, .. } => Some(input.len()),
        _ => None,
    });
    assert_eq!(input, Some(MAX_INPUT_BYTES));
    assert!(!events.iter().any(|e| matches!(e, Event::TaskFailed { .. })));
}
