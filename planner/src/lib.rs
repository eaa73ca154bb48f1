//! From a request in plain words to a runner manifest: the deterministic planner, the
//! complexity detector, and an LLM plan author that repairs, falls back and picks the best
//! candidate.

pub mod author;
pub mod complexity;
pub mod deterministic;
pub mod lines;
pub mod steps;
pub mod yaml;

/// A template manifest's text (YAML or JSON) as a JSON value, for
/// [`deterministic::Bindings::template`]; the caller loads and validates it first.
pub fn template_value(text: &str) -> Result<serde_json::Value, TemplateError> {
    serde_saphyr::from_str::<serde_json::Value>(text).map_err(TemplateError)
}

/// A template manifest's text that is not a YAML or JSON document; the reader's own error is
/// its source.
#[derive(Debug, thiserror::Error)]
#[error("not a YAML or JSON document")]
pub struct TemplateError(#[source] serde_saphyr::Error);

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_template_reads_as_a_json_value() {
        let value = template_value("name: demo\ntasks: [{id: a}]\n").expect("a YAML mapping is a template");
        assert_eq!(value, serde_json::json!({"name": "demo", "tasks": [{"id": "a"}]}));
    }

    #[test]
    fn a_broken_template_is_a_typed_error_with_the_reader_s_reason() {
        let error = template_value("tasks: [unclosed").expect_err("an unclosed list is not a document");
        assert_eq!(error.to_string(), "not a YAML or JSON document");
        assert!(error.source().is_some_and(|reason| !reason.to_string().is_empty()));
    }
}
