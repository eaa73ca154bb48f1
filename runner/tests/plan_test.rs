//! `runner test`: the challenge folder passes as a whole, each good plan's expectations fail
//! against its naive variant, reports come in three formats, bad scenario files are located
//! errors with exit 2, and runs leave nothing under RUNNER_HOME unless `--keep`.

mod shipped;

use std::path::Path;

use shipped::{repo_root, runner};

const CHALLENGES: [&str; 7] = [
    "blind-alley",
    "data-flood",
    "unreliable-witness",
    "deep-chain",
    "partial-failure",
    "careful-janitor",
    "unknown-width",
];

/// Runs `runner test ARGS` from `dir` with RUNNER_HOME in `home`; exit code and stdout.
fn test_in(dir: &Path, home: &Path, args: &[&str]) -> (i32, String) {
    let output = runner().current_dir(dir).env("RUNNER_HOME", home).arg("test").args(args).output().expect("runs");
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty() || output.status.code() == Some(2), "{stderr}");
    (output.status.code().expect("an exit code"), stdout)
}

#[test]
fn the_challenge_folder_passes_as_a_whole_and_leaves_no_run() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) = test_in(&repo_root(), home.path(), &["examples/challenges"]);
    assert_eq!(code, 0, "{stdout}");
    let scenarios = CHALLENGES.len() * 2;
    assert!(stdout.ends_with(&format!("{scenarios} passed, 0 failed\n")), "{stdout}");
    for name in CHALLENGES {
        assert!(stdout.contains(&format!("ok   {name} (")), "{name} did not pass:\n{stdout}");
        assert!(stdout.contains(&format!("ok   {name}-naive (")), "{name}-naive did not pass:\n{stdout}");
    }
    assert_eq!(std::fs::read_dir(home.path()).expect("home exists").count(), 0, "the runs left files");
}

#[test]
fn each_good_plans_expectations_fail_against_its_naive_variant() {
    let home = tempfile::tempdir().expect("a temp dir");
    let dir = tempfile::tempdir().expect("a temp dir");
    let challenges = repo_root().join("examples/challenges");
    for name in CHALLENGES {
        let scenario = std::fs::read_to_string(challenges.join(format!("{name}.test.yaml"))).expect("the scenario");
        let naive = challenges.join(format!("naive/{name}.yaml"));
        let swapped = scenario.replace(&format!("plan: {name}.yaml"), &format!("plan: {}", naive.display()));
        assert_ne!(swapped, scenario, "{name}: the scenario names its plan as `plan: {name}.yaml`");
        let file = dir.path().join(format!("{name}.test.yaml"));
        std::fs::write(&file, swapped).expect("writes the scenario");
        let (code, stdout) = test_in(dir.path(), home.path(), &[file.to_str().expect("a UTF-8 path")]);
        // Either an expectation fails (1), or the naive plan lacks the very task the good plan's
        // scenario scripts or expects (the reviewer, the gate): a located error (2).
        let lacks_safeguard = code == 2 && stdout.contains("test::unknown_target");
        assert!(
            code == 1 || lacks_safeguard,
            "{name}: the good plan's expectations held against the naive plan:\n{stdout}"
        );
        if code == 1 {
            assert!(stdout.contains(&format!("FAIL {name} (")), "{stdout}");
        }
    }
}

#[test]
fn junit_lists_each_scenario_as_a_testcase() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) = test_in(&repo_root(), home.path(), &["examples/challenges", "--format", "junit"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("<?xml"), "{stdout}");
    let scenarios = CHALLENGES.len() * 2;
    assert_eq!(stdout.matches("<testcase ").count(), scenarios, "{stdout}");
    let suite = format!("<testsuite name=\"runner test\" tests=\"{scenarios}\" failures=\"0\" errors=\"0\">");
    assert!(stdout.contains(&suite), "{stdout}");
}

#[test]
fn json_reports_each_outcome_and_the_counts() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) = test_in(&repo_root(), home.path(), &["examples/challenges", "--format", "json"]);
    assert_eq!(code, 0, "{stdout}");
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(document["passed"], CHALLENGES.len() * 2);
    assert_eq!(document["failed"], 0);
    let scenarios = document["scenarios"].as_array().expect("a list of scenarios");
    assert!(scenarios.iter().all(|s| s["outcome"] == "passed" && s["makespan_ms"].is_u64()), "{document:#}");
}

#[test]
fn filter_runs_only_matching_scenarios() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) = test_in(&repo_root(), home.path(), &["examples/challenges", "--filter", "deep-chain"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.ends_with("2 passed, 0 failed\n"), "{stdout}");
}

