//! The JSON in a task's output, found by the rule every reader of a model's answer shares
//! ([`manifest::find_json`]): the whole output, else the first code fence holding JSON, else the
//! one JSON object or list amid prose.

use manifest::{AnswerError, find_json};
use serde_json::Value;

/// Why an output holds no usable JSON, worded for the task's log and its next attempt's prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{}", wording(.0))]
#[diagnostic(code(verify::not_json))]
pub struct NotJson(pub AnswerError);

/// The JSON value in `text`; the error names the problem and its line and column in `text`.
pub fn extract_json(text: &str) -> Result<Value, NotJson> {
    find_json(text).map(|found| found.value).map_err(NotJson)
}

/// What an [`AnswerError`] says about an output.
fn wording(error: &AnswerError) -> String {
    match error {
        AnswerError::Empty => "the output is empty, not JSON".to_owned(),
        AnswerError::NoJson => "the output is not valid JSON: expected a JSON object or list, found none".to_owned(),
        AnswerError::Several => {
            "the output holds more than one JSON object or list, so which one is meant is unclear".to_owned()
        }
        other => match other.syntax() {
            Some(syntax) => format!("the output is not valid JSON: {syntax}"),
            None => format!("the output is not valid JSON: {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(text: &str) -> String {
        extract_json(text).expect_err(text).to_string()
    }

    #[test]
    fn bare_json_with_whitespace_parses() {
        assert_eq!(extract_json("  \n{\"a\": 1}\n\n"), Ok(json!({"a": 1})));
        assert_eq!(extract_json("[1, 2]"), Ok(json!([1, 2])));
    }

    #[test]
    fn fenced_json_parses() {
        let text = "Here it is:\n```json\n{\"a\": [1, 2]}\n```\nAnything else?";
        assert_eq!(extract_json(text), Ok(json!({"a": [1, 2]})));
    }

    #[test]
    fn an_untagged_fence_parses() {
        assert_eq!(extract_json("```\n[true]\n```"), Ok(json!([true])));
    }

    #[test]
    fn a_fence_holding_code_is_skipped() {
        let text = "```python\nprint(1)\n```\nand the answer:\n```json\n{\"ok\": true}\n```";
        assert_eq!(extract_json(text), Ok(json!({"ok": true})));
    }

    #[test]
    fn an_object_amid_prose_parses() {
        let text = "Sure! {\"pass\": true, \"reason\": \"fine\"} Hope that helps {:";
        assert_eq!(extract_json(text), Ok(json!({"pass": true, "reason": "fine"})));
    }

    #[test]
    fn truncated_json_fails_with_its_position() {
        assert_eq!(
            message("{\"a\": [1, 2"),
            "the output is not valid JSON: EOF while parsing a list at line 1 column 11"
        );
    }

    #[test]
    fn positions_count_from_the_start_of_the_output() {
        let error = message("Result:\n```json\n{\n  \"a\": 1,\n  \"b\": oops\n}\n```");
        assert!(error.ends_with("at line 5 column 8"), "{error}");
        let error = message("The value: {\"a\": tru}");
        assert!(error.ends_with("expected ident at line 1 column 21"), "{error}");
    }

    #[test]
    fn an_unclosed_fence_reports_the_truncation() {
        assert_eq!(
            message("```json\n{\"a\": 1,"),
            "the output is not valid JSON: EOF while parsing a value at line 2 column 8"
        );
    }

    #[test]
    fn prose_is_not_json() {
        let error = message("I could not find anything.");
        assert!(error.starts_with("the output is not valid JSON: expected"), "{error}");
        assert_eq!(message("   "), "the output is empty, not JSON");
    }

    #[test]
    fn two_values_in_prose_are_ambiguous() {
        let error = message("Either {\"a\": 1} or {\"a\": 2}.");
        assert!(error.contains("more than one JSON object or list"), "{error}");
    }
}
