//! `llm_reviewer` verification: a reviewer agent reads the task, its input and the output and
//! answers `{"pass": bool, "reason": "..."}`.
//!
//! Its answer is read forgivingly (see [`parse_review`]), but a reviewer that fails, asks a
//! question or answers something else fails the check: the review could not be completed.

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Check, NotJson, Verdict, Verified, excerpt, extract_json};
use crate::runtime::{Attempt, Reply};

/// What is checked when the plan names no criteria.
const DEFAULT_CRITERIA: &str = "the output fully and correctly answers the task";

/// How much of a reviewer's unusable answer or error a reason quotes.
const MAX_QUOTE: usize = 200;

/// The JSON Schema of a review, handed to the reviewer's runtime so llm agents answer in JSON
/// mode.
pub fn review_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pass": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["pass", "reason"],
        "additionalProperties": false,
    })
}

/// The reviewer's prompt: the task id, its input, the output, the criteria (or "the output
/// fully and correctly answers the task") and the answer format.
pub fn review_prompt(task: &str, input: &str, output: &str, criteria: Option<&str>) -> String {
    let criteria = criteria.map(str::trim).filter(|c| !c.is_empty()).unwrap_or(DEFAULT_CRITERIA);
    format!(
        "You are reviewing the output of task `{task}`.\n\
         \n\
         Criteria: {criteria}\n\
         \n\
         The task's input:\n\
         <input>\n{input}\n</input>\n\
         \n\
         The output to review:\n\
         <output>\n{output}\n</output>\n\
         \n\
         Decide whether the output meets the criteria. Answer with exactly one JSON object and \
         nothing else: {{\"pass\": true, \"reason\": \"...\"}} or {{\"pass\": false, \"reason\": \"...\"}}. \
         The reason is one or two sentences; when the output fails, say what is wrong so that the \
         next attempt can fix it.\n"
    )
}

/// Why a reviewer's answer holds no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ReviewError {
    /// No JSON could be taken from the answer.
    #[error(transparent)]
    #[diagnostic(transparent)]
    NotJson(#[from] NotJson),
    /// The JSON is not an object.
    #[error("the answer is not a JSON object")]
    #[diagnostic(code(review::not_object))]
    NotObject,
    /// The object has neither `pass` nor `passed`.
    #[error("the answer has no `pass` field")]
    #[diagnostic(code(review::no_pass))]
    NoPass,
    /// `pass` is there but says neither yes nor no.
    #[error("`pass` is {found}, not true or false")]
    #[diagnostic(code(review::unclear_pass))]
    UnclearPass {
        /// The value of `pass`.
        found: Value,
    },
}

/// The verdict in a reviewer's answer, or why there is none. The answer may be fenced or
/// wrapped in prose (see [`super::extract_json`]); it must be an object whose `pass` (or
/// `passed`) is a boolean or one of the strings `true`/`false`, `yes`/`no`, `pass`/`fail`
/// (any case); `reason` is optional and any other JSON value is quoted as text.
pub fn parse_review(answer: &str) -> Result<Verdict, ReviewError> {
    let Value::Object(object) = extract_json(answer)? else { return Err(ReviewError::NotObject) };
    let pass = match object.get("pass").or_else(|| object.get("passed")) {
        Some(Value::Bool(pass)) => *pass,
        Some(found @ Value::String(word)) => match word.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "pass" | "passed" => true,
            "false" | "no" | "fail" | "failed" => false,
            _ => return Err(ReviewError::UnclearPass { found: found.clone() }),
        },
        Some(other) => return Err(ReviewError::UnclearPass { found: other.clone() }),
        None => return Err(ReviewError::NoPass),
    };
    if pass {
        return Ok(Verdict::Pass);
    }
    Ok(Verdict::Fail(format!("the reviewer rejected the output: {}", reason(&object))))
}

/// The reviewer's reason, as text.
fn reason(object: &Map<String, Value>) -> String {
    match object.get("reason") {
        Some(Value::String(reason)) if !reason.trim().is_empty() => reason.trim().to_owned(),
        None | Some(Value::Null | Value::String(_)) => "(no reason given)".to_owned(),
        Some(other) => other.to_string(),
    }
}

