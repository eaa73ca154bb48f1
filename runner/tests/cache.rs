//! The task cache from the command line: an edited plan re-applied with `--reuse` asks the model
//! only for what changed, `cache:` on tasks and agents, two processes at once, damaged entries,
//! and `runner cache`.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use llm_support::{is_agent, llm_agent, llm_plan, role, runner, user};
use serde_json::Value;
use support::{Env, mock_chain};
use testkit::{COMPLETION_TOKENS, FakeOpenAi, PROMPT_TOKENS, Step};

/// A model at temperature 0: the same request always gets the same answer, made from the agent
/// and the start of the task's input.
fn repeatable() -> FakeOpenAi {
    FakeOpenAi::start(|body, _| {
        let role = role(body).replace("ROLE ", "");
        let input: String = user(body).chars().take(60).collect();
        Step::Answer(format!("[{role}] {input}"))
    })
}

/// A research plan like `examples/research.yaml` without its person: three searches in parallel,
/// a synthesis that reads them, and a writer that reads the synthesis.
fn research(base_url: &str, brief: &str) -> String {
    let agents = ["news", "filings", "people", "synth", "writer"].map(llm_agent).join("\n");
    let workflow = format!(
        r#"    - {{id: search_news, agent: news, input: "NEWS about XyzzyCorp"}}
    - {{id: search_filings, agent: filings, input: "FILINGS of XyzzyCorp"}}
    - {{id: search_people, agent: people, input: "PEOPLE at XyzzyCorp"}}
    - id: synthesize
      agent: synth
      input: "SYNTH {{{{ tasks.search_news.output }}}} / {{{{ tasks.search_filings.output }}}} / {{{{ tasks.search_people.output }}}}"
      depends_on: [search_news, search_filings, search_people]
    - id: write_brief
      agent: writer
      input: "{brief} {{{{ tasks.synthesize.output }}}}"
      depends_on: [synthesize]"#
    );
    llm_plan("research", base_url, &agents, &workflow, "")
}

/// The run id `apply` printed.
fn run_id(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.starts_with("run `")).expect("apply names its run");
    line.split('`').nth(1).expect("a run id in backticks").to_owned()
}

fn status(env: &Env, run: &str) -> Value {
    let out = runner(env, &["status", run, "--format", "json"]);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status is JSON ({e}): {out}"))
}

