//! `runner plan --lines` against a local fake OpenAI server: each line's verdict printed and
//! recorded in `lines.ndjson` as it arrives, a bad line repaired on its own, an unrepairable
//! one dropped with the rest kept, a server that does not stream, a request that dies midway,
//! and the fallback when no task line holds.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use llm_support::runner;
use serde_json::{Value, json};
use support::Env;
use testkit::{FakeOpenAi, Step};

const HEADER: &str = r#"{"plan": {"mission": "Brief tea buyers.", "agents": {"researcher": {"runtime": "mock"}, "writer": {"runtime": "mock"}}}}"#;

fn task(id: &str, agent: &str, depends_on: &[&str]) -> String {
    json!({"task": {"id": id, "agent": agent, "input": format!("Do {id}."), "depends_on": depends_on}}).to_string()
}

/// The folder of the only plan recorded so far, if there is one yet.
fn plan_dir(env: &Env) -> Option<PathBuf> {
    let plans: Vec<PathBuf> =
        std::fs::read_dir(env.home().join("plans")).ok()?.filter_map(|entry| entry.ok().map(|e| e.path())).collect();
    match plans.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("lines.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each record is JSON"))
        .collect()
}

fn provenance(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).expect("provenance.json"))
        .expect("provenance.json is JSON")
}

/// The ids of the tasks of the plan in `file`.
fn task_ids(env: &Env, file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(env.dir().join(file)).expect("the plan was written");
    let loaded = manifest::load_str(file, "plan", &text, &|_| false);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.plan.expect("a plan").tasks.iter().map(|t| t.id.value.as_str().to_owned()).collect()
}

