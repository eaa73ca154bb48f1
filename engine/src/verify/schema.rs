//! `schema_check`: the output must be JSON valid against a JSON Schema.

use serde_json::Value;

use super::{Verdict, excerpt, extract_json};

/// How many validation errors a reason lists.
const MAX_ERRORS: usize = 5;

/// How much of one validation error's message is kept; messages quote the offending value,
/// which may be large.
const MAX_MESSAGE: usize = 200;

/// Holds `output` to `schema`: it must hold JSON (see [`extract_json`]) that conforms.
pub(super) fn check(schema: &Value, output: &str) -> Verdict {
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(error) => return Verdict::Fail(format!("the verification schema is not a valid JSON Schema: {error}")),
    };
    let instance = match extract_json(output) {
        Ok(instance) => instance,
        Err(reason) => return Verdict::Fail(reason.to_string()),
    };
    let mut errors = validator.iter_errors(&instance);
    let listed: Vec<String> = errors
        .by_ref()
        .take(MAX_ERRORS)
        .map(|error| {
            let path = error.instance_path().as_str();
            let path = if path.is_empty() { "(root)" } else { path };
            format!("- at {path}: {}", excerpt(&error.to_string(), MAX_MESSAGE))
        })
        .collect();
    if listed.is_empty() {
        return Verdict::Pass;
    }
    let more = errors.count();
    let mut reason = format!("the output does not match the schema:\n{}", listed.join("\n"));
    if more > 0 {
        reason.push_str(&format!("\n(and {more} more)"));
    }
    Verdict::Fail(reason)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filings() -> Value {
        json!({
            "type": "object",
            "required": ["filings"],
            "properties": {"filings": {"type": "array", "items": {"type": "string"}}},
        })
    }

    #[test]
    fn conforming_json_passes() {
        assert_eq!(check(&filings(), r#"{"filings": ["10-K"]}"#), Verdict::Pass);
    }

    #[test]
    fn errors_are_listed_with_their_paths() {
        let Verdict::Fail(reason) = check(&filings(), r#"{"filings": ["10-K", 7]}"#) else { panic!("passed") };
        assert_eq!(reason, "the output does not match the schema:\n- at /filings/1: 7 is not of type \"string\"");
        let Verdict::Fail(reason) = check(&filings(), "{}") else { panic!("passed") };
        assert_eq!(reason, "the output does not match the schema:\n- at (root): \"filings\" is a required property");
    }

    #[test]
    fn at_most_five_errors_are_listed() {
        let output = json!({"filings": [1, 2, 3, 4, 5, 6, 7]}).to_string();
        let Verdict::Fail(reason) = check(&filings(), &output) else { panic!("passed") };
        assert_eq!(reason.lines().filter(|l| l.starts_with("- at /filings/")).count(), 5, "{reason}");
        assert!(reason.ends_with("(and 2 more)"), "{reason}");
    }

    #[test]
    fn long_messages_are_shortened() {
        let schema = json!({"type": "string"});
        let output = json!({"text": "word ".repeat(500)}).to_string();
        let Verdict::Fail(reason) = check(&schema, &output) else { panic!("passed") };
        assert!(reason.len() < 400, "{reason}");
    }

    #[test]
    fn a_schema_that_does_not_compile_fails_clearly() {
        let Verdict::Fail(reason) = check(&json!({"type": 12}), "{}") else { panic!("passed") };
        assert!(reason.starts_with("the verification schema is not a valid JSON Schema: "), "{reason}");
    }
}
