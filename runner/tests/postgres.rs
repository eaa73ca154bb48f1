//! `--store postgres://...` on the command line, against the real server (a schema per test):
//! a run applied into the database is seen by `runs`, `status`, `logs` and `events`; a paused
//! run is answered, approved and resumed; a sub-plan keeps its child run there; `cancel`
//! reaches the process that drives a run;
//! `RUNNER_STORE` stands for the flag; `runner serve` shows and acts on the database's runs; a URL of another kind and a dead server are clear
//! errors that never show the password. Skipped without a server, unless
//! `RUNNER_REQUIRE_POSTGRES=1`.

#[path = "support/server.rs"]
mod server;
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use server::Server;
use support::{Env, plan, review_plan};
use testkit::pg::TestDatabase;

/// A test folder and a schema of its own.
struct Store {
    env: Env,
    db: TestDatabase,
}

impl Store {
    fn new(test: &str) -> Option<Store> {
        Some(Store { env: Env::new(), db: TestDatabase::new(test)? })
    }

    /// `runner ARGS --store URL`.
    fn run(&self, args: &[&str]) -> std::process::Output {
        self.env.runner().args(args).args(["--store", &self.db.url]).output().expect("runner runs")
    }

    fn status(&self, run: &str) -> Value {
        let output = self.run(&["status", run, "--format", "json"]);
        assert!(output.status.success(), "status failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("status prints JSON")
    }

    /// The event types of a run, from `runner events`.
    fn types(&self, run: &str) -> Vec<String> {
        let output = self.run(&["events", run]);
        assert!(output.status.success(), "events failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).expect("a JSON record")["type"].as_str().unwrap_or("").to_owned()
            })
            .collect()
    }
}

