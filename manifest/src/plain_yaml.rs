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

use std::borrow::Cow;
use std::collections::HashMap;

use serde_saphyr::granit_parser::ScalarStyle;

use crate::json::MAX_DEPTH;
use crate::source::Span;
use crate::tree::{Node, Value};
use crate::yaml::{MAX_NODES, MAX_TEXT, key, scalar, unique_keys};

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

/// The items of a workflow left out of the tree by [`parse_deferring`]: each stands there as a
/// null node over the item's span, and [`Deferred::whole`] reads it again when the normaliser
/// comes to it. A plan of 100,000 tasks then never holds the tree of its whole workflow beside
/// its tasks (the tree is several times the size of the text).
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    /// Every item left out, in the order of the text (so by `span`).
    items: Vec<Later>,
}

/// Where an item left out starts, and the reader's state there.
#[derive(Debug, Clone, Copy)]
struct Later {
    /// Where the item's node starts: its placeholder's span.
    span: u32,
    pos: u32,
    col: u32,
    depth: u32,
}

/// The keys whose block sequence is a workflow: the field and its aliases.
const WORKFLOW_KEYS: [&str; 4] = ["workflow", "tasks", "steps", "phases"];

/// Where a block mapping is, as far as finding a workflow goes: only the mappings the
/// normaliser reads a workflow from may have their workflow's items deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The document's root (a bare plan's workflow is here).
    Root,
    /// The root's `spec`, or a nested `plan` under the root or the spec.
    Spec,
    /// Anywhere else.
    Other,
}

impl Place {
    /// The place of the mapping that is the value of `key` in a mapping at this place.
    fn below(self, key: &Node) -> Place {
        let Value::Str(name) = &key.value else { return Place::Other };
        match (self, name.as_str()) {
            (Place::Root, "spec" | "plan") | (Place::Spec, "plan") => Place::Spec,
            _ => Place::Other,
        }
    }

    /// Whether the block sequence under `key` in a mapping at this place is a workflow.
    fn holds_workflow(self, key: &Node) -> bool {
        self != Place::Other && matches!(&key.value, Value::Str(name) if WORKFLOW_KEYS.contains(&name.as_str()))
    }
}

impl Deferred {
    /// `node` itself, or, when it stands for an item left out, that item read again from `text`.
    pub(crate) fn whole(&self, text: &str, node: Node) -> Node {
        if !matches!(node.value, Value::Null) || self.items.is_empty() {
            return node;
        }
        let Some(later) = u32::try_from(node.span().offset())
            .ok()
            .and_then(|at| self.items.binary_search_by_key(&at, |later| later.span).ok())
            .map(|i| self.items[i])
        else {
            return node;
        };
        let mut reader = Reader::at(text, later.pos as usize, later.col as usize);
        reader
            .block_node(later.depth as usize, Place::Other)
            .expect("an item that was read whole from this text when it was left out reads the same again")
    }
}

/// Where the first line that is neither blank nor a comment starts.
fn first_content_line(bytes: &[u8]) -> usize {
    let mut line = 0;
    loop {
        let rest = &bytes[line..];
        let content = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        if !matches!(rest.get(content), Some(b'#' | b'\n')) {
            return line;
        }
        line += rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |i| i + 1);
    }
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

