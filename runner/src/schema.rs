//! `runner schema`: the manifest's JSON Schema.

use crate::diagnostics::print;

/// Prints the JSON Schema (draft-07) of the enveloped manifest.
pub fn run() -> anyhow::Result<u8> {
    print(&format!("{}\n", serde_json::to_string_pretty(&manifest::schema::manifest_schema())?))?;
    Ok(0)
}