#[test]
fn an_edited_plan_reapplied_with_reuse_asks_the_model_only_for_what_changed() {
    let server = repeatable();
    let env = Env::new();
    env.write("plan.yaml", &research(&server.base_url(), "BRIEF one page:"));
    let first = runner(&env, &["apply", "plan.yaml", "--yes"]);
    assert_eq!(first.code, Some(0), "{first}");
    assert_eq!(server.requests().len(), 5, "the first run asks for every task");

    // Only the last task's input changes.
    env.write("plan.yaml", &research(&server.base_url(), "BRIEF half a page:"));
    let second = runner(&env, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(second.code, Some(0), "{second}");
    let asked: Vec<Value> = server.requests().into_iter().skip(5).map(|r| r.body).collect();
    assert_eq!(asked.len(), 1, "only the changed task is asked for: {asked:#?}");
    assert!(is_agent(&asked[0], "writer") && user(&asked[0]).starts_with("BRIEF half a page:"), "{asked:#?}");
    assert!(second.stdout.contains("Reuse: 4 of 5 tasks from the cache"), "{second}");
    assert!(second.stdout.contains("run    write_brief: its rendered input changed since run"), "{second}");
    let saved = 4 * (PROMPT_TOKENS + COMPLETION_TOKENS);
    assert!(
        second.stdout.contains(&format!("reused:   4 task outputs from the cache, saving {saved} tokens")),
        "{second}"
    );
    let reused = status(&env, &run_id(&second.stdout));
    assert_eq!(reused["reused"]["tasks"], 4, "{reused:#}");
    assert_eq!(reused["reused"]["tokens_saved"]["prompt"], 4 * PROMPT_TOKENS, "{reused:#}");
    assert_eq!(reused["tokens"]["prompt"], PROMPT_TOKENS, "only the writer's tokens count: {reused:#}");

    // The reused run's result is a fresh run's.
    let fresh_env = Env::new();
    fresh_env.write("plan.yaml", &research(&server.base_url(), "BRIEF half a page:"));
    let fresh = runner(&fresh_env, &["apply", "plan.yaml", "--yes"]);
    assert_eq!(fresh.code, Some(0), "{fresh}");
    let output =
        |env: &Env, out: &llm_support::Out| runner(env, &["output", &run_id(&out.stdout), "write_brief"]).stdout;
    assert_eq!(output(&env, &second), output(&fresh_env, &fresh));

    // A change upstream reaches what depends on it, and nothing else; and where an answer comes
    // out the same, what reads it is reused after all.
    let before = server.requests().len();
    env.write("plan.yaml", &research(&server.base_url(), "BRIEF half a page:").replace("PEOPLE at", "PEOPLE who run"));
    let third = runner(&env, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(third.code, Some(0), "{third}");
    assert!(third.stdout.contains("run    synthesize: it depends on `search_people`, which runs"), "{third}");
    assert!(third.stdout.contains("run    write_brief: it depends on `synthesize`, which runs"), "{third}");
    // The synthesiser answers from the first 60 characters of its input, which the change does
    // not reach: its answer is the one stored, so the writer's key matches when it is ready.
    let roles: Vec<String> = server.requests().into_iter().skip(before).map(|r| role(&r.body)).collect();
    assert_eq!(roles, ["ROLE people", "ROLE synth"], "{third}");
    assert!(third.stdout.contains("reused:   3 task outputs from the cache"), "{third}");
}

#[test]
fn cache_on_an_agent_reuses_without_the_flag_and_a_task_can_turn_it_off() {
    let env = Env::new();
    let plan = mock_chain(3, ", cache: true").replace("input: \"step 2", "cache: false, input: \"step 2");
    env.write("plan.yaml", &plan);
    assert_eq!(runner(&env, &["apply", "plan.yaml", "--yes"]).code, Some(0));
    let again = runner(&env, &["apply", "plan.yaml", "--yes"]);
    assert_eq!(again.code, Some(0), "{again}");
    assert!(again.stdout.contains("Reuse: 2 of 3 tasks"), "{again}");
    assert!(again.stdout.contains("run    t2: its `cache` is off (`--reuse` reuses it anyway)"), "{again}");
    let types = env.types(&run_id(&again.stdout));
    assert_eq!(types.iter().filter(|t| *t == "TaskReused").count(), 2, "{types:?}");
    assert_eq!(types.iter().filter(|t| *t == "TaskDispatched").count(), 1, "{types:?}");
}

#[test]
fn reuse_of_one_run_takes_only_that_runs_outputs() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(2, ""));
    let first = runner(&env, &["apply", "plan.yaml", "--yes"]);
    let second = runner(&env, &["apply", "plan.yaml", "--yes"]);
    let (first, second) = (run_id(&first.stdout), run_id(&second.stdout));
    let reused = runner(&env, &["apply", "plan.yaml", "--yes", &format!("--reuse={first}")]);
    assert_eq!(reused.code, Some(0), "{reused}");
    assert!(reused.stdout.contains(&format!("reuse  t0: from run `{first}`")), "{reused}");
    let other = runner(&env, &["apply", "--reuse=no-such-run", "plan.yaml", "--yes"]);
    assert!(other.stdout.contains("Reuse: 0 of 2 tasks"), "{other}");
    assert!(other.stdout.contains("run `no-such-run` stored no output for its key"), "{other}");
    // A bare `--reuse` before the plan takes no value from it.
    let bare = runner(&env, &["apply", "--reuse", "plan.yaml", "--yes"]);
    assert!(bare.stdout.contains("Reuse: 2 of 2 tasks"), "{bare}");
    assert_ne!(first, second);
}

#[test]
fn two_processes_applying_with_reuse_at_once_both_finish_and_the_cache_stays_readable() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(200, ""));
    let spawn = || {
        env.runner_process()
            .args(["apply", "plan.yaml", "--yes", "--reuse"])
            .stdin(std::process::Stdio::null())
            .output()
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(spawn);
        let b = scope.spawn(spawn);
        (a.join().expect("joined"), b.join().expect("joined"))
    });
    for out in [a.expect("runner runs"), b.expect("runner runs")] {
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let third = runner(&env, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert!(third.stdout.contains("Reuse: 200 of 200 tasks"), "{third}");
    assert!(!third.stderr.contains("warning"), "{third}");
    let list = runner(&env, &["cache", "list"]);
    assert_eq!(list.code, Some(0), "{list}");
    assert!(list.stdout.lines().count() >= 200, "{list}");
}

#[test]
fn a_damaged_entry_is_reported_and_never_trusted() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(2, ""));
    assert_eq!(runner(&env, &["apply", "plan.yaml", "--yes"]).code, Some(0));
    let packs = env.home().join("cache/packs");
    for file in std::fs::read_dir(&packs).expect("the cache has packs") {
        let path = file.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "pack") {
            let text = std::fs::read_to_string(&path).expect("a pack");
            std::fs::write(&path, text.replace("\"output\":\"step 0\"", "\"output\":\"step X\"")).expect("written");
        }
    }
    let out = runner(&env, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("is damaged: its output does not match its digest"), "{out}");
    assert!(out.stdout.contains("run    t0: its stored output is damaged"), "{out}");
    let run = run_id(&out.stdout);
    assert_eq!(runner(&env, &["output", &run, "t1"]).stdout.trim(), "step 1 step 0", "the damaged output was not used");
}

