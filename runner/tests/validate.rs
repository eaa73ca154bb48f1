//! `runner validate` on the shipped examples: every invalid plan in `examples/invalid/` fails
//! with exactly the error its file is named after, at the place it names; every plan in
//! `examples/` is valid.

use std::collections::BTreeSet;

mod shipped;

use serde_json::Value;
use shipped::{plans_in, repo_root, runner, stem};

fn invalid_plans() -> Vec<String> {
    plans_in("examples/invalid")
}

/// Runs `runner validate --format json` and returns the exit code and the parsed document.
fn validate_json(plan: &str) -> (i32, Value) {
    let output = runner().args(["validate", plan, "--format", "json"]).output().expect("runner runs");
    let document = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("{plan}: stdout is not JSON ({error}): {}", String::from_utf8_lossy(&output.stdout))
    });
    (output.status.code().expect("an exit code"), document)
}

fn diagnostics(document: &Value) -> &Vec<Value> {
    document["diagnostics"].as_array().expect("`diagnostics` is a list")
}

/// Codes that have no example here: file-level problems and reader limits
/// (`runner/tests/bad_input.rs` covers them), codes that are never errors, and
/// `replacement_not_json`, which only a planner's replacement during a replan can have
/// (`manifest/tests/splice.rs` covers it), and `subplan_too_deep`, which takes a chain of 17
/// files (`manifest/tests/subplans.rs` and its explain page's example cover it).
const NOT_EXAMPLES: &[&str] = &[
    "subplan_too_deep",
    "io",
    "too_large",
    "not_utf8",
    "json_syntax",
    "over_limit",
    "alias",
    "unsupported",
    "implicit_inputs",
    "replacement_not_json",
];

#[test]
fn every_error_code_has_an_invalid_example() {
    let source = std::fs::read_to_string(repo_root().join("manifest/src/problem.rs")).expect("problem.rs");
    let codes: BTreeSet<&str> = source
        .split("code(plan::")
        .skip(1)
        .map(|rest| rest.split(')').next().expect("a closing parenthesis"))
        .filter(|code| !NOT_EXAMPLES.contains(code))
        .collect();
    assert!(codes.len() >= 20, "parsed too few codes from problem.rs: {codes:?}");
    let plans = invalid_plans();
    let examples: BTreeSet<&str> = plans.iter().map(|p| stem(p)).collect();
    assert_eq!(
        examples, codes,
        "examples/invalid/ must hold one `<code>.yaml` per error code of `Problem` (or list the code in NOT_EXAMPLES)"
    );
}

#[test]
fn invalid_examples_render_their_error_and_exit_2() {
    for plan in invalid_plans() {
        let output = runner().args(["validate", &plan]).output().expect("runner runs");
        assert_eq!(output.status.code(), Some(2), "{plan} should be invalid");
        assert!(output.stderr.is_empty(), "{plan}: the report, errors included, goes to stdout only");
        let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
        assert!(stdout.contains(&format!("plan::{}", stem(&plan))), "{plan}: {stdout}");
        insta::assert_snapshot!(format!("validate_{}", stem(&plan)), stdout);
    }
}

#[test]
fn invalid_examples_report_exactly_their_code_in_json() {
    for plan in invalid_plans() {
        let (code, document) = validate_json(&plan);
        assert_eq!(code, 2, "{plan}: exit code");
        assert_eq!(document["valid"], Value::Bool(false), "{plan}");
        // A sub-plan's own diagnostics are listed too, under its file.
        let found: Vec<(&str, &str)> = diagnostics(&document)
            .iter()
            .filter(|d| d["file"] == plan.as_str())
            .map(|d| (d["code"].as_str().unwrap_or(""), d["severity"].as_str().unwrap_or("")))
            .collect();
        let expected = format!("plan::{}", stem(&plan));
        assert_eq!(found, [(expected.as_str(), "error")], "{plan}: one error, named after the file");
    }
}

