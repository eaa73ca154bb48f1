//! `runner schema`: the manifest's JSON Schema, or the plan test's.

use crate::diagnostics::print;

/// Prints the JSON Schema (draft-07) of the enveloped manifest, or with `test` of a plan test.
pub fn run(test: bool) -> anyhow::Result<u8> {
    let schema = if test {
        manifest::schema::plan_test_schema(&engine::script::VOCABULARY)
    } else {
        manifest::schema::manifest_schema()
    };
    print(&format!("{}\n", serde_json::to_string_pretty(&schema)?))?;
    Ok(0)
}