#[test]
fn keep_leaves_each_run_under_runner_home() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) =
        test_in(&repo_root(), home.path(), &["examples/challenges", "--filter", "blind-alley", "--keep"]);
    assert_eq!(code, 0, "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(home.path().join("runs")).expect("runs were kept").collect();
    assert_eq!(runs.len(), 2, "{stdout}");
    assert!(stdout.contains("kept as run `test-blind-alley-"), "{stdout}");
}

/// A scenario folder with a valid two-task mock plan and one scenario file.
fn fixture(scenario: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: pair}\nspec:\n  agent_definitions:\n    \
                stub: {runtime: mock}\n  workflow:\n    - {id: first, agent: stub, input: one}\n    \
                - {id: second, agent: stub, input: two, depends_on: [first]}\n";
    std::fs::write(dir.path().join("plan.yaml"), plan).expect("writes the plan");
    std::fs::write(dir.path().join("bad.test.yaml"), scenario).expect("writes the scenario");
    dir
}

const HEAD: &str = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: bad}\nspec:\n  plan: plan.yaml\n";

#[test]
fn bad_scenario_files_are_located_errors_with_exit_2() {
    let cases = [
        (
            "  overrides:\n    agents:\n      stubb: {replies: [x]}\n",
            "test::unknown_target",
            "bad.test.yaml:8:7",
            "did you mean `stub`?",
        ),
        ("  expect:\n    statuss: succeeded\n", "plan::unknown_field", "bad.test.yaml:7:5", "did you mean `status`?"),
        (
            "  expect:\n    events: [{type: TaskExploded}]\n",
            "plan::invalid_value",
            "bad.test.yaml:7:21",
            "TaskExploded",
        ),
        (
            "  expect:\n    tasks:\n      third: {status: succeeded}\n",
            "test::unknown_target",
            "bad.test.yaml:8:7",
            "third",
        ),
    ];
    let home = tempfile::tempdir().expect("a temp dir");
    for (spec, code, place, text) in cases {
        let dir = fixture(&format!("{HEAD}{spec}"));
        let (exit, stdout) = test_in(dir.path(), home.path(), &[]);
        assert_eq!(exit, 2, "{stdout}");
        for wanted in [code, place, text, "0 passed, 0 failed, 1 invalid"] {
            assert!(stdout.contains(wanted), "`{wanted}` missing for {spec:?}:\n{stdout}");
        }
    }
}

#[test]
fn a_scenario_over_a_plan_with_errors_is_a_located_error_listing_them() {
    let home = tempfile::tempdir().expect("a temp dir");
    let dir = fixture(HEAD);
    std::fs::write(
        dir.path().join("plan.yaml"),
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: p}\nspec:\n  workflow:\n    - {id: a, agent: nobody}\n",
    )
    .expect("writes");
    let (exit, stdout) = test_in(dir.path(), home.path(), &["bad.test.yaml"]);
    assert_eq!(exit, 2, "{stdout}");
    for wanted in ["test::plan_invalid", "bad.test.yaml:5:9", "plan::unknown_agent", "plan.yaml:6:22"] {
        assert!(stdout.contains(wanted), "`{wanted}` missing:\n{stdout}");
    }
}

/// The events of every run kept under `home`, without the run ids, which differ, and the
/// checksums, which sum them.
fn kept_events(home: &Path) -> Vec<String> {
    let mut logs = Vec::new();
    for run in std::fs::read_dir(home.join("runs")).expect("runs were kept") {
        let log = std::fs::read_to_string(run.expect("a run").path().join("events.jsonl")).expect("a log");
        let lines: Vec<String> = log
            .lines()
            .map(|line| {
                let mut record: serde_json::Value = serde_json::from_str(line).expect("a JSON record");
                let fields = record.as_object_mut().expect("a record is an object");
                fields.remove("run_id");
                fields.remove("crc");
                record.to_string()
            })
            .collect();
        logs.push(lines.join("\n"));
    }
    logs
}

#[test]
fn a_scenario_of_over_ten_virtual_minutes_gives_the_same_events_every_time() {
    let home = tempfile::tempdir().expect("a temp dir");
    for _ in 0..20 {
        let (code, stdout) = test_in(
            &repo_root(),
            home.path(),
            &["runner/tests/scenarios/long.test.yaml", "--format", "json", "--keep"],
        );
        assert_eq!(code, 0, "{stdout}");
        let document: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
        let makespan = document["scenarios"][0]["makespan_ms"].as_u64().expect("a makespan");
        assert!(makespan > 600_000, "the scenario takes {makespan} ms of virtual time, not over ten minutes");
    }
    let logs = kept_events(home.path());
    assert_eq!(logs.len(), 20);
    assert!(logs.iter().all(|log| log == &logs[0]), "the runs' events differ");
    assert!(logs[0].contains("\"at\":\"2026-01-01T00:12:"), "records carry virtual time from the fixed epoch");
}

