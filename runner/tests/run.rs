//! `runner apply` and the commands around a run: `runs`, `status`, `logs`, `events`, `resume`,
//! `cancel`, `retry`, `answer`, `approve`, `reject`. Each test has its own `RUNNER_HOME`.

mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::{Env, plan, review_plan};

const ECHO: &str = "    echo: {runtime: mock, latency: 10ms}";

fn three_tasks() -> String {
    plan(
        "three",
        ECHO,
        r#"    - {id: a, agent: echo, input: "hello {{ mission }}"}
    - {id: b, agent: echo, input: "b reads {{ tasks.a.output }}", depends_on: [a]}
    - {id: c, agent: echo, input: "{{ tasks.a.output }} + {{ tasks.b.output }}", depends_on: [a, b]}"#,
    )
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().expect("an object").keys().cloned().collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Tasks named in events of one type, in order.
fn tasks_of(env: &Env, run: &str, kind: &str) -> Vec<String> {
    env.records(run)
        .iter()
        .filter(|r| r["type"] == kind)
        .map(|r| r["task"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn apply(env: &Env, plan_file: &str, run: &str) -> std::process::Output {
    env.runner().args(["apply", plan_file, "--yes", "--run-id", run]).output().expect("runner runs")
}

#[test]
fn the_overview_apply_prints_names_a_few_tasks_a_phase_and_a_few_phases() {
    let env = Env::new();
    let mut workflow = String::from("    - {id: root, agent: echo, input: r}\n");
    for i in 0..100 {
        workflow.push_str(&format!("    - {{id: wide{i}, agent: echo, input: w, depends_on: [root]}}\n"));
    }
    for i in 0..25 {
        let after = if i == 0 { "wide0".to_owned() } else { format!("deep{}", i - 1) };
        workflow.push_str(&format!("    - {{id: deep{i}, agent: echo, input: d, depends_on: [{after}]}}\n"));
    }
    env.write("plan.yaml", &plan("wide", "    echo: {runtime: mock}", workflow.trim_end()));
    let output = env.runner().args(["apply", "plan.yaml", "--yes"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("plan `wide`: 126 tasks in 27 phases"), "{stdout}");
    let phase2 = stdout.lines().find(|l| l.starts_with("  phase 2: ")).expect("phase 2 is listed");
    assert!(phase2.starts_with("  phase 2: wide0, wide1, ") && phase2.ends_with(" … and 88 more"), "{phase2}");
    assert!(stdout.contains("  phase 20: deep17\n  … and 7 more phases\n"), "{stdout}");
    assert!(!stdout.contains("phase 21:"), "{stdout}");
}

#[test]
fn apply_with_yes_runs_a_plan_and_every_view_of_the_run_agrees() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    let output = apply(&env, "plan.yaml", "r1");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("run `r1` succeeded"), "{stdout}");
    assert!(stdout.contains("TaskSucceeded c"), "plain progress lines: {stdout}");

    let status = env.status("r1");
    assert_eq!(
        keys(&status),
        set(&["run_id", "plan", "status", "tokens", "forecast", "replans", "exhausted", "tasks"])
    );
    assert_eq!(keys(&status["forecast"]), set(&["tokens", "duration_ms"]), "no model is asked, so no cost");
    assert_eq!(status["tokens"], serde_json::json!({"prompt": 0, "completion": 0}), "command agents use no tokens");
    assert_eq!(status["run_id"], "r1");
    assert_eq!(status["plan"], "three");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(keys(&status["tasks"]), set(&["a", "b", "c"]));
    for task in ["a", "b", "c"] {
        let task = &status["tasks"][task];
        assert_eq!(keys(task), set(&["status", "attempts", "output", "error", "question"]));
        assert_eq!(task["status"], "succeeded");
        assert_eq!(task["attempts"], 1);
        assert!(task["error"].is_null());
    }
    assert_eq!(status["tasks"]["c"]["output"], "hello test the runner + b reads hello test the runner");

    let events = env.runner().args(["events", "r1"]).output().expect("runner runs");
    assert!(events.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|r| r["seq"].as_u64().expect("a seq")).collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
    assert_eq!(lines.first().map(|r| &r["type"]), Some(&Value::from("RunCreated")));
    assert_eq!(lines.last().map(|r| &r["type"]), Some(&Value::from("RunCompleted")));
    assert!(lines.iter().all(|r| r["run_id"] == "r1"));

    let runs = env.runner().arg("runs").output().expect("runner runs");
    let runs = String::from_utf8_lossy(&runs.stdout).into_owned();
    let row = runs.lines().find(|l| l.starts_with("r1 ")).unwrap_or_else(|| panic!("r1 is listed: {runs}"));
    assert!(row.contains("three") && row.contains("succeeded") && row.contains("3/3"), "{row}");

    let logs = env.runner().args(["logs", "r1"]).output().expect("runner runs");
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert_eq!(logs.lines().count(), lines.len(), "{logs}");
    assert!(logs.lines().zip(&lines).all(|(line, record)| line.contains(record["type"].as_str().unwrap_or("?"))));

    let human = env.runner().args(["status", "r1"]).output().expect("runner runs");
    let human = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(human.contains("succeeded") && human.contains("hello test the runner"), "{human}");
}

#[test]
fn runs_without_any_run_says_so() {
    let env = Env::new();
    env.runner().arg("runs").assert().success().stdout(predicates::str::contains("no runs"));
}

#[test]
fn apply_without_yes_and_without_a_terminal_declines_and_creates_nothing() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    let output = env.runner().args(["apply", "plan.yaml"]).write_stdin("y\n").output().expect("runner runs");
    assert_eq!(output.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--yes"));
    assert!(!env.home().join("runs").exists());
}

#[test]
fn dry_run_prints_phases_in_order_and_touches_nothing() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "dry",
            ECHO,
            r#"    - {id: short, agent: echo, input: "s"}
    - {id: long, agent: echo, input: "l"}
    - {id: mid, agent: echo, input: "{{ tasks.long.output }}", depends_on: [long]}
    - {id: end, agent: echo, input: "{{ tasks.mid.output }} {{ tasks.short.output }}", depends_on: [mid, short]}"#,
        ),
    );
    let output = env.runner().args(["apply", "plan.yaml", "--dry-run"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let at = |text: &str| stdout.find(text).unwrap_or_else(|| panic!("`{text}` in {stdout}"));
    assert!(at("phase 1:") < at("phase 2:") && at("phase 2:") < at("phase 3:"));
    // Within a phase, the longer remaining critical path goes first.
    assert!(at("long (agent echo)") < at("short (agent echo)"), "{stdout}");
    assert!(at("phase 2:") < at("mid (agent echo)") && at("mid (agent echo)") < at("phase 3:"));
    assert!(at("phase 3:") < at("end (agent echo)"));
    assert!(!env.home().exists(), "a dry run creates no RUNNER_HOME");

    let sequential = env
        .runner()
        .args(["apply", "plan.yaml", "--dry-run", "--strategy", "sequential"])
        .output()
        .expect("runner runs");
    let stdout = String::from_utf8_lossy(&sequential.stdout).into_owned();
    assert!(stdout.contains("1. short") && stdout.contains("4. end"), "{stdout}");
    assert!(!env.home().exists());
}

#[test]
fn an_invalid_plan_is_refused_with_exit_2() {
    let env = Env::new();
    env.write("plan.yaml", &plan("bad", ECHO, "    - {id: a, agent: nobody, input: x}"));
    let output = env.runner().args(["apply", "plan.yaml", "--yes"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nobody"));
    assert!(!env.home().exists());
}

#[test]
fn an_existing_run_id_is_refused() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    assert_eq!(apply(&env, "plan.yaml", "same").status.code(), Some(0));
    let again = apply(&env, "plan.yaml", "same");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn unknown_runs_are_one_line_errors() {
    let env = Env::new();
    for args in
        [&["status", "nope"][..], &["logs", "nope"], &["events", "nope"], &["resume", "nope"], &["cancel", "nope"]]
    {
        let output = env.runner().args(args).output().expect("runner runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("no run `nope`"), "{stderr}");
    }
    let output = env.runner().args(["status", "../etc"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_failing_task_with_the_fail_policy_fails_the_run() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "failing",
            "    m: {runtime: mock, responses: {bad: {fail: \"HTTP 503\"}}}",
            "    - {id: ok, agent: m, input: fine}\n    - {id: bad, agent: m, input: x, depends_on: [ok]}",
        ),
    );
    let output = apply(&env, "plan.yaml", "f1");
    assert_eq!(output.status.code(), Some(1));
    let status = env.status("f1");
    assert_eq!(status["status"], "failed");
    assert_eq!(status["tasks"]["bad"]["status"], "failed");
    assert!(status["tasks"]["bad"]["error"].as_str().unwrap_or_default().contains("HTTP 503"));
    assert!(String::from_utf8_lossy(&output.stdout).contains("runner retry f1"));
}

#[test]
fn a_skipped_task_makes_the_run_partial() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "partial",
            "    m: {runtime: mock, responses: {bad: {fail: boom}}}",
            r#"    - {id: bad, agent: m, input: x, on_failure: skip}
    - {id: after, agent: m, input: "bad was {{ tasks.bad.status }}", depends_on: [bad]}"#,
        ),
    );
    let output = apply(&env, "plan.yaml", "p1");
    assert_eq!(output.status.code(), Some(5));
    let status = env.status("p1");
    assert_eq!(status["status"], "partial");
    assert_eq!(status["tasks"]["bad"]["status"], "skipped");
    assert_eq!(status["tasks"]["after"]["output"], "bad was skipped");
}

#[test]
fn a_clarification_pauses_and_answer_then_resume_finishes() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "ask",
            "    m: {runtime: mock, responses: {a: [{clarify: \"Which fiscal year?\"}, {output: done}]}}",
            "    - {id: a, agent: m, input: start}\n    - {id: b, agent: m, input: \"{{ tasks.a.output }}\", depends_on: [a]}",
        ),
    );
    let output = apply(&env, "plan.yaml", "q1");
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("Which fiscal year?") && stdout.contains("runner answer q1 a"), "{stdout}");
    assert!(stdout.contains("runner resume q1"), "{stdout}");
    let status = env.status("q1");
    assert_eq!(status["status"], "paused");
    assert_eq!(status["tasks"]["a"]["status"], "paused");
    assert_eq!(status["tasks"]["a"]["question"], "Which fiscal year?");

    let answered = env.runner().args(["answer", "q1", "a", "FY2024"]).output().expect("runner runs");
    assert_eq!(answered.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&answered.stdout).contains("runner resume q1"));
    assert_eq!(env.runner().args(["resume", "q1"]).output().expect("runner runs").status.code(), Some(0));

    let inputs: Vec<String> = env
        .records("q1")
        .iter()
        .filter(|r| r["type"] == "TaskDispatched" && r["task"] == "a")
        .map(|r| r["input"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert!(inputs[1].contains("Clarification: FY2024"), "{inputs:?}");
    assert_eq!(env.status("q1")["status"], "succeeded");
}

#[test]
fn answering_a_task_that_is_not_waiting_is_refused() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    assert_eq!(apply(&env, "plan.yaml", "done").status.code(), Some(0));
    let output = env.runner().args(["answer", "done", "a", "late"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already ended"));
    let records = env.records("done").len();

    let review = plan(
        "review",
        ECHO,
        "    - {id: a, agent: echo, input: x}\n    - {id: ok, type: human_review, depends_on: [a], prompt: fine?}",
    );
    env.write("review.yaml", &review);
    assert_eq!(apply(&env, "review.yaml", "rv").status.code(), Some(3));
    let output = env.runner().args(["answer", "rv", "ok", "yes"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not waiting for an answer"));
    let output = env.runner().args(["approve", "rv", "a"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    let output = env.runner().args(["approve", "rv", "ghost"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no task `ghost`"));
    assert_eq!(env.records("done").len(), records, "a refused command records nothing");
}

#[test]
fn a_review_pauses_and_approve_then_resume_finishes() {
    let env = Env::new();
    env.write("plan.yaml", &review_plan());
    let output = apply(&env, "plan.yaml", "rv1");
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("runner approve rv1 approve") && stdout.contains("runner reject rv1 approve"), "{stdout}");
    let human = env.runner().args(["status", "rv1"]).output().expect("runner runs");
    let human = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(human.contains("Publish the draft?") && human.contains("output of `draft`"), "{human}");

    let approved = env.runner().args(["approve", "rv1", "approve", "--comment", "ship it"]).output().expect("runs");
    assert_eq!(approved.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&approved.stdout).contains("ReviewDecided approve approved"));
    assert_eq!(env.runner().args(["resume", "rv1"]).output().expect("runner runs").status.code(), Some(0));
    let status = env.status("rv1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["approve"]["output"], "ship it");
    assert_eq!(status["tasks"]["publish"]["output"], "published the draft");
}

#[test]
fn a_rejected_review_fails_the_run_by_default() {
    let env = Env::new();
    env.write("plan.yaml", &review_plan());
    assert_eq!(apply(&env, "plan.yaml", "rv2").status.code(), Some(3));
    let rejected = env.runner().args(["reject", "rv2", "approve", "--comment", "too long"]).output().expect("runs");
    assert_eq!(rejected.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&rejected.stdout).contains("failed"));
    let resumed = env.runner().args(["resume", "rv2"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(1));
    let status = env.status("rv2");
    assert_eq!(status["status"], "failed");
    assert!(status["tasks"]["approve"]["error"].as_str().unwrap_or_default().contains("too long"));
    assert!(tasks_of(&env, "rv2", "TaskDispatched").iter().all(|t| t != "publish"));
}

#[test]
fn retry_from_a_task_reuses_upstream_outputs_and_reruns_it_and_its_downstream() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "retry",
            ECHO,
            r#"    - {id: a, agent: echo, input: "a"}
    - {id: side, agent: echo, input: "side"}
    - {id: b, agent: echo, input: "b after {{ tasks.a.output }}", depends_on: [a]}
    - {id: c, agent: echo, input: "c after {{ tasks.b.output }} and {{ tasks.side.output }}", depends_on: [b, side]}"#,
        ),
    );
    assert_eq!(apply(&env, "plan.yaml", "first").status.code(), Some(0));
    let output = env.runner().args(["retry", "first", "--from", "b", "--run-id", "second"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));

    let reused: BTreeSet<String> = tasks_of(&env, "second", "TaskReused").into_iter().collect();
    assert_eq!(reused, set(&["a", "side"]));
    let dispatched: BTreeSet<String> = tasks_of(&env, "second", "TaskDispatched").into_iter().collect();
    assert_eq!(dispatched, set(&["b", "c"]));
    let created = &env.records("second")[0];
    assert_eq!(created["retry_of"], "first");
    let status = env.status("second");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["c"]["output"], "c after b after a and side");

    // Without --from, every succeeded task is reused and nothing runs.
    let output = env.runner().args(["retry", "first", "--run-id", "third"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(tasks_of(&env, "third", "TaskReused").len(), 4);
    assert!(tasks_of(&env, "third", "TaskDispatched").is_empty());

    let output = env.runner().args(["retry", "first", "--from", "ghost"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn retry_reruns_what_ran_without_a_skipped_tasks_output() {
    let env = Env::new();
    let agents = "    flaky: {runtime: mock, latency: 10ms, responses: {a: {fail: down}}}";
    env.write(
        "plan.yaml",
        &plan(
            "skipped",
            agents,
            r#"    - {id: a, agent: flaky, input: "a", on_failure: skip}
    - {id: b, agent: flaky, input: "b sees {{ tasks.a.status }}", depends_on: [a]}
    - {id: other, agent: flaky, input: "other"}"#,
        ),
    );
    assert_eq!(apply(&env, "plan.yaml", "first").status.code(), Some(5), "a was skipped: partial");
    let output = env.runner().args(["retry", "first", "--run-id", "second"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(5), "{}", String::from_utf8_lossy(&output.stderr));
    let reused: BTreeSet<String> = tasks_of(&env, "second", "TaskReused").into_iter().collect();
    assert_eq!(reused, set(&["other"]), "b's output was made while a was skipped: it runs again");
    let dispatched: BTreeSet<String> = tasks_of(&env, "second", "TaskDispatched").into_iter().collect();
    assert_eq!(dispatched, set(&["a", "b"]));
}

#[test]
fn cancel_of_a_paused_run_records_run_cancelled() {
    let env = Env::new();
    env.write("plan.yaml", &review_plan());
    assert_eq!(apply(&env, "plan.yaml", "c1").status.code(), Some(3));
    let output = env.runner().args(["cancel", "c1"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(env.types("c1").last().map(String::as_str), Some("RunCancelled"));
    assert_eq!(env.status("c1")["status"], "cancelled");

    let again = env.runner().args(["cancel", "c1"]).output().expect("runner runs");
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already ended: cancelled"));
    let resumed = env.runner().args(["resume", "c1"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(130));
}

#[test]
fn an_upstream_output_reaches_a_command_as_data_and_is_never_executed() {
    let env = Env::new();
    let payload = "$(touch pwned); rm -rf x; `touch pwned2`";
    std::fs::create_dir(env.dir().join("x")).expect("x is created");
    env.write("x/keep.txt", "keep");
    env.write(
        "plan.yaml",
        &plan(
            "inject",
            &format!(
                "    src: {{runtime: mock, default: {payload:?}}}\n    cat: {{runtime: command, command: [python3, -c, \"import sys; print(sys.stdin.read())\"]}}"
            ),
            r#"    - {id: a, agent: src, input: anything}
    - {id: b, agent: cat, input: "got: {{ tasks.a.output }}", depends_on: [a]}"#,
        ),
    );
    let output = apply(&env, "plan.yaml", "inj");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(env.status("inj")["tasks"]["b"]["output"], format!("got: {payload}"));
    assert!(!env.dir().join("pwned").exists() && !env.dir().join("pwned2").exists());
    assert!(env.dir().join("x/keep.txt").exists());
}

#[test]
fn a_run_no_process_drives_is_interrupted_in_every_view() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    assert_eq!(apply(&env, "plan.yaml", "crashed").status.code(), Some(0));
    // What a killed process leaves: the log stops after the first dispatch, and no lock.
    let log = env.log("crashed");
    let text = std::fs::read_to_string(&log).expect("the log");
    let cut: Vec<&str> = text.lines().take_while(|l| !l.contains("\"TaskSucceeded\"")).collect();
    std::fs::write(&log, format!("{}\n", cut.join("\n"))).expect("the log is cut");

    assert_eq!(env.status("crashed")["status"], "interrupted");
    let human = env.runner().args(["status", "crashed"]).output().expect("runner runs");
    let human = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(human.starts_with("run `crashed`: interrupted ("), "{human}");
    let runs = env.runner().arg("runs").output().expect("runner runs");
    let runs = String::from_utf8_lossy(&runs.stdout).into_owned();
    let row = runs.lines().find(|l| l.starts_with("crashed ")).unwrap_or_else(|| panic!("listed: {runs}"));
    assert!(row.contains(" interrupted ") && !row.contains("running"), "{row}");
}

#[test]
fn io_failures_exit_6_and_a_mistyped_path_exits_2() {
    let env = Env::new();
    std::fs::create_dir(env.dir().join("folder.yaml")).expect("a folder");
    let unreadable = env.runner().args(["validate", "folder.yaml"]).output().expect("runner runs");
    assert_eq!(unreadable.status.code(), Some(6), "{}", String::from_utf8_lossy(&unreadable.stdout));
    let critic = env.runner().args(["critic", "folder.yaml"]).output().expect("runner runs");
    assert_eq!(critic.status.code(), Some(6));
    let missing = env.runner().args(["validate", "nowhere.yaml"]).output().expect("runner runs");
    assert_eq!(missing.status.code(), Some(2), "a path that names nothing is a usage error");

    // A RUNNER_HOME that is a file: the run's folder cannot be created.
    env.write("plan.yaml", &three_tasks());
    env.write("home", "not a folder");
    let apply = apply(&env, "plan.yaml", "r1");
    assert_eq!(apply.status.code(), Some(6), "{}", String::from_utf8_lossy(&apply.stderr));

    // A full disk: stdout is /dev/full.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let status = env
        .runner_process()
        .arg("schema")
        .stdout(full)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("runner runs");
    assert_eq!(status.code(), Some(6));
}

/// A plan whose `llm` agents `writer` and `editor` use provider `remote`, whose key is in
/// `RUNNER_TEST_UNSET_KEY`.
fn keyed_plan() -> String {
    let plan = plan(
        "keyed",
        "    writer: {runtime: llm, provider: remote}\n    editor: {runtime: llm, provider: remote}",
        "    - {id: draft, agent: writer, input: write}\n    - {id: edit, agent: editor, input: edit, depends_on: [draft]}",
    );
    plan.replace(
        "spec:\n",
        "spec:\n  providers:\n    remote: {kind: openai, base_url: \"http://127.0.0.1:9/v1\", api_key_env: RUNNER_TEST_UNSET_KEY, model: m}\n",
    )
}

#[test]
fn apply_with_an_unset_key_variable_refuses_before_creating_a_run() {
    let env = Env::new();
    env.write("plan.yaml", &keyed_plan());
    let output = env
        .runner()
        .env_remove("RUNNER_TEST_UNSET_KEY")
        .args(["apply", "plan.yaml", "--yes", "--run-id", "k1"])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for named in ["`RUNNER_TEST_UNSET_KEY`", "`remote`", "`writer`", "`editor`"] {
        assert!(stderr.contains(named), "{named} is named: {stderr}");
    }
    assert!(!env.home().join("runs").join("k1").exists(), "no run folder");

    // A variable set to nothing (`export KEY=`) holds no key either.
    let blank = env
        .runner()
        .env("RUNNER_TEST_UNSET_KEY", " ")
        .args(["apply", "plan.yaml", "--yes", "--run-id", "k2"])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&blank.stderr);
    assert_eq!(blank.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`RUNNER_TEST_UNSET_KEY` is not set or is empty"), "{stderr}");
    assert!(!env.home().join("runs").join("k2").exists(), "no run folder");

    // A dry run writes nothing anyway: it warns and goes on.
    let dry = env
        .runner()
        .env_remove("RUNNER_TEST_UNSET_KEY")
        .args(["apply", "plan.yaml", "--dry-run"])
        .output()
        .expect("runner runs");
    assert_eq!(dry.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dry.stderr).contains("warning: the environment variable `RUNNER_TEST_UNSET_KEY`"));
    assert!(!env.home().join("runs").exists());
}

#[test]
fn resume_and_retry_refuse_an_unset_key_variable_and_record_nothing() {
    let env = Env::new();
    let plan = keyed_plan().replace(
        "    - {id: draft, agent: writer, input: write}",
        "    - {id: ok, type: human_review, prompt: \"go?\"}\n    - {id: draft, agent: writer, input: write, depends_on: [ok]}",
    );
    env.write("plan.yaml", &plan);
    let paused = env
        .runner()
        .env("RUNNER_TEST_UNSET_KEY", "set")
        .args(["apply", "plan.yaml", "--yes", "--run-id", "k2"])
        .output()
        .expect("runner runs");
    assert_eq!(paused.status.code(), Some(3), "{}", String::from_utf8_lossy(&paused.stderr));
    let log = env.home().join("runs").join("k2").join("events.jsonl");
    let before = std::fs::read(&log).expect("the log exists");

    for args in [&["resume", "k2"][..], &["retry", "k2", "--run-id", "k3"][..]] {
        let output = env.runner().env_remove("RUNNER_TEST_UNSET_KEY").args(args).output().expect("runner runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("`RUNNER_TEST_UNSET_KEY`") && stderr.contains("`writer`"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read(&log).expect("the log exists"), before, "resume recorded nothing");
    assert!(!env.home().join("runs").join("k3").exists(), "retry created no run");
}

#[test]
fn output_prints_a_tasks_whole_output_raw_and_apply_ends_with_it() {
    let env = Env::new();
    env.write("plan.yaml", &three_tasks());
    let applied = apply(&env, "plan.yaml", "r1");
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        stdout.contains("output of `c`:\n    hello test the runner + b reads hello test the runner\n"),
        "a short result is shown at the end: {stdout}"
    );
    assert!(stdout.contains("runner output r1"), "{stdout}");

    let sinks = env.runner().args(["output", "r1"]).output().expect("runner runs");
    assert_eq!(sinks.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&sinks.stdout), "hello test the runner + b reads hello test the runner\n");
    let one = env.runner().args(["output", "r1", "a"]).output().expect("runner runs");
    assert_eq!(String::from_utf8_lossy(&one.stdout), "hello test the runner\n");

    let unknown = env.runner().args(["output", "r1", "nope"]).output().expect("runner runs");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(unknown.stdout.is_empty());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no task `nope`"));
}

#[test]
fn output_heads_several_final_outputs_and_refuses_a_task_without_one() {
    let env = Env::new();
    let long: String = (1..=8).map(|n| format!("line {n}\\n")).collect();
    env.write(
        "plan.yaml",
        &plan(
            "two",
            &format!("    echo: {{runtime: mock}}\n    broken: {{runtime: mock, responses: {{c: [{{fail: boom}}]}}}}\n    long: {{runtime: mock, responses: {{b: \"{long}\"}}}}"),
            "    - {id: a, agent: echo, input: first}\n    - {id: b, agent: long, input: x}\n    \
             - {id: c, agent: broken, input: x, on_failure: skip}",
        ),
    );
    let applied = apply(&env, "plan.yaml", "r2");
    assert_eq!(applied.status.code(), Some(5), "{}", String::from_utf8_lossy(&applied.stderr));
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(stdout.contains("output:   runner output r2"), "several outputs: only the command: {stdout}");
    assert!(!stdout.contains("output of"), "{stdout}");

    let sinks = env.runner().args(["output", "r2"]).output().expect("runner runs");
    assert_eq!(sinks.status.code(), Some(0));
    let text = String::from_utf8_lossy(&sinks.stdout);
    assert!(text.starts_with("--- a ---\nfirst\n--- b ---\nline 1\n"), "{text}");
    assert!(text.contains("line 8"), "the whole output: {text}");
    assert!(String::from_utf8_lossy(&sinks.stderr).contains("`c` has no output"));

    let status = env.runner().args(["status", "r2"]).output().expect("runner runs");
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("line 1…") && status.contains("`runner output r2 TASK`"), "{status}");

    let failed = env.runner().args(["output", "r2", "c"]).output().expect("runner runs");
    assert_eq!(failed.status.code(), Some(2));
    assert!(failed.stdout.is_empty());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("has no output: it is skipped"));
}
