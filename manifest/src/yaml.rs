//! The fast YAML reader: the spanned tree built straight from the YAML parser's events.
//!
//! It reads the plain documents plans are made of (mappings, sequences and scalars without
//! anchors, aliases, tags or merge keys) and gives up on anything else, and on every error, by
//! returning `None`: the caller then reads the text with serde-saphyr, whose tree, messages,
//! error locations and budgets stay the reference. Scalars resolve as serde-saphyr resolves them
//! (YAML 1.1 booleans, the null spellings); a plain scalar that may be a number and is not a
//! simple integer is resolved by serde-saphyr itself, once per distinct text.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle, Span as Marks};

use crate::json::MAX_DEPTH;
use crate::source::Span;
use crate::tree::{Node, Value};

/// Texts longer than this are left to serde-saphyr, whose byte budgets then apply: the largest
/// plan a cap can allow, as past it spans (32-bit offsets) could not locate a node.
pub(crate) const MAX_TEXT: usize = crate::source::PLAN_BYTES_CEILING as usize;
/// Documents with more nodes than this are left to serde-saphyr, whose node budget applies.
pub(crate) const MAX_NODES: usize = 10_000_000;

/// An open collection while its children are read.
enum Open {
    Seq(Span, Vec<Node>),
    Map(Span, Vec<(Node, Node)>, Option<Node>),
}