/// Where each error is reported, checked by hand against the files: 1-based line and column
/// of the offending key or value, and its YAML path.
const LOCATIONS: &[(&str, &str, usize, usize, &str)] = &[
    ("cycle", "plan::cycle", 11, 11, "spec.workflow[0].id"),
    ("duplicate_task", "plan::duplicate_task", 14, 11, "spec.workflow[1].id"),
    ("empty_workflow", "plan::empty_workflow", 10, 13, "spec.workflow"),
    ("expression_syntax", "plan::expression_syntax", 19, 13, "spec.workflow[1].when"),
    ("invalid_schema", "plan::invalid_schema", 17, 11, "spec.workflow[0].verification.schema"),
    ("invalid_value", "plan::invalid_value", 15, 15, "spec.control_logic.strategy"),
    ("item_outside_map", "plan::item_outside_map", 14, 28, "spec.workflow[0].input"),
    ("literal_api_key", "plan::literal_api_key", 11, 20, "spec.providers.openai.api_key_env"),
    ("literal_secret", "plan::literal_secret", 12, 30, "spec.agent_definitions.scorer.headers_env.X-Token"),
    ("missing_attachment", "plan::missing_attachment", 15, 18, "spec.workflow[0].attachments[0].file"),
    ("missing_field", "plan::missing_field", 9, 5, "spec.providers.local"),
    ("replan_in_map", "plan::replan_in_map", 15, 19, "spec.workflow[0].on_failure"),
    ("replan_without_planner", "plan::replan_without_planner", 14, 19, "spec.workflow[0].on_failure"),
    ("self_dependency", "plan::self_dependency", 17, 27, "spec.workflow[1].depends_on[1]"),
    ("skip_on_critical", "plan::skip_on_critical", 15, 58, "spec.workflow[0].on_failure.then"),
    ("subplan_cycle", "plan::subplan_cycle", 17, 13, "spec.workflow[1].plan"),
    ("subplan_invalid", "plan::subplan_invalid", 12, 13, "spec.workflow[0].plan"),
    ("subplan_missing", "plan::subplan_missing", 12, 13, "spec.workflow[0].plan"),
    ("subplan_var", "plan::subplan_var", 14, 18, "spec.workflow[0].with.compnay"),
    ("template_not_ancestor", "plan::template_not_ancestor", 17, 29, "spec.workflow[1].input"),
    ("template_syntax", "plan::template_syntax", 16, 14, "spec.workflow[1].input"),
    ("template_unknown_variable", "plan::template_unknown_variable", 14, 40, "spec.workflow[0].input"),
    ("too_many_items", "plan::too_many_items", 14, 17, "spec.workflow[0].for_each"),
    ("unbounded_map", "plan::unbounded_map", 19, 17, "spec.workflow[1].for_each"),
    ("undeclared_var", "plan::undeclared_var", 15, 34, "spec.workflow[0].input"),
    ("unknown_agent", "plan::unknown_agent", 12, 14, "spec.workflow[0].agent"),
    ("unknown_dependency", "plan::unknown_dependency", 17, 20, "spec.workflow[1].depends_on[0]"),
    ("unknown_field", "plan::unknown_field", 17, 7, "spec.workflow[1].depend_on"),
    ("unknown_gate_input", "plan::unknown_gate_input", 19, 28, "spec.workflow[2].inputs[1]"),
    ("unknown_provider", "plan::unknown_provider", 14, 17, "spec.agent_definitions.researcher.provider"),
    ("unknown_tool", "plan::unknown_tool", 18, 15, "spec.agent_definitions.researcher.tools[0]"),
    ("unsupported_version", "plan::unsupported_version", 3, 13, "apiVersion"),
    ("wrong_task_type", "plan::wrong_task_type", 15, 18, "spec.workflow[0].max_tasks"),
    ("wrong_type", "plan::wrong_type", 17, 19, "spec.workflow[1].depends_on"),
    ("yaml_syntax", "plan::yaml_syntax", 17, 19, ""),
];

#[test]
fn errors_point_at_the_offending_key_or_value() {
    for &(file, code, line, column, path) in LOCATIONS {
        let plan = format!("examples/invalid/{file}.yaml");
        let (_, document) = validate_json(&plan);
        let diagnostic = diagnostics(&document)
            .iter()
            .find(|d| d["code"] == code)
            .unwrap_or_else(|| panic!("{plan}: no {code} in {document:#}"));
        assert_eq!(diagnostic["file"], plan.as_str(), "{plan}: file");
        assert_eq!(
            (diagnostic["line"].as_u64(), diagnostic["column"].as_u64(), diagnostic["path"].as_str()),
            (Some(line as u64), Some(column as u64), Some(path)),
            "{plan}: (line, column, path)"
        );
    }
}