fn text(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

const ECHO: &str = "    echo: {runtime: mock, latency: 10ms}";

#[test]
fn a_run_applied_into_the_database_is_seen_by_every_command_and_no_run_folder_is_made() {
    let Some(store) = Store::new("apply_store") else { return };
    store.env.write(
        "plan.yaml",
        &plan("two", ECHO, "    - {id: a, agent: echo, input: hi}\n    - {id: b, agent: echo, input: \"{{ tasks.a.output }}!\", depends_on: [a]}"),
    );
    let applied = store.run(&["apply", "plan.yaml", "--yes", "--run-id", "r1"]);
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    assert!(text(&applied).contains("run `r1`: in postgres://"), "{}", text(&applied));
    assert!(!store.env.home().exists(), "nothing is written under RUNNER_HOME");

    let runs = store.run(&["runs"]);
    let listed = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(
        listed.contains("r1") && listed.contains("two") && listed.contains("succeeded") && listed.contains("2/2"),
        "{listed}"
    );
    let status = store.status("r1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["b"]["output"], "hi!");
    let logs = String::from_utf8_lossy(&store.run(&["logs", "r1"]).stdout).into_owned();
    assert!(logs.contains("RunCompleted succeeded"), "{logs}");
    assert_eq!(
        store.types("r1"),
        ["RunCreated", "TaskDispatched", "TaskSucceeded", "TaskDispatched", "TaskSucceeded", "RunCompleted"]
    );
    let rows = store.db.column("SELECT status || ' ' || coalesce(owner, '-') FROM runner_runs WHERE run_id = 'r1'");
    assert_eq!(rows, [Some("succeeded -".to_owned())], "the run's row has its status and no holder at the end");

    let followed = store.run(&["logs", "r1", "--follow"]);
    assert_eq!(followed.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&followed.stdout), logs, "following an ended run prints it and stops");
    let output = store.run(&["output", "r1"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "hi!");
    let retried = store.run(&["retry", "r1", "--from", "b", "--run-id", "r2"]);
    assert_eq!(retried.status.code(), Some(0), "{}", text(&retried));
    let types = store.types("r2");
    assert_eq!(types.iter().filter(|t| *t == "TaskReused").count(), 1, "a's output is reused: {types:?}");
    assert_eq!(store.status("r2")["tasks"]["b"]["output"], "hi!");

    let again = store.run(&["apply", "plan.yaml", "--yes", "--run-id", "r1"]);
    assert_ne!(again.status.code(), Some(0));
    assert!(text(&again).contains("a run `r1` already exists"), "{}", text(&again));
    let missing = store.run(&["status", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing).contains("no run `nope` in postgres://"), "{}", text(&missing));
}

#[test]
fn a_paused_run_is_answered_approved_and_resumed_through_the_database() {
    let Some(store) = Store::new("pause_store") else { return };
    store.env.write(
        "ask.yaml",
        &plan(
            "ask",
            "    m: {runtime: mock, responses: {a: [{clarify: \"Which year?\"}, {output: done}]}}",
            "    - {id: a, agent: m, input: start}",
        ),
    );
    assert_eq!(store.run(&["apply", "ask.yaml", "--yes", "--run-id", "q1"]).status.code(), Some(3));
    assert_eq!(store.status("q1")["tasks"]["a"]["question"], "Which year?");
    let wrong = store.run(&["answer", "q1", "nope", "2024"]);
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    // The refused command let the run's lease go on its way out: the next one finds it free.
    let answered = store.run(&["answer", "q1", "a", "2024"]);
    assert_eq!(answered.status.code(), Some(0), "{}", text(&answered));
    let resumed = store.run(&["resume", "q1"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    assert_eq!(store.status("q1")["tasks"]["a"]["output"], "done");

    store.env.write("review.yaml", &review_plan());
    assert_eq!(store.run(&["apply", "review.yaml", "--yes", "--run-id", "rv"]).status.code(), Some(3));
    let approved = store.run(&["approve", "rv", "approve", "--comment", "fine"]);
    assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    assert_eq!(store.run(&["resume", "rv"]).status.code(), Some(0));
    let status = store.status("rv");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["publish"]["output"], "published the draft");
    assert!(store.types("rv").contains(&"ReviewDecided".to_owned()));
}

#[test]
fn cancel_from_another_process_stops_the_run_its_driver_drives() {
    let Some(store) = Store::new("cancel_store") else { return };
    store.env.write(
        "slow.yaml",
        &plan(
            "slow",
            "    quick: {runtime: mock, latency: 10ms}\n    sleepy: {runtime: command, command: [sleep, \"30\"]}",
            "    - {id: a, agent: quick, input: go}\n    - {id: b, agent: sleepy, input: x, depends_on: [a]}",
        ),
    );
    let mut driver = store
        .env
        .runner_process()
        .args(["apply", "slow.yaml", "--yes", "--run-id", "live", "--store", &store.db.url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner starts");
    let started = Instant::now();
    loop {
        let output = store.run(&["status", "live", "--format", "json"]);
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        if status["tasks"]["b"]["status"] == "running" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "b was not dispatched within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let busy = store.run(&["resume", "live"]);
    assert_ne!(busy.status.code(), Some(0));
    assert!(text(&busy).contains("run `live` is being driven by"), "{}", text(&busy));

    let cancel = store.run(&["cancel", "live"]);
    assert_eq!(cancel.status.code(), Some(0), "{}", text(&cancel));
    assert_eq!(driver.wait().expect("the driver exits").code(), Some(130));
    assert_eq!(store.status("live")["status"], "cancelled");
    assert!(store.types("live").contains(&"RunCancelled".to_owned()));
    assert!(started.elapsed() < Duration::from_secs(25), "the sleeping task was ended, not waited for");
}

#[test]
fn runner_store_stands_for_the_flag() {
    let Some(store) = Store::new("env_store") else { return };
    store.env.write("plan.yaml", &plan("one", ECHO, "    - {id: a, agent: echo, input: hi}"));
    let applied = store
        .env
        .runner()
        .args(["apply", "plan.yaml", "--yes", "--run-id", "e1"])
        .env("RUNNER_STORE", &store.db.url)
        .output()
        .expect("runner runs");
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    assert_eq!(store.status("e1")["status"], "succeeded", "the flag finds what the variable wrote");
    let home = store.env.runner().args(["status", "e1"]).output().expect("runner runs");
    assert_eq!(home.status.code(), Some(2), "without either, runs live under RUNNER_HOME");
}

#[test]
fn a_url_of_another_kind_and_a_dead_server_are_clear_errors_without_the_password() {
    let env = Env::new();
    let other = env.runner().args(["runs", "--store", "mysql://u:s3cret@db/x"]).output().expect("runner runs");
    assert_eq!(other.status.code(), Some(2));
    assert!(
        text(&other).contains("is not a store runner knows") && !text(&other).contains("s3cret"),
        "{}",
        text(&other)
    );

    let dead =
        env.runner().args(["status", "r1", "--store", "postgres://u:s3cret@127.0.0.1:1/x"]).output().expect("runs");
    assert_eq!(dead.status.code(), Some(6));
    let shown = text(&dead);
    assert!(shown.contains("connect to the database (postgres://u:***@127.0.0.1:1/x)"), "{shown}");
    assert!(!shown.contains("s3cret") && !shown.contains("panicked"), "{shown}");

    let window = env
        .runner()
        .args(["runs", "--store", "postgres://u:s3cret@127.0.0.1:1/x"])
        .env("RUNNER_DB_RECONNECT_SECS", "2m")
        .output()
        .expect("runs");
    assert_eq!(window.status.code(), Some(2), "a window that is not whole seconds is a usage error");
    assert!(
        text(&window).contains("RUNNER_DB_RECONNECT_SECS=\"2m\" is not a whole number of seconds"),
        "{}",
        text(&window)
    );
}

#[test]
fn serve_shows_streams_and_acts_on_the_runs_in_the_database() {
    let Some(store) = Store::new("serve_store") else { return };
    store.env.write("review.yaml", &review_plan());
    assert_eq!(store.run(&["apply", "review.yaml", "--yes", "--run-id", "rv"]).status.code(), Some(3));
    let server = Server::start(&store.env, &["--store", &store.db.url]);

    let runs = server.get("/api/runs").json();
    assert_eq!((runs[0]["id"].as_str(), runs[0]["status"].as_str()), (Some("rv"), Some("paused")), "{runs}");
    let run = server.get("/api/runs/rv").json();
    assert_eq!(run["state"]["tasks"]["approve"], "paused");
    let total = run["events"].as_array().map_or(0, Vec::len);
    let streamed = server.stream("/api/runs/rv/stream", Duration::from_secs(30), |messages| {
        messages.iter().flat_map(|m| m["events"].as_array().cloned().unwrap_or_default()).count() >= total
    });
    assert_eq!(streamed[0]["events"][0]["type"], "RunCreated");
    assert_eq!(server.get("/api/runs/nope").status, 404);

    let approved =
        server.post("/api/runs/rv/approve", json!({"task": "approve", "comment": "ship it", "resume": true}));
    assert_eq!(approved.status, 200, "{}", approved.text);
    // The resume the page started is a child `runner` that found the database too.
    let state = server.wait_for("/api/runs/rv/state", Duration::from_secs(30), |s| s["status"] == "succeeded");
    assert_eq!(state["tasks"]["publish"], "succeeded");
    assert!(store.types("rv").contains(&"RunResumed".to_owned()));
}

#[test]
fn a_sub_plan_keeps_its_child_run_in_the_database_and_is_answered_through_the_parent() {
    let Some(store) = Store::new("subplan") else { return };
    store.env.write(
        "child.yaml",
        &review_plan().replace("  agent_definitions:", "  vars: {topic: x}\n  agent_definitions:"),
    );
    let workflow = "    - {id: sub, type: plan, plan: child.yaml, with: {topic: y}}\n    - {id: after, agent: echo, depends_on: [sub], input: \"got {{ tasks.sub.output }}\"}";
    store.env.write("parent.yaml", &plan("parent", ECHO, workflow));
    let paused = store.run(&["apply", "parent.yaml", "--yes", "--run-id", "pgsub"]);
    assert_eq!(paused.status.code(), Some(3), "{}", text(&paused));
    assert_eq!(store.status("pgsub.sub")["status"], "paused");
    assert_eq!(store.status("pgsub.sub")["parent"], json!({"run": "pgsub", "task": "sub"}));
    let approved = store.run(&["approve", "pgsub", "sub/approve"]);
    assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    let resumed = store.run(&["resume", "pgsub"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    assert_eq!(store.status("pgsub")["tasks"]["after"]["output"], "got published the draft");
    assert_eq!(store.status("pgsub.sub")["status"], "succeeded");
    assert!(!store.env.home().join("runs").join("pgsub.sub").exists(), "the child is in the database");
}
