//! Sub-plans on the command line: `validate`, `critic` (every format) and `apply` report a
//! sub-plan's own errors in the sub-plan's file at their lines and exit 2; `critic` reviews each
//! valid sub-plan under its own file, with its own score, and keeps the plan's score the plan's.

mod support;

use serde_json::Value;
use support::Env;

/// A sub-plan with one error: line 8 names an agent it does not define.
const BROKEN: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: child}
spec:
  agent_definitions:
    m: {runtime: mock}
  workflow:
    - {id: work, agent: nobody, input: x}
";

/// A valid sub-plan with one finding: the agent `spare` no task uses (a note at line 7).
const CHILD: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: child}
spec:
  agent_definitions:
    m: {runtime: mock}
    spare: {runtime: mock}
  workflow:
    - {id: work, agent: m, input: x, on_failure: {action: retry, max_attempts: 2}}
";

/// A plan whose task `sub` (line 7) runs `plans/child.yaml`.
const PARENT: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: parent}
spec:
  workflow:
    - id: sub
      type: plan
      plan: plans/child.yaml
      on_failure: {action: retry, max_attempts: 2}
";

/// A test folder with `parent.yaml` and, under `plans/`, the child `child`.
fn folder(child: &str) -> Env {
    let env = Env::new();
    std::fs::create_dir_all(env.dir().join("plans")).expect("the plans folder is made");
    env.write("plans/child.yaml", child);
    env.write("parent.yaml", PARENT);
    env
}

/// Runs `runner ARGS` in the folder: exit code, stdout, stderr.
fn run(env: &Env, args: &[&str]) -> (i32, String, String) {
    let output = env.runner().args(args).output().expect("runner runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
    (output.status.code().expect("an exit code"), text(output.stdout), text(output.stderr))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("not JSON ({error}): {text}"))
}

/// The snippet header miette draws for the child's error: its file, line and column.
const CHILD_ERROR_AT: &str = "╭─[plans/child.yaml:8:25]";

#[test]
fn validate_shows_the_childs_error_in_its_file_and_exits_2() {
    let env = folder(BROKEN);
    let (code, stdout, _) = run(&env, &["validate", "parent.yaml"]);
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("╭─[parent.yaml:8:13]") && stdout.contains("plan::subplan_invalid"), "{stdout}");
    assert!(stdout.contains(CHILD_ERROR_AT) && stdout.contains("unknown agent `nobody`"), "{stdout}");
    assert!(stdout.ends_with("parent.yaml: invalid plan: 2 errors (1 in sub-plans)\n"), "{stdout}");

    let (code, stdout, _) = run(&env, &["validate", "parent.yaml", "--format", "json"]);
    assert_eq!(code, 2);
    let report = json(&stdout);
    assert_eq!(report["valid"], false);
    let found: Vec<(&str, &str, u64, u64)> = report["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            let text = |key: &str| d[key].as_str().expect("a text");
            let number = |key: &str| d[key].as_u64().expect("a number");
            (text("code"), text("file"), number("line"), number("column"))
        })
        .collect();
    assert_eq!(
        found,
        [("plan::subplan_invalid", "parent.yaml", 8, 13), ("plan::unknown_agent", "plans/child.yaml", 8, 25)]
    );
}

#[test]
fn critic_shows_the_childs_error_in_its_file_in_every_format_and_exits_2() {
    let env = folder(BROKEN);
    let (code, stdout, _) = run(&env, &["critic", "parent.yaml"]);
    assert_eq!(code, 2);
    assert!(stdout.contains(CHILD_ERROR_AT), "{stdout}");
    assert!(stdout.contains("sub-plan plans/child.yaml has errors and cannot run: score 0/10"), "{stdout}");
    assert!(stdout.contains("plan `parent` has errors and cannot run: score 0/10"), "{stdout}");

    let (code, stdout, _) = run(&env, &["critic", "parent.yaml", "--format", "json"]);
    assert_eq!(code, 2);
    let report = json(&stdout);
    let errors = report["errors"].as_array().expect("errors");
    let unknown = errors.iter().find(|e| e["code"] == "plan::unknown_agent").expect("the child's error");
    assert_eq!((&unknown["file"], &unknown["line"]), (&Value::from("plans/child.yaml"), &Value::from(8)));
    assert_eq!(report["subplans"][0]["file"], "plans/child.yaml");
    assert_eq!(report["subplans"][0]["score"], 0.0);

    let (code, stdout, _) = run(&env, &["critic", "parent.yaml", "--format", "sarif"]);
    assert_eq!(code, 2);
    let sarif = json(&stdout);
    let located: Vec<(&str, &str, u64)> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let at = &r["locations"][0]["physicalLocation"];
            let line = at["region"]["startLine"].as_u64().expect("a line");
            (r["ruleId"].as_str().expect("a rule"), at["artifactLocation"]["uri"].as_str().expect("a uri"), line)
        })
        .collect();
    assert_eq!(located, [("plan::subplan_invalid", "parent.yaml", 8), ("plan::unknown_agent", "plans/child.yaml", 8)]);

    let (code, stdout, _) = run(&env, &["critic", "parent.yaml", "--format", "markdown"]);
    assert_eq!(code, 2);
    assert!(stdout.contains("- **error** `plan::unknown_agent` (`plans/child.yaml` line 8)"), "{stdout}");
}

