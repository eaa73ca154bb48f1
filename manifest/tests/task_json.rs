//! A task's rarely set fields live behind one box; its JSON, equality and plan hash must not
//! show whether the box is there.

use manifest::load_str;
use manifest::plan::{Plan, Task};

const PLAN: &str = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: extras}
spec:
  agent_definitions:
    worker: {runtime: mock}
  workflow:
    - id: plain
      agent: worker
      input: Start.
    - id: checked
      agent: worker
      input: "Go on from {{ tasks.plain.output }}"
      timeout: 10s
      max_output_tokens: 100
      parallel_group: pair
      attachments: [{link: "https://example.com/style.pdf"}]
      verification: {type: schema_check, schema: {type: object}}
    - id: gate
      type: synthesis_gate
      agent: worker
      inputs: [checked]
      prompt: Good enough?
  control_logic:
    strategy: sequential
"#;

fn plan() -> Plan {
    let loaded = load_str("plan.yaml", "plan", PLAN, &|_| true);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.plan.expect("a valid plan")
}

#[test]
fn a_plan_with_and_without_extras_round_trips_through_json() {
    let plan = plan();
    let extras: Vec<_> = plan.tasks.iter().map(|t| t.extras().clone()).collect();
    assert_eq!(extras[0], Default::default(), "the first task sets none of them");
    assert!(extras[1].timeout.is_some() && extras[1].verification.is_some(), "{:?}", extras[1]);
    assert!(plan.tasks[1].chained_after.is_some() && !extras[1].attachments.is_empty());
    assert!(extras[2].prompt.is_some() && !extras[2].inputs.is_empty(), "{:?}", extras[2]);
    let json = serde_json::to_string(&plan).expect("a plan serialises");
    for field in [
        "chained_after",
        "timeout",
        "max_output_tokens",
        "parallel_group",
        "attachments",
        "verification",
        "prompt",
        "inputs",
    ] {
        assert!(json.contains(&format!("\"{field}\"")), "{field} is written: {json}");
    }
    let back: Plan = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back.tasks[0].extras, plan.tasks[0].extras, "a task without extras reads back without them");
    assert_eq!(back.tasks[1].extras().max_output_tokens, Some(100));
    assert_eq!(serde_json::to_string(&back).expect("a plan serialises"), json, "locations aside, nothing is lost");
}

#[test]
fn a_task_whose_extras_were_set_then_cleared_equals_one_never_given_any() {
    let plain = Task::default();
    let mut touched = Task::default();
    touched.extras_mut().max_output_tokens = Some(10);
    assert_ne!(touched, plain);
    touched.extras_mut().max_output_tokens = None;
    assert_eq!(touched, plain);
    assert_eq!(serde_json::to_value(&touched).unwrap(), serde_json::to_value(&plain).unwrap());
}

#[test]
fn setting_default_extras_leaves_a_task_as_it_was() {
    let mut task = Task::default();
    task.set_extras(Default::default());
    assert_eq!(serde_json::to_string(&task).unwrap(), serde_json::to_string(&Task::default()).unwrap());
    let mut with = Task::default();
    with.extras_mut().parallel_group = Some(manifest::plan::At::new("a".into(), Default::default()));
    let json = serde_json::to_string(&with).unwrap();
    assert!(json.contains("parallel_group"), "{json}");
    let back: Task = serde_json::from_str(&json).unwrap();
    assert_eq!(back.extras().parallel_group.as_ref().map(|g| g.value.as_str()), Some("a"));
}
