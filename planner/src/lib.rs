//! From a request in plain words to a runner manifest: the deterministic planner, the
//! complexity detector, and an LLM plan author that repairs, falls back and picks the best
//! candidate.

pub mod author;
pub mod complexity;
pub mod deterministic;
pub mod steps;
pub mod yaml;

/// A template manifest's text (YAML or JSON) as a JSON value, for
/// [`deterministic::Bindings::template`]; the caller loads and validates it first.
pub fn template_value(text: &str) -> Result<serde_json::Value, String> {
    serde_saphyr::from_str::<serde_json::Value>(text).map_err(|error| error.to_string())
}