/// Runs the review on the reviewer agent's runtime.
pub(super) async fn check(
    agent: &str,
    criteria: Option<&str>,
    check: &Check<'_>,
    cancel: &CancellationToken,
) -> Verified {
    let incomplete = |why: String| Verified::plain(Verdict::Fail(format!("the review could not be completed: {why}")));
    let Some(reviewer) = &check.reviewer else {
        return incomplete(format!("no runtime was given for the reviewer agent `{agent}`"));
    };
    let prompt = review_prompt(check.task, check.input, check.output, criteria);
    let mut attempt =
        Attempt::new(format!("{}.review", check.task), check.attempt, prompt, check.workdir.to_path_buf());
    attempt.schema = Some(review_schema());
    let deadline = async {
        match check.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let reply = tokio::select! {
        reply = reviewer.run(attempt, cancel.clone()) => reply,
        () = deadline => {
            let timeout = check.timeout.unwrap_or_default();
            return incomplete(format!("the reviewer `{agent}` did not answer within {timeout:?}"));
        }
        () = cancel.cancelled() => return Verified::plain(Verdict::Fail("the verification was cancelled".to_owned())),
    };
    match reply {
        Reply::Output { text, tokens } => match parse_review(&text) {
            Ok(verdict) => Verified { verdict, tokens },
            Err(why) => Verified {
                tokens,
                ..incomplete(format!("the reviewer `{agent}` answered {:?}: {why}", excerpt(&text, MAX_QUOTE)))
            },
        },
        Reply::Failure { error, tokens, .. } => {
            Verified { tokens, ..incomplete(format!("the reviewer `{agent}` failed: {}", excerpt(&error, MAX_QUOTE))) }
        }
        Reply::Question(question, tokens) => Verified {
            tokens,
            ..incomplete(format!(
                "the reviewer `{agent}` asked a question instead of answering, and reviewers cannot ask: {:?}",
                excerpt(&question, MAX_QUOTE)
            ))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_holds_task_input_output_and_criteria() {
        let prompt = review_prompt("write_brief", "Write a brief.", "The brief.", Some("cites two sources"));
        assert!(prompt.contains("task `write_brief`"), "{prompt}");
        assert!(prompt.contains("<input>\nWrite a brief.\n</input>"), "{prompt}");
        assert!(prompt.contains("<output>\nThe brief.\n</output>"), "{prompt}");
        assert!(prompt.contains("Criteria: cites two sources\n"), "{prompt}");
        assert!(prompt.contains(r#"exactly one JSON object and nothing else: {"pass": true, "reason": "..."}"#));
    }

    #[test]
    fn the_prompt_has_default_criteria() {
        for criteria in [None, Some("  ")] {
            let prompt = review_prompt("t", "in", "out", criteria);
            assert!(prompt.contains("Criteria: the output fully and correctly answers the task\n"), "{prompt}");
        }
    }

    #[test]
    fn a_passing_review_passes() {
        assert_eq!(parse_review(r#"{"pass": true, "reason": "good"}"#), Ok(Verdict::Pass));
    }

    #[test]
    fn a_failing_review_keeps_its_reason() {
        assert_eq!(
            parse_review(r#"{"pass": false, "reason": "no sources cited"}"#),
            Ok(Verdict::Fail("the reviewer rejected the output: no sources cited".to_owned()))
        );
    }

    #[test]
    fn reviews_are_read_forgivingly() {
        let pass = Ok(Verdict::Pass);
        assert_eq!(parse_review("```json\n{\"pass\": true, \"reason\": \"ok\"}\n```"), pass);
        assert_eq!(parse_review("My verdict: {\"pass\": \"True\", \"reason\": \"ok\"}. Thanks."), pass);
        assert_eq!(parse_review(r#"{"passed": "yes"}"#), pass);
        assert_eq!(
            parse_review(r#"{"pass": "fail", "reason": ["too short", "no title"]}"#),
            Ok(Verdict::Fail(r#"the reviewer rejected the output: ["too short","no title"]"#.to_owned()))
        );
        assert_eq!(
            parse_review(r#"{"pass": false}"#),
            Ok(Verdict::Fail("the reviewer rejected the output: (no reason given)".to_owned()))
        );
    }

    #[test]
    fn unusable_reviews_say_why() {
        let why = |answer: &str| parse_review(answer).expect_err(answer).to_string();
        assert_eq!(why("[true]"), "the answer is not a JSON object");
        assert_eq!(why(r#"{"ok": true}"#), "the answer has no `pass` field");
        assert_eq!(why(r#"{"pass": "maybe"}"#), r#"`pass` is "maybe", not true or false"#);
        assert_eq!(why(r#"{"pass": 1}"#), "`pass` is 1, not true or false");
        assert!(parse_review("Looks good to me!").is_err());
    }

    #[test]
    fn the_review_schema_is_valid() {
        assert!(jsonschema::meta::is_valid(&review_schema()));
    }
}