#[test]
fn streamed_lines_are_recorded_while_the_model_is_still_writing() {
    let pieces = vec![
        format!("{HEADER}\n"),
        format!("{}\n", task("search", "researcher", &[])),
        format!("{}\n", task("write", "writer", &["search"])),
        format!("{}\n", task("review", "writer", &["write"])),
    ];
    let server = FakeOpenAi::start(move |_, _| Step::SlowStream(pieces.clone(), Duration::from_millis(800)));
    let env = Env::new();
    let base = server.base_url();
    let mut child = env
        .runner_process()
        .args([
            "plan",
            "Brief tea buyers",
            "--provider",
            &base,
            "--model",
            "m",
            "--lines",
            "--stream",
            "-o",
            "plan.yaml",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runner starts");
    // The first task's record is written while the last lines are still to come.
    let started = Instant::now();
    let first = loop {
        if let Some(dir) = plan_dir(&env)
            && records(&dir).iter().any(|r| r["task"] == "search")
        {
            break dir;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no record of the first task");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(child.try_wait().expect("the child can be polled").is_none(), "runner is still reading the answer");
    let output = child.wait_with_output().expect("runner ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("line 1: header accepted") && stderr.contains("line 4: task `review` accepted"),
        "{stderr}"
    );
    let records = records(&first);
    let events: Vec<(u64, &str)> =
        records.iter().map(|r| (r["line"].as_u64().unwrap_or(0), r["event"].as_str().unwrap_or(""))).collect();
    assert_eq!(events, [(1, "accepted"), (2, "accepted"), (3, "accepted"), (4, "accepted")]);
    assert_eq!(records[1]["text"], task("search", "researcher", &[]));
    assert_eq!(task_ids(&env, "plan.yaml"), ["search", "write", "review"]);
    let record = provenance(&first);
    assert_eq!(record["protocol"], planner::lines::LINE_PROTOCOL_VERSION);
    assert_eq!(record["prompt_version"], planner::lines::LINES_PROMPT_VERSION);
    assert_eq!(record["planner"], "llm");
    assert!(record.get("problems").is_none(), "{record}");
    assert_eq!(server.requests()[0].body["stream"], true);
}

#[test]
fn a_bad_line_is_repaired_and_an_unrepairable_one_is_dropped_with_the_rest_kept() {
    let lines = [
        HEADER.to_owned(),
        task("search", "researcher", &[]),
        task("write", "writer", &["serach"]),
        task("notes", "nobody", &[]),
        task("review", "writer", &["write"]),
    ];
    let answer: Vec<String> = lines.iter().map(|line| format!("{line}\n")).collect();
    let fixed = task("write", "writer", &["search"]);
    let server = FakeOpenAi::start(move |body, n| {
        let last = body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        match n {
            0 => Step::Stream(answer.clone()),
            _ if last.contains("Line 3 ") => Step::Answer(fixed.clone()),
            _ => Step::Answer(task("notes", "ghost", &[])),
        }
    });
    let env = Env::new();
    let base = server.base_url();
    let out = runner(
        &env,
        &["plan", "Brief tea buyers", "--provider", &base, "--model", "m", "--lines", "--stream", "-o", "plan.yaml"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("rejected line 3 (task `write`): author::line_dependency"), "{out}");
    assert!(out.stderr.contains("line 3: task `write` accepted after repair"), "{out}");
    assert!(out.stderr.contains("line 5: task `review` accepted after repair"), "taken again once `write` is: {out}");
    assert!(out.stderr.contains("dropped line 4 (task `notes`): author::line_agent"), "{out}");
    assert!(out.stderr.contains("1 line(s) dropped"), "{out}");
    assert_eq!(task_ids(&env, "plan.yaml"), ["search", "write", "review"]);
    assert_eq!(server.requests().len(), 3, "the answer and a repair for each of lines 3 and 4");
    let dir = plan_dir(&env).expect("the plan's folder");
    let record = provenance(&dir);
    assert_eq!(record["problems"][0]["line"], 4, "{record}");
    assert_eq!(record["problems"][0]["code"], "author::line_agent");
    let outcomes: Vec<&str> =
        record["attempts"].as_array().into_iter().flatten().filter_map(|a| a["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["valid", "valid", "invalid"]);
    let repaired: Vec<u64> =
        records(&dir).iter().filter(|r| r["event"] == "repaired").filter_map(|r| r["line"].as_u64()).collect();
    assert_eq!(repaired, [3, 5]);
    let shown = runner(&env, &["plan", "--show", dir.file_name().and_then(|n| n.to_str()).expect("an id")]);
    assert!(shown.stdout.contains("dropped line 4 (task `notes`): author::line_agent"), "{shown}");
}

#[test]
fn a_server_that_does_not_stream_gives_its_lines_at_once() {
    let answer = format!(
        "```json\n{HEADER}\n{}\n{}\n```\n",
        task("search", "researcher", &[]),
        task("write", "writer", &["search"])
    );
    let server = FakeOpenAi::start(move |_, _| Step::Answer(answer.clone()));
    let env = Env::new();
    let base = server.base_url();
    let out =
        runner(&env, &["plan", "Brief tea buyers", "--provider", &base, "--model", "m", "--lines", "-o", "plan.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(task_ids(&env, "plan.yaml"), ["search", "write"]);
    let body = &server.requests()[0].body;
    assert!(body.get("stream").is_none_or(|s| s == false), "{body}");
    assert!(body.get("response_format").is_none(), "JSON mode would allow one object only: {body}");
    assert_eq!(records(&plan_dir(&env).expect("the folder")).len(), 3);
}

#[test]
fn a_request_that_dies_midway_keeps_the_accepted_lines_and_says_why() {
    let pieces = vec![
        format!("{HEADER}\n"),
        format!("{}\n", task("search", "researcher", &[])),
        "{\"task\": {\"id\": \"wri".to_owned(),
    ];
    let server = FakeOpenAi::start(move |_, _| Step::BrokenStream(pieces.clone()));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(
        &env,
        &["plan", "Brief tea buyers", "--provider", &base, "--model", "m", "--lines", "--stream", "-o", "plan.yaml"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("the request failed midway"), "{out}");
    assert!(out.stderr.contains("the plan holds the 1 task(s) accepted before"), "{out}");
    assert_eq!(task_ids(&env, "plan.yaml"), ["search"]);
    let record = provenance(&plan_dir(&env).expect("the folder"));
    assert!(record["failed"].as_str().is_some_and(|why| why.contains("failed midway")), "{record}");
    assert_eq!(record["attempts"][0]["outcome"], "failed");
    let dir = plan_dir(&env).expect("the folder");
    let raw = std::fs::read_to_string(dir.join("output-01.txt")).expect("what arrived is kept");
    assert!(raw.starts_with(HEADER) && raw.ends_with("{\"task\": {\"id\": \"wri"), "{raw}");
}

#[test]
fn no_task_line_that_holds_falls_back_to_the_rules() {
    let server = FakeOpenAi::start(|_, _| Step::Answer("I would rather not.".to_owned()));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(
        &env,
        &[
            "plan",
            "Fetch the logs, then summarise them",
            "--provider",
            &base,
            "--model",
            "m",
            "--lines",
            "-o",
            "plan.yaml",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("falling back to the deterministic planner"), "{out}");
    let record = provenance(&plan_dir(&env).expect("the folder"));
    assert_eq!(record["planner"], "deterministic");
    assert_eq!(record["protocol"], planner::lines::LINE_PROTOCOL_VERSION);
    assert_eq!(record["problems"][0]["code"], "author::line_parse", "{record}");
}

#[test]
fn with_a_schema_dialect_the_schema_is_sent_and_the_one_object_answer_streams_task_by_task() {
    let answer = json!({
        "plan": {"mission": "Brief tea buyers.", "agents": {"researcher": {"runtime": "mock"}}},
        "tasks": [{"id": "search", "agent": "researcher", "input": "Find."}, {"id": "sum_up", "agent": "researcher", "input": "Sum up.", "depends_on": ["search"]}],
    });
    let text = serde_json::to_string_pretty(&answer).expect("JSON");
    let pieces: Vec<String> = text.lines().map(|line| format!("{line}\n")).collect();
    let server = FakeOpenAi::start(move |_, _| Step::Stream(pieces.clone()));
    let env = Env::new();
    let base = server.base_url();
    let args = ["plan", "Brief tea buyers", "--provider", &base, "--model", "m", "--lines", "--stream"];
    let out = runner(&env, &[&args[..], &["--schema-dialect", "json_object", "-o", "plan.yaml"]].concat());
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("line 3: task `sum_up` accepted"), "{out}");
    assert_eq!(task_ids(&env, "plan.yaml"), ["search", "sum_up"]);
    let body = &server.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_object", "{body}");
    let schema = &body["response_format"]["schema"];
    assert_eq!(schema, &planner::lines::schema::line_schema(None));
    assert_eq!(
        schema["properties"]["tasks"]["items"]["anyOf"][0]["properties"]["id"]["pattern"],
        planner::lines::schema::ID_PATTERN
    );

    // The whole-plan author sends the manifest's schema in the same dialect; `ollama` as `format`.
    let server = FakeOpenAi::start(|_, _| Step::Answer("{\"questions\": [\"Which market?\"]}".to_owned()));
    let base = server.base_url();
    let out =
        runner(&env, &["plan", "Brief tea buyers", "--provider", &base, "--model", "m", "--schema-dialect", "ollama"]);
    assert_eq!(out.code, Some(3), "questions: {out}");
    let body = &server.requests()[0].body;
    assert!(body.get("response_format").is_none(), "{body}");
    assert_eq!(body["format"]["definitions"]["Task"]["properties"]["id"]["type"], "string", "{body}");
    let refused = runner(&env, &["plan", "x", "--provider", &base, "--model", "m", "--schema-dialect", "xml"]);
    assert_eq!(refused.code, Some(2), "{refused}");
    assert!(refused.stderr.contains("json_schema, json_object, ollama, none"), "{refused}");
}