#[test]
fn typos_get_a_did_you_mean_help() {
    for (file, suggestion) in [
        ("unknown_dependency", "search"),
        ("unknown_agent", "researcher"),
        ("unknown_tool", "web_search"),
        ("unknown_provider", "local"),
        ("unknown_field", "depends_on"),
        ("invalid_value", "sequential"),
        ("template_unknown_variable", "mission"),
        ("undeclared_var", "topic"),
    ] {
        let (_, document) = validate_json(&format!("examples/invalid/{file}.yaml"));
        let help = diagnostics(&document)[0]["help"].as_str().unwrap_or_default().to_owned();
        assert_eq!(help, format!("did you mean `{suggestion}`?"), "{file}");
    }
}

#[test]
fn json_report_has_exactly_the_documented_keys() {
    let document_keys: BTreeSet<&str> = ["valid", "diagnostics"].into();
    let diagnostic_keys: BTreeSet<&str> =
        ["code", "severity", "message", "help", "file", "line", "column", "path"].into();
    for plan in invalid_plans() {
        let (_, document) = validate_json(&plan);
        let keys: BTreeSet<&str> = document.as_object().expect("an object").keys().map(String::as_str).collect();
        assert_eq!(keys, document_keys, "{plan}");
        for diagnostic in diagnostics(&document) {
            let object = diagnostic.as_object().expect("a diagnostic is an object");
            let keys: BTreeSet<&str> = object.keys().map(String::as_str).collect();
            assert_eq!(keys, diagnostic_keys, "{plan}: {diagnostic}");
            for text in ["code", "severity", "message", "file", "path"] {
                assert!(object[text].is_string(), "{plan}: `{text}` is a string in {diagnostic}");
            }
            assert!(object["help"].is_string() || object["help"].is_null(), "{plan}: {diagnostic}");
            for number in ["line", "column"] {
                assert!(object[number].as_u64().is_some_and(|n| n >= 1), "{plan}: `{number}` is 1-based");
            }
        }
    }
}

#[test]
fn shipped_examples_are_valid_without_warnings() {
    for plan in plans_in("examples") {
        let (code, document) = validate_json(&plan);
        assert_eq!(code, 0, "{plan}: {document:#}");
        assert_eq!(document["valid"], Value::Bool(true), "{plan}");
        assert_eq!(diagnostics(&document), &Vec::<Value>::new(), "{plan}: no errors or warnings");
    }
}

#[test]
fn shipped_examples_point_editors_at_the_schema() {
    for plan in plans_in("examples") {
        let text = std::fs::read_to_string(repo_root().join(&plan)).expect("the example reads");
        assert!(
            text.starts_with("# yaml-language-server: $schema=../docs/manifest.schema.json\n"),
            "{plan} should start with the schema modeline"
        );
    }
}

#[test]
fn a_valid_plan_prints_a_summary_and_exits_0() {
    let output = runner().args(["validate", "examples/research.yaml"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "examples/research.yaml: plan `company-research` is valid: 6 tasks in 4 phases\n"
    );
    assert!(output.stderr.is_empty());
}

#[test]
fn a_literal_api_key_never_reaches_the_output() {
    let (key, secret) = ("examples/invalid/literal_api_key.yaml", "examples/invalid/literal_secret.yaml");
    for (plan, field, code) in
        [(key, "api_key_env:", "literal_api_key"), (secret, "headers_env: {X-Token:", "literal_secret")]
    {
        let text = std::fs::read_to_string(repo_root().join(plan)).expect("the example exists");
        let key = text
            .lines()
            .find_map(|line| line.trim().strip_prefix(field))
            .map(|rest| rest.trim().trim_end_matches('}'))
            .expect("the example has the secret's field");
        assert!(key.len() > 8, "the example's key should look like a real one");
        for args in [
            vec!["validate", plan],
            vec!["validate", plan, "--format", "json"],
            vec!["critic", plan, "--format", "sarif"],
        ] {
            let output = runner().args(&args).output().expect("runner runs");
            let all = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            assert!(!all.contains(key), "{args:?} printed the key:\n{all}");
            assert!(all.contains(code), "{args:?} did not report it:\n{all}");
        }
    }
}
