//! `on_failure` as a map: `retry_on` is read, checked and defaulted.

use manifest::plan::{Action, RetryOn};
use manifest::{Loaded, load_str};

fn load(on_failure: &str) -> Loaded {
    let text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions: {{m: {{runtime: mock}}}}\n  \
         workflow:\n    - {{id: a, agent: m, input: x, on_failure: {on_failure}}}\n"
    );
    load_str("t.yaml", "t", &text, &|_| true)
}

fn errors(loaded: &Loaded) -> Vec<String> {
    loaded.errors().map(|d| d.to_string()).collect()
}

fn retry_on(loaded: &Loaded) -> RetryOn {
    loaded.plan.as_ref().expect("the plan was read").tasks[0].on_failure.value.retry_on
}

#[test]
fn retry_on_is_read_and_defaults_to_any() {
    let loaded = load("{action: retry, retry_on: transient, then: skip}");
    assert!(errors(&loaded).is_empty(), "{:?}", errors(&loaded));
    assert_eq!(retry_on(&loaded), RetryOn::Transient);
    assert_eq!(loaded.plan.as_ref().expect("read").tasks[0].on_failure.value.then, Action::Skip);
    let loaded = load("{action: retry}");
    assert!(errors(&loaded).is_empty(), "{:?}", errors(&loaded));
    assert_eq!(retry_on(&loaded), RetryOn::Any);
    assert_eq!(retry_on(&load("retry")), RetryOn::Any);
}

#[test]
fn an_unknown_retry_on_is_an_error_that_names_the_field() {
    let loaded = load("{action: retry, retry_on: sometimes}");
    let errors = errors(&loaded);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("retry_on"), "{errors:?}");
}

#[test]
fn retry_on_without_retry_is_an_error() {
    let loaded = load("{action: skip, retry_on: transient}");
    let errors = errors(&loaded);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`retry_on` applies only to `action: retry`"), "{errors:?}");
}
