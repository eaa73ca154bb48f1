//! Sub-plans and `expand` from the command line: a `type: plan` task runs its plan file as a
//! child run with its own log linked both ways, a person answers the child from the parent's
//! commands, cancel and a kill -9 reach it, a failed child is retried as a new child keeping
//! what succeeded, and an `expand` task's written plan runs as a child or is refused.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Env, SLOW_SCRIPT, plan};

/// A child plan with a variable, on a mock agent and the slow script (which records each run).
fn child(script: &str, middle: &str) -> String {
    let agents = format!("    echo: {{runtime: mock}}\n    slow: {{runtime: command, command: [python3, {script:?}]}}");
    let workflow = format!(
        "    - {{id: first, agent: slow, input: \"first {{{{ vars.topic }}}}\"}}\n{middle}    - {{id: last, agent: echo, \
         depends_on: [middle], input: \"last {{{{ tasks.first.output }}}}\"}}"
    );
    plan("child", &agents, &workflow).replace("  agent_definitions:", "  vars: {topic: nothing}\n  agent_definitions:")
}

/// A parent whose `sub` task runs `child.yaml` with `topic` from an upstream output.
fn parent(sub: &str) -> String {
    let workflow = format!(
        "    - {{id: pick, agent: echo, input: chess}}\n    - {{id: sub, type: plan, plan: child.yaml, depends_on: \
         [pick], with: {{topic: \"{{{{ tasks.pick.output }}}}\"}}{sub}}}\n    - {{id: after, agent: echo, depends_on: \
         [sub], input: \"got {{{{ tasks.sub.output }}}}\"}}"
    );
    plan("parent", "    echo: {runtime: mock}", &workflow)
}

fn setup(middle: &str, sub: &str) -> Env {
    let env = Env::new();
    let script = env.write("item.py", SLOW_SCRIPT);
    env.write("child.yaml", &child(&script.display().to_string(), middle));
    env.write("parent.yaml", &parent(sub));
    env
}

const MIDDLE: &str = "    - {id: middle, agent: slow, depends_on: [first], input: \"middle {{ vars.topic }}\"}\n";

fn apply(env: &Env, run: &str) -> std::process::Output {
    env.runner().args(["apply", "parent.yaml", "--yes", "--run-id", run]).output().expect("runner runs")
}

fn created(env: &Env, run: &str) -> Value {
    env.records(run).into_iter().find(|r| r["type"] == "RunCreated").expect("the run has a RunCreated")
}

#[test]
fn a_sub_plan_runs_as_a_child_run_linked_both_ways_and_gives_its_final_output() {
    let env = setup(MIDDLE, "");
    let out = apply(&env, "p");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    assert_eq!(created(&env, "p.sub")["parent"], json!({"run": "p", "task": "sub"}));
    assert_eq!(created(&env, "p.sub")["vars"], json!({"topic": "chess"}));
    assert_eq!(env.succeeded("p.sub"), ["first", "last", "middle"].map(String::from).into());
    let status = env.status("p");
    assert_eq!(status["tasks"]["sub"]["child_run"], "p.sub");
    assert_eq!(status["tasks"]["sub"]["output"], "last first chess");
    assert_eq!(status["tasks"]["after"]["output"], "got last first chess");
    assert_eq!(env.status("p.sub")["parent"], json!({"run": "p", "task": "sub"}));

    let human = env.runner().args(["status", "p"]).output().expect("runner runs");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("sub-plan runs") && text.contains("p.sub"), "{text}");
}

#[test]
fn a_map_of_sub_plans_starts_one_child_per_item_and_collects_their_outputs() {
    let env = Env::new();
    let script = env.write("item.py", SLOW_SCRIPT);
    env.write("child.yaml", &child(&script.display().to_string(), MIDDLE));
    let workflow =
        r#"    - {id: sub, type: plan, plan: child.yaml, for_each: [go, shogi], with: {topic: "{{ item }}"}}"#;
    env.write("parent.yaml", &plan("parent", "    echo: {runtime: mock}", workflow));
    let out = apply(&env, "m");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(created(&env, "m.sub.0")["parent"], json!({"run": "m", "task": "sub[0]"}));
    assert_eq!(created(&env, "m.sub.1")["vars"], json!({"topic": "shogi"}));
    let output: Value =
        serde_json::from_str(env.status("m")["tasks"]["sub"]["output"].as_str().expect("a text")).expect("JSON");
    assert_eq!(output, json!(["last first go", "last first shogi"]));
}

