//! Flow collections and scalars, all on one line: `[a, b]`, `{k: v}`.

use std::borrow::Cow;

use serde_saphyr::granit_parser::ScalarStyle;

use super::scalars::quote_style;
use super::{MAX_KEY, Reader};
use crate::json::MAX_DEPTH;
use crate::source::Span;
use crate::tree::{Node, Value};
use crate::yaml::{key, scalar, unique_keys};

impl Reader<'_> {
    /// A flow collection or scalar on the current line, inside `depth` open collections.
    pub(super) fn flow_node(&mut self, depth: usize) -> Option<Node> {
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
