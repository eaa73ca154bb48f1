//! `runner test` where it once said something other than `runner apply`: a rejected review that
//! ends the run, `command` verifications however the scenario is named, a reviewer whose replies
//! follow attempts, scripted token usage, a scenario's strategy, finding codes that do not
//! exist, and a folder of scenarios that always ends with a whole report.

mod shipped;

use std::path::Path;

use shipped::runner;

/// Writes `files` (name, text) into a new folder.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("writes a fixture");
    }
    dir
}

/// Runs `runner test ARGS` from `dir` with an empty RUNNER_HOME; exit code, stdout and stderr.
fn test_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("a temp dir");
    let output =
        runner().current_dir(dir).env("RUNNER_HOME", home.path()).arg("test").args(args).output().expect("runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
    (output.status.code().expect("an exit code"), text(output.stdout), text(output.stderr))
}

const REVIEWED: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: reviewed}
spec:
  agent_definitions:
    writer: {runtime: mock, default: the draft}
  workflow:
    - {id: draft, agent: writer, input: Write.}
    - id: approve_x
      type: human_review
      depends_on: [draft]
      prompt: 'Publish? {{ tasks.draft.output }}'
    - {id: publish, agent: writer, input: 'Publish {{ tasks.draft.output }}', depends_on: [approve_x]}
";

#[test]
fn a_rejected_review_that_ends_the_run_is_a_result_whose_expectations_are_checked() {
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: rejected}\nspec:\n  plan: reviewed.yaml\n  \
                    reviews: {approve_x: {approve: false, comment: 'no'}}\n  expect:\n    status: failed\n    tasks:\n      \
                    approve_x: {status: failed}\n      publish: {status: pending}\n";
    let dir = folder(&[("reviewed.yaml", REVIEWED), ("rejected.test.yaml", scenario)]);
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("ok   rejected ("), "{stdout}");
    // The expectations are checked, not skipped: a wrong one fails.
    let wrong = scenario.replace("status: failed\n    tasks", "status: succeeded\n    tasks");
    std::fs::write(dir.path().join("rejected.test.yaml"), wrong).expect("writes");
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("status: expected succeeded") && stdout.contains("actual failed"), "{stdout}");
}

const CHECKED: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: checked}
spec:
  agent_definitions:
    writer: {runtime: mock, default: hello world}
    slow: {runtime: mock, latency: 2m}
  workflow:
    - id: draft
      agent: writer
      input: Write.
      verification: {type: command, command: [sh, -c, 'sleep 0.2; grep -q hello']}
    - {id: wait, agent: slow, input: Wait.}
";

const CHECKED_TEST: &str = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: checked}\nspec:\n  plan: \
                            checked.yaml\n  expect:\n    status: succeeded\n    makespan: 2m\n    tasks:\n      draft: \
                            {status: succeeded, attempts: 1}\n";

