//! Block collections: sequences of `-` items and mappings of `key: value` lines, by indentation.

use serde_saphyr::granit_parser::ScalarStyle;

use super::{Later, MAX_KEY, Place, Reader};
use crate::json::MAX_DEPTH;
use crate::source::Span;
use crate::tree::{Node, Value};
use crate::yaml::{key, unique_keys};

impl Reader<'_> {
    /// The node that starts here, at column `col` of a line that may have begun with `-`
    /// indicators; `depth` collections are open around it, and a mapping here is at `place`.
    pub(super) fn block_node(&mut self, depth: usize, place: Place) -> Option<Node> {
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
}
