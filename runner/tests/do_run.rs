//! `runner do "REQUEST"`: a model writes the plan a line at a time against the fake server,
//! and each task starts as soon as its line has arrived and its dependencies have succeeded.
//! The run records the plan as it grows; a planner that stops midway ends the run cleanly; a
//! run killed while the model writes resumes by asking the model to go on, and no task that
//! succeeded runs again.

#[path = "support/llm.rs"]
mod llm_support;
#[path = "support/server.rs"]
mod server;
mod support;

use std::time::{Duration, Instant};

use llm_support::{KEY, KEY_VAR, Out, runner_with_key};
use serde_json::Value;
use support::{Env, SLOW_SCRIPT};
use testkit::{FakeOpenAi, Step};

/// A template with one command agent, `slow`, which takes 0.3 s and records each input in
/// `side.txt` (see [`SLOW_SCRIPT`]).
fn template(env: &Env) -> String {
    env.write("slow.py", SLOW_SCRIPT);
    env.write(
        "agents.yaml",
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: agents}\nspec:\n  mission: agents for runner do\n  \
         agent_definitions:\n    slow: {runtime: command, command: [python3, slow.py]}\n  \
         workflow:\n    - {id: placeholder, agent: slow, input: x}\n",
    );
    "agents.yaml".to_owned()
}

