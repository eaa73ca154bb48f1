//! Finding the JSON in an output the way LLM output needs: bare, in a code fence, or as the
//! first `{...}`/`[...]` value amid prose.

use serde_json::Value;

/// The JSON value in `text`: the whole text when it parses, else the first fenced block that
/// holds an object or array, else the value starting at the first `{` or `[` (text after it
/// is ignored). The error names the problem and its line and column in `text`.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the output is empty, not JSON".to_owned());
    }
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Ok(value);
    }
    if let Some((start, body)) = fenced(text) {
        return serde_json::from_str(body).map_err(|e| not_json(text, start, &e));
    }
    let start = text.find(['{', '[']).unwrap_or(text.len() - text.trim_start().len());
    let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Ok(value),
        Some(Err(error)) => Err(not_json(text, start, &error)),
        None => Err("the output holds no JSON value".to_owned()),
    }
}

/// The byte offset and body of the first ``` fence whose body starts with `{` or `[`; an
/// unclosed fence runs to the end of the text, so truncated JSON in it reports where it ends.
fn fenced(text: &str) -> Option<(usize, &str)> {
    let mut rest = 0;
    while let Some(open) = text[rest..].find("```").map(|i| rest + i + 3) {
        let line_end = text[open..].find('\n').map_or(text.len(), |i| open + i);
        let info = text[open..line_end].trim();
        let is_tag = info.chars().all(|c| c.is_alphanumeric() || "-_+.".contains(c));
        let start = if is_tag && line_end < text.len() { line_end + 1 } else { open };
        let end = text[start..].find("```").map_or(text.len(), |i| start + i);
        let body = &text[start..end];
        if body.trim_start().starts_with(['{', '[']) {
            return Some((start, body));
        }
        rest = (end + 3).min(text.len());
        if end == text.len() {
            return None;
        }
    }
    None
}

/// A parse error of the JSON that starts at byte `start` of `text`, its position made
/// relative to the whole text.
fn not_json(text: &str, start: usize, error: &serde_json::Error) -> String {
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let Some(message) = message.strip_suffix(&position) else {
        return format!("the output is not valid JSON: {message}");
    };
    let before = &text[..start];
    let lines_before = before.matches('\n').count();
    let (line, column) = if error.line() <= 1 {
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (lines_before + 1, before.len() - line_start + error.column())
    } else {
        (lines_before + error.line(), error.column())
    };
    format!("the output is not valid JSON: {message} at line {line} column {column}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let error = extract_json("{\"a\": [1, 2").unwrap_err();
        assert_eq!(error, "the output is not valid JSON: EOF while parsing a list at line 1 column 11");
    }

    #[test]
    fn positions_count_from_the_start_of_the_output() {
        let error = extract_json("Result:\n```json\n{\n  \"a\": 1,\n  \"b\": oops\n}\n```").unwrap_err();
        assert!(error.ends_with("at line 5 column 8"), "{error}");
        let error = extract_json("The value: {\"a\": tru}").unwrap_err();
        assert!(error.ends_with("expected ident at line 1 column 21"), "{error}");
    }

    #[test]
    fn an_unclosed_fence_reports_the_truncation() {
        let error = extract_json("```json\n{\"a\": 1,").unwrap_err();
        assert_eq!(error, "the output is not valid JSON: EOF while parsing a value at line 2 column 8");
    }

    #[test]
    fn prose_is_not_json() {
        let error = extract_json("I could not find anything.").unwrap_err();
        assert!(error.starts_with("the output is not valid JSON: expected"), "{error}");
        assert_eq!(extract_json("   "), Err("the output is empty, not JSON".to_owned()));
    }
}
