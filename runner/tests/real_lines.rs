//! A small model writing plans a line at a time on the real server of
//! `scripts/llama-server.sh` (llama-cpp-python serving SmolLM2-135M), when `RUNNER_LLAMA_URL`
//! names it: with its answers held to the line schema (`--schema-dialect json_object`, the
//! dialect `runner probe` finds working there), the model's own plan validates for at least
//! eight of the ten requests docs/planning.md lists, instead of falling back to the rules.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::Env;
use testkit::{JSON_MODEL, real_server};

/// The ten requests of docs/planning.md ("Small models and schema constraints").
const REQUESTS: [&str; 10] = [
    "Fetch the sales figures, summarise them, then write a report for the board.",
    "Research three competitors and compare their pricing in a table.",
    "Read the error logs, find the three most common errors, and suggest a fix for each.",
    "Draft a blog post about our new feature, then have it reviewed before publishing.",
    "Collect customer feedback from the survey, group it by theme, and write a summary.",
    "Translate the README into French and Spanish.",
    "Check the website for broken links and list them.",
    "Plan a team offsite: pick a venue, draft an agenda, and estimate the budget.",
    "Summarise the last five research papers on retrieval augmented generation.",
    "Write unit tests for the payment module, then run them and report failures.",
];

/// The agents the plans may use.
const TEMPLATE: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: agents}\nspec:\n  \
    mission: agents for small-model plans\n  agent_definitions:\n    researcher: {runtime: mock}\n    \
    writer: {runtime: mock}\n    reviewer: {runtime: mock}\n  workflow:\n    - {id: placeholder, agent: writer, input: x}\n";

/// The longest one `runner plan` may take before the test gives up on it: a bound, not a
/// measurement.
const BOUND: Duration = Duration::from_secs(600);

fn bounded(mut command: Command) -> Output {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("runner starts");
    loop {
        if child.try_wait().expect("the child can be polled").is_some() {
            return child.wait_with_output().expect("its output is read");
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            panic!("{command:?} did not end within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn with_schema_constraints_smollm2_writes_plans_that_validate_for_eight_of_ten_requests() {
    let Some(server) = real_server("with_schema_constraints_smollm2_writes_plans_that_validate") else { return };
    let env = Env::new();
    env.write("agents.yaml", TEMPLATE);
    let mut written = Vec::new();
    for (n, request) in REQUESTS.iter().enumerate() {
        let file = format!("plan-{n}.yaml");
        let mut command = env.runner_process();
        command.args(["plan", request, "--provider", &server.url, "--model", JSON_MODEL, "--template", "agents.yaml"]);
        command.args(["--lines", "--schema-dialect", "json_object", "--temperature", "0", "--timeout", "300s"]);
        command.args(["-o", &file]);
        let output = bounded(command);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "a plan is written, by the model or the rules: {stderr}");
        let by_model = !stderr.contains("falling back to the deterministic planner");
        let validate = env.runner_process().args(["validate", &file]).output().expect("runner validate runs");
        let valid = validate.status.success();
        eprintln!("{n}: {request}\n   by the model: {by_model}, valid: {valid}");
        if by_model && valid {
            written.push(n);
        }
    }
    eprintln!("the model's own plan validated for {} of 10 requests: {written:?}", written.len());
    assert!(written.len() >= 8, "only {written:?} of the ten requests got a valid plan from the model");
}