impl<'t> Reader<'t> {
    fn at(text: &'t str, pos: usize, col: usize) -> Self {
        Reader { text, bytes: text.as_bytes(), pos, col, numbers: HashMap::new(), nodes: 0, deferred: None }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Finishes the current line (only spaces and a comment may be left on it), skips blank
    /// and comment lines, and stands on the next content; `None` at a document marker.
    fn next_line(&mut self) -> Option<()> {
        let start = self.pos;
        let mut crossed = start == 0 || self.bytes[start - 1] == b'\n';
        self.skip_spaces();
        if crossed {
            self.col = self.pos - start;
        }
        loop {
            match self.peek() {
                None => return Some(()),
                Some(b'#') => {
                    // A comment needs a space before it, unless it starts the line.
                    let starts = self.pos == 0 || matches!(self.bytes[self.pos - 1], b' ' | b'\n');
                    if !starts {
                        return None;
                    }
                    self.pos +=
                        self.bytes[self.pos..].iter().position(|&b| b == b'\n').unwrap_or(self.bytes.len() - self.pos);
                }
                Some(b'\n') => {
                    self.pos += 1;
                    let start = self.pos;
                    self.skip_spaces();
                    self.col = self.pos - start;
                    crossed = true;
                    let rest = &self.bytes[self.pos..];
                    if self.col == 0 && (rest.starts_with(b"---") || rest.starts_with(b"...")) {
                        return None;
                    }
                }
                // Content right after a value on its line is not plain YAML.
                Some(_) => return crossed.then_some(()),
            }
        }
    }

    /// Counts a node against the budget.
    fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes <= MAX_NODES).then_some(())
    }

    /// Whether the byte after `at` ends an indicator (`-`, `:`): a space, a line break or the end.
    fn ends_indicator(&self, at: usize) -> bool {
        matches!(self.bytes.get(at + 1), None | Some(b' ' | b'\n'))
    }

    /// The node that starts here, at column `col` of a line that may have begun with `-`
    /// indicators; `depth` collections are open around it, and a mapping here is at `place`.
    fn block_node(&mut self, depth: usize, place: Place) -> Option<Node> {
        let col = self.col;
        match self.peek()? {
            b'-' if self.ends_indicator(self.pos) => self.block_seq(col, depth, false, false),
            b'[' | b'{' => {
                let node = self.flow_node(depth)?;
                self.next_line()?;
                Some(node)
            }
            _ => match self.implicit_key()? {
                Some(_) => self.block_map(col, depth, place),
                None => {
                    let node = self.block_scalar_value()?;
                    self.next_line()?;
                    Some(node)
                }
            },
        }
    }

    /// A block sequence whose `-` indicators are at column `indent`; `indentless` when it is a
    /// mapping's value at the indentation of its key (its span then starts at its first item);
    /// `workflow` when its items are deferred, if this reading defers.
    fn block_seq(&mut self, indent: usize, depth: usize, indentless: bool, workflow: bool) -> Option<Node> {
        if depth + 1 >= MAX_DEPTH {
            return None;
        }
        let mut span = Span::new(self.pos, 0);
        if indentless {
            let after = self.bytes[self.pos + 1..]
                .iter()
                .position(|&b| b != b' ')
                .map_or(self.bytes.len(), |i| self.pos + 1 + i);
            span = Span::new(after, 0);
            // Where such a sequence starts when its first item is on the next line is left to
            // the other readers.
            if matches!(self.bytes.get(after), None | Some(b'\n' | b'#')) {
                return None;
            }
        }
        let mut items = Vec::new();
        let mut deferred = if workflow { self.deferred.take() } else { None };
        while !self.at_end() && self.col == indent && self.peek() == Some(b'-') && self.ends_indicator(self.pos) {
            let dash = self.pos;
            self.pos += 1;
            self.skip_spaces();
            if matches!(self.peek(), None | Some(b'\n' | b'#')) {
                self.next_line()?;
                if self.at_end() || self.col <= indent {
                    return None;
                }
            } else {
                self.col = indent + (self.pos - dash);
            }
            let (pos, col) = (self.pos, self.col);
            let item = self.block_node(depth + 1, Place::Other)?;
            match &mut deferred {
                Some(later) => {
                    let span = item.span();
                    let [span_at, pos, col, depth] = [span.offset(), pos, col, depth + 1].map(|n| n as u32);
                    later.push(Later { span: span_at, pos, col, depth });
                    items.push(Node::new(Value::Null, span));
                }
                None => items.push(item),
            }
        }
        if deferred.is_some() {
            self.deferred = deferred;
        }
        if !self.at_end() && self.col > indent {
            return None;
        }
        self.count()?;
        Some(Node::new(Value::Seq(items.into_boxed_slice()), span))
    }

    /// A block mapping whose keys are at column `indent`, at `place`.
    fn block_map(&mut self, indent: usize, depth: usize, place: Place) -> Option<Node> {
        if depth + 1 >= MAX_DEPTH {
            return None;
        }
        let span = Span::new(self.pos, 0);
        let mut entries = Vec::new();
        while !self.at_end() && self.col == indent {
            let (key, colon) = self.implicit_key()??;
            self.count()?;
            self.pos = colon + 1;
            self.skip_spaces();
            let value = match self.peek() {
                None | Some(b'\n' | b'#') => {
                    self.next_line()?;
                    let seq_here = self.col == indent && self.peek() == Some(b'-') && self.ends_indicator(self.pos);
                    if seq_here || (!self.at_end() && self.col > indent) {
                        match self.peek()? {
                            b'-' if self.ends_indicator(self.pos) => {
                                self.block_seq(self.col, depth + 1, seq_here, place.holds_workflow(&key))?
                            }
                            // Below its key, a value is a block collection or this reader gives up.
                            _ if self.implicit_key()?.is_some() => {
                                self.block_map(self.col, depth + 1, place.below(&key))?
                            }
                            _ => return None,
                        }
                    } else {
                        self.count()?;
                        Node::new(Value::Null, Span::new(colon, 0))
                    }
                }
                Some(_) => {
                    let node = match self.peek()? {
                        b'[' | b'{' => self.flow_node(depth + 1)?,
                        _ => self.block_scalar_value()?,
                    };
                    self.next_line()?;
                    node
                }
            };
            entries.push((key, value));
        }
        if !self.at_end() && self.col > indent {
            return None;
        }
        if !unique_keys(&entries) {
            return None;
        }
        self.count()?;
        Some(Node::new(Value::Map(entries.into_boxed_slice()), span))
    }

    /// The key that starts here and the offset of its `:`, when the line is `key: ...`; `None`
    /// inside when the line holds a plain scalar; `None` outside when this reader gives up.
    fn implicit_key(&mut self) -> Option<Option<(Node, usize)>> {
        let start = self.pos;
        let (value, style, end, plain_colon) = self.line_scalar(start)?;
        if matches!(style, ScalarStyle::Plain) && plain_colon.is_none() {
            return Some(None);
        }
        let mut colon = end;
        while self.bytes.get(colon) == Some(&b' ') {
            colon += 1;
        }
        if self.bytes.get(colon) != Some(&b':') || !self.ends_indicator(colon) {
            return Some(None);
        }
        if end - start > MAX_KEY {
            return None;
        }
        let node = Node::new(key(value, style)?, Span::new(start, end - start));
        Some(Some((node, colon)))
    }

    /// A scalar on one line that starts at `start`, quoted or plain: its value, style and end,
    /// and for a plain one the offset of the `: ` after it when it is a key.
    fn line_scalar(&self, start: usize) -> Option<(Cow<'t, str>, ScalarStyle, usize, Option<usize>)> {
        match self.bytes.get(start)? {
            b'"' | b'\'' => {
                let (value, end) = self.quoted(start)?;
                Some((value, quote_style(self.bytes[start]), end, None))
            }
            _ => {
                let (end, colon) = self.plain_block_end(start)?;
                Some((Cow::Borrowed(&self.text[start..end]), ScalarStyle::Plain, end, colon))
            }
        }
    }

    /// Where a plain scalar in block context that starts at `start` ends (trailing spaces
    /// trimmed), and the offset of the `: ` after it when it is a key.
    fn plain_block_end(&self, start: usize) -> Option<(usize, Option<usize>)> {
        if !self.plain_start(start, false) {
            return None;
        }
        let mut at = start;
        let mut end = start;
        while let Some(&b) = self.bytes.get(at) {
            match b {
                b'\n' => break,
                b'#' if self.bytes[at - 1] == b' ' => break,
                b':' if self.ends_indicator(at) => return Some((end, Some(at))),
                b' ' => {}
                _ => end = at + 1,
            }
            at += 1;
        }
        Some((end, None))
    }

    /// Whether a plain scalar may start at `at`: not on an indicator that starts something else.
    fn plain_start(&self, at: usize, flow: bool) -> bool {
        match self.bytes.get(at) {
            None => false,
            Some(b'-' | b'?' | b':') => {
                let next = self.bytes.get(at + 1);
                let ends = matches!(next, None | Some(b' ' | b'\n'));
                let ends_in_flow = flow && matches!(next, Some(b',' | b'[' | b']' | b'{' | b'}'));
                !(ends || ends_in_flow)
            }
            Some(b) => !b",[]{}#&*!|>'\"%@`".contains(b),
        }
    }

    /// A scalar value in block context, on one line: quoted or plain; the rest of the line
    /// may hold only a comment.
    fn block_scalar_value(&mut self) -> Option<Node> {
        let start = self.pos;
        let (value, style, end, plain_colon) = self.line_scalar(start)?;
        if plain_colon.is_some() {
            return None;
        }
        self.pos = end;
        if !matches!(self.peek(), None | Some(b' ' | b'\n')) {
            return None;
        }
        let node = Node::new(scalar(value, style, &mut self.numbers)?, Span::new(start, end - start));
        // A plain scalar may go on at a deeper line; the callers refuse deeper lines.
        self.count()?;
        Some(node)
    }

    /// A quoted scalar on one line that starts at `start`: its value and the offset after its
    /// closing quote.
    fn quoted(&self, start: usize) -> Option<(Cow<'t, str>, usize)> {
        let text = self.text;
        let quote = self.bytes[start];
        let mut at = start + 1;
        let mut owned: Option<String> = None;
        let mut run = at;
        loop {
            let b = *self.bytes.get(at)?;
            match b {
                b'\n' => return None,
                b'\'' if quote == b'\'' => {
                    if self.bytes.get(at + 1) == Some(&b'\'') {
                        let text = owned.get_or_insert_with(String::new);
                        text.push_str(&self.text[run..=at]);
                        at += 2;
                        run = at;
                        continue;
                    }
                    break;
                }
                b'"' if quote == b'"' => break,
                b'\\' if quote == b'"' => {
                    let text = owned.get_or_insert_with(String::new);
                    text.push_str(&self.text[run..at]);
                    at = escape(self.bytes, at, text)?;
                    run = at;
                    continue;
                }
                _ => {}
            }
            at += 1;
        }
        let value = match owned {
            Some(mut owned) => {
                owned.push_str(&text[run..at]);
                Cow::Owned(owned)
            }
            None => Cow::Borrowed(&text[run..at]),
        };
        Some((value, at + 1))
    }

    /// A flow collection or scalar on the current line, inside `depth` open collections.
    fn flow_node(&mut self, depth: usize) -> Option<Node> {
        let text = self.text;
        let start = self.pos;
        let node = match self.peek()? {
            open @ (b'[' | b'{') => {
                if depth + 1 >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                self.skip_spaces();
                let close = if open == b'[' { b']' } else { b'}' };
                let mut items = Vec::new();
                let mut entries = Vec::new();
                if self.peek() != Some(close) {
                    loop {
                        if open == b'[' {
                            items.push(self.flow_node(depth + 1)?);
                        } else {
                            let key = self.flow_key()?;
                            self.skip_spaces();
                            entries.push((key, self.flow_node(depth + 1)?));
                        }
                        self.skip_spaces();
                        match self.peek()? {
                            b',' => {
                                self.pos += 1;
                                self.skip_spaces();
                                if self.peek() == Some(close) {
                                    return None;
                                }
                            }
                            b if b == close => break,
                            _ => return None,
                        }
                    }
                }
                self.pos += 1;
                let span = Span::new(start, 1);
                if open == b'[' {
                    Node::new(Value::Seq(items.into_boxed_slice()), span)
                } else if unique_keys(&entries) {
                    Node::new(Value::Map(entries.into_boxed_slice()), span)
                } else {
                    return None;
                }
            }
            b'"' | b'\'' => {
                let (value, end) = self.quoted(start)?;
                self.pos = end;
                let value = scalar(value, quote_style(self.bytes[start]), &mut self.numbers)?;
                Node::new(value, Span::new(start, end - start))
            }
            _ => {
                let end = self.plain_flow_end(start)?;
                self.pos = end;
                let value = scalar(Cow::Borrowed(&text[start..end]), ScalarStyle::Plain, &mut self.numbers)?;
                Node::new(value, Span::new(start, end - start))
            }
        };
        self.count()?;
        Some(node)
    }

    /// A key of a flow mapping and its `: `, leaving the position after them.
    fn flow_key(&mut self) -> Option<Node> {
        let text = self.text;
        let start = self.pos;
        let (value, style, end) = match self.peek()? {
            b'"' | b'\'' => {
                let (value, end) = self.quoted(start)?;
                (value, quote_style(self.bytes[start]), end)
            }
            _ => {
                let end = self.plain_flow_end(start)?;
                (Cow::Borrowed(&text[start..end]), ScalarStyle::Plain, end)
            }
        };
        self.pos = end;
        self.skip_spaces();
        if self.peek() != Some(b':') || self.peek_at(1) != Some(b' ') || end - start > MAX_KEY {
            return None;
        }
        self.pos += 2;
        self.count()?;
        Some(Node::new(key(value, style)?, Span::new(start, end - start)))
    }

    /// Where a plain scalar in flow context that starts at `start` ends (trailing spaces
    /// trimmed); `None` when it would go on to the next line or holds a `:` this reader
    /// does not split on.
    fn plain_flow_end(&self, start: usize) -> Option<usize> {
        if !self.plain_start(start, true) {
            return None;
        }
        let mut at = start;
        let mut end = start;
        loop {
            match *self.bytes.get(at)? {
                b'\n' => return None,
                b',' | b'[' | b']' | b'{' | b'}' => return Some(end),
                b'#' if self.bytes[at - 1] == b' ' => return None,
                b':' => {
                    return matches!(self.bytes.get(at + 1), Some(b' ' | b',' | b']' | b'}')).then_some(end);
                }
                b' ' => {}
                _ => end = at + 1,
            }
            at += 1;
        }
    }
}

