//! Dynamic plans from the command line: a map over what a task found runs its items as
//! `ID[INDEX]` tasks everywhere a user looks, a condition skips without making the run
//! partial, and a run killed with SIGKILL in the middle of a map resumes running only the
//! items that had not succeeded, without evaluating the list again.

mod support;

use std::time::{Duration, Instant};

use support::{Env, SLOW_SCRIPT, plan};

/// A source whose output lists six items, a map over them two at a time, and a report that
/// runs only when the map found something.
fn map_plan(script: &str) -> String {
    let agents = format!(
        "    source: {{runtime: mock, responses: {{search: '[\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]'}}}}\n    \
         slow: {{runtime: command, command: [python3, {script:?}]}}\n    echo: {{runtime: mock}}"
    );
    let workflow = r#"    - {id: search, agent: source, input: x}
    - {id: read, agent: slow, input: "item {{ item }} at {{ index }}", depends_on: [search], for_each: tasks.search.output, max_items: 10}
    - {id: report, agent: echo, input: "{{ tasks.read.output }}", depends_on: [read], when: "tasks.read.output | length > 0"}
    - {id: never, agent: echo, input: x, depends_on: [read], when: "tasks.read.output | length > 100"}"#;
    plan("map", &agents, workflow) + "  control_logic: {max_concurrency: 2}\n"
}

#[test]
fn a_map_killed_midway_resumes_running_only_the_items_that_had_not_succeeded() {
    let env = Env::new();
    let script = env.write("item.py", SLOW_SCRIPT);
    env.write("plan.yaml", &map_plan(&script.display().to_string()));
    let mut child = env.spawn_apply("plan.yaml", "map");
    let started = Instant::now();
    while env.succeeded("map").iter().filter(|t| t.starts_with("read[")).count() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "two items did not succeed within 60 s");
        assert!(child.try_wait().expect("the child can be polled").is_none(), "runner exited before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL is sent");
    child.wait().expect("the child is reaped");
    let before: Vec<String> = env.succeeded("map").into_iter().filter(|t| t.starts_with("read[")).collect();
    assert!(before.len() >= 2 && before.len() < 6, "killed mid-map: {before:?}");

    let resumed = env.runner().args(["resume", "map"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));

    let records = env.records("map");
    let expansions: Vec<_> = records.iter().filter(|r| r["type"] == "MapExpanded").collect();
    assert_eq!(expansions.len(), 1, "the list is evaluated once, before the kill");
    assert_eq!(expansions[0]["items"], serde_json::json!(["a", "b", "c", "d", "e", "f"]));

    let effects = env.side_effects();
    for (index, item) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let line = format!("item {item} at {index}");
        assert!(effects.get(&line).copied().unwrap_or(0) >= 1, "{line} never ran: {effects:?}");
        if before.contains(&format!("read[{index}]")) {
            assert_eq!(effects.get(&line), Some(&1), "read[{index}] succeeded before the kill and ran again");
        }
    }

    let json = env.status("map");
    assert_eq!(json["status"], "succeeded", "a skip by condition leaves the run succeeded: {json}");
    assert_eq!(json["tasks"]["read[5]"]["status"], "succeeded");
    assert_eq!(json["tasks"]["never"]["status"], "skipped");
    assert_eq!(json["tasks"]["never"]["skipped_by_condition"], true);
    let collected: serde_json::Value =
        serde_json::from_str(json["tasks"]["read"]["output"].as_str().expect("the map has an output"))
            .expect("the map's output is JSON");
    let expected: Vec<String> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .enumerate()
        .map(|(index, item)| format!("item {item} at {index}"))
        .collect();
    assert_eq!(collected, serde_json::json!(expected), "item outputs in item order");

    let output = env.runner().args(["output", "map", "read[2]"]).output().expect("runner runs");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "item c at 2");
    let logs = env.runner().args(["logs", "map"]).output().expect("runner runs");
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert!(logs.contains("MapExpanded read 6 item(s)"), "{logs}");
    assert!(logs.contains("TaskSkipped never"), "{logs}");

    // Retrying from one item runs that item again, and what reads the map; the others are reused.
    let retried =
        env.runner().args(["retry", "map", "--from", "read[2]", "--run-id", "again"]).output().expect("runner runs");
    assert_eq!(retried.status.code(), Some(0), "{}", String::from_utf8_lossy(&retried.stderr));
    let again = env.side_effects();
    for (index, item) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let line = format!("item {item} at {index}");
        let ran = again[&line] - effects[&line];
        assert_eq!(ran, usize::from(index == 2), "{line} ran {ran} more time(s) in the retry");
    }
    let json = env.status("again");
    assert_eq!(json["status"], "succeeded", "{json}");
    assert_eq!(
        json["tasks"]["read"]["output"],
        serde_json::json!(serde_json::to_string(&expected).unwrap_or_default())
    );
}

#[test]
fn a_plan_test_scripts_and_expects_items_but_not_items_of_a_task_that_does_not_map() {
    let env = Env::new();
    let agents = "    echo: {runtime: mock}";
    let workflow = r#"    - {id: search, agent: echo, input: x}
    - {id: read, agent: echo, input: "{{ item }}", for_each: [a, b, c]}"#;
    env.write("plan.yaml", &plan("items", agents, workflow));
    let scenario = |tasks: &str, expect: &str| {
        format!(
            "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: items}}\nspec:\n  plan: plan.yaml\n  \
             overrides:\n    tasks:\n      read: {{replies: [all]}}\n{tasks}  expect:\n    status: succeeded\n    tasks:\n{expect}"
        )
    };
    env.write(
        "items.test.yaml",
        &scenario(
            "      \"read[1]\": {replies: [one]}\n",
            "      \"read[0]\": {output: {equals: all}}\n      \"read[1]\": {output: {equals: one}}\n      \
             read: {output: {equals: '[\"all\",\"one\",\"all\"]'}}\n",
        ),
    );
    let passed = env.runner().args(["test", "items.test.yaml"]).output().expect("runner runs");
    assert_eq!(passed.status.code(), Some(0), "{}", String::from_utf8_lossy(&passed.stdout));

    env.write(
        "wrong.test.yaml",
        &scenario("      \"search[1]\": {replies: [x]}\n", "      search: {status: succeeded}\n"),
    );
    let refused = env.runner().args(["test", "wrong.test.yaml"]).output().expect("runner runs");
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("test::unknown_target") && stdout.contains("search[1]"), "{stdout}");
}
