//! Every expectation kind of a plan test, once met and once not: the met one passes (exit 0),
//! the other fails (exit 1) with a message that says what was expected, what happened and the
//! events around it (snapshots).

mod shipped;

use shipped::runner;

/// A two-task plan: `fetch` fails once, is retried after a 30 s backoff, then returns JSON;
/// `write` echoes its input, which holds `fetch`'s output.
const PLAN: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: fixture}
spec:
  agent_definitions:
    stub: {runtime: mock}
  workflow:
    - id: fetch
      agent: stub
      input: fetch the data
      on_failure: {action: retry, max_attempts: 3, backoff: 30s}
    - id: write
      agent: stub
      input: \"write from {{ tasks.fetch.output }}\"
      depends_on: [fetch]
";

const SCENARIO: &str = "apiVersion: runner/v1
kind: PlanTest
metadata: {name: kind}
spec:
  plan: plan.yaml
  overrides:
    agents:
      stub: {latency: 1s}
    tasks:
      fetch:
        replies: [{fail: HTTP 503}, {json: {rows: 3, source: db}}]
  expect:
";

/// Each expectation kind: its name, an `expect:` body the run meets, and one it does not.
const KINDS: [(&str, &str, &str); 17] = [
    ("status", "status: succeeded", "status: failed"),
    ("task_status", "tasks: {fetch: {status: succeeded}}", "tasks: {fetch: {status: skipped}}"),
    ("attempts", "tasks: {fetch: {attempts: 2}}", "tasks: {fetch: {attempts: 1}}"),
    (
        "output_equals",
        "tasks: {write: {output: {equals: 'write from {\"rows\":3,\"source\":\"db\"}'}}}",
        "tasks: {write: {output: {equals: nothing}}}",
    ),
    ("output_contains", "tasks: {write: {output: {contains: rows}}}", "tasks: {write: {output: {contains: columns}}}"),
    (
        "output_matches",
        "tasks: {write: {output: {matches: 'rows\":[0-9]+'}}}",
        "tasks: {write: {output: {matches: '^columns'}}}",
    ),
    (
        "output_pointer",
        "tasks: {fetch: {output: {pointer: /rows, value: 3}}}",
        "tasks: {fetch: {output: {pointer: /rows, value: 4}}}",
    ),
    ("event_present", "events: [{type: RetryScheduled, task: fetch}]", "events: [{type: Replanned}]"),
    (
        "event_absent",
        "events: [{type: Replanned, absent: true}]",
        "events: [{type: RetryScheduled, task: fetch, absent: true}]",
    ),
    (
        "order",
        "order: [{type: TaskFailed, task: fetch}, {type: TaskSucceeded, task: fetch}, {type: TaskSucceeded, task: write}]",
        "order: [{type: TaskSucceeded, task: write}, {type: TaskFailed, task: fetch}]",
    ),
    ("max_tokens", "max_tokens: 1000", "max_tokens: 5"),
    ("max_prompt_tokens", "tasks: {write: {max_prompt_tokens: 100}}", "tasks: {write: {max_prompt_tokens: 3}}"),
    ("min_prompt_tokens", "tasks: {write: {min_prompt_tokens: 3}}", "tasks: {write: {min_prompt_tokens: 1000}}"),
    ("makespan", "makespan: 1m", "makespan: 10s"),
    (
        "critic_reported",
        "critic: {reported: [critic::single_point_of_failure]}",
        "critic: {reported: [critic::wide_fan_in]}",
    ),
    (
        "critic_not_reported",
        "critic: {not_reported: [critic::wide_fan_in]}",
        "critic: {not_reported: [critic::single_point_of_failure]}",
    ),
    ("several", "status: succeeded\n    tasks: {write: {status: succeeded}}", "status: partial\n    max_tokens: 1"),
];

/// Runs one scenario with `expect` as its expectations; the exit code and stdout.
fn run(expect: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("plan.yaml"), PLAN).expect("writes the plan");
    std::fs::write(dir.path().join("kind.test.yaml"), format!("{SCENARIO}    {expect}\n"))
        .expect("writes the scenario");
    let output = runner()
        .current_dir(dir.path())
        .env("RUNNER_HOME", dir.path().join("home"))
        .args(["test", "kind.test.yaml"])
        .output()
        .expect("runs");
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    (output.status.code().expect("an exit code"), String::from_utf8(output.stdout).expect("UTF-8"))
}

#[test]
fn every_expectation_kind_passes_when_met() {
    for (kind, met, _) in KINDS {
        let (code, stdout) = run(met);
        assert_eq!(code, 0, "{kind} should pass:\n{stdout}");
        assert!(stdout.ends_with("1 passed, 0 failed\n"), "{kind}:\n{stdout}");
    }
}

#[test]
fn every_expectation_kind_fails_readably_when_not_met() {
    for (kind, _, unmet) in KINDS {
        let (code, stdout) = run(unmet);
        assert_eq!(code, 1, "{kind} should fail:\n{stdout}");
        insta::assert_snapshot!(format!("fails_{kind}"), stdout);
    }
}