#[test]
fn a_command_verification_runs_however_the_scenario_is_named_and_holds_the_virtual_clock() {
    let dir = folder(&[("checked.yaml", CHECKED), ("checked.test.yaml", CHECKED_TEST)]);
    let absolute = dir.path().join("checked.test.yaml");
    for name in ["checked.test.yaml", "./checked.test.yaml", absolute.to_str().expect("a UTF-8 path")] {
        let (code, stdout, stderr) = test_in(dir.path(), &[name]);
        // While the program runs, the paused clock must not jump to the 2m latency (nor to
        // the check's own 60s timeout), so the check passes and the makespan is the latency's.
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
        assert!(stdout.contains("ok   checked (") && stdout.contains(", 120s virtual)"), "{name}: {stdout}");
    }
    // The program runs in the plan's folder, as under `runner apply`, wherever the scenario is.
    let nested = folder(&[]);
    std::fs::create_dir(nested.path().join("plans")).expect("a folder");
    let reads_file = CHECKED.replace("sleep 0.2; grep -q hello", "test -f marker && grep -q hello");
    std::fs::write(nested.path().join("plans/checked.yaml"), reads_file).expect("writes");
    std::fs::write(nested.path().join("plans/marker"), "").expect("writes");
    let scenario = CHECKED_TEST.replace("plan: checked.yaml", "plan: plans/checked.yaml");
    std::fs::write(nested.path().join("checked.test.yaml"), scenario).expect("writes");
    let (code, stdout, _) = test_in(nested.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn a_folder_of_thirty_scenarios_with_command_checks_ends_with_a_whole_report() {
    let mut files =
        vec![("checked.yaml".to_owned(), CHECKED.to_owned()), ("reviewed.yaml".to_owned(), REVIEWED.to_owned())];
    for i in 0..15 {
        files.push((format!("c{i}.test.yaml"), CHECKED_TEST.replace("name: checked}", &format!("name: c{i}}}"))));
        let rejected = format!(
            "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: r{i}}}\nspec:\n  plan: reviewed.yaml\n  reviews: \
             {{approve_x: {{approve: false}}}}\n  expect: {{status: failed}}\n"
        );
        files.push((format!("r{i}.test.yaml"), rejected));
    }
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let dir = folder(&borrowed);
    let (code, stdout, stderr) = test_in(dir.path(), &["."]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.ends_with("30 passed, 0 failed\n"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok   ")).count(), 30, "{stdout}");
}

#[test]
fn a_reviewers_scripted_verdicts_follow_the_tasks_attempts() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: judged}\nspec:\n  agent_definitions:\n    writer: \
                {runtime: mock}\n    judge: {runtime: mock}\n  workflow:\n    - id: draft\n      agent: writer\n      \
                input: Write.\n      on_failure: {action: retry, max_attempts: 3, backoff: 1s}\n      verification: {type: \
                llm_reviewer, agent: judge}\n";
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: judged}\nspec:\n  plan: judged.yaml\n  \
                    overrides:\n    agents:\n      writer: {replies: [first, second]}\n      judge:\n        replies:\n          \
                    - {json: {pass: false, reason: too short}}\n          - {json: {pass: true, reason: fine}}\n  expect:\n    \
                    status: succeeded\n    tasks:\n      draft: {status: succeeded, attempts: 2, output: {equals: \
                    second}}\n";
    let dir = folder(&[("judged.yaml", plan), ("judged.test.yaml", scenario)]);
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn scripted_token_usage_counts_as_a_servers_and_trips_the_budget() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: metered}\nspec:\n  control_logic: {token_budget: \
                1000}\n  agent_definitions:\n    writer: {runtime: mock}\n  workflow:\n    - {id: first, agent: writer, \
                input: One.}\n    - {id: second, agent: writer, input: Two., depends_on: [first]}\n";
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: metered}\nspec:\n  plan: metered.yaml\n  \
                    overrides:\n    agents:\n      writer: {replies: [{output: done, tokens: {prompt: 700, completion: \
                    400}}]}\n  expect:\n    tasks:\n      first: {status: succeeded}\n      second: {status: skipped}\n    \
                    events:\n      - {type: BudgetExhausted}\n      - {type: TaskDispatched, task: second, absent: true}\n";
    let dir = folder(&[("metered.yaml", plan), ("metered.test.yaml", scenario)]);
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
    // Without the stated usage the budget is never reached and the second task runs.
    let unmetered = scenario.replace(", tokens: {prompt: 700, completion: 400}", "");
    std::fs::write(dir.path().join("metered.test.yaml"), unmetered).expect("writes");
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 1, "{stdout}");
}

#[test]
fn a_scenario_chooses_the_strategy_as_apply_does() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: pair}\nspec:\n  agent_definitions:\n    slow: \
                {runtime: mock, latency: 10s}\n  workflow:\n    - {id: a, agent: slow, input: A.}\n    - {id: b, agent: \
                slow, input: B.}\n";
    let scenario = |strategy: &str, makespan: &str| {
        format!(
            "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: pair}}\nspec:\n  plan: pair.yaml\n{strategy}  \
             expect:\n    makespan: {makespan}\n"
        )
    };
    let eager = scenario("", "10s");
    let sequential = scenario("  strategy: sequential\n", "20s");
    let dir = folder(&[("pair.yaml", plan), ("eager.test.yaml", &eager), ("sequential.test.yaml", &sequential)]);
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("10s virtual") && stdout.contains("20s virtual"), "{stdout}");
    let wrong = scenario("  strategy: sequential\n", "10s");
    std::fs::write(dir.path().join("sequential.test.yaml"), wrong).expect("writes");
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 1, "a sequential run takes 20s, over the 10s expected: {stdout}");
}

#[test]
fn a_finding_code_that_does_not_exist_is_a_located_error() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: one}\nspec:\n  agent_definitions:\n    m: {runtime: \
                mock}\n  workflow:\n    - {id: a, agent: m, input: A.}\n";
    let scenario = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: codes}\nspec:\n  plan: one.yaml\n  expect:\n    \
                    critic:\n      reported: [critic::single_point_of_failur]\n      not_reported: [critic::spof]\n";
    let dir = folder(&[("one.yaml", plan), ("codes.test.yaml", scenario)]);
    let (code, stdout, _) = test_in(dir.path(), &[]);
    assert_eq!(code, 2, "{stdout}");
    for wanted in [
        "test::unknown_finding",
        "the critic has no finding `critic::single_point_of_failur`",
        "codes.test.yaml:8:18",
        "did you mean `critic::single_point_of_failure`?",
        "the critic has no finding `critic::spof`",
    ] {
        assert!(stdout.contains(wanted), "`{wanted}` missing:\n{stdout}");
    }
}
