//! `runner critic` on dynamic plans (`runner/tests/fixtures/critic_dynamic_plan.yaml` and the
//! examples of the new findings in `examples/critic/`): the new findings where they belong, a
//! map's items in the token estimate, and the variables a plan takes in the human, JSON and
//! markdown reports.

use std::collections::BTreeSet;

mod shipped;

use serde_json::Value;
use shipped::{Located, located, repo_root, runner};

const PLAN: &str = "runner/tests/fixtures/critic_dynamic_plan.yaml";
const MAP: &str = "examples/critic/map_without_synthesis.yaml";
const CONDITION: &str = "examples/critic/condition_never_holds.yaml";

fn critic(plan: &str, args: &[&str]) -> (i32, String) {
    let output = runner().arg("critic").arg(plan).args(args).output().expect("runner runs");
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    (output.status.code().expect("an exit code"), stdout)
}

fn critic_json(plan: &str) -> Value {
    let (code, stdout) = critic(plan, &["--format", "json"]);
    assert_eq!(code, 0, "{plan}: {stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{plan}: not JSON ({error}): {stdout}"))
}

fn finding(code: &str, task: &str, line: u64, column: u64) -> Located {
    (format!("critic::{code}"), Some(task.to_owned()), line, column)
}

#[test]
fn each_example_raises_its_finding_and_nothing_else() {
    assert_eq!(located(&critic_json(MAP)), [finding("map_without_synthesis", "summary", 18, 29)]);
    assert_eq!(located(&critic_json(CONDITION)), [finding("condition_never_holds", "explain", 19, 13)]);
}

/// The yaml example of a `## code` entry of `docs/explain/critic.md`.
fn explained(code: &str) -> String {
    let docs = std::fs::read_to_string(repo_root().join("docs/explain/critic.md")).expect("the explain page");
    let entry = docs.split(&format!("\n## {code}\n")).nth(1).unwrap_or_else(|| panic!("no entry for {code}"));
    let example = entry.split("```yaml\n").nth(1).expect("a yaml example");
    example.split("```").next().expect("a closing fence").to_owned()
}

#[test]
fn the_examples_are_the_explain_pages_examples() {
    for (plan, code) in [(MAP, "critic::map_without_synthesis"), (CONDITION, "critic::condition_never_holds")] {
        let text = std::fs::read_to_string(repo_root().join(plan)).expect("the fixture");
        assert_eq!(text, explained(code), "{plan} and the example of {code} differ");
    }
}

#[test]
fn the_dynamic_plan_is_reviewed_with_its_maps_and_conditions() {
    let report = critic_json(PLAN);
    assert_eq!(
        located(&report),
        [
            finding("output_format_coupling", "read_each", 22, 17),
            finding("long_unverified_chain", "brief", 31, 11),
            finding("context_budget", "appendix", 39, 14),
            finding("map_without_synthesis", "appendix", 39, 29),
            finding("unread_dependency", "never", 45, 20),
            finding("condition_never_holds", "never", 46, 13),
        ]
    );
    // search 8 + 1000; read_each (6 + 1000) x 10 items; merge 500; brief 24 + 500 + one item's
    // 1000 + 1000; appendix 10 + 10 x 1000 + 1000; never 2 + 1000.
    assert_eq!(report["metrics"]["estimated_tokens"], 1008 + 10060 + 500 + 2524 + 11010 + 1002);
    let budget =
        report["findings"].as_array().expect("findings").iter().find(|f| f["code"] == "critic::context_budget");
    let message = budget.expect("a context-budget finding")["message"].as_str().expect("a message");
    assert!(message.contains("about 10010 tokens"), "{message}");
    assert_eq!(report["dimensions"]["context_budget"], 6.0, "two warnings in the dimension");
}

#[test]
fn the_json_report_names_the_variables_and_their_defaults() {
    let report = critic_json(PLAN);
    let keys: BTreeSet<&str> = report.as_object().expect("an object").keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["plan", "vars", "score", "dimensions", "errors", "findings", "metrics", "forecast"]),
        "the documented keys, `vars` among them"
    );
    assert_eq!(report["vars"], serde_json::json!({"audience": "buyers", "regions": ["EU", "UK", "US"]}));
    let plain = critic_json(MAP);
    assert!(plain.get("vars").is_none(), "a plan that declares no vars has no `vars`: {plain}");
}

#[test]
fn the_human_report_lists_the_variables() {
    let (code, stdout) = critic(PLAN, &[]);
    assert_eq!(code, 0);
    assert!(stdout.ends_with("variables:\n  audience  \"buyers\"\n  regions   [\"EU\",\"UK\",\"US\"]\n"), "{stdout}");
    assert!(stdout.contains("estimated_tokens    26104\n"), "{stdout}");
    let (_, plain) = critic(MAP, &[]);
    assert!(!plain.contains("variables"), "{plain}");
}

#[test]
fn the_markdown_report_has_a_table_of_the_variables() {
    let (code, stdout) = critic(PLAN, &["--format", "markdown"]);
    assert_eq!(code, 0);
    let table = "### Variables\n\n| Variable | Default |\n| --- | --- |\n| `audience` | `\"buyers\"` |\n| `regions` | `[\"EU\",\"UK\",\"US\"]` |\n";
    assert!(stdout.contains(table), "{stdout}");
    let (_, plain) = critic(MAP, &["--format", "markdown"]);
    assert!(!plain.contains("Variables"), "{plain}");
}

#[test]
fn sarif_has_a_rule_for_each_new_code() {
    for (plan, code) in [(MAP, "critic::map_without_synthesis"), (CONDITION, "critic::condition_never_holds")] {
        let (_, stdout) = critic(plan, &["--format", "sarif"]);
        let sarif: Value = serde_json::from_str(&stdout).expect("JSON");
        let rules = sarif["runs"][0]["tool"]["driver"]["rules"].as_array().expect("rules");
        assert!(rules.iter().any(|r| r["id"] == code && r["help"]["text"].as_str().is_some_and(|t| !t.is_empty())));
        let results = sarif["runs"][0]["results"].as_array().expect("results");
        assert!(results.iter().any(|r| r["ruleId"] == code && r["level"] == "warning"), "{stdout}");
    }
}