#[test]
fn a_with_that_is_one_expression_passes_its_value_and_a_var_reaches_the_child() {
    let env = Env::new();
    let child = plan(
        "child",
        "    echo: {runtime: mock}",
        r#"    - {id: count, agent: echo, input: "{{ vars.names | length }} names, first {{ vars.names[0] }}"}"#,
    )
    .replace("  agent_definitions:", "  vars: {names: []}\n  agent_definitions:");
    env.write("child.yaml", &child);
    let workflow = r#"    - {id: sub, type: plan, plan: child.yaml, with: {names: "{{ vars.people }}"}}"#;
    let parent = plan("parent", "    echo: {runtime: mock}", workflow)
        .replace("  agent_definitions:", "  vars: {people: [ann]}\n  agent_definitions:");
    env.write("parent.yaml", &parent);
    let out = env
        .runner()
        .args(["apply", "parent.yaml", "--yes", "--run-id", "v", "--var", r#"people:=["bo", "cy"]"#])
        .output()
        .expect("runner runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(created(&env, "v.sub")["vars"], json!({"names": ["bo", "cy"]}));
    assert_eq!(env.status("v")["tasks"]["sub"]["output"], "2 names, first bo");
}

#[test]
fn a_review_in_the_child_is_decided_from_the_parent_and_the_parent_goes_on() {
    let env = setup(
        "    - {id: middle, type: human_review, depends_on: [first], prompt: \"Keep {{ tasks.first.output }}?\"}\n",
        "",
    );
    let out = apply(&env, "r");
    assert_eq!(out.status.code(), Some(3), "paused: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("runner approve r sub/middle"), "the parent says how to answer the child: {said}");
    assert_eq!(env.status("r.sub")["status"], "paused");

    let wrong = env.runner().args(["approve", "r", "pick/middle"]).output().expect("runner runs");
    assert_ne!(wrong.status.code(), Some(0), "`pick` runs no sub-plan");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("no sub-plan run for task `pick`"));

    let approved = env.runner().args(["approve", "r", "sub/middle", "--comment", "fine"]).output().expect("runs");
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    let decided: Vec<Value> = env.records("r.sub").into_iter().filter(|r| r["type"] == "ReviewDecided").collect();
    assert_eq!(decided.len(), 1);
    assert_eq!((decided[0]["task"].as_str(), decided[0]["approved"].as_bool()), (Some("middle"), Some(true)));

    let resumed = env.runner().args(["resume", "r"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(env.status("r")["tasks"]["after"]["output"], "got last first chess");
    // The child went on from its review: its first task ran once.
    assert_eq!(env.side_effects().get("first chess"), Some(&1));
}

#[test]
fn cancelling_a_paused_parent_cancels_its_waiting_child() {
    let env = setup("    - {id: middle, type: human_review, depends_on: [first], prompt: \"ok?\"}\n", "");
    assert_eq!(apply(&env, "c").status.code(), Some(3), "paused");
    let out = env.runner().args(["cancel", "c"]).output().expect("runner runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(env.status("c")["status"], "cancelled");
    assert_eq!(env.status("c.sub")["status"], "cancelled");
}

#[test]
fn a_parent_killed_while_its_child_runs_resumes_the_same_child_where_it_was() {
    let env = setup(MIDDLE, "");
    let mut runner = env.spawn_apply("parent.yaml", "k");
    let started = Instant::now();
    while !env.succeeded("k.sub").contains("first") {
        assert!(started.elapsed() < Duration::from_secs(60), "the child's first task did not succeed within 60 s");
        assert!(runner.try_wait().expect("the runner can be polled").is_none(), "runner exited before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    runner.kill().expect("SIGKILL is sent");
    runner.wait().expect("the runner is reaped");

    let resumed = env.runner().args(["resume", "k"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(!env.home().join("runs").join("k.sub.2").exists(), "the same child is resumed, not a new one");
    assert!(env.types("k.sub").contains(&"RunResumed".to_owned()));
    assert_eq!(env.side_effects().get("first chess"), Some(&1), "the child's finished task did not run again");
    assert_eq!(env.status("k")["tasks"]["after"]["output"], "got last first chess");
}

#[test]
fn a_failed_child_is_retried_as_a_new_child_that_keeps_what_succeeded() {
    // `middle` fails on its first run only: it leaves a flag file next to the plans.
    let flaky = "import os, sys\nflag = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'flag')\n\
                 if not os.path.exists(flag):\n    open(flag, 'w').close()\n    sys.exit('not yet')\nprint('middle ok')\n";
    let env = Env::new();
    let script = env.write("item.py", SLOW_SCRIPT);
    let flaky = env.write("flaky.py", flaky);
    let middle = "    - {id: middle, agent: flaky, depends_on: [first], input: x}\n";
    let child = child(&script.display().to_string(), middle).replace(
        "  workflow:",
        &format!("    flaky: {{runtime: command, command: [python3, {:?}]}}\n  workflow:", flaky.display().to_string()),
    );
    env.write("child.yaml", &child);
    env.write("parent.yaml", &parent(", on_failure: {action: retry, max_attempts: 2, backoff: 10ms}"));
    let out = apply(&env, "f");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(env.status("f.sub")["status"], "failed");
    assert_eq!(created(&env, "f.sub.2")["retry_of"], "f.sub");
    let reused: Vec<Value> = env.records("f.sub.2").into_iter().filter(|r| r["type"] == "TaskReused").collect();
    assert_eq!(reused.len(), 1, "the new child keeps `first`: {reused:?}");
    assert_eq!(env.side_effects().get("first chess"), Some(&1));
    assert_eq!(env.status("f")["tasks"]["sub"]["child_run"], "f.sub.2");
}

/// A plan whose `investigate` step is written by a mock planner answering `answers` in turn.
fn expand_plan(answers: &[&str], max_tasks: &str) -> String {
    let answers: Vec<String> = answers.iter().map(|a| format!("{a:?}")).collect();
    let agents = format!(
        "    echo: {{runtime: mock}}\n    planner: {{runtime: mock, responses: {{investigate: [{}]}}}}",
        answers.join(", ")
    );
    let workflow = format!(
        "    - {{id: investigate, type: expand, agent: planner, input: \"look into it\"{max_tasks}}}\n    - {{id: after, \
         agent: echo, depends_on: [investigate], input: \"got {{{{ tasks.investigate.output }}}}\"}}"
    );
    plan("expanding", &agents, &workflow)
}

const GOOD: &str = r#"{"workflow": [{"id": "a", "agent": "echo", "input": "step a"}, {"id": "b", "agent": "echo", "depends_on": ["a"], "input": "b after {{ tasks.a.output }}"}]}"#;

#[test]
fn an_expand_step_runs_the_plan_its_agent_writes_as_a_child_recorded_whole() {
    let env = Env::new();
    env.write("plan.yaml", &expand_plan(&[GOOD], ""));
    let out = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "x"]).output().expect("runner runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = created(&env, "x.investigate");
    let ids: Vec<&str> =
        written["plan"]["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(written["plan"]["name"], "expanding.investigate");
    assert_eq!(env.status("x")["tasks"]["after"]["output"], "got b after step a");
}

#[test]
fn an_expand_agent_that_writes_an_invalid_plan_twice_fails_the_step_saying_why() {
    let unknown_agent = r#"{"workflow": [{"id": "a", "agent": "nobody", "input": "x"}]}"#;
    let env = Env::new();
    env.write("plan.yaml", &expand_plan(&[unknown_agent, "not json at all"], ""));
    let out = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "bad"]).output().expect("runner runs");
    assert_eq!(out.status.code(), Some(1), "the run fails");
    let error = env.status("bad")["tasks"]["investigate"]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("still refused after one repair"), "{error}");
    assert!(!env.home().join("runs").join("bad.investigate").exists(), "nothing invalid runs");
}

#[test]
fn an_expand_plan_over_max_tasks_is_sent_back_and_a_smaller_one_runs() {
    let three = r#"{"workflow": [{"id": "a", "agent": "echo", "input": "1"}, {"id": "b", "agent": "echo", "input": "2"}, {"id": "c", "agent": "echo", "input": "3"}]}"#;
    let env = Env::new();
    env.write("plan.yaml", &expand_plan(&[three, GOOD], ", max_tasks: 2"));
    let out = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "big"]).output().expect("runner runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let tasks = created(&env, "big.investigate")["plan"]["tasks"].as_array().map_or(0, Vec::len);
    assert_eq!(tasks, 2, "the repaired plan runs");
}

#[test]
fn a_childs_tokens_count_against_the_parents_budget() {
    let env = Env::new();
    let child = plan(
        "child",
        "    costly: {runtime: mock, responses: {spend: [{output: spent, tokens: {prompt: 700, completion: 400}}]}}",
        "    - {id: spend, agent: costly, input: x}",
    );
    env.write("child.yaml", &child);
    let workflow =
        "    - {id: sub, type: plan, plan: child.yaml}\n    - {id: after, agent: echo, depends_on: [sub], input: more}";
    env.write(
        "parent.yaml",
        &(plan("parent", "    echo: {runtime: mock}", workflow) + "  control_logic: {token_budget: 1000}\n"),
    );
    let out = apply(&env, "t");
    assert_ne!(out.status.code(), Some(0), "the budget is spent by the child");
    let status = env.status("t");
    assert_eq!(status["tokens"], json!({"prompt": 700, "completion": 400}));
    assert_eq!(status["tasks"]["sub"]["status"], "succeeded");
    assert_ne!(status["tasks"]["after"]["status"], "succeeded", "nothing runs past the budget");
    assert!(status["exhausted"].as_str().is_some_and(|r| r.contains("budget")), "{status}");
}

#[test]
fn a_child_with_several_final_tasks_gives_an_object_of_their_outputs_by_id() {
    let env = Env::new();
    let child = plan(
        "child",
        "    echo: {runtime: mock, responses: {json: ['{\"n\": 1}']}}",
        "    - {id: text, agent: echo, input: plain}\n    - {id: json, agent: echo, input: x}",
    );
    env.write("child.yaml", &child);
    env.write(
        "parent.yaml",
        &plan("parent", "    echo: {runtime: mock}", "    - {id: sub, type: plan, plan: child.yaml}"),
    );
    assert_eq!(apply(&env, "o").status.code(), Some(0));
    let output: Value =
        serde_json::from_str(env.status("o")["tasks"]["sub"]["output"].as_str().expect("a text")).expect("JSON");
    assert_eq!(output, json!({"text": "plain", "json": {"n": 1}}));
}

#[test]
fn a_review_decided_on_the_child_run_itself_lets_the_parent_go_on() {
    let env = setup("    - {id: middle, type: human_review, depends_on: [first], prompt: \"ok?\"}\n", "");
    assert_eq!(apply(&env, "d").status.code(), Some(3), "paused");
    let approved = env.runner().args(["approve", "d.sub", "middle"]).output().expect("runner runs");
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    let answered: Vec<Value> = env.records("d").into_iter().filter(|r| r["type"] == "ClarificationProvided").collect();
    assert_eq!(answered.len(), 1, "the parent's question is answered with the child's decision");
    let resumed = env.runner().args(["resume", "d"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(env.status("d")["tasks"]["after"]["output"], "got last first chess");
}

#[test]
fn a_review_rejected_in_the_child_fails_the_parent_task_without_starting_another_child() {
    let env = setup(
        "    - {id: middle, type: human_review, depends_on: [first], prompt: \"ok?\"}\n",
        ", on_failure: {action: retry, max_attempts: 3, backoff: 10ms}",
    );
    assert_eq!(apply(&env, "j").status.code(), Some(3), "paused");
    let rejected = env.runner().args(["reject", "j", "sub/middle", "--comment", "no"]).output().expect("runs");
    assert_eq!(rejected.status.code(), Some(0), "{}", String::from_utf8_lossy(&rejected.stderr));
    let resumed = env.runner().args(["resume", "j"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(1), "{}", String::from_utf8_lossy(&resumed.stderr));
    let status = env.status("j");
    assert_eq!(status["tasks"]["sub"]["status"], "failed");
    assert!(status["tasks"]["sub"]["error"].as_str().is_some_and(|e| e.contains("rejected: no")), "{status}");
    assert!(!env.home().join("runs").join("j.sub.2").exists(), "a person's rejection is not retried");
}

#[test]
fn a_parent_stopped_by_sigterm_leaves_its_child_to_be_resumed_not_cancelled() {
    let env = setup(MIDDLE, "");
    let mut runner = env.spawn_apply("parent.yaml", "h");
    let started = Instant::now();
    while !env.succeeded("h.sub").contains("first") {
        assert!(started.elapsed() < Duration::from_secs(60), "the child's first task did not succeed within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = std::process::Command::new("kill").args(["-TERM", &runner.id().to_string()]).status();
    assert!(sent.expect("kill runs").success());
    runner.wait().expect("the runner exits");
    assert!(!env.types("h.sub").contains(&"RunCancelled".to_owned()), "{:?}", env.types("h.sub"));
    let resumed = env.runner().args(["resume", "h"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(env.status("h")["tasks"]["after"]["output"], "got last first chess");
}
