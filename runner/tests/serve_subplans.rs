//! `runner serve` on sub-plans, over HTTP: a plan preview's graph nests each sub-plan task's
//! child graph (recursively, one per task even when two run the same file), and refuses a
//! sub-plan file outside the served folder; a run's state links the child run each sub-plan
//! item started, and a child run's view names the run and task that started it.

#[path = "support/server.rs"]
mod server;
mod support;

use std::path::Path;

use serde_json::{Value, json};
use server::Server;
use support::Env;

/// The workspace's `examples/` folder.
fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Copies files from `from` into the test folder under the same relative names.
fn copy(env: &Env, from: &Path, files: &[&str]) {
    for file in files {
        let to = env.dir().join(file);
        std::fs::create_dir_all(to.parent().expect("a parent folder")).expect("the folder is made");
        std::fs::copy(from.join(file), &to).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// The ids of a graph's tasks, in plan order.
fn ids(graph: &Value) -> Vec<&str> {
    graph["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect()
}

/// The preview of `runner/tests/fixtures/graph_subplans.yaml` (with its sub-plans) served
/// from a copy of the fixtures folder.
fn preview(env: &Env, server: &Server) -> Value {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    copy(env, &fixtures, &["graph_subplans.yaml", "subplans/company.yaml", "subplans/summary.yaml"]);
    let report = server.get("/api/plan?path=graph_subplans.yaml").json();
    assert_eq!(report["valid"], true, "{report}");
    report
}

#[test]
fn a_plan_preview_nests_each_sub_plan_tasks_child_graph() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let report = preview(&env, &server);
    let tasks = &report["graph"]["tasks"];
    assert_eq!(ids(&report["graph"]), ["search", "ours", "theirs", "investigate", "report"]);
    let ours = &tasks[1];
    assert_eq!((ours["kind"].as_str(), ours["plan"].as_str()), (Some("plan"), Some("subplans/company.yaml")));
    let child = &ours["subplan"];
    assert_eq!(child["name"], "company");
    assert_eq!(ids(child), ["profile", "news", "summary"]);
    assert_eq!(child["tasks"][2]["deps"], json!([0, 1]), "the child's own edges");
    assert_eq!(ids(&child["tasks"][2]["subplan"]), ["write"], "the child's sub-plan, nested");
    assert_eq!(ours["deps"], json!([0]), "the parent's edge into the box");
    assert_eq!(tasks[3]["deps"], json!([1, 2]), "and out of it");

    let theirs = &tasks[2];
    assert_eq!(theirs["map"], json!({"items": 2}), "a map of sub-plans keeps its map");
    assert_eq!(theirs["subplan"], ours["subplan"], "the same file, drawn again for the second task");

    let investigate = &tasks[3];
    assert_eq!((investigate["kind"].as_str(), investigate["max_tasks"].as_u64()), (Some("expand"), Some(8)));
    assert!(investigate.get("subplan").is_none() && investigate.get("plan").is_none());
    assert!(tasks[0].get("plan").is_none() && tasks[0].get("subplan").is_none() && tasks[0].get("max_tasks").is_none());
}

#[test]
fn a_pasted_plan_names_its_sub_plans_without_their_graphs() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let text = std::fs::read_to_string(examples().join("competitors.yaml")).expect("the example");
    let report = server.post("/api/plan", json!({"text": text})).json();
    assert_eq!(report["valid"], true, "{report}");
    let brief = &report["graph"]["tasks"][0];
    assert_eq!(brief["plan"], "plans/company.yaml");
    assert!(brief.get("subplan").is_none(), "a pasted plan has no folder to load it from: {brief}");
}

#[test]
fn a_sub_plan_outside_the_served_folder_is_refused() {
    let env = Env::new();
    copy(&env, &examples(), &["plans/company.yaml"]);
    let text = std::fs::read_to_string(examples().join("competitors.yaml")).expect("the example");
    env.write("plans/outside.yaml", &text.replace("plan: plans/company.yaml", "plan: ../company.yaml"));
    std::fs::copy(env.dir().join("plans/company.yaml"), env.dir().join("company.yaml")).expect("copied");
    let served = env.dir().join("plans");
    let mut command = env.runner_process();
    command.current_dir(&served).args(["serve", "--addr", "127.0.0.1:0"]).env_remove("RUNNER_SERVE_TOKEN");
    let server = Server::spawn(command);
    let refused = server.get("/api/plan?path=outside.yaml");
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.json()["code"], "serve::outside");
    let inside = server.get("/api/plan?path=company.yaml");
    assert_eq!(inside.status, 200, "a plan without sub-plans still opens: {}", inside.text);
}

/// Applies `examples/competitors.yaml` as run `c`: a map of three sub-plan items, each a
/// child run `c.brief.N`.
fn applied() -> Env {
    let env = Env::new();
    copy(&env, &examples(), &["competitors.yaml", "plans/company.yaml"]);
    let output = env.runner().args(["apply", "competitors.yaml", "--yes", "--run-id", "c"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    env
}

#[test]
fn a_run_links_the_child_run_of_each_item_and_a_child_links_back() {
    let env = applied();
    let server = Server::start(&env, &[]);
    let run = server.get("/api/runs/c").json();
    assert_eq!(ids(&run["graph"]["tasks"][0]["subplan"]), ["profile", "news", "brief"], "the box in a run's graph");
    let children = json!({"brief[0]": "c.brief.0", "brief[1]": "c.brief.1", "brief[2]": "c.brief.2"});
    assert_eq!(run["state"]["children"], children);
    assert!(run.get("parent").is_none(), "the parent run has no parent");
    assert_eq!(server.get("/api/runs/c/state").json()["children"], children);

    let child = server.get("/api/runs/c.brief.1").json();
    assert_eq!(child["parent"], json!({"run": "c", "task": "brief[1]"}));
    assert_eq!(child["state"]["children"], json!({}));
    assert_eq!(child["state"]["tasks"]["brief"], "succeeded");

    let expanded = env.types("c").iter().position(|t| t == "MapExpanded").expect("a MapExpanded") + 1;
    let before = server.get(&format!("/api/runs/c/state?at={expanded}")).json();
    assert_eq!(before["children"], json!({}), "replayed before any item ran, no child is linked");
}

#[test]
fn a_child_run_missing_from_the_store_is_not_linked() {
    let env = applied();
    std::fs::remove_dir_all(env.home().join("runs/c.brief.2")).expect("the child run is removed");
    let server = Server::start(&env, &[]);
    let state = server.get("/api/runs/c/state").json();
    assert_eq!(state["children"], json!({"brief[0]": "c.brief.0", "brief[1]": "c.brief.1"}));
}