/// Reads a single plain YAML document into a spanned tree; `None` when the document uses
/// anything this reader leaves to serde-saphyr, or is not valid.
pub(crate) fn parse(text: &str) -> Option<Node> {
    if text.len() > MAX_TEXT {
        return None;
    }
    // The options serde-saphyr gives the parser under the loader's depth budget.
    let mut options = Options::default();
    options.block_nesting_limit = options.block_nesting_limit.max(MAX_DEPTH + 1);
    options.emit_comments = false;
    let mut parser = Parser::new_from_str_with_options(text, options);
    let mut numbers: HashMap<String, Value> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut nodes = 0usize;
    let mut root = None;
    let mut started = false;
    for item in &mut parser {
        let (event, marks) = item.ok()?;
        let span = span_of(&marks)?;
        let node = match event {
            Event::StreamStart => continue,
            Event::DocumentStart(_, None) if !started && root.is_none() => {
                started = true;
                continue;
            }
            Event::DocumentEnd if root.is_some() => continue,
            Event::StreamEnd if root.is_some() => break,
            Event::Scalar(value, style, 0, None) if root.is_none() => {
                let in_key = matches!(stack.last(), Some(Open::Map(_, _, None)));
                let value = if in_key { key(value, style)? } else { scalar(value, style, &mut numbers)? };
                Node::new(value, span)
            }
            Event::SequenceStart(_, 0, None) | Event::MappingStart(_, 0, None) if root.is_none() => {
                // A collection as a key, and depths near the budget, are left to serde-saphyr.
                if stack.len() + 1 >= MAX_DEPTH || matches!(stack.last(), Some(Open::Map(_, _, None))) {
                    return None;
                }
                stack.push(match event {
                    Event::SequenceStart(..) => Open::Seq(span, Vec::new()),
                    _ => Open::Map(span, Vec::new(), None),
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop()? {
                Open::Seq(span, items) => Node::new(Value::Seq(items.into_boxed_slice()), span),
                Open::Map(..) => return None,
            },
            Event::MappingEnd => match stack.pop()? {
                Open::Map(span, entries, None) if unique_keys(&entries) => {
                    Node::new(Value::Map(entries.into_boxed_slice()), span)
                }
                _ => return None,
            },
            _ => return None,
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return None;
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Open::Seq(_, items)) => items.push(node),
            Some(Open::Map(_, entries, pending)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => entries.push((key, node)),
            },
        }
    }
    root
}

/// The byte span of an event; `None` when the parser gives no byte offsets.
fn span_of(marks: &Marks) -> Option<Span> {
    let start = marks.start.byte_offset()?;
    let end = marks.end.byte_offset()?;
    Some(Span::new(start, end.saturating_sub(start)))
}

/// A mapping key: a string that no YAML rule could read as anything else, and not a merge key.
pub(crate) fn key(value: Cow<'_, str>, style: ScalarStyle) -> Option<Value> {
    match style {
        ScalarStyle::Plain if value == "<<" || !plain_text(&value) => None,
        _ => Some(Value::Str(value.into())),
    }
}

/// A scalar value, resolved as serde-saphyr resolves an untyped scalar.
pub(crate) fn scalar(value: Cow<'_, str>, style: ScalarStyle, numbers: &mut HashMap<String, Value>) -> Option<Value> {
    if style != ScalarStyle::Plain {
        return Some(Value::Str(value.into()));
    }
    if matches!(&*value, "" | "~" | "null" | "Null" | "NULL") {
        return Some(Value::Null);
    }
    if let Some(b) = yaml11_bool(&value) {
        return Some(Value::Bool(b));
    }
    if plain_text(&value) {
        return Some(Value::Str(value.into()));
    }
    if let Some(n) = simple_integer(&value) {
        return Some(Value::Int(n));
    }
    if let Some(known) = numbers.get(&*value) {
        return Some(known.clone());
    }
    let resolved = number(&value)?;
    numbers.insert(value.into_owned(), resolved.clone());
    Some(resolved)
}

/// Whether a plain scalar is a string however YAML reads it: it starts where no number can,
/// and is neither a null nor a boolean spelling.
fn plain_text(value: &str) -> bool {
    let starts_like_a_number = value.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
    !starts_like_a_number && !matches!(value, "" | "~" | "null" | "Null" | "NULL") && yaml11_bool(value).is_none()
}

/// The YAML 1.1 boolean spellings serde-saphyr accepts by default.
fn yaml11_bool(value: &str) -> Option<bool> {
    // No spelling is longer than `false`: most scalars are, and are told apart by length alone.
    if value.len() > "false".len() {
        return None;
    }
    let is = |words: [&str; 4]| words.iter().any(|w| value.eq_ignore_ascii_case(w));
    if is(["true", "yes", "y", "on"]) {
        Some(true)
    } else if is(["false", "no", "n", "off"]) {
        Some(false)
    } else {
        None
    }
}

/// A decimal integer without sign tricks or leading zeros that fits in 18 digits.
fn simple_integer(value: &str) -> Option<i64> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let simple = !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && value != "-0";
    if simple { value.parse().ok() } else { None }
}

/// A plain scalar that may be a number, resolved by serde-saphyr as a one-scalar document;
/// `None` for texts that would not read back as the same scalar alone.
fn number(value: &str) -> Option<Value> {
    let alone = !value.starts_with("---")
        && !value.starts_with("...")
        && !value.contains(|c: char| c.is_whitespace() || matches!(c, '#' | ':' | ',' | '[' | ']' | '{' | '}'));
    if !alone {
        return None;
    }
    serde_saphyr::from_str::<Value>(value).ok()
}

/// Whether a mapping's keys are all different (serde-saphyr refuses duplicates).
pub(crate) fn unique_keys(entries: &[(Node, Node)]) -> bool {
    fn text(node: &Node) -> &[u8] {
        match &node.value {
            Value::Str(s) => s.as_bytes(),
            _ => b"",
        }
    }
    if entries.len() <= 16 {
        return entries.iter().enumerate().all(|(i, (k, _))| entries[..i].iter().all(|(o, _)| text(o) != text(k)));
    }
    let mut keys: Vec<&[u8]> = entries.iter().map(|(k, _)| text(k)).collect();
    keys.sort_unstable();
    keys.windows(2).all(|pair| pair[0] != pair[1])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::tree::parse_yaml_serde;

    /// A YAML value before rendering in block style; scalars are written as they appear.
    #[derive(Debug, Clone)]
    enum Yaml {
        Scalar(String),
        Seq(Vec<Yaml>),
        Map(Vec<(String, Yaml)>),
    }

    /// Scalars that exercise every resolution rule, written as an author would.
    const SCALARS: &[&str] = &[
        "",
        "~",
        "null",
        "NULL",
        "true",
        "False",
        "yes",
        "No",
        "on",
        "OFF",
        "y",
        "n",
        "0",
        "-0",
        "7",
        "-7",
        "007",
        "0.5",
        "-0.0",
        "1.5e3",
        "0x1F",
        "0o17",
        "0b101",
        "+3",
        "1_000",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "30s",
        "500ms",
        "plain text",
        "é",
        "\"quoted\"",
        "'single'",
        "\"7\"",
        "'true'",
        "\"\\u00e9\\n\"",
        "a#b",
        "x # comment",
        "[a, 1, {b: c}]",
        "{}",
        "[]",
        "|\n  block\n",
        ">-\n  folded\n",
    ];

    /// Scalars and forms the event reader leaves to serde-saphyr.
    const LEFT: &[&str] = &[
        "1e999",
        ".inf",
        "-.inf",
        ".nan",
        "1:30",
        "&anchor v",
        "*anchor",
        "!!str 5",
        "!custom x",
        "---",
        "...",
        "- x",
        "<<",
    ];

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            30 => prop::sample::select(SCALARS).prop_map(str::to_owned),
            1 => prop::sample::select(LEFT).prop_map(str::to_owned),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            30 => "[a-z_]{1,10}",
            1 => scalar(),
            // Where the plain reader defers a workflow's items.
            4 => prop::sample::select(&["workflow", "tasks", "steps", "phases", "spec", "plan"][..]).prop_map(str::to_owned),
        ]
    }

    fn yaml() -> impl Strategy<Value = Yaml> {
        scalar().prop_map(Yaml::Scalar).prop_recursive(5, 48, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..5).prop_map(Yaml::Seq),
                prop::collection::vec((key(), inner), 1..5).prop_map(Yaml::Map),
            ]
        })
    }

    /// Renders in block style; `indentless` puts a mapping's sequences at the key's indentation.
    fn render(value: &Yaml, indent: usize, indentless: bool, out: &mut String) {
        let pad = " ".repeat(indent);
        match value {
            Yaml::Scalar(text) => {
                out.push(' ');
                out.push_str(&text.replace('\n', &format!("\n{pad}")));
                out.push('\n');
            }
            Yaml::Seq(items) => {
                out.push('\n');
                for item in items {
                    out.push_str(&pad);
                    out.push('-');
                    render(item, indent + 2, indentless, out);
                }
            }
            Yaml::Map(entries) => {
                out.push('\n');
                for (key, item) in entries {
                    out.push_str(&pad);
                    out.push_str(key);
                    out.push(':');
                    let below = if indentless && matches!(item, Yaml::Seq(_)) { indent } else { indent + 2 };
                    render(item, below, indentless, out);
                }
            }
        }
    }

    fn document(root: &[(String, Yaml)], indentless: bool) -> String {
        let mut out = String::new();
        render(&Yaml::Map(root.to_vec()), 0, indentless, &mut out);
        out
    }

    /// A value in flow style, on one line.
    fn render_flow(value: &Yaml, out: &mut String) {
        match value {
            Yaml::Scalar(text) => out.push_str(text),
            Yaml::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { ", " });
                    render_flow(item, out);
                }
                out.push(']');
            }
            Yaml::Map(entries) => {
                out.push('{');
                for (i, (key, item)) in entries.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { ", " });
                    out.push_str(key);
                    out.push_str(": ");
                    render_flow(item, out);
                }
                out.push('}');
            }
        }
    }

    /// The document as plans generated by tools write it: each top-level value in flow style,
    /// and sequences as one flow item per line.
    fn flow_document(root: &[(String, Yaml)]) -> String {
        let mut out = String::from("# generated\n---\n");
        for (key, value) in root {
            out.push_str(key);
            out.push(':');
            match value {
                Yaml::Seq(items) => {
                    out.push_str("  # items\n");
                    for item in items {
                        out.push_str("  - ");
                        render_flow(item, &mut out);
                        out.push('\n');
                    }
                }
                _ => {
                    out.push(' ');
                    render_flow(value, &mut out);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Both readers that stand in for serde-saphyr: the plain reader and the event reader.
    fn fast_readers(text: &str) -> [Option<Node>; 2] {
        [crate::plain_yaml::parse(text), parse(text)]
    }

    /// The tree with every item the plain reader deferred read again in place.
    fn read_again(node: Node, text: &str, deferred: &crate::plain_yaml::Deferred) -> Node {
        let span = node.span();
        let value = match node.value {
            Value::Seq(items) => Value::Seq(
                items.into_iter().map(|item| read_again(deferred.whole(text, item), text, deferred)).collect(),
            ),
            Value::Map(entries) => {
                Value::Map(entries.into_iter().map(|(key, item)| (key, read_again(item, text, deferred))).collect())
            }
            scalar => scalar,
        };
        Node::new(value, span)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whatever the plain and the event reader read, serde-saphyr reads to the same tree,
        /// spans included, in block and in flow style.
        #[test]
        fn fast_readers_build_serde_saphyrs_tree(root in prop::collection::vec((key(), yaml()), 1..6)) {
            for text in [document(&root, false), document(&root, true), flow_document(&root)] {
                for fast in fast_readers(&text).into_iter().flatten() {
                    let reference = parse_yaml_serde(&text);
                    prop_assert!(reference.is_ok(), "only serde-saphyr refused {:?}", text);
                    let reference = reference.map_err(|e| e.message).unwrap_or_else(|_| unreachable!());
                    prop_assert_eq!(format!("{fast:?}"), format!("{reference:?}"), "in {:?}", text);
                }
                // Deferring a workflow's items changes nothing once they are read again.
                let whole = crate::plain_yaml::parse(&text);
                let deferring = crate::plain_yaml::parse_deferring(&text);
                prop_assert_eq!(whole.is_some(), deferring.is_some(), "in {:?}", text);
                if let (Some(whole), Some((root, deferred))) = (whole, deferring) {
                    prop_assert_eq!(read_again(root, &text, &deferred), whole, "in {:?}", text);
                }
            }
        }
    }

    #[test]
    fn a_plain_plan_is_read_from_events() {
        let text = "apiVersion: runner/v1\nkind: Plan\nspec:\n  workflow:\n    - id: a\n      agent: w\n      \
                    prompt: \"do it\"\n      timeout: 30s\n      retries: 2\n      temperature: 0.2\n      \
                    depends_on: [b, c]\n      note: |\n        two\n        lines\n";
        let fast = parse(text).expect("a plain plan needs nothing the event reader leaves to serde-saphyr");
        let reference = parse_yaml_serde(text).map_err(|e| e.message).expect("valid YAML");
        assert_eq!(format!("{fast:?}"), format!("{reference:?}"));
    }

    #[test]
    fn anchors_tags_merges_and_duplicates_are_left_to_serde_saphyr() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 5\n",
            "a: {x: 1}\nb:\n  <<: {y: 2}\n",
            "a: 1\na: 2\n",
            "",
            "a: 1\n---\nb: 2\n",
        ] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }
}
