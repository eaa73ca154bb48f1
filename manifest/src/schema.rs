//! The JSON Schema of the manifest.

/// The JSON Schema (draft-07) of the enveloped manifest.
pub fn manifest_schema() -> serde_json::Value {
    serde_json::json!({})
}
