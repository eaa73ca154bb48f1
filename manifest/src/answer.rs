//! Finding the JSON in a model's answer: the one rule the verifier, the plan author and
//! replanning all read answers by, so one answer never means three things.
//!
//! Models answer JSON bare, in a Markdown code fence, or amid prose; some add a byte-order mark
//! or a comma before a closing bracket. [`find_json`] takes, in this order:
//!
//! 1. **The whole answer**, when it is one JSON value (of any kind, scalars too), ignoring a
//!    leading byte-order mark and surrounding whitespace.
//! 2. **The first fenced block that holds JSON.** A fence opens with three backticks at the
//!    start of a line (indentation allowed); the first word after them is its label. A block
//!    holds JSON when it is labelled `json` (any case), or when its body starts with `{` or `[`
//!    whatever its label (models label JSON `javascript`, or not at all). Other blocks, such as
//!    a `python` snippet, an untagged shell command or a `yaml` block, are skipped. A fence
//!    closes at the next line that starts with three backticks, else at the next three
//!    backticks anywhere (`}```), else at the end of the answer: a cut-off answer's block is
//!    read as far as it goes and reported as [`AnswerError::Truncated`]. Content right after
//!    the opening backticks on the same line (```` ```{"a": 1}``` ````) is the body. The first
//!    such block is read and later ones are ignored; when it does not parse, that is the error
//!    (no other block or bare JSON is tried). A fence that wins makes bare JSON elsewhere in
//!    the answer irrelevant.
//! 3. **The one JSON record in the prose**, when no block holds JSON: the bracketed parts of
//!    the text outside every fence (each `{` or `[` up to the bracket that balances it, quotes
//!    respected, or to the end of the text) are read, and those that parse as an object, or as
//!    a list holding an object, count. Exactly one must count: two are
//!    [`AnswerError::Several`], since which one is meant is a guess. Brackets around prose and
//!    scalars (`[1]`, `[sic]`, `{as requested}`, `["a", "b"]`) never count here; a list of
//!    scalars is read bare or fenced. When none counts, the error is the one of the longest
//!    part that did not parse, or [`AnswerError::NoJson`] when there is none.
//!
//! Only whole answers of JSON hold a scalar; a fence inside a JSON string is no fence, since a
//! JSON string cannot hold the line break a fence starts after. Every candidate is parsed
//! strictly first and, only when that fails, again without commas that directly precede a
//! `}` or `]` (outside strings); the strict parser's error is the one reported. Positions in
//! errors count lines and columns (in bytes, from 1) of the whole answer.
//!
//! What a caller does next is its own: the verifier checks the value against a schema or reads
//! a verdict, the plan author wants an object, and replanning reads the [`Found::range`] again
//! with spans and falls back to YAML when there is no JSON (see [`crate::splice`]).

use std::fmt;
use std::ops::Range;

use miette::Diagnostic;
use serde_json::Value;
use thiserror::Error;

use crate::json_strings::JsonStrings;

/// The JSON found in an answer: where it is and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The bytes of the answer that hold the value, without surrounding whitespace.
    pub range: Range<usize>,
    /// The value, parsed (trailing commas forgiven).
    pub value: Value,
}

/// Why JSON could not be taken from an answer. The messages are written for a model to read
/// in a repair prompt as much as for a person.
#[derive(Debug, Clone, PartialEq, Eq, Error, Diagnostic)]
#[non_exhaustive]
pub enum AnswerError {
    /// Nothing but whitespace.
    #[error("the answer is empty")]
    #[diagnostic(code(answer::empty))]
    Empty,
    /// No fenced block holds JSON and no part of the prose is a JSON object or list.
    #[error("the answer holds no JSON object or list")]
    #[diagnostic(code(answer::no_json), help("answer with one JSON object, bare or in a ```json fence"))]
    NoJson,
    /// The JSON opens but the answer ends before it closes: it was cut off.
    #[error("the answer stops mid-object: {depth} brace(s) or bracket(s) are still open at the end")]
    #[diagnostic(code(answer::truncated), help("answer with shorter JSON, so that it fits"))]
    Truncated {
        /// How many brackets are still open at the end.
        depth: usize,
        /// The parser's account, at the end of the answer.
        syntax: JsonSyntax,
    },
    /// The JSON is not valid.
    #[error("the JSON does not parse: {0}")]
    #[diagnostic(code(answer::syntax))]
    Syntax(JsonSyntax),
    /// More than one JSON object or list in the prose, so it is unclear which is meant.
    #[error("the answer holds more than one JSON object or list; answer with exactly one")]
    #[diagnostic(code(answer::several), help("put the one meant in a ```json fence, or leave the others out"))]
    Several,
}