#[test]
fn a_request_is_planned_by_the_deterministic_planner_and_tested_like_a_plan() {
    let home = tempfile::tempdir().expect("a temp dir");
    let (code, stdout) = test_in(&repo_root(), home.path(), &["runner/tests/scenarios/request.test.yaml"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("ok   planned-blind-alley ("), "{stdout}");
    let dir = tempfile::tempdir().expect("a temp dir");
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: r}\nspec:\n  request: Research the company \
                    XyzzyCorp\n  overrides:\n    agents:\n      researcher: {replies: [x]}\n";
    std::fs::write(dir.path().join("r.test.yaml"), scenario).expect("writes");
    let (code, stdout) = test_in(dir.path(), home.path(), &[]);
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("plan `r` has no agent `researcher`"), "{stdout}");
}

/// A scenario over a request, and a fake model server that answers every planning request with
/// a two-task plan (`find` by `searcher`, then `report`).
fn model_planned() -> (tempfile::TempDir, testkit::FakeOpenAi) {
    let plan = serde_json::json!({
        "apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "authored"},
        "spec": {
            "mission": "Research XyzzyCorp",
            "agent_definitions": {"searcher": {"runtime": "mock"}, "writer": {"runtime": "mock"}},
            "workflow": [
                {"id": "find", "agent": "searcher", "input": "Search for XyzzyCorp"},
                {"id": "report", "agent": "writer", "depends_on": ["find"],
                 "input": "Write up {{ tasks.find.output }}"}
            ]
        }
    })
    .to_string();
    let server = testkit::FakeOpenAi::start(move |_, _| testkit::Step::Answer(plan.clone()));
    let dir = tempfile::tempdir().expect("a temp dir");
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: modelled}\nspec:\n  request: Research the \
                    company XyzzyCorp\n  overrides:\n    agents:\n      searcher:\n        replies: [{fail: nothing \
                    found}]\n  expect:\n    status: failed\n    tasks:\n      find: {status: failed, attempts: 1}\n      \
                    report: {status: pending}\n";
    std::fs::write(dir.path().join("modelled.test.yaml"), scenario).expect("writes");
    (dir, server)
}

#[test]
fn a_request_is_planned_by_the_model_named_and_leaves_no_trace_unless_kept() {
    let (dir, server) = model_planned();
    let home = tempfile::tempdir().expect("a temp dir");
    let base = server.base_url();
    let (code, stdout) = test_in(dir.path(), home.path(), &["--provider", &base, "--model", "planner-model"]);
    assert_eq!(code, 0, "the model's plan ran under the scenario's overrides: {stdout}");
    assert!(stdout.starts_with("ok   modelled ("), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one plan was asked for");
    assert_eq!(requests[0].body["model"], "planner-model");
    assert!(requests[0].body["messages"].to_string().contains("Research the company XyzzyCorp"), "the request is sent");
    assert_eq!(std::fs::read_dir(home.path()).expect("home exists").count(), 0, "planning left files");

    let (code, stdout) = test_in(dir.path(), home.path(), &["--provider", &base, "--model", "planner-model", "--keep"]);
    assert_eq!(code, 0, "{stdout}");
    let plans: Vec<_> = std::fs::read_dir(home.path().join("plans")).expect("plans kept").flatten().collect();
    assert_eq!(plans.len(), 1, "one plan's provenance is kept");
    let provenance = std::fs::read_to_string(plans[0].path().join("provenance.json")).expect("provenance");
    assert!(provenance.contains("\"planner\": \"llm\"") && provenance.contains("XyzzyCorp"), "{provenance}");
    assert!(home.path().join("models.json").exists(), "the model's record counts a kept plan");
}

#[test]
fn a_model_that_cannot_plan_or_a_provider_that_is_not_a_url_is_an_error_with_exit_2() {
    let (dir, _server) = model_planned();
    let home = tempfile::tempdir().expect("a temp dir");
    let asks =
        testkit::FakeOpenAi::start(|_, _| testkit::Step::Answer(r#"{"questions": ["Which XyzzyCorp?"]}"#.into()));
    let (code, stdout) = test_in(dir.path(), home.path(), &["--provider", &asks.base_url(), "--model", "m"]);
    assert_eq!(code, 2, "{stdout}");
    for wanted in ["test::request_unplanned", "modelled.test.yaml:5:12", "asked questions"] {
        assert!(stdout.contains(wanted), "`{wanted}` is missing: {stdout}");
    }
    let output = runner()
        .current_dir(dir.path())
        .env("RUNNER_HOME", home.path())
        .args(["test", "--provider", "openai", "--model", "m"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("base URL"), "{output:?}");
    assert_eq!(std::fs::read_dir(home.path()).expect("home exists").count(), 0, "nothing was written");
}