#[test]
fn cache_list_show_prune_and_clear() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(3, ""));
    assert_eq!(runner(&env, &["apply", "plan.yaml", "--yes"]).code, Some(0));
    let list = runner(&env, &["cache", "list"]);
    assert_eq!(list.stdout.lines().count(), 3, "{list}");
    let key = list.stdout.lines().next().and_then(|l| l.split_whitespace().next()).expect("a key").to_owned();
    let show = runner(&env, &["cache", "show", &key[..12]]);
    let entry: Value = serde_json::from_str(&show.stdout).unwrap_or_else(|e| panic!("{e}: {show}"));
    assert_eq!(entry["key"], key.as_str());
    assert_eq!(runner(&env, &["cache", "show", "0000"]).code, Some(2));
    let kept = runner(&env, &["cache", "prune", "--older-than", "30d"]);
    assert!(kept.stdout.contains("removed 0 stored outputs, kept 3"), "{kept}");
    assert_eq!(runner(&env, &["cache", "prune"]).code, Some(2), "prune says what to prune");
    let pruned = runner(&env, &["cache", "prune", "--older-than", "0s"]);
    assert!(pruned.stdout.contains("removed 3 stored outputs, kept 0"), "{pruned}");
    assert_eq!(runner(&env, &["apply", "plan.yaml", "--yes"]).code, Some(0));
    let cleared = runner(&env, &["cache", "clear"]);
    assert!(cleared.stdout.contains("removed 3 stored outputs, kept 0"), "{cleared}");
    assert_eq!(runner(&env, &["cache", "list"]).stdout, "");
}

#[test]
fn a_plan_test_declares_what_the_cache_holds_and_expects_reuse() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(3, ""));
    let scenario = |reuse: bool, absent: &str| {
        format!(
            "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: cached}}\nspec:\n  plan: plan.yaml\n  \
             cache: {{t0: from the cache, t1: also stored}}\n  reuse: {reuse}\n  expect:\n    status: succeeded\n    \
             tasks:\n      t2: {{output: {{equals: \"step 2 also stored\"}}}}\n    events:\n      \
             - {{type: TaskReused, task: t1{absent}}}\n      - {{type: TaskDispatched, task: t0, absent: true}}\n"
        )
    };
    env.write("reused.test.yaml", &scenario(true, ""));
    let passed = runner(&env, &["test", "reused.test.yaml"]);
    assert_eq!(passed.code, Some(0), "{passed}");
    // Without `reuse` the plan's tasks have `cache` off: they run, and the test says so.
    env.write("off.test.yaml", &scenario(false, ""));
    let failed = runner(&env, &["test", "off.test.yaml"]);
    assert_eq!(failed.code, Some(1), "{failed}");
    assert!(failed.all().contains("TaskReused"), "{failed}");
}

#[test]
fn a_cache_over_its_cap_loses_its_oldest_outputs_after_a_run() {
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(40, ""));
    let out = env.runner().env("RUNNER_CACHE_MAX_BYTES", "4KiB").args(["apply", "plan.yaml", "--yes"]).output();
    let out = out.expect("runner runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("note: the task cache was over RUNNER_CACHE_MAX_BYTES (4096 bytes)"), "{stderr}");
    let list = runner(&env, &["cache", "list"]);
    let kept = list.stdout.lines().count();
    assert!(kept > 0 && kept < 40, "some outputs are kept, the oldest removed: {list}");
    let bytes: u64 = std::fs::read_dir(env.home().join("cache/packs"))
        .expect("packs")
        .filter_map(|f| f.ok())
        .filter(|f| f.path().extension().is_some_and(|e| e == "pack"))
        .map(|f| f.metadata().map_or(0, |m| m.len()))
        .sum();
    assert!(bytes <= 4096, "the packs hold {bytes} bytes");
}

