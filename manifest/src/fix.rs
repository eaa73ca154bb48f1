//! Fixes: the mechanical edits a diagnostic's help describes (a typo to its suggestion, a
//! redundant dependency removed, a fallback added), as replacements of byte spans, so a file
//! keeps its comments, order and formatting. `runner critic --fix` and the language server's
//! code actions both apply these.

use crate::source::Span;

/// One replacement: the bytes of `span` become `text` (an empty span inserts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The bytes replaced.
    pub span: Span,
    /// What replaces them.
    pub text: String,
}

/// The edits that carry out one help, with a title saying what they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// What the fix does, such as "replace `serach` with `search`".
    pub title: String,
    /// The replacements, which never overlap.
    pub edits: Vec<Edit>,
}

impl Fix {
    /// Replaces `was`, the scalar written at `span`, with `word`, keeping the quotes it was
    /// written in; `None` when the text does not hold `was` there.
    pub fn replace(text: &str, span: Span, was: &str, word: &str) -> Option<Fix> {
        let written = slice(text, span);
        if span.is_empty() || unquoted(written) != was {
            return None;
        }
        let replacement = match written.chars().next() {
            Some('"') => serde_json::to_string(word).unwrap_or_else(|_| format!("\"{word}\"")),
            Some('\'') => format!("'{}'", word.replace('\'', "''")),
            _ => word.to_owned(),
        };
        Some(Fix { title: format!("replace `{was}` with `{word}`"), edits: vec![Edit { span, text: replacement }] })
    }

    /// Removes the list entry at `span` (a scalar in a flow list `[a, b]` or a block list
    /// `- a`), with its separator; `None` when the text around it is not a list entry.
    pub fn remove_entry(text: &str, span: Span, title: String) -> Option<Fix> {
        let (start, end) = (span.offset(), span.offset() + span.len());
        let before = text.get(..start)?;
        let after = text.get(end..)?;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let prefix = &before[line_start..];
        // A block entry: `  - name` alone on its line, perhaps with a comment.
        if prefix.trim_start() == "- " || prefix.trim_start() == "-" {
            let rest = after.split('\n').next().unwrap_or("");
            let rest = rest.trim_start();
            if !(rest.is_empty() || rest.starts_with('#')) {
                return None;
            }
            let line_end = after.find('\n').map_or(text.len(), |i| end + i + 1);
            return Some(Fix {
                title,
                edits: vec![Edit { span: Span::new(line_start, line_end - line_start), text: String::new() }],
            });
        }
        // A flow entry: take the comma after it, or else the one before it.
        let trailing = after.len() - after.trim_start_matches([' ', '\t']).len();
        if after[trailing..].starts_with(',') {
            let comma = end + trailing + 1;
            let spaces = text[comma..].len() - text[comma..].trim_start_matches([' ', '\t']).len();
            return Some(Fix {
                title,
                edits: vec![Edit { span: Span::new(start, comma + spaces - start), text: String::new() }],
            });
        }
        let leading = before.trim_end_matches([' ', '\t']);
        if leading.ends_with(',') {
            let comma = leading.len() - 1;
            return Some(Fix { title, edits: vec![Edit { span: Span::new(comma, end - comma), text: String::new() }] });
        }
        None
    }

    /// Adds `word` to the list whose last entry is at `last` (a scalar in a flow list, or a
    /// block list's `- entry`), after that entry; `None` when the text there is not a list entry.
    pub fn add_entry(text: &str, last: Span, word: &str, title: String) -> Option<Fix> {
        let end = last.offset() + last.len();
        let after = text.get(end..)?;
        let quoted;
        let word = if text.get(last.offset()..end)?.starts_with('"') {
            quoted = serde_json::to_string(word).ok()?;
            quoted.as_str()
        } else {
            word
        };
        let next = after.trim_start_matches([' ', '\t']);
        if next.starts_with([',', ']']) {
            return Some(Fix { title, edits: vec![Edit { span: Span::new(end, 0), text: format!(", {word}") }] });
        }
        let before = text.get(..last.offset())?;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let prefix = &before[line_start..];
        let dash = prefix.trim_end();
        if !dash.ends_with('-') || !dash[..dash.len() - 1].chars().all(|c| c == ' ' || c == '-') {
            return None;
        }
        let line_end = after.find('\n').map_or(text.len(), |i| end + i);
        let indent = " ".repeat(dash.len() - 1);
        Some(Fix { title, edits: vec![Edit { span: Span::new(line_end, 0), text: format!("\n{indent}- {word}") }] })
    }

