//! `Command::Start` through the library API with plans `manifest::load_file` would refuse.

use std::sync::Arc;

use engine::driver::{Driver, DriverError};
use engine::{Command, EngineError, Handler, RunState, RunStatus, Start};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

/// A plan whose tasks `b` and `c` depend on each other; loaded despite its `plan::cycle` error.
fn cyclic() -> Arc<manifest::Plan> {
    let yaml = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: cyclic}
spec:
  agent_definitions:
    echo: {runtime: mock}
  workflow:
    - {id: a, agent: echo, input: x}
    - {id: b, agent: echo, input: x, depends_on: [a, c]}
    - {id: c, agent: echo, input: x, depends_on: [b]}
"#;
    let loaded = manifest::load_str("cyclic.yaml", "cyclic", yaml, &|_| true);
    assert!(loaded.errors().any(|d| d.code() == "plan::cycle"), "the plan has a cycle");
    Arc::new(loaded.plan.expect("a cyclic plan still reads"))
}

#[test]
fn start_with_a_cyclic_plan_is_refused_and_the_run_stays_new() {
    let mut state = RunState::new();
    let error = state.process(Command::Start(Start::plan(cyclic()))).expect_err("a cycle is refused");
    assert!(matches!(&error, EngineError::Cycle { tasks } if tasks == "`b`, `c`"), "{error}");
    assert_eq!(state.status, RunStatus::New);
    // The run can still start with a plan that can run.
    let ok = manifest::load_str(
        "ok.yaml",
        "ok",
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: ok}\nspec:\n  agent_definitions:\n    echo: {runtime: mock}\n  \
         workflow:\n    - {id: a, agent: echo, input: x}\n",
        &|_| true,
    );
    let events = state.process(Command::Start(Start::plan(Arc::new(ok.plan.expect("loads"))))).expect("starts");
    assert!(!events.is_empty());
}

#[tokio::test]
async fn the_driver_refuses_a_cyclic_plan_and_records_nothing() {
    let store = TestStore::new("cyclic");
    let driver = Driver::new("cyclic".into(), store.clone(), &[], std::env::temp_dir());
    let result = driver.run(Command::Start(Start::plan(cyclic())), CancellationToken::new()).await;
    assert!(matches!(result, Err(DriverError::Refused(EngineError::Cycle { .. }))), "{result:?}");
    assert!(store.records().is_empty());
}
