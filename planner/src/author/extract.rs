//! Taking the plan out of a model's answer: the one JSON object found by the rule every reader
//! of a model's answer shares ([`manifest::find_json`]), which is a manifest or questions.

use manifest::{AnswerError, find_json};
use serde_json::{Map, Value};
use thiserror::Error;

/// What a model answered: a manifest to load, or questions for the person who asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A JSON object that should be a manifest.
    Manifest(Map<String, Value>),
    /// `{"questions": [...]}`: the request is too ambiguous to plan.
    Questions(Vec<String>),
}

/// Why no manifest or questions could be taken from an answer. The messages are written for
/// the model to read in a repair prompt.
#[derive(Debug, Clone, PartialEq, Eq, Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ExtractError {
    /// No JSON could be taken from the answer.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Answer(#[from] AnswerError),
    /// The JSON is a list or a scalar.
    #[error("the answer is {found}, not a JSON object")]
    #[diagnostic(
        code(author::not_object),
        help("answer with one JSON object: a manifest, or `{{\"questions\": [...]}}`")
    )]
    NotObject {
        /// What it is instead, such as `a list`.
        found: &'static str,
    },
    /// `questions` is there but is not a non-empty list of texts.
    #[error("`questions` must be a non-empty list of strings")]
    #[diagnostic(code(author::bad_questions))]
    BadQuestions,
}

/// The JSON object in `text` (see [`manifest::find_json`] for where it is looked for), read as a
/// manifest or as questions.
pub fn extract(text: &str) -> Result<Answer, ExtractError> {
    let object = match find_json(text)?.value {
        Value::Object(object) => object,
        other => return Err(ExtractError::NotObject { found: kind(&other) }),
    };
    match object.get("questions") {
        Some(questions) if !is_manifest(&object) => {
            let questions: Option<Vec<String>> = questions
                .as_array()
                .map(|list| list.iter().filter_map(|q| q.as_str().map(str::trim).map(str::to_owned)).collect());
            match questions {
                Some(questions) if !questions.is_empty() && questions.iter().all(|q| !q.is_empty()) => {
                    Ok(Answer::Questions(questions))
                }
                _ => Err(ExtractError::BadQuestions),
            }
        }
        _ => Ok(Answer::Manifest(object)),
    }
}

/// Whether an object looks like a plan, in either form, rather than a list of questions: it has
/// a spec, an envelope, agents or a workflow under any name the loader reads it by.
fn is_manifest(object: &Map<String, Value>) -> bool {
    ["spec", "apiVersion", "agent_definitions"]
        .iter()
        .chain(&manifest::WORKFLOW_KEYS)
        .any(|key| object.contains_key(*key))
}

/// What kind of JSON value a non-object is, for a message.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Map<String, Value> {
        match extract(text) {
            Ok(Answer::Manifest(object)) => object,
            other => panic!("expected a manifest, got {other:?}"),
        }
    }

    #[test]
    fn plain_object_is_taken_as_is() {
        assert_eq!(manifest(r#"{"spec": {"a": 1}}"#)["spec"]["a"], 1);
    }

    #[test]
    fn code_fence_with_prose_around_it() {
        let text = "Here is your plan:\n```json\n{\"spec\": {\"a\": \"}\"}}\n```\nHope this helps {really}.";
        assert_eq!(manifest(text)["spec"]["a"], "}");
    }

    #[test]
    fn fence_without_object_is_skipped() {
        let text = "```\nrunner apply\n```\nthen\n```json\n{\"spec\": 1}\n```";
        assert_eq!(manifest(text)["spec"], 1);
    }

    #[test]
    fn leading_and_trailing_prose_without_fence() {
        let text = "Sure! {\"kind\": \"Plan\", \"spec\": {}} Let me know if you want changes.";
        assert_eq!(manifest(text)["kind"], "Plan");
    }

    #[test]
    fn prose_brace_before_the_object_is_skipped() {
        let text = "The plan {as requested}:\n{\"spec\": {\"x\": [1, 2]}}";
        assert_eq!(manifest(text)["spec"]["x"][1], 2);
    }

    #[test]
    fn trailing_commas_are_repaired_outside_strings() {
        let text = "{\"spec\": {\"list\": [1, 2, ], \"text\": \"a, }\",\n},}";
        let object = manifest(text);
        assert_eq!(object["spec"]["list"], serde_json::json!([1, 2]));
        assert_eq!(object["spec"]["text"], "a, }");
    }

    #[test]
    fn byte_order_mark_is_dropped() {
        assert_eq!(manifest("\u{feff}{\"spec\": true}")["spec"], true);
    }

    #[test]
    fn truncated_answer_is_an_error_not_a_repair() {
        let error = extract("{\"spec\": {\"workflow\": [{\"id\": \"a\"").unwrap_err();
        assert!(matches!(error, ExtractError::Answer(AnswerError::Truncated { depth: 4, .. })), "{error:?}");
        assert!(error.to_string().contains("stops mid-object"));
        let fenced = extract("```json\n{\"spec\": {\"workflow\": [").unwrap_err();
        assert!(matches!(fenced, ExtractError::Answer(AnswerError::Truncated { .. })), "{fenced:?}");
    }

    #[test]
    fn two_objects_are_ambiguous() {
        assert_eq!(extract("{\"spec\": 1}\n{\"spec\": 2}"), Err(ExtractError::Answer(AnswerError::Several)));
    }

    #[test]
    fn no_object_and_bad_syntax_are_errors() {
        assert_eq!(extract("I cannot do that."), Err(ExtractError::Answer(AnswerError::NoJson)));
        let error = extract("{\"spec\": {\"a\" 1}}").unwrap_err();
        assert!(matches!(&error, ExtractError::Answer(AnswerError::Syntax(syntax)) if syntax.line == 1), "{error:?}");
        assert!(error.to_string().contains("line 1"), "{error}");
    }

    #[test]
    fn a_list_is_not_a_manifest() {
        let error = extract("[{\"spec\": {}}]").unwrap_err();
        assert_eq!(error, ExtractError::NotObject { found: "a list" });
        assert_eq!(error.to_string(), "the answer is a list, not a JSON object");
    }

    #[test]
    fn questions_are_recognised() {
        assert_eq!(
            extract("{\"questions\": [\"Which company?\", \" For whom? \"]}"),
            Ok(Answer::Questions(vec!["Which company?".to_owned(), "For whom?".to_owned()]))
        );
        assert_eq!(extract("{\"questions\": []}"), Err(ExtractError::BadQuestions));
        assert!(matches!(extract("{\"questions\": [\"x\"], \"spec\": {}}"), Ok(Answer::Manifest(_))));
    }

    #[test]
    fn a_bare_plan_with_phases_and_questions_is_a_manifest() {
        let text =
            r#"{"questions": ["Which company?"], "phases": [{"id": "look", "tasks": [{"id": "a", "input": "go"}]}]}"#;
        let object = manifest(text);
        assert_eq!(object["phases"][0]["tasks"][0]["id"], "a", "{object:?}");
    }
}
