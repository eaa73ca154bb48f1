//! Finding the one JSON object in a model's answer: through code fences, prose around it, a
//! byte-order mark and trailing commas, but never by guessing the end of a cut-off answer.

use manifest::JsonStrings;
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

/// Why no JSON object could be taken from an answer. The messages are written for the
/// model to read in a repair prompt.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ExtractError {
    /// Nothing that opens a JSON object.
    #[error("the answer holds no JSON object")]
    NoObject,
    /// An object opens but never closes.
    #[error("the answer stops mid-object: {depth} brace(s) or bracket(s) are still open at the end")]
    Truncated {
        /// How many brackets are still open.
        depth: usize,
    },
    /// The object is not valid JSON.
    #[error("the JSON does not parse: {message}")]
    Syntax {
        /// serde_json's message, with the line and column inside the object.
        message: String,
    },
    /// More than one JSON object, so it is unclear which is meant.
    #[error("the answer holds more than one JSON object; answer with exactly one")]
    Several,
    /// `questions` is there but is not a non-empty list of texts.
    #[error("`questions` must be a non-empty list of strings")]
    BadQuestions,
}

/// The JSON object in `text`, or questions. Code fences (the first one holding an object is
/// used), prose before and after, a leading byte-order mark and commas before `}` or `]`
/// are tolerated; an object that does not close is [`ExtractError::Truncated`].
pub fn extract(text: &str) -> Result<Answer, ExtractError> {
    let text = text.trim_start_matches('\u{feff}');
    let body = fenced(text).unwrap_or(text);
    let object = single_object(body)?;
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

/// Whether an object looks like a plan, in either form, rather than a list of questions.
fn is_manifest(object: &Map<String, Value>) -> bool {
    ["spec", "apiVersion", "workflow", "tasks", "steps", "agent_definitions"]
        .iter()
        .any(|key| object.contains_key(*key))
}

/// The content of the first fenced block that holds a `{`, if any block does.
fn fenced(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // The info string (`json`, say) runs to the end of the opening line.
        let content_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let content = &after[content_start..];
        let Some(close) = content.find("```") else {
            // An unclosed fence: the answer was cut off, or the fence is never closed.
            return content.contains('{').then_some(content);
        };
        let block = &content[..close];
        if block.contains('{') {
            return Some(block);
        }
        rest = &content[close + 3..];
    }
    None
}

/// The one top-level JSON object in `text`: brace-balanced candidates are tried in order, a
/// candidate that does not parse is skipped as a whole (never searched for inner objects),
/// and the error of the longest candidate is reported when none parses.
fn single_object(text: &str) -> Result<Map<String, Value>, ExtractError> {
    let mut found: Option<Map<String, Value>> = None;
    let mut worst: Option<(usize, ExtractError)> = None;
    let mut offset = 0;
    while let Some(start) = text[offset..].find('{').map(|i| i + offset) {
        let end = match balanced_end(&text[start..]) {
            Ok(len) => start + len,
            Err(depth) => {
                if found.is_some() {
                    // Prose after the plan with an unclosed brace in it: not our concern.
                    break;
                }
                return Err(ExtractError::Truncated { depth });
            }
        };
        let candidate = without_trailing_commas(&text[start..end]);
        match serde_json::from_str::<Map<String, Value>>(&candidate) {
            Ok(object) if found.is_none() => found = Some(object),
            Ok(_) => return Err(ExtractError::Several),
            Err(error) => {
                let len = end - start;
                if found.is_none() && worst.as_ref().is_none_or(|(longest, _)| len > *longest) {
                    worst = Some((len, ExtractError::Syntax { message: error.to_string() }));
                }
            }
        }
        offset = end;
    }
    match (found, worst) {
        (Some(object), _) => Ok(object),
        (None, Some((_, error))) => Err(error),
        (None, None) => Err(ExtractError::NoObject),
    }
}

/// The length of the bracketed value `text` starts with, counting braces and brackets outside
/// strings; when it never closes, the depth still open at the end.
fn balanced_end(text: &str) -> Result<usize, usize> {
    let mut depth = 0usize;
    let mut strings = JsonStrings::default();
    for (i, byte) in text.bytes().enumerate() {
        if !strings.outside(byte) {
            continue;
        }
        match byte {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
    }
    Err(depth.max(1))
}

/// `text` without commas that directly (but for whitespace) precede `}` or `]`, outside
/// strings.
fn without_trailing_commas(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut strings = JsonStrings::default();
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if strings.outside(byte) && byte == b',' {
            let next = bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                out.push_str(&text[kept..i]);
                kept = i + 1;
            }
        }
    }
    out.push_str(&text[kept..]);
    out
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
        assert!(matches!(error, ExtractError::Truncated { depth: 4 }), "{error:?}");
        assert!(error.to_string().contains("stops mid-object"));
        let fenced = extract("```json\n{\"spec\": {\"workflow\": [").unwrap_err();
        assert!(matches!(fenced, ExtractError::Truncated { .. }), "{fenced:?}");
    }

    #[test]
    fn two_objects_are_ambiguous() {
        assert_eq!(extract("{\"spec\": 1}\n{\"spec\": 2}"), Err(ExtractError::Several));
    }

    #[test]
    fn no_object_and_bad_syntax_are_errors() {
        assert_eq!(extract("I cannot do that."), Err(ExtractError::NoObject));
        let error = extract("{\"spec\": {\"a\" 1}}").unwrap_err();
        assert!(matches!(&error, ExtractError::Syntax { message } if message.contains("line 1")), "{error:?}");
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
}
