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
