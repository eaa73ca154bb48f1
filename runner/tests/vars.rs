//! Variables: a plan's `spec.vars` defaults, `--var NAME=VALUE` (a text) and `--var NAME:=JSON`
//! (any JSON value) over them, undeclared names and bad JSON refused with exit 2 before a run
//! exists, and plan tests' `vars` of any YAML type checked against the declared names.

mod support;

use std::path::PathBuf;

use serde_json::json;
use support::Env;

/// A fixture under `runner/tests/fixtures`.
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// `runner apply FIXTURE --yes --run-id RUN ARGS`.
fn apply(env: &Env, plan: &str, run: &str, args: &[&str]) -> std::process::Output {
    env.runner().arg("apply").arg(fixture(plan)).args(["--yes", "--run-id", run]).args(args).output().expect("runs")
}

/// The output of a run's task.
fn output(env: &Env, run: &str, task: &str) -> String {
    let output = env.runner().args(["output", run, task]).output().expect("runner runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8").trim_end().to_owned()
}

/// The vars the run's `RunCreated` recorded.
fn recorded_vars(env: &Env, run: &str) -> serde_json::Value {
    let records = env.records(run);
    let created = records.iter().find(|r| r["type"] == "RunCreated").expect("a RunCreated record");
    created["vars"].clone()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether any run folder exists under the test's RUNNER_HOME.
fn any_run(env: &Env) -> bool {
    std::fs::read_dir(env.home().join("runs")).is_ok_and(|mut entries| entries.next().is_some())
}

#[test]
fn a_run_takes_the_declared_defaults_of_every_type() {
    let env = Env::new();
    let ran = apply(&env, "vars_declared.yaml", "r", &[]);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert_eq!(output(&env, "r", "brief"), "for investors on rates, jobs at depth 2");
    assert_eq!(recorded_vars(&env, "r"), json!({"audience": "investors", "topics": ["rates", "jobs"], "depth": 2}));
}

#[test]
fn a_var_overrides_its_default_as_text_and_leaves_the_others() {
    let env = Env::new();
    let ran = apply(&env, "vars_declared.yaml", "r", &["--var", "audience=the press", "--var", "depth=[9]"]);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert_eq!(output(&env, "r", "brief"), "for the press on rates, jobs at depth [9]");
    let vars = recorded_vars(&env, "r");
    assert_eq!(vars["depth"], json!("[9]"), "`=` gives a text, even one that looks like JSON");
    assert_eq!(vars["topics"], json!(["rates", "jobs"]));
}

#[test]
fn colon_equals_gives_a_list_a_number_and_an_object() {
    let env = Env::new();
    let args = ["--var", r#"topics:=["inflation", "housing", "trade"]"#, "--var", "depth:=5"];
    let ran = apply(&env, "vars_declared.yaml", "r", &args);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert_eq!(output(&env, "r", "brief"), "for investors on inflation, housing, trade at depth 5");
    assert_eq!(recorded_vars(&env, "r")["depth"], json!(5));

    let ran = apply(&env, "vars_undeclared.yaml", "o", &["--var", r#"who:={"name": "Ada", "ok": true}"#]);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert_eq!(recorded_vars(&env, "o"), json!({"who": {"name": "Ada", "ok": true}}));
}

#[test]
fn an_undeclared_var_is_refused_with_exit_2_a_suggestion_and_the_declared_names() {
    let env = Env::new();
    for dry_run in [false, true] {
        let mut args = vec!["--var", "audiense=press"];
        if dry_run {
            args.push("--dry-run");
        }
        let refused = apply(&env, "vars_declared.yaml", "r", &args);
        assert_eq!(refused.status.code(), Some(2), "dry run {dry_run}");
        let stderr = stderr(&refused);
        assert!(stderr.contains("declares no variable `audiense`"), "{stderr}");
        assert!(stderr.contains("did you mean `audience`?"), "{stderr}");
        assert!(stderr.contains("`audience`, `depth`, `topics`"), "the declared names: {stderr}");
        assert!(stderr.contains("runner explain cli::undeclared_var"), "{stderr}");
        assert!(refused.stdout.is_empty(), "nothing is shown before the refusal");
    }
    assert!(!any_run(&env), "no run was created");
}

#[test]
fn a_plan_without_declared_vars_takes_any_name() {
    let env = Env::new();
    let ran = apply(&env, "vars_undeclared.yaml", "r", &["--var", "who=world", "--var", "unused:=[1]"]);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert_eq!(output(&env, "r", "greet"), "hello world");
    assert_eq!(recorded_vars(&env, "r"), json!({"who": "world", "unused": [1]}));
}

#[test]
fn bad_json_after_colon_equals_is_a_usage_error_naming_the_var() {
    let env = Env::new();
    let refused = apply(&env, "vars_declared.yaml", "r", &["--var", "topics:=[rates, jobs]"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = stderr(&refused);
    assert!(stderr.contains("the value of `topics` after `:=` is not JSON"), "{stderr}");
    assert!(!any_run(&env), "no run was created");
}

#[test]
fn a_plan_test_gives_vars_of_any_yaml_type() {
    let env = Env::new();
    let output = env.runner().arg("test").arg(fixture("vars_list.test.yaml")).output().expect("runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", stderr(&output));
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}

#[test]
fn a_plan_test_naming_an_undeclared_var_is_a_located_error() {
    let env = Env::new();
    let output = env.runner().arg("test").arg(fixture("vars_typo.test.yaml")).output().expect("runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("test::unknown_target"), "{stdout}");
    assert!(stdout.contains("has no variable `topcis`"), "{stdout}");
    assert!(stdout.contains("vars_typo.test.yaml:8:5"), "located at the name: {stdout}");
    assert!(stdout.contains("did you mean `topics`?"), "{stdout}");
}