#[test]
fn apply_refuses_with_the_childs_error_in_its_file() {
    let env = folder(BROKEN);
    for dry_run in [true, false] {
        let mut args = vec!["apply", "parent.yaml", "--yes"];
        if dry_run {
            args.push("--dry-run");
        }
        let (code, stdout, stderr) = run(&env, &args);
        assert_eq!(code, 2, "dry run {dry_run}: {stderr}");
        assert!(stdout.is_empty(), "nothing is shown but the refusal: {stdout}");
        assert!(stderr.contains(CHILD_ERROR_AT) && stderr.contains("plan::unknown_agent"), "{stderr}");
        assert!(stderr.contains("invalid plan: 2 errors (1 in sub-plans)"), "{stderr}");
    }
    assert!(!env.home().join("runs").exists(), "no run was created");
}

#[test]
fn critic_reviews_each_sub_plan_under_its_file_and_keeps_the_parents_score() {
    let env = folder(CHILD);
    let (code, stdout, _) = run(&env, &["critic", "parent.yaml", "--format", "json"]);
    assert_eq!(code, 0, "{stdout}");
    let report = json(&stdout);
    let (_, alone, _) = run(&env, &["critic", "plans/child.yaml", "--format", "json"]);
    let alone = json(&alone);
    let child = &report["subplans"][0];
    assert_eq!(report["subplans"].as_array().map(Vec::len), Some(1));
    assert_eq!((&child["file"], &child["plan"]), (&Value::from("plans/child.yaml"), &Value::from("child")));
    assert_eq!(child["findings"], alone["findings"], "the sub-plan's findings, as `critic` gives them for its file");
    assert_eq!(child["score"], alone["score"]);
    assert!(alone["score"].as_f64().is_some_and(|s| s < 10.0), "the unused agent costs the child: {alone:#}");
    let own = report["findings"].as_array().expect("findings");
    assert!(own.iter().all(|f| f["file"] == "parent.yaml"), "the parent's findings are its own: {own:#?}");
    assert_eq!(report["score"], 10.0, "the child's note does not lower the parent's score");
    assert!(report["metrics"]["estimated_tokens"] == alone["metrics"]["estimated_tokens"], "the sub-plan's whole run");

    let (code, stdout, _) = run(&env, &["critic", "parent.yaml"]);
    assert_eq!(code, 0);
    let (parent, child) = stdout.split_once("findings in sub-plan plans/child.yaml").expect("the child's group");
    assert!(parent.starts_with("findings in parent.yaml: none\n"), "{stdout}");
    assert!(child.starts_with(" (plan `child`, score 9.9/10): 1 note\n"), "{stdout}");
    assert!(child.contains("plans/child.yaml:7:5: agent `spare` is never used [critic::unused_agent]"), "{stdout}");
    assert!(child.contains("plan `parent`: score 10.0/10"), "the table at the end is the parent's: {stdout}");

    let (_, stdout, _) = run(&env, &["critic", "parent.yaml", "--format", "markdown"]);
    let section = stdout.split_once("### Sub-plan `plans/child.yaml`").expect("the child's section").1;
    assert!(section.contains("`child` scores 9.9/10: 0 warning(s) and 1 note(s)."), "{stdout}");
    assert!(section.contains("`critic::unused_agent` (line 7)"), "{stdout}");

    let (code, stdout, _) = run(&env, &["validate", "parent.yaml"]);
    assert_eq!((code, stdout.as_str()), (0, "parent.yaml: plan `parent` is valid: 1 task in 1 phase, 1 sub-plan\n"));
}