/// The style of a scalar quoted with `quote`.
fn quote_style(quote: u8) -> ScalarStyle {
    if quote == b'"' { ScalarStyle::DoubleQuoted } else { ScalarStyle::SingleQuoted }
}

/// Appends the character of the escape at `at` (a backslash) in a double-quoted scalar and
/// returns the offset after it; `None` for an escape this reader does not know.
fn escape(bytes: &[u8], at: usize, out: &mut String) -> Option<usize> {
    let simple = match *bytes.get(at + 1)? {
        b'0' => '\0',
        b'a' => '\u{7}',
        b'b' => '\u{8}',
        b't' => '\t',
        b'n' => '\n',
        b'v' => '\u{b}',
        b'f' => '\u{c}',
        b'r' => '\r',
        b'e' => '\u{1b}',
        b' ' => ' ',
        b'"' => '"',
        b'/' => '/',
        b'\\' => '\\',
        b'N' => '\u{85}',
        b'_' => '\u{a0}',
        b'L' => '\u{2028}',
        b'P' => '\u{2029}',
        b'x' => return hex(bytes, at + 2, 2, out),
        b'u' => return hex(bytes, at + 2, 4, out),
        b'U' => return hex(bytes, at + 2, 8, out),
        _ => return None,
    };
    out.push(simple);
    Some(at + 2)
}