    /// Adds `key: value` to the mapping whose key `anchor` is the value of (a task's `id`, say):
    /// on a line of its own below the anchor's in a block mapping, after the anchor's entry in a
    /// flow one. `yaml` is the value in block YAML, `json` the same value in JSON.
    pub fn add_field(text: &str, anchor: Span, key: &str, yaml: &str, json: &str, title: String) -> Option<Fix> {
        let end = anchor.offset() + anchor.len();
        let before = text.get(..anchor.offset())?;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = &before[line_start..];
        let key_column = line.len() - line.trim_start_matches([' ', '-']).len();
        let edit = if line[key_column..].contains(['{', ',']) {
            let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
            Edit { span: Span::new(end, 0), text: format!(", {quoted}: {json}") }
        } else {
            let line_end = text.get(end..)?.find('\n').map_or(text.len(), |i| end + i);
            Edit { span: Span::new(line_end, 0), text: format!("\n{}{key}: {yaml}", " ".repeat(key_column)) }
        };
        Some(Fix { title, edits: vec![edit] })
    }

    /// Replaces the value at `span` (a field's whole value, scalar or mapping) with a flow
    /// value, which reads the same in YAML and JSON.
    pub fn replace_value(span: Span, flow: &str, title: String) -> Fix {
        Fix { title, edits: vec![Edit { span, text: flow.to_owned() }] }
    }
}

/// Applies edits to a text: each replaces its span, in order of position; an edit that overlaps
/// one already taken, or falls outside the text, is left out. Returns the new text and how
/// many edits were left out.
pub fn apply(text: &str, edits: &[Edit]) -> (String, usize) {
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.span.offset(), e.span.len()));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut left_out = 0;
    for edit in sorted {
        let (start, end) = (edit.span.offset(), edit.span.offset() + edit.span.len());
        let fits = start >= at && end <= text.len() && text.is_char_boundary(start) && text.is_char_boundary(end);
        if !fits {
            left_out += 1;
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(&edit.text);
        at = end;
    }
    out.push_str(&text[at..]);
    (out, left_out)
}

/// The text a span covers, or `""` outside the text.
fn slice(text: &str, span: Span) -> &str {
    text.get(span.offset()..span.offset() + span.len()).unwrap_or("")
}

