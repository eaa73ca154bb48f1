//! `runner schema`: the manifest's JSON Schema, and the copy in `docs/` that the examples'
//! `yaml-language-server` modelines point at.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn schema_output() -> String {
    let output =
        Command::cargo_bin("runner").expect("the runner binary is built").arg("schema").output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

#[test]
fn schema_is_draft_07_json() {
    let schema: Value = serde_json::from_str(&schema_output()).expect("the schema is JSON");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
}

#[test]
fn schema_describes_the_envelope() {
    let schema: Value = serde_json::from_str(&schema_output()).expect("the schema is JSON");
    for field in ["apiVersion", "kind", "metadata", "spec"] {
        assert!(schema["properties"][field].is_object(), "the schema has no `{field}`: {schema:#}");
    }
}

#[test]
fn docs_copy_of_the_schema_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/manifest.schema.json");
    let committed = std::fs::read_to_string(&path).expect("docs/manifest.schema.json exists");
    assert!(
        committed == schema_output(),
        "docs/manifest.schema.json is out of date; regenerate it with `cargo run -p runner -- schema > docs/manifest.schema.json`"
    );
}

fn test_schema_output() -> String {
    let output = Command::cargo_bin("runner")
        .expect("the runner binary is built")
        .args(["schema", "--test"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

#[test]
fn docs_copy_of_the_plan_test_schema_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/plan-test.schema.json");
    let committed = std::fs::read_to_string(&path).expect("docs/plan-test.schema.json exists");
    assert!(
        committed == test_schema_output(),
        "docs/plan-test.schema.json is out of date; regenerate it with `cargo run -p runner -- schema --test > docs/plan-test.schema.json`"
    );
}

#[test]
fn the_challenge_scenarios_match_the_plan_test_schema() {
    let schema: Value = serde_json::from_str(&test_schema_output()).expect("the schema is JSON");
    assert_eq!(schema["properties"]["kind"]["const"], "PlanTest");
    let validator = jsonschema::draft7::new(&schema).expect("the schema is valid draft-07");
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/challenges");
    let (mut files, mut plans) = (Vec::new(), 0);
    for dir in [folder.clone(), folder.join("naive")] {
        for entry in std::fs::read_dir(&dir).expect("the folder exists") {
            let path = entry.expect("an entry").path();
            let name = path.to_string_lossy().into_owned();
            if name.ends_with(".test.yaml") {
                files.push(path);
            } else if name.ends_with(".yaml") {
                plans += 1;
            }
        }
    }
    assert_eq!(files.len(), plans, "every challenge plan and naive variant has its scenario");
    assert!(plans >= 14, "the challenges are all here: {plans}");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let document: Value = serde_saphyr::from_str(&text).expect("YAML");
        let errors: Vec<String> =
            validator.iter_errors(&document).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{} does not match the schema:\n{}", path.display(), errors.join("\n"));
    }
}