#[test]
fn a_task_whose_dependency_ran_again_with_the_same_output_is_reused_when_it_becomes_ready() {
    let env = Env::new();
    // `first` answers the same whatever its input; `t1` and `t2` echo theirs.
    let plan = |version: &str| {
        format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: cutoff}}\nspec:\n  agent_definitions:\n    \
             fixed: {{runtime: mock, default: same}}\n    echo: {{runtime: mock}}\n  workflow:\n    \
             - {{id: t0, agent: fixed, input: \"{version}\"}}\n    \
             - {{id: t1, agent: echo, input: \"after {{{{ tasks.t0.output }}}}\", depends_on: [t0]}}\n    \
             - {{id: t2, agent: echo, input: \"then {{{{ tasks.t1.output }}}}\", depends_on: [t1]}}\n"
        )
    };
    env.write("plan.yaml", &plan("v1"));
    let first = runner(&env, &["apply", "plan.yaml", "--yes"]);
    assert_eq!(first.code, Some(0), "{first}");
    let first_run = run_id(&first.stdout);

    env.write("plan.yaml", &plan("v2"));
    let second = runner(&env, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(second.code, Some(0), "{second}");
    // Before the run nothing below t0 can be known...
    assert!(second.stdout.contains("Reuse: 0 of 3 tasks"), "{second}");
    assert!(second.stdout.contains("run    t1: it depends on `t0`, which runs"), "{second}");
    // ...but t0's output came out the same, so t1 and t2 are found as they become ready.
    let run = run_id(&second.stdout);
    let records = env.records(&run);
    assert_eq!(records[0]["cache_reuse"]["all"], true, "the run records how it reuses: {:#}", records[0]);
    let dispatched: Vec<&str> =
        records.iter().filter(|r| r["type"] == "TaskDispatched").filter_map(|r| r["task"].as_str()).collect();
    assert_eq!(dispatched, ["t0"], "only t0 ran");
    for task in ["t1", "t2"] {
        let reused = records.iter().find(|r| r["type"] == "TaskReused" && r["task"] == task);
        let reused = reused.unwrap_or_else(|| panic!("{task} is reused: {records:#?}"));
        assert_eq!(reused["from"]["run"], first_run.as_str(), "{reused:#}");
    }
    assert!(second.stdout.contains("reused:   2 task outputs from the cache"), "{second}");
    assert_eq!(runner(&env, &["output", &run, "t2"]).stdout.trim(), "then after same");

    // Without --reuse and without `cache`, nothing is looked up: every task runs.
    let plain = runner(&env, &["apply", "plan.yaml", "--yes"]);
    let records = env.records(&run_id(&plain.stdout));
    assert_eq!(records.iter().filter(|r| r["type"] == "TaskDispatched").count(), 3);
    assert!(records[0].get("cache_reuse").is_none(), "a run without --reuse records none: {:#}", records[0]);
}

#[test]
fn a_resumed_run_looks_tasks_up_as_the_run_was_told_to() {
    let env = Env::new();
    env.write("plan.yaml", &support::review_plan());
    let through = |args: &[&str]| {
        let out = runner(&env, args);
        let run = run_id(&out.stdout);
        assert_eq!(out.code, Some(3), "the run pauses for the review: {out}");
        assert_eq!(runner(&env, &["approve", &run, "approve"]).code, Some(0));
        let resumed = runner(&env, &["resume", &run]);
        assert_eq!(resumed.code, Some(0), "{resumed}");
        run
    };
    let first = through(&["apply", "plan.yaml", "--yes"]);
    // With --reuse, `publish` is below a review, so it is decided after the pause, by the
    // process that resumes the run: it reads how to reuse from the run's log.
    let second = through(&["apply", "plan.yaml", "--yes", "--reuse"]);
    let records = env.records(&second);
    let dispatched: Vec<&str> =
        records.iter().filter(|r| r["type"] == "TaskDispatched").filter_map(|r| r["task"].as_str()).collect();
    assert!(dispatched.is_empty(), "draft and publish come from the cache: {dispatched:?}");
    let publish = records.iter().find(|r| r["type"] == "TaskReused" && r["task"] == "publish");
    assert_eq!(publish.map(|r| &r["from"]["run"]), Some(&Value::from(first.as_str())), "{records:#?}");
}