/// Appends the character of `digits` hexadecimal digits at `at`; the offset after them.
fn hex(bytes: &[u8], at: usize, digits: usize, out: &mut String) -> Option<usize> {
    let text = std::str::from_utf8(bytes.get(at..at + digits)?).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    out.push(char::from_u32(u32::from_str_radix(text, 16).ok()?)?);
    Some(at + digits)
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

    /// The items of the sequence at `path` (keys, then an index), when the tree holds one there.
    fn items<'n>(root: &'n Node, path: &[&str]) -> &'n [Node] {
        let mut node = root;
        for step in path {
            node = match &node.value {
                Value::Map(entries) => {
                    &entries.iter().find(|(k, _)| matches!(&k.value, Value::Str(s) if s == step)).expect(step).1
                }
                Value::Seq(items) => &items[step.parse::<usize>().expect("an index")],
                _ => panic!("no {step} in {node:?}"),
            };
        }
        let Value::Seq(items) = &node.value else { panic!("not a sequence at {path:?}: {node:?}") };
        items
    }

    #[test]
    fn only_a_workflows_items_are_deferred_and_each_reads_again_as_it_was() {
        // Each text, where its workflow is, and where sequences that must stay whole are.
        type Paths = &'static [&'static [&'static str]];
        let cases: [(&str, &[&str], Paths); 5] = [
            (
                "apiVersion: runner/v1\nspec:\n  agent_definitions:\n    w:\n      tasks:\n      - not a workflow\n  workflow:\n  \
                 - {id: a, agent: w}\n  -\n    id: b\n    depends_on:\n    - a\n  - phase: p\n    tasks:\n      - id: c\n",
                &["spec", "workflow"],
                &[&["spec", "agent_definitions", "w", "tasks"]],
            ),
            (
                "workflow:\n  - id: a\n  - id: b\nmetadata:\n  steps:\n    - x\n",
                &["workflow"],
                &[&["metadata", "steps"]],
            ),
            ("steps:\n- a plain step\n- ~\n", &["steps"], &[]),
            ("spec:\n  plan:\n    tasks:\n      - id: a\n", &["spec", "plan", "tasks"], &[]),
            (
                "plan:\n  phases:\n    - id: a\nother:\n  tasks:\n    - id: b\n",
                &["plan", "phases"],
                &[&["other", "tasks"]],
            ),
        ];
        for (text, deferred_at, whole_at) in cases {
            let whole = parse(text).expect("plain");
            let (root, deferred) = parse_deferring(text).expect("plain");
            let left = items(&root, deferred_at);
            assert!(left.iter().all(|item| matches!(item.value, Value::Null)), "{text:?}: {left:?}");
            for (item, expected) in left.iter().zip(items(&whole, deferred_at)) {
                assert_eq!(&deferred.whole(text, item.clone()), expected, "{text:?}");
            }
            for path in whole_at {
                assert_eq!(items(&root, path), items(&whole, path), "{text:?} at {path:?}");
            }
        }
        // A flow-style workflow is read whole.
        let (root, deferred) = parse_deferring("workflow: [{id: a}]\n").expect("plain");
        assert_eq!(root, parse("workflow: [{id: a}]\n").expect("plain"));
        assert!(deferred.items.is_empty());
    }

    #[test]
    fn errors_are_left_to_serde_saphyr() {
        for text in ["a: b: c\n", "a: 1\na: 2\n", "- a\nb: c\n", "a:\n  - b\n c: d\n", "a: 'b\n", "{a: 1}}\n"] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }
}