impl AnswerError {
    /// The parser's account of JSON that does not parse, truncated or not.
    pub fn syntax(&self) -> Option<&JsonSyntax> {
        match self {
            AnswerError::Truncated { syntax, .. } | AnswerError::Syntax(syntax) => Some(syntax),
            _ => None,
        }
    }

    /// The byte of the answer the error concerns: where parsing stopped, else the start.
    pub fn offset(&self) -> usize {
        self.syntax().map_or(0, |syntax| syntax.offset)
    }
}

/// Where and why the JSON parser stopped, counted in the whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSyntax {
    /// The parser's message, without its position.
    pub message: String,
    /// The byte of the answer the parser stopped at.
    pub offset: usize,
    /// The line, from 1.
    pub line: usize,
    /// The column in bytes, from 1.
    pub column: usize,
}

impl fmt::Display for JsonSyntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at line {} column {}", self.message, self.line, self.column)
    }
}

/// The JSON in a model's answer: the whole answer when it is JSON; else the first code fence
/// labelled `json` or whose body starts with `{` or `[`; else the one object (or list holding
/// an object) in the prose outside fences, two being [`AnswerError::Several`]. Trailing commas
/// are forgiven; a cut-off answer is [`AnswerError::Truncated`], never guessed at.
pub fn find_json(answer: &str) -> Result<Found, AnswerError> {
    let bom = answer.len() - answer.trim_start_matches('\u{feff}').len();
    let whole = trim(answer, bom..answer.len());
    if whole.is_empty() {
        return Err(AnswerError::Empty);
    }
    if let Some(value) = parse(&answer[whole.clone()]) {
        return Ok(Found { range: whole, value });
    }
    let fences = fences(answer);
    if let Some(fence) = fences.iter().find(|fence| fence.holds_json(answer)) {
        let range = trim(answer, fence.body.clone());
        return read(answer, range.clone()).map(|value| Found { range, value }).map_err(|u| u.error(answer));
    }
    in_prose(answer, &fences)
}

/// A fenced block of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    /// The first word after the opening backticks; empty when there is none.
    pub label: Range<usize>,
    /// The body, between the opening line and the closing backticks.
    pub body: Range<usize>,
    /// The whole block, backticks included.
    pub whole: Range<usize>,
}

impl Fence {
    /// Whether the block is labelled `json` or its body starts like JSON.
    fn holds_json(&self, answer: &str) -> bool {
        let body = answer[self.body.clone()].trim_start();
        !body.is_empty() && (answer[self.label.clone()].eq_ignore_ascii_case("json") || body.starts_with(['{', '[']))
    }
}

/// The fenced blocks of an answer, in order.
pub(crate) fn fences(answer: &str) -> Vec<Fence> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = fence_at_line_start(answer, from) {
        let after = open + 3;
        let line_end = answer[after..].find('\n').map_or(answer.len(), |i| after + i);
        let info = &answer[after..line_end];
        let (label, body_start) = if info.trim_start().starts_with(['{', '[']) {
            (after..after, after)
        } else {
            let word_start = after + (info.len() - info.trim_start().len());
            let word_len = answer[word_start..line_end].find(char::is_whitespace).unwrap_or(line_end - word_start);
            (word_start..word_start + word_len, (line_end + 1).min(answer.len()))
        };
        let close = fence_at_line_start(answer, body_start)
            .or_else(|| answer[body_start..].find("```").map(|i| body_start + i));
        let (body_end, end) = close.map_or((answer.len(), answer.len()), |close| (close, close + 3));
        found.push(Fence { label, body: body_start..body_end, whole: open..end });
        from = end;
    }
    found
}

/// The first three backticks that start a line (but for indentation) at or after `from`; when
/// `from` is inside a line, the search starts at the next line. One pass.
fn fence_at_line_start(answer: &str, from: usize) -> Option<usize> {
    let mut line_start = from;
    if from > 0 && answer.as_bytes()[from - 1] != b'\n' {
        line_start = from + answer[from..].find('\n')? + 1;
    }
    loop {
        let line = &answer[line_start..];
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if line[indent..].starts_with("```") {
            return Some(line_start + indent);
        }
        line_start += line.find('\n')? + 1;
    }
}

