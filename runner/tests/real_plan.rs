//! `runner probe` and `runner plan` against the real server of `scripts/llama-server.sh`
//! (llama-cpp-python serving SmolLM2-135M as `smollm2-tools` and `smollm2`), when
//! `RUNNER_LLAMA_URL` names it: what the probe reports is true, and a model-written plan ends
//! within a bound with prompts that fit the window and a plan that validates.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Env;
use testkit::{FakeOpenAi, JSON_MODEL, Step, TOOLS_MODEL, real_server};

/// The longest a command against the real server may take before the test gives up on it:
/// a bound on the test, not a measurement.
const BOUND: Duration = Duration::from_secs(900);

/// Runs `command` to its end, killing it and failing the test past [`BOUND`].
fn bounded(mut command: Command) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("runner starts");
    loop {
        if child.try_wait().expect("the child can be polled").is_some() {
            return (child.wait_with_output().expect("its output is read"), started.elapsed());
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            panic!("{command:?} did not end within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Whether the probe's tool request carries `tool_choice`, seen on a fake server: this
/// llama-cpp-python returns `tool_calls` from `smollm2-tools` only when it does.
fn probe_sends_tool_choice() -> bool {
    let fake = FakeOpenAi::start(|_, _| Step::Answer("{}".to_owned()));
    let env = Env::new();
    let mut command = env.runner_process();
    command.args(["probe", &fake.base_url(), "--model", "m", "--format", "json"]);
    let (output, _) = bounded(command);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let requests = fake.requests();
    let tool_request = requests.iter().find(|r| r.body.get("tools").is_some()).expect("a tool request was sent");
    tool_request.body.get("tool_choice").is_some_and(|choice| !choice.is_null() && choice != "none")
}

#[test]
fn probe_tells_the_truth_about_the_real_server() {
    let Some(server) = real_server("probe_tells_the_truth_about_the_real_server") else { return };
    let env = Env::new();
    let mut command = env.runner_process();
    command.args(["probe", &server.url, "--model", TOOLS_MODEL, "--model", JSON_MODEL, "--format", "json"]);
    command.args(["--timeout", "300s"]);
    let (output, took) = bounded(command);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let report = json(&output);
    eprintln!("runner probe {} ({took:?}):\n{report:#}", server.url);
    let served: Vec<&str> =
        report["served"].as_array().expect("the server lists its models").iter().filter_map(Value::as_str).collect();
    assert!(served.contains(&TOOLS_MODEL) && served.contains(&JSON_MODEL), "{served:?}");
    let tried = |model: &str| {
        report["models"]
            .as_array()
            .and_then(|models| models.iter().find(|m| m["model"] == model))
            .cloned()
            .expect("probed")
    };
    let (tools_model, json_model) = (tried(TOOLS_MODEL), tried(JSON_MODEL));
    for model in [&tools_model, &json_model] {
        assert_eq!(model["listed"], true);
        // llama-cpp-python lists only ids, so the window is unknown (its real one is 8192).
        assert_eq!(model["context_window"], Value::Null, "{model}");
    }
    assert_eq!(json_model["json_mode"]["works"], true, "JSON mode works with the model's own template: {json_model}");
    assert_eq!(json_model["tool_calls"]["works"], false, "the model's own template never calls tools: {json_model}");
    assert_eq!(
        tools_model["tool_calls"]["works"],
        probe_sends_tool_choice(),
        "the function-calling format calls tools exactly when asked with tool_choice: {tools_model}"
    );
}

#[test]
fn a_model_writes_a_plan_on_the_real_server_within_its_window() {
    let Some(server) = real_server("a_model_writes_a_plan_on_the_real_server_within_its_window") else { return };
    let env = Env::new();
    let mut command = env.runner_process();
    command.args(["plan", "Write a haiku about tea, then translate it to French.", "--provider", &server.url]);
    command.args(["--model", JSON_MODEL, "--temperature", "0", "--timeout", "300s", "-o", "plan.yaml"]);
    let (output, took) = bounded(command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("runner plan on {} took {took:?}:\n{stderr}", server.url);
    assert_eq!(output.status.code(), Some(0), "a plan is written, by the model or the rules: {stderr}");
    let validate = env.runner_process().args(["validate", "plan.yaml"]).output().expect("runner validate runs");
    assert_eq!(validate.status.code(), Some(0), "{}", String::from_utf8_lossy(&validate.stdout));
    let plans: Vec<_> = std::fs::read_dir(env.home().join("plans")).expect("plans").flatten().collect();
    assert_eq!(plans.len(), 1);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(plans[0].path().join("provenance.json")).expect("provenance"))
            .expect("JSON");
    assert_eq!(record["context_windows"][JSON_MODEL]["tokens"], 8192, "{record}");
    let attempts = record["attempts"].as_array().expect("attempts");
    assert!(!attempts.is_empty(), "the model was asked: {record}");
    for attempt in attempts {
        let detail = attempt["detail"].as_str().unwrap_or("");
        assert!(!detail.contains("exceed") && !detail.contains("context_length"), "a prompt overflowed: {attempt}");
    }
}