/// The header line of a plan named `name`.
fn header(name: &str) -> String {
    format!(r#"{{"plan": {{"name": "{name}", "mission": "test runner do"}}}}"#)
}

/// A task line on agent `slow`, depending on `after`.
fn task(id: &str, after: &[&str]) -> String {
    let after: Vec<String> = after.iter().map(|a| format!("\"{a}\"")).collect();
    format!(r#"{{"task": {{"id": "{id}", "agent": "slow", "input": "{id}", "depends_on": [{}]}}}}"#, after.join(", "))
}

/// The lines as stream pieces, one piece per line.
fn pieces(lines: &[String]) -> Vec<String> {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// `runner do REQUEST` on the fake server with the template, and any more args.
fn run_do(env: &Env, server: &FakeOpenAi, run: &str, more: &[&str]) -> Out {
    let template = template(env);
    let url = server.base_url();
    let mut args = vec![
        "do",
        "Fetch three things, then report",
        "--provider",
        url.as_str(),
        "--api-key-env",
        KEY_VAR,
        "--model",
        "fake-model",
        "--template",
        template.as_str(),
        "--run-id",
        run,
    ];
    args.extend_from_slice(more);
    runner_with_key(env, KEY, &args)
}

/// The `seq` of the first record of `type` (about `task`, when given; a `TaskPlanned` is about
/// the task it carries).
fn seq_of(records: &[Value], kind: &str, task: Option<&str>) -> u64 {
    records
        .iter()
        .find(|r| r["type"] == kind && task.is_none_or(|t| r["task"] == t || r["task"]["id"] == t))
        .and_then(|r| r["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} {task:?} in the log: {records:#?}"))
}

#[test]
fn each_line_joins_the_run_as_it_arrives_and_the_run_records_the_plan_growing() {
    let env = Env::new();
    let lines = [header("three"), task("a", &[]), task("b", &["a"]), task("report", &["a", "b"])];
    let server = FakeOpenAi::start(move |_, _| Step::SlowStream(pieces(&lines), Duration::from_millis(800)));
    let out = run_do(&env, &server, "grow", &[]);
    assert_eq!(out.code, Some(0), "{out}");
    let records = env.records("grow");
    // `a` ran and finished while the model was still writing: before the last task joined.
    assert!(seq_of(&records, "TaskSucceeded", Some("a")) < seq_of(&records, "TaskPlanned", Some("report")));
    let created = &records[0];
    assert_eq!(created["type"], "RunCreated");
    assert!(created["growing"]["lines"].as_array().is_some_and(|l| l.len() == 2), "{created}");
    assert!(!created.to_string().contains(KEY), "the key never reaches the log");
    let planned: Vec<&str> =
        records.iter().filter(|r| r["type"] == "TaskPlanned").filter_map(|r| r["task"]["id"].as_str()).collect();
    assert_eq!(planned, ["b", "report"]);
    assert_eq!(records.iter().filter(|r| r["type"] == "PlanWritten").count(), 1);
    assert_eq!(env.succeeded("grow").len(), 3);
    let status = env.status("grow");
    assert_eq!(status["planning"]["state"], "written", "{status}");
    assert_eq!(status["planning"]["tasks"], 3);

    // The web view draws the plan as it grew, and its stream tells the page to redraw it.
    let server = server::Server::start(&env, &[]);
    let run = server.get("/api/runs/grow").json();
    let ids: Vec<&str> =
        run["graph"]["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids, ["a", "b", "report"]);
    let total = records.len();
    let messages = server.stream("/api/runs/grow/stream", Duration::from_secs(30), |messages| {
        messages.iter().map(|m| m["events"].as_array().map_or(0, Vec::len)).sum::<usize>() >= total
    });
    let grew = messages.iter().filter(|m| m["replanned"] == true).count();
    assert!(grew >= 1, "a message with a TaskPlanned redraws the graph: {messages:#?}");
}

#[test]
fn a_line_that_cannot_run_is_rejected_with_its_line_and_the_rest_runs() {
    let env = Env::new();
    let ghost = r#"{"task": {"id": "ghost", "agent": "nobody", "input": "x"}}"#.to_owned();
    let lines = [header("rejects"), task("a", &[]), ghost, "not json at all".to_owned(), task("b", &["a"])];
    let server = FakeOpenAi::start(move |_, n| match n {
        0 => Step::Stream(pieces(&lines)),
        // Repairs of the bad lines answer nothing better.
        _ => Step::Answer("still not a line".to_owned()),
    });
    let out = run_do(&env, &server, "rejects", &[]);
    assert_eq!(out.code, Some(0), "{out}");
    let records = env.records("rejects");
    let rejected: Vec<u64> =
        records.iter().filter(|r| r["type"] == "LineRejected").filter_map(|r| r["line"].as_u64()).collect();
    assert_eq!(rejected, [3, 4], "{records:#?}");
    assert_eq!(env.succeeded("rejects"), ["a".to_owned(), "b".to_owned()].into());
    let logs = env.runner().args(["logs", "rejects"]).output().expect("runner runs");
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.contains("LineRejected") && logs.contains("line 3"), "{logs}");
}

#[test]
fn a_planner_that_stops_midway_ends_the_run_failed_with_what_ran_recorded() {
    let env = Env::new();
    let lines = [header("broken"), task("a", &[]), task("b", &["a"])];
    let server = FakeOpenAi::start(move |_, _| Step::BrokenStream(pieces(&lines)));
    let out = run_do(&env, &server, "broken", &[]);
    assert_eq!(out.code, Some(1), "{out}");
    let records = env.records("broken");
    let written = records.iter().find(|r| r["type"] == "PlanWritten").expect("the plan's end is recorded");
    assert!(written["error"].as_str().is_some_and(|e| !e.is_empty()), "{written}");
    let last = records.last().expect("a log");
    assert_eq!(last["type"], "RunCompleted");
    assert_eq!(last["status"], "failed");
    assert_eq!(env.succeeded("broken"), ["a".to_owned(), "b".to_owned()].into());
    assert_eq!(env.status("broken")["planning"]["state"], "stopped");
}

#[test]
fn questions_instead_of_a_plan_exit_3_and_create_no_run() {
    let env = Env::new();
    let server =
        FakeOpenAi::start(|_, _| Step::Stream(vec![r#"{"questions": ["Which region: EU or US?"]}"#.to_owned()]));
    let out = run_do(&env, &server, "asked", &[]);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stderr.contains("Which region"), "{out}");
    assert!(!env.log("asked").exists());
}

#[test]
fn without_streaming_the_whole_answer_arrives_and_the_plan_still_runs() {
    let env = Env::new();
    let lines = [header("whole"), task("a", &[]), task("b", &["a"])];
    let server = FakeOpenAi::start(move |_, _| Step::Answer(lines.join("\n")));
    let out = run_do(&env, &server, "whole", &["--no-stream"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(server.requests()[0].body["stream"], Value::Null, "no stream was asked for");
    assert_eq!(env.succeeded("whole").len(), 2);
}

#[test]
fn a_run_killed_while_the_model_writes_resumes_and_no_finished_task_runs_again() {
    let env = Env::new();
    // The first answer writes three tasks a line every 1.5 s (the run is killed before its
    // last line); the resumed run's request gets the rest.
    let first = [header("killed"), task("a", &[]), task("b", &["a"]), task("c", &["b"]), task("never", &[])];
    let rest = [task("d", &["c"]), task("report", &["a", "d"])];
    let rest_text = rest.join("\n");
    let server = FakeOpenAi::start(move |_, n| match n {
        0 => Step::SlowStream(pieces(&first), Duration::from_millis(1500)),
        _ => Step::Answer(rest_text.clone()),
    });
    let template = template(&env);
    let url = server.base_url();
    let mut child = env
        .runner_process()
        .env(KEY_VAR, KEY)
        .args(["do", "Do a chain of work", "--provider", &url, "--api-key-env", KEY_VAR, "--model", "fake-model"])
        .args(["--template", &template, "--run-id", "killed"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let planned_c = |records: Vec<Value>| records.iter().any(|r| r["type"] == "TaskPlanned" && r["task"]["id"] == "c");
    while !env.succeeded("killed").contains("b") || !planned_c(env.records("killed")) {
        assert!(Instant::now() < deadline, "task c never joined: {:#?}", env.records("killed"));
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("the process is killed");
    child.wait().expect("it ends");
    assert!(!env.types("killed").contains(&"PlanWritten".to_owned()), "killed while the model was writing");
    let before = env.side_effects();

    let out = runner_with_key(&env, KEY, &["resume", "killed"]);
    assert_eq!(out.code, Some(0), "{out}");
    let after = env.side_effects();
    for task in ["a", "b"] {
        assert_eq!(after.get(task), Some(&1), "`{task}` ran once in all: {after:?} (before the kill: {before:?})");
    }
    assert_eq!(env.succeeded("killed").len(), 5, "{:#?}", env.records("killed"));
    // The model was asked to go on after the lines the run had recorded.
    let requests = server.requests();
    let resumed = requests.last().expect("a request on resume").body.to_string();
    assert!(resumed.contains(r#"\"id\": \"c\""#) || resumed.contains(r#"\"id\":\"c\""#), "{resumed}");
}

#[test]
fn with_confirm_each_a_person_says_which_tasks_join_and_a_declined_one_is_a_rejected_line() {
    let env = Env::new();
    let lines = [header("asked"), task("a", &[]), task("b", &[]), task("c", &["a"])];
    let server = FakeOpenAi::start(move |_, _| Step::Stream(pieces(&lines)));
    let template = template(&env);
    let url = server.base_url();
    let args = [
        "do",
        "Three things",
        "--provider",
        &url,
        "--api-key-env",
        KEY_VAR,
        "--model",
        "fake-model",
        "--template",
        &template,
        "--run-id",
        "asked",
        "--confirm-each",
    ];
    let out = llm_support::on_terminal(&env, &args, &[(KEY_VAR, KEY)], "y\nn\ny\n");
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("add task `b`"), "{out}");
    assert_eq!(env.succeeded("asked"), ["a".to_owned(), "c".to_owned()].into());
    let records = env.records("asked");
    let declined = records.iter().find(|r| r["type"] == "LineRejected").expect("b is recorded as declined");
    assert_eq!((declined["task"].as_str(), declined["code"].as_str()), (Some("b"), Some("author::line_declined")));
    assert_eq!(declined["line"], 3);
}

#[test]
fn confirm_each_needs_a_terminal() {
    let env = Env::new();
    let server = FakeOpenAi::start(|_, _| Step::Answer(String::new()));
    let out = run_do(&env, &server, "none", &["--confirm-each"]);
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("--confirm-each asks at the terminal"), "{out}");
    assert!(server.requests().is_empty(), "nothing was asked of the model");
}

#[test]
fn a_task_that_may_call_a_destructive_tool_with_no_review_before_it_never_joins() {
    let env = Env::new();
    env.write("slow.py", SLOW_SCRIPT);
    let clean = r#"{"task": {"id": "clean", "agent": "cleaner", "input": "wipe the cache", "depends_on": ["a"]}}"#;
    let lines = [header("wipe"), task("a", &[]), clean.to_owned(), task("b", &["a"])];
    let again = clean.to_owned();
    let server = FakeOpenAi::start(move |_, n| match n {
        0 => Step::Stream(pieces(&lines)),
        // The repair writes the same line: still no review before it.
        _ => Step::Answer(again.clone()),
    });
    let url = server.base_url();
    env.write(
        "agents.yaml",
        &format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: agents}}\nspec:\n  mission: agents\n  \
             providers:\n    fake: {{kind: openai, base_url: \"{url}\", api_key_env: {KEY_VAR}, model: fake-model}}\n  \
             tools:\n    wipe: {{description: Delete the cache, command: [rm, -r, cache], destructive: true}}\n  \
             agent_definitions:\n    slow: {{runtime: command, command: [python3, slow.py]}}\n    \
             cleaner: {{runtime: llm, provider: fake, tools: [wipe], allow_tools: [wipe], max_turns: 2}}\n  \
             workflow:\n    - {{id: placeholder, agent: slow, input: x}}\n"
        ),
    );
    let args = ["do", "Clean up", "--provider", "fake", "--template", "agents.yaml", "--run-id", "wipe"];
    let out = runner_with_key(&env, KEY, &args);
    assert_eq!(out.code, Some(0), "{out}");
    let records = env.records("wipe");
    let blocked = records.iter().find(|r| r["type"] == "LineRejected").expect("the line is rejected");
    assert_eq!((blocked["task"].as_str(), blocked["code"].as_str()), (Some("clean"), Some("author::line_blocked")));
    assert_eq!(env.succeeded("wipe"), ["a".to_owned(), "b".to_owned()].into());
}
