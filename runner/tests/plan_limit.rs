//! `RUNNER_MAX_PLAN_BYTES`: the cap on a plan's size, raised or lowered for every command that
//! loads a plan, clamped at the most a plan can have, and refused with exit 2 when malformed.

mod support;

use serde_json::Value;
use support::{Env, plan};

const VARIABLE: &str = "RUNNER_MAX_PLAN_BYTES";

/// A valid plan padded with a trailing comment to exactly `size` bytes.
fn plan_of(size: usize) -> String {
    let mut text = plan("sized", "    echo: {runtime: mock}", "    - {id: a, agent: echo, input: hi}");
    text.push_str("# ");
    assert!(text.len() < size, "the plan alone is {} bytes", text.len());
    text.push_str(&"x".repeat(size - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), size);
    text
}

/// Runs `runner ARGS` with the variable set to `limit`: (exit code, stdout, stderr).
fn runner(env: &Env, limit: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = env.runner().env(VARIABLE, limit).args(args).output().expect("runner runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "runner panicked:\n{stderr}");
    (output.status.code(), text(&output.stdout), stderr)
}

/// The codes of `runner validate --format json`'s diagnostics.
fn codes(stdout: &str) -> Vec<String> {
    let report: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let diagnostics = report["diagnostics"].as_array().cloned().unwrap_or_default();
    diagnostics.iter().filter_map(|d| d["code"].as_str().map(str::to_owned)).collect()
}

#[test]
fn a_plan_at_a_small_cap_loads_and_one_byte_over_it_is_too_large() {
    let env = Env::new();
    env.write("at.yaml", &plan_of(1000));
    env.write("over.yaml", &plan_of(1001));

    let (code, stdout, stderr) = runner(&env, "1000", &["validate", "at.yaml", "--format", "json"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(codes(&stdout), Vec::<String>::new());

    let (code, stdout, _) = runner(&env, "1000", &["validate", "over.yaml", "--format", "json"]);
    assert_eq!(code, Some(2));
    assert_eq!(codes(&stdout), ["plan::too_large"]);
    assert!(stdout.contains("the plan is 1001 bytes; plans are limited to 1000 bytes"), "{stdout}");

    let (code, human, _) = runner(&env, "1000", &["validate", "over.yaml"]);
    assert_eq!(code, Some(2));
    assert!(
        human.contains("plan::too_large") && human.contains("RUNNER_MAX_PLAN_BYTES"),
        "the help says how:\n{human}"
    );

    // Every command that loads a plan reads the variable.
    for args in [&["critic", "over.yaml"][..], &["graph", "over.yaml"], &["apply", "over.yaml", "--yes"]] {
        let (code, stdout, stderr) = runner(&env, "1000", args);
        assert_eq!(code, Some(2), "{args:?}:\n{stdout}{stderr}");
        assert!(format!("{stdout}{stderr}").contains("too_large"), "{args:?}:\n{stdout}{stderr}");
    }
    let (code, stdout, stderr) = runner(&env, "1kb", &["apply", "at.yaml", "--yes"]);
    assert_eq!(code, Some(0), "1kb is 1000 bytes:\n{stdout}{stderr}");
}

#[test]
fn the_cap_can_be_raised_past_32_mib() {
    let env = Env::new();
    env.write("big.yaml", &plan_of(33 << 20));
    let (code, stdout, _) = runner(&env, "", &["validate", "big.yaml", "--format", "json"]);
    assert_eq!((code, codes(&stdout)), (Some(2), vec!["plan::too_large".to_owned()]), "an empty value is the default");
    let (code, stdout, stderr) = runner(&env, "64MiB", &["validate", "big.yaml", "--format", "json"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
}

#[test]
fn a_cap_over_4_gib_is_clamped_with_a_warning() {
    let env = Env::new();
    env.write("at.yaml", &plan_of(1000));
    let (code, _, stderr) = runner(&env, "8GiB", &["validate", "at.yaml"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("plans are capped at 4294967295 bytes"), "{stderr}");
}

#[test]
fn a_malformed_cap_is_a_usage_error_for_the_commands_that_load_plans() {
    let env = Env::new();
    env.write("at.yaml", &plan_of(1000));
    for value in ["12QB", "1.5GiB", "lots", "-1"] {
        let (code, stdout, stderr) = runner(&env, value, &["validate", "at.yaml"]);
        assert_eq!(code, Some(2), "{value}: {stderr}");
        assert!(stdout.is_empty(), "{value}: {stdout}");
        assert!(stderr.contains(&format!("{VARIABLE}=\"{value}\" is not a byte count")), "{value}: {stderr}");
        assert!(stderr.contains("128MiB"), "the message shows a good value: {stderr}");
    }
    let (code, _, stderr) = runner(&env, "0", &["validate", "at.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("allows no plan at all"), "{stderr}");

    let (code, _, stderr) = runner(&env, "12QB", &["runs"]);
    assert_eq!(code, Some(0), "a command that loads no plan ignores it: {stderr}");
}