/// A scalar as written, without the quotes around it.
fn unquoted(written: &str) -> &str {
    written.trim_matches(|c| c == '"' || c == '\'')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, word: &str) -> Span {
        Span::new(text.find(word).expect("the test text holds the word"), word.len())
    }

    fn applied(text: &str, fix: &Fix) -> String {
        apply(text, &fix.edits).0
    }

    #[test]
    fn a_replacement_keeps_the_quotes_it_was_written_in() {
        for (text, word, want) in [
            ("depends_on: [serach]", "serach", "depends_on: [search]"),
            ("depends_on: [\"serach\"]", "\"serach\"", "depends_on: [\"search\"]"),
            ("depends_on: ['serach']", "'serach'", "depends_on: ['search']"),
        ] {
            let fix = Fix::replace(text, at(text, word), "serach", "search").expect("the word is there");
            assert_eq!(applied(text, &fix), want);
            assert_eq!(fix.title, "replace `serach` with `search`");
        }
    }

    #[test]
    fn no_replacement_where_the_text_does_not_hold_the_word() {
        assert_eq!(Fix::replace("d: [a]", Span::new(4, 1), "b", "c"), None);
        assert_eq!(Fix::replace("d: [a]", Span::default(), "", "c"), None);
    }

    #[test]
    fn removing_a_flow_entry_takes_one_comma() {
        let title = String::new();
        for (text, word, want) in [
            ("d: [a, b, c]", "b", "d: [a, c]"),
            ("d: [a, b]", "b", "d: [a]"),
            ("d: [a, b]", "a", "d: [b]"),
            ("{\"d\": [\"a\",\"b\"]}", "\"b\"", "{\"d\": [\"a\"]}"),
        ] {
            let fix = Fix::remove_entry(text, at(text, word), title.clone()).expect("an entry of a flow list");
            assert_eq!(applied(text, &fix), want, "removing {word} from {text}");
        }
        assert_eq!(Fix::remove_entry("d: b", Span::new(3, 1), title), None);
    }

    #[test]
    fn removing_a_block_entry_takes_its_line_and_keeps_comments_elsewhere() {
        let text = "d:\n  - a  # first\n  - b # second\n  - c\n";
        let fix = Fix::remove_entry(text, at(text, "b"), String::new()).expect("an entry of a block list");
        assert_eq!(applied(text, &fix), "d:\n  - a  # first\n  - c\n");
    }

    #[test]
    fn a_field_goes_on_its_own_line_in_block_style_and_after_the_anchor_in_flow_style() {
        let text = "workflow:\n  - id: publish  # the last step\n    agent: echo\n";
        let fix = Fix::add_field(text, at(text, "publish"), "on_failure", "retry", "\"retry\"", String::new())
            .expect("a block mapping");
        assert_eq!(
            applied(text, &fix),
            "workflow:\n  - id: publish  # the last step\n    on_failure: retry\n    agent: echo\n"
        );

        let text = "{\"tasks\": [{\"id\": \"publish\", \"agent\": \"echo\"}]}";
        let fix = Fix::add_field(text, at(text, "\"publish\""), "on_failure", "retry", "\"retry\"", String::new())
            .expect("a flow mapping");
        assert_eq!(
            applied(text, &fix),
            "{\"tasks\": [{\"id\": \"publish\", \"on_failure\": \"retry\", \"agent\": \"echo\"}]}"
        );

        let text = "- id: last";
        let fix = Fix::add_field(text, at(text, "last"), "critical", "true", "true", String::new()).expect("block");
        assert_eq!(applied(text, &fix), "- id: last\n  critical: true");
    }

    #[test]
    fn an_entry_goes_after_the_last_one_in_the_list_s_own_style() {
        let text = "d: [a, b]  # deps";
        let fix = Fix::add_entry(text, at(text, "b"), "c", String::new()).expect("a flow list");
        assert_eq!(applied(text, &fix), "d: [a, b, c]  # deps");
        let text = "d:\n  - a\n  - b  # last\ne: 1\n";
        let fix = Fix::add_entry(text, at(text, "b"), "c", String::new()).expect("a block list");
        assert_eq!(applied(text, &fix), "d:\n  - a\n  - b  # last\n  - c\ne: 1\n");
        assert_eq!(Fix::add_entry("d: b\n", Span::new(3, 1), "c", String::new()), None);
        let text = "{\"d\": [\"a\"]}";
        let fix = Fix::add_entry(text, at(text, "\"a\""), "c", String::new()).expect("a JSON list");
        assert_eq!(applied(text, &fix), "{\"d\": [\"a\", \"c\"]}");
    }

    #[test]
    fn overlapping_edits_are_left_out_rather_than_garbling_the_text() {
        let edits = [
            Edit { span: Span::new(0, 3), text: "x".into() },
            Edit { span: Span::new(2, 2), text: "y".into() },
            Edit { span: Span::new(9, 1), text: "z".into() },
        ];
        assert_eq!(apply("abcdef", &edits), ("xdef".to_owned(), 2));
    }
}
