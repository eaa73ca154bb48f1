//! `runner serve` on a dynamic plan, over HTTP: a run's graph is its plan as written, a map
//! one node however many items it expanded into; the state, the replay, the stream and the
//! task view carry each map's items and their counts by status, and tell a task skipped by
//! its condition from one skipped by a failure.

#[path = "support/server.rs"]
mod server;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use server::Server;
use support::{Env, plan};

const WAIT: Duration = Duration::from_secs(30);

/// `search` yields three results; the map `read` runs once per result, its second item
/// failing and skipped by the map's policy; `wide` is skipped by its condition; `digest`
/// reads the map's collected outputs.
fn map_plan() -> String {
    plan(
        "maps",
        r#"    finder: {runtime: mock, responses: {search: '["alpha", "beta", "gamma"]'}}
    reader: {runtime: mock, default: echo, responses: {"read[1]": [{fail: "the page is gone"}]}}"#,
        r#"    - {id: search, agent: finder, input: "search"}
    - {id: wide, agent: reader, input: "x", depends_on: [search], when: "tasks.search.output | length > 5"}
    - {id: read, agent: reader, depends_on: [search], for_each: tasks.search.output, max_items: 10, on_failure: skip, input: "notes on {{ item }}"}
    - {id: digest, type: synthesis_gate, inputs: [read]}"#,
    )
}

/// Applies [`map_plan`] as run `m`; it ends `partial` (exit code 5: an item was skipped by a failure).
fn applied() -> Env {
    let env = Env::new();
    env.write("plan.yaml", &map_plan());
    let output = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "m"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(5), "{}", String::from_utf8_lossy(&output.stderr));
    env
}

fn ids(graph: &Value) -> Vec<&str> {
    graph["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect()
}

/// The position in the log just after the first event of this type.
fn after_first(env: &Env, kind: &str) -> usize {
    env.records("m").iter().position(|r| r["type"] == kind).map(|p| p + 1).unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn a_run_graph_draws_a_map_as_one_node_and_its_state_lists_the_items_and_their_counts() {
    let env = applied();
    let server = Server::start(&env, &[]);
    let run = server.get("/api/runs/m").json();
    let graph = &run["graph"];
    assert_eq!(ids(graph), ["search", "wide", "read", "digest"], "the plan as written, no item nodes");
    assert_eq!(graph["tasks"][2]["map"], json!({"expr": "tasks.search.output", "max_items": 10}));
    assert_eq!(graph["tasks"][2]["deps"], json!([0]), "the map depends on what it was written to, not its items");
    assert_eq!(graph["tasks"][3]["deps"], json!([2]));
    assert_eq!(graph["tasks"][1]["when"], "tasks.search.output | length > 5");
    assert!(graph["tasks"][0].get("map").is_none() && graph["tasks"][0].get("when").is_none());

    let state = &run["state"];
    assert_eq!(
        state["maps"],
        json!({"read": {"items": ["read[0]", "read[1]", "read[2]"], "counts": {"succeeded": 2, "skipped": 1}}})
    );
    assert_eq!(state["tasks"]["read[1]"], "skipped");
    assert_eq!(state["tasks"]["wide"], "skipped");
    assert_eq!(state["skipped_by_condition"], json!(["wide"]), "the failed item's skip is not a condition's");
}

#[test]
fn the_replay_shows_a_map_unexpanded_then_its_items_pending_then_running() {
    let env = applied();
    let server = Server::start(&env, &[]);
    let expanded = after_first(&env, "MapExpanded");
    let before = server.get(&format!("/api/runs/m/state?at={}", expanded - 1)).json();
    assert_eq!(before["maps"], json!({}), "no MapExpanded yet");
    let at = server.get(&format!("/api/runs/m/state?at={expanded}")).json();
    assert_eq!(at["maps"]["read"]["counts"], json!({"pending": 3}));
    let dispatched =
        env.records("m")[expanded..].iter().position(|r| r["type"] == "TaskDispatched").expect("an item runs");
    let running = server.get(&format!("/api/runs/m/state?at={}", expanded + dispatched + 1)).json();
    assert_eq!(running["maps"]["read"]["counts"], json!({"pending": 2, "running": 1}));
}

#[test]
fn a_task_tells_its_map_and_whether_its_condition_skipped_it() {
    let env = applied();
    let server = Server::start(&env, &[]);
    let item = server.get("/api/runs/m/tasks/read%5B2%5D").json();
    assert_eq!((item["map"].as_str(), item["status"].as_str()), (Some("read"), Some("succeeded")));
    assert_eq!(item["input"], "notes on gamma");
    let failed = server.get("/api/runs/m/tasks/read%5B1%5D").json();
    assert_eq!((failed["status"].as_str(), failed["skipped_by_condition"].as_bool()), (Some("skipped"), Some(false)));
    let wide = server.get("/api/runs/m/tasks/wide").json();
    assert_eq!(wide["skipped_by_condition"], true);
    assert_eq!(wide["when"], "tasks.search.output | length > 5");
    let map = server.get("/api/runs/m/tasks/read").json();
    assert_eq!((map["map"].clone(), map["status"].as_str()), (Value::Null, Some("succeeded")), "a map is no item");
}

#[test]
fn the_stream_sends_a_map_with_its_items_when_it_expands_and_again_as_they_end() {
    let env = applied();
    let log = env.log("m");
    let whole = std::fs::read_to_string(&log).expect("the log");
    let expanded = after_first(&env, "MapExpanded");
    let head: String = whole.split_inclusive('\n').take(expanded).collect();
    std::fs::write(&log, &head).expect("the log is cut after MapExpanded");
    let server = Server::start(&env, &[]);
    let total = whole.split_inclusive('\n').count();
    let mut appended = false;
    let messages = server.stream("/api/runs/m/stream", WAIT, |messages| {
        let seen: usize = messages.iter().map(|m| m["events"].as_array().map_or(0, Vec::len)).sum();
        if !appended && seen == expanded {
            let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("the log opens");
            std::io::Write::write_all(&mut file, &whole.as_bytes()[head.len()..]).expect("the rest is written");
            appended = true;
        }
        seen >= total
    });
    let first = &messages[0];
    assert_eq!(first["maps"]["read"]["items"], json!(["read[0]", "read[1]", "read[2]"]));
    assert_eq!(first["maps"]["read"]["counts"], json!({"pending": 3}));
    let last = messages.last().expect("a message");
    assert_eq!(last["maps"]["read"]["counts"], json!({"succeeded": 2, "skipped": 1}));
    assert_eq!(last["tasks"]["read[1]"], "skipped");
    assert_eq!(last["skipped_by_condition"], json!(["wide"]));
}

#[test]
fn a_plan_preview_marks_maps_with_what_they_run_over_and_conditions() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let text = plan(
        "preview",
        "    echo: {runtime: mock}",
        r#"    - {id: regions, agent: echo, for_each: [eu, us, apac], input: "{{ item }}"}
    - {id: more, agent: echo, depends_on: [regions], when: "vars.deep", input: x}"#,
    )
    .replace("  mission: test the runner\n", "  mission: test the runner\n  vars: {deep: false}\n");
    let report = server.post("/api/plan", json!({"text": text})).json();
    assert_eq!(report["valid"], true, "{report}");
    let tasks = &report["graph"]["tasks"];
    assert_eq!(tasks[0]["map"], json!({"items": 3}));
    assert_eq!(tasks[1]["when"], "vars.deep");
}
