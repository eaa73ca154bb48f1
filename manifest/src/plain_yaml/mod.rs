//! The quick YAML reader: the spanned tree of the plain YAML most plans are written in, read
//! straight from the text.
//!
//! It knows block mappings and sequences, single-line flow mappings and sequences, and
//! single-line plain, single- and double-quoted scalars, with comments and blank lines between.
//! Anything else (block scalars, multi-line scalars, anchors, aliases, tags, directives,
//! explicit or complex keys, tabs, carriage returns, and every error) makes it give up by
//! returning `None`, and the caller reads the text with the event reader of [`crate::yaml`],
//! which in turn leaves the rest to serde-saphyr. Scalars resolve through the event reader's
//! rules, and spans are those serde-saphyr gives: collections in block style where their first
//! key or `-` is (length 0), in flow style at their opening bracket (length 1), quoted scalars
//! with their quotes, and an empty value at its mapping's `:` (length 0).

use std::collections::HashMap;

use crate::tree::{Node, Value};
use crate::yaml::MAX_TEXT;

mod block;
mod deferral;
mod flow;
mod lines;
mod scalars;

pub(crate) use deferral::Deferred;
use deferral::{Later, Place};
use lines::first_content_line;

/// The longest implicit key YAML allows.
const MAX_KEY: usize = 1024;

/// Reads a plain YAML document into a spanned tree; `None` when it uses anything this reader
/// leaves to the event reader.
pub(crate) fn parse(text: &str) -> Option<Node> {
    read(text, None).map(|(root, _)| root)
}

/// [`parse`], leaving the items of a workflow's block sequence to be read again one at a time
/// (see [`Deferred`]): each is read whole, so the text is known to be plain, then dropped.
pub(crate) fn parse_deferring(text: &str) -> Option<(Node, Deferred)> {
    read(text, Some(Vec::new()))
}

fn read(text: &str, deferring: Option<Vec<Later>>) -> Option<(Node, Deferred)> {
    if text.len() > MAX_TEXT || !plain_characters(text) {
        return None;
    }
    let mut reader = Reader::at(text, 0, 0);
    reader.deferred = deferring;
    reader.pos = first_content_line(text.as_bytes());
    if reader.bytes[reader.pos..].starts_with(b"---") && reader.ends_indicator(reader.pos + 2) {
        reader.pos += 3;
    }
    reader.next_line()?;
    if reader.at_end() {
        return None;
    }
    let root = reader.block_node(0, Place::Root)?;
    let ended = reader.at_end();
    ended.then(|| (root, Deferred { items: reader.deferred.unwrap_or_default() }))
}

/// Whether every character is one this reader may meet: printable, no tab, no carriage return,
/// and none of the characters YAML 1.1 counts as line breaks or byte order marks.
fn plain_characters(text: &str) -> bool {
    let control = |b: &u8| (*b < 0x20 && *b != b'\n') || *b == 0x7f;
    if text.as_bytes().iter().any(control) {
        return false;
    }
    text.is_ascii()
        || text.chars().all(|c| {
            matches!(c, '\u{20}'..='\u{7e}' | '\n' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
                && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
        })
}

/// The reading position; after each block node it stands on the first character of the next
/// line that holds something, and `col` is that line's indentation.
struct Reader<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    col: usize,
    /// Number-like plain scalars already resolved, by text.
    numbers: HashMap<String, Value>,
    nodes: usize,
    /// The items left out so far, when a workflow's items are deferred; `None` when they are
    /// not, and while such an item is read (its own sequences stay whole).
    deferred: Option<Vec<Later>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::parse_yaml_serde;

    fn reference(text: &str) -> String {
        format!("{:?}", parse_yaml_serde(text).map_err(|e| e.message).expect("valid YAML"))
    }

    #[test]
    fn a_plan_in_block_and_flow_style_is_read_from_the_text() {
        let text = "# a plan\n---\napiVersion: runner/v1\nkind: Plan\nmetadata: {name: p, labels: {team: \"a\\tb\"}}\n\
                    spec:\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n\
                    \x20   - {id: t0, agent: noop, input: x}  # first\n\n    - id: t1\n      agent: 'no''op'\n\
                    \x20     depends_on: [t0]\n      retries: 2\n      temperature: 0.2\n      note:\n\
                    \x20     tags:\n      - a\n      - \"é\"\n";
        let fast = parse(text).expect("nothing here is left to the other readers");
        assert_eq!(format!("{fast:?}"), reference(text));
    }

    #[test]
    fn what_the_plain_reader_leaves_is_still_read_as_serde_saphyr_reads_it() {
        for text in [
            "a: |\n  block\n",
            "a: >-\n  folded\n",
            "a: b\n  c\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 5\n",
            "a:\tb\n",
            "a: b\r\nc: d\r\n",
            "--- a\n",
            "%YAML 1.2\n---\na: b\n",
            "? a\n: b\n",
            "a: [b,\n  c]\n",
            "a: \"b\n  c\"\n",
            "a: {b: }\n",
            "[a, b]: c\n",
            "a: 1\n...\n",
        ] {
            assert!(parse(text).is_none(), "{text:?}");
            let read = crate::tree::parse_yaml(text).map_err(|e| e.message);
            assert_eq!(format!("{:?}", read.expect("valid YAML")), reference(text), "{text:?}");
        }
    }

    #[test]
    fn errors_are_left_to_serde_saphyr() {
        for text in ["a: b: c\n", "a: 1\na: 2\n", "- a\nb: c\n", "a:\n  - b\n c: d\n", "a: 'b\n", "{a: 1}}\n"] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }
}