/// The one JSON record among the bracketed parts of the text outside the fences.
fn in_prose(answer: &str, fences: &[Fence]) -> Result<Found, AnswerError> {
    let mut found = None;
    let mut longest: Option<Unparsed> = None;
    for part in outside(answer, fences).into_iter().flat_map(|segment| bracketed(answer, segment)) {
        match read(answer, part.clone()) {
            Ok(value) if is_record(&value) => {
                if found.is_some() {
                    return Err(AnswerError::Several);
                }
                found = Some(Found { range: part, value });
            }
            Ok(_) => {}
            Err(unparsed) => {
                if longest.as_ref().is_none_or(|longest| unparsed.range.len() > longest.range.len()) {
                    longest = Some(unparsed);
                }
            }
        }
    }
    match (found, longest) {
        (Some(found), _) => Ok(found),
        (None, Some(unparsed)) => Err(unparsed.error(answer)),
        (None, None) => Err(AnswerError::NoJson),
    }
}

/// An object, or a list that holds an object.
fn is_record(value: &Value) -> bool {
    match value {
        Value::Object(_) => true,
        Value::Array(items) => items.iter().any(Value::is_object),
        _ => false,
    }
}

/// The parts of the answer between its fences.
fn outside(answer: &str, fences: &[Fence]) -> Vec<Range<usize>> {
    let mut segments = Vec::with_capacity(fences.len() + 1);
    let mut start = 0;
    for fence in fences {
        segments.push(start..fence.whole.start);
        start = fence.whole.end;
    }
    segments.push(start..answer.len());
    segments
}

