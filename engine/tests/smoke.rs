//! A first end-to-end check of the driver with mock agents and the in-memory store.

use std::sync::Arc;

use engine::driver::Driver;
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus, Start};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

fn plan(yaml: &str) -> Arc<manifest::Plan> {
    let loaded = manifest::load_str("test.yaml", "test", yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

#[tokio::test]
async fn a_mock_plan_runs_to_success_and_the_log_folds_to_the_same_state() {
    let plan = plan(
        r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: smoke}
spec:
  mission: test
  agent_definitions:
    echo: {runtime: mock}
    flaky: {runtime: mock, responses: {b: [{fail: boom}, {output: "fixed"}]}}
  workflow:
    - {id: a, agent: echo, input: "hello {{ mission }}"}
    - {id: b, agent: flaky, input: x, depends_on: [a], on_failure: {action: retry, max_attempts: 3, backoff: 10ms}}
    - {id: c, agent: echo, input: "{{ tasks.a.output }} / {{ tasks.b.output }}", depends_on: [a, b]}
"#,
    );
    let store = TestStore::new("run-1");
    let driver = Driver::new("run-1".into(), store.clone(), &[], std::env::temp_dir());
    let start = Command::Start(Start::plan(plan));
    let state = driver.run(start, CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let c = state.index_of("c").expect("c exists");
    assert_eq!(state.tasks[c].output.as_deref(), Some("hello test / fixed"));
    let records = store.records();
    assert!(records.iter().any(|r| matches!(&r.event, Event::RetryScheduled { task, .. } if task == "b")));
    let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    assert_eq!(RunState::fold(&events), state);
    assert!(records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
}

#[tokio::test]
async fn a_wide_layer_is_recorded_in_order_with_consecutive_numbers() {
    // Wider than the slices a wide batch is turned into records by, and not a multiple of them.
    let width = 20_000;
    let mut yaml = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: wide}\nspec:\n  agent_definitions:\n    \
         m: {runtime: mock, default: ok}\n  workflow:\n    - {id: root, agent: m, input: x}\n",
    );
    for i in 0..width {
        yaml.push_str(&format!("    - {{id: t{i}, agent: m, input: x, depends_on: [root]}}\n"));
    }
    let store = TestStore::new("wide");
    let driver = Driver::new("wide".into(), store.clone(), &[], std::env::temp_dir());
    let state = driver.run(Command::Start(Start::plan(plan(&yaml))), CancellationToken::new()).await.expect("driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let records = store.records();
    assert!(records.iter().enumerate().all(|(n, r)| r.seq == n as u64 + 1), "numbered 1, 2, 3, ...");
    let after_root =
        records.iter().position(|r| matches!(&r.event, Event::TaskSucceeded { task, .. } if task == "root"));
    let layer: Vec<&str> = records[after_root.expect("root succeeded") + 1..]
        .iter()
        .take(width)
        .map(|r| match &r.event {
            Event::TaskDispatched { task, .. } => task.as_str(),
            other => panic!("the layer is dispatched in one batch, not {other:?}"),
        })
        .collect();
    let expected: Vec<String> = (0..width).map(|i| format!("t{i}")).collect();
    assert_eq!(layer, expected, "dispatched in the machine's order, t0 first");
    let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    assert_eq!(RunState::fold(&events), state);
}