/// The top-level bracketed parts of a segment, in order: each `{` or `[` outside an earlier
/// part up to the bracket that balances it (quotes respected), or to the segment's end when
/// none does. One pass.
fn bracketed(answer: &str, segment: Range<usize>) -> Vec<Range<usize>> {
    let mut parts = Vec::new();
    let mut start = None;
    let mut depth = 0usize;
    let mut strings = JsonStrings::default();
    for (i, byte) in answer[segment.clone()].bytes().enumerate().map(|(i, b)| (segment.start + i, b)) {
        if start.is_none() {
            if matches!(byte, b'{' | b'[') {
                start = Some(i);
                depth = 1;
                strings = JsonStrings::default();
            }
            continue;
        }
        if !strings.outside(byte) {
            continue;
        }
        match byte {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0
                    && let Some(s) = start.take()
                {
                    parts.push(s..i + 1);
                }
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        parts.push(s..segment.end);
    }
    parts
}

/// The value in `range` of the answer, or the strict parser's error.
fn read(answer: &str, range: Range<usize>) -> Result<Value, Unparsed> {
    let text = &answer[range.clone()];
    let error = match serde_json::from_str(text) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    match serde_json::from_str(&without_trailing_commas(text)) {
        Ok(value) => Ok(value),
        Err(_) => Err(Unparsed { range, error }),
    }
}

/// A part of the answer that is not JSON, and the parser's error, positioned in the whole
/// answer only when it is reported (that takes a scan of the answer up to it).
struct Unparsed {
    range: Range<usize>,
    error: serde_json::Error,
}

impl Unparsed {
    /// The error to report: truncated when the parser ran out of text.
    fn error(self, answer: &str) -> AnswerError {
        let syntax = positioned(answer, self.range.start, &self.error);
        if self.error.is_eof() {
            AnswerError::Truncated { depth: open_at_end(&answer[self.range]), syntax }
        } else {
            AnswerError::Syntax(syntax)
        }
    }
}

/// The value of a text, strictly or without trailing commas.
fn parse(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok().or_else(|| serde_json::from_str(&without_trailing_commas(text)).ok())
}

/// A parse error of the JSON that starts at byte `start` of the answer, its position counted
/// in the whole answer.
fn positioned(answer: &str, start: usize, error: &serde_json::Error) -> JsonSyntax {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = message.strip_suffix(&suffix).unwrap_or(&message).to_owned();
    let before = &answer[..start];
    let lines_before = before.matches('\n').count();
    let text = &answer[start..];
    let line_offset = if error.line() <= 1 {
        0
    } else {
        text.match_indices('\n').nth(error.line() - 2).map_or(text.len(), |(i, _)| i + 1)
    };
    let mut offset = (start + line_offset + error.column().saturating_sub(1)).min(answer.len());
    while !answer.is_char_boundary(offset) {
        offset -= 1;
    }
    let (line, column) = if error.line() <= 1 {
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (lines_before + 1, before.len() - line_start + error.column())
    } else {
        (lines_before + error.line(), error.column())
    };
    JsonSyntax { message, offset, line, column }
}

/// How many brackets are open at the end of a text, outside strings (at least one).
fn open_at_end(text: &str) -> usize {
    let mut depth = 0usize;
    let mut strings = JsonStrings::default();
    for byte in text.bytes() {
        if strings.outside(byte) {
            match byte {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    depth.max(1)
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

/// The range without surrounding whitespace.
pub(crate) fn trim(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    let start = range.start + (slice.len() - slice.trim_start().len());
    let end = range.end - (slice.len() - slice.trim_end().len());
    start..end.max(start)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(answer: &str) -> Value {
        find_json(answer).unwrap_or_else(|error| panic!("{answer:?}: {error}")).value
    }

    fn error(answer: &str) -> AnswerError {
        find_json(answer).map(|found| found.value).expect_err(answer)
    }

    #[test]
    fn the_whole_answer_wins_and_may_be_a_scalar() {
        assert_eq!(value("  \n{\"a\": 1}\n\n"), json!({"a": 1}));
        assert_eq!(value("[{\"id\": \"a\"}]"), json!([{"id": "a"}]));
        assert_eq!(value("42"), json!(42));
        assert_eq!(value("\u{feff}{\"a\": true}"), json!({"a": true}));
        let found = find_json(" [1] ").expect("a list");
        assert_eq!(found.range, 1..4);
    }

    #[test]
    fn a_fence_inside_a_json_string_is_no_fence() {
        // Earlier the plan author and replanning read `{}` out of the string.
        assert_eq!(
            value("{\"code\": \"```json\\n{}\\n```\", \"id\": \"a\"}"),
            json!({"code": "```json\n{}\n```", "id": "a"})
        );
        let text = "Here: {\"note\": \"use ```json\\n{\\\"x\\\": 1}\\n``` blocks\", \"id\": \"a\"}";
        assert_eq!(value(text)["id"], "a");
    }

    #[test]
    fn fences_labelled_json_in_any_case_or_untagged_are_read() {
        assert_eq!(value("Here:\n```json\n{\"id\": \"a\"}\n```\nDone."), json!({"id": "a"}));
        assert_eq!(value("```JSON\n{\"id\": \"a\"}\n```"), json!({"id": "a"}));
        assert_eq!(value("```\n[true]\n```"), json!([true]));
        assert_eq!(value("```javascript\n{\"id\": \"a\"}\n```"), json!({"id": "a"}));
        assert_eq!(value("  ```json\n  {\"id\": \"a\"}\n  ```"), json!({"id": "a"}));
    }

    #[test]
    fn fences_holding_other_things_are_skipped() {
        // Earlier replanning took the first fence, whatever it held.
        let text = "```python\nd = {'x': 1}\n```\nand the answer:\n```json\n{\"id\": \"a\"}\n```";
        assert_eq!(value(text), json!({"id": "a"}));
        let text = "```\nrunner apply\n```\nthen\n```json\n{\"spec\": 1}\n```";
        assert_eq!(value(text), json!({"spec": 1}));
    }

    #[test]
    fn the_first_fence_holding_json_wins() {
        let text = "```\n{\"id\": \"u\"}\n```\n```json\n{\"id\": \"a\"}\n```";
        assert_eq!(value(text), json!({"id": "u"}));
        let text = "```json\n{\"id\": \"a\"}\n```\n```json\n{\"id\": \"b\"}\n```";
        assert_eq!(value(text), json!({"id": "a"}));
    }

    #[test]
    fn a_fence_beats_bare_json_in_the_prose() {
        let text = "{\"id\": \"b\"}\n```json\n{\"id\": \"a\"}\n```";
        assert_eq!(value(text), json!({"id": "a"}));
    }

    #[test]
    fn fences_closed_inline_or_opened_inline_are_read() {
        assert_eq!(value("```json\n{\"id\": \"a\"}```"), json!({"id": "a"}));
        assert_eq!(value("```{\"id\": \"a\"}```"), json!({"id": "a"}));
    }

    #[test]
    fn an_unterminated_fence_runs_to_the_end() {
        assert_eq!(value("```json\n{\"id\": \"a\"}"), json!({"id": "a"}));
        let AnswerError::Truncated { depth, syntax } = error("```json\n{\"a\": 1,") else { panic!("not truncated") };
        assert_eq!(depth, 1);
        assert_eq!(syntax.to_string(), "EOF while parsing a value at line 2 column 8");
    }

    #[test]
    fn one_record_in_prose_is_read() {
        assert_eq!(value("Sure! {\"pass\": true} Hope that helps {:"), json!({"pass": true}));
        assert_eq!(value("Per [1], the answer: {\"id\": \"a\"} [sic]"), json!({"id": "a"}));
        assert_eq!(value("The plan {as asked}: {\"id\": \"a\"}"), json!({"id": "a"}));
        assert_eq!(value("Tasks: [{\"id\": \"a\"}] done"), json!([{"id": "a"}]));
    }

    #[test]
    fn several_records_in_prose_are_ambiguous() {
        assert_eq!(error("{\"id\": \"a\"}\n{\"id\": \"b\"}"), AnswerError::Several);
        assert_eq!(error("Old {\"id\": \"x\"}; new: {\"id\": \"a\", \"input\": \"longer\"}"), AnswerError::Several);
    }

    #[test]
    fn scalars_in_prose_are_not_read() {
        assert_eq!(error("The ids: [\"a\", \"b\"]"), AnswerError::NoJson);
        assert_eq!(error("42 is the answer"), AnswerError::NoJson);
    }

    #[test]
    fn yaml_is_not_json() {
        assert_eq!(error("```yaml\n- id: a\n  input: x\n```"), AnswerError::NoJson);
        assert_eq!(error("- id: a\n  input: x\n"), AnswerError::NoJson);
    }

    #[test]
    fn trailing_commas_are_forgiven_outside_strings() {
        assert_eq!(value("{\"list\": [1, 2, ], \"text\": \"a, }\",\n}"), json!({"list": [1, 2], "text": "a, }"}));
        assert_eq!(value("Plan: {\"id\": \"a\",}"), json!({"id": "a"}));
    }

    #[test]
    fn a_cut_off_answer_is_truncated_not_repaired() {
        let AnswerError::Truncated { depth, syntax } = error("{\"spec\": {\"workflow\": [{\"id\": \"a\"") else {
            panic!("not truncated")
        };
        assert_eq!(depth, 4);
        assert_eq!(syntax.line, 1);
        assert_eq!(
            error("{\"a\": [1, 2").syntax().map(ToString::to_string).as_deref(),
            Some("EOF while parsing a list at line 1 column 11")
        );
    }

    #[test]
    fn syntax_errors_are_positioned_in_the_whole_answer() {
        let AnswerError::Syntax(syntax) = error("Result:\n```json\n{\n  \"a\": 1,\n  \"b\": oops\n}\n```") else {
            panic!("not a syntax error")
        };
        assert_eq!((syntax.line, syntax.column), (5, 8));
        let text = "The value: {\"a\": tru}";
        let AnswerError::Syntax(syntax) = error(text) else { panic!("not a syntax error") };
        assert_eq!(syntax.to_string(), "expected ident at line 1 column 21");
        assert_eq!(&text[syntax.offset..], "}");
    }

    #[test]
    fn empty_and_prose_answers_say_so() {
        assert_eq!(error("   "), AnswerError::Empty);
        assert_eq!(error("\u{feff}"), AnswerError::Empty);
        assert_eq!(error("I cannot do that."), AnswerError::NoJson);
        assert_eq!(error("```json\n```"), AnswerError::NoJson);
    }

    #[test]
    fn hostile_answers_end_quickly() {
        let many_fences = "```".repeat(100_000);
        assert!(find_json(&many_fences).is_err());
        let lines = "```\n".repeat(50_000);
        assert!(find_json(&lines).is_err());
        assert!(find_json(&"{a} ".repeat(200_000)).is_err());
        assert!(find_json(&"[".repeat(100_000)).is_err());
    }
}
