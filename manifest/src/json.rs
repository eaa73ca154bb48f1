//! A fast reader for plans written as JSON, building the same spanned tree as the YAML reader.
//!
//! JSON is YAML, so every JSON plan could go through serde-saphyr; this reader exists because
//! machine-written plans are JSON and large ones parse several times faster here. It is
//! iterative (no recursion), rejects duplicate keys and nesting deeper than the YAML reader
//! allows, and gives up on anything it does not understand so the YAML reader can report it.

use std::collections::HashSet;

use crate::source::Span;
use crate::tree::{Node, Value};

/// The deepest nesting either reader accepts.
pub const MAX_DEPTH: usize = 64;

/// Why a text is not plain JSON; the caller falls back to the YAML reader.
#[derive(Debug)]
pub struct NotJson;

enum Frame {
    Seq { start: usize, items: Vec<Node> },
    Map { start: usize, entries: Vec<(Node, Node)>, key: Option<Node>, seen: HashSet<String> },
}

/// Maps with more entries than this check duplicate keys through a set, not a scan.
const SCAN_LIMIT: usize = 16;

/// Reads a JSON document into a spanned tree.
pub fn parse(text: &str) -> Result<Node, NotJson> {
    let mut reader = Reader { bytes: text.as_bytes(), text, pos: 0 };
    let mut stack: Vec<Frame> = Vec::new();
    reader.skip_ws();
    loop {
        // Parse one value (a scalar, or the opening of a collection).
        let value = match reader.peek() {
            Some(b'{') => {
                stack.push(Frame::Map { start: reader.pos, entries: Vec::new(), key: None, seen: HashSet::new() });
                reader.pos += 1;
                reader.skip_ws();
                if reader.peek() == Some(b'}') {
                    reader.pos += 1;
                    close(&mut stack)
                } else {
                    let key = reader.key()?;
                    set_key(&mut stack, key)?;
                    None
                }
            }
            Some(b'[') => {
                stack.push(Frame::Seq { start: reader.pos, items: Vec::new() });
                reader.pos += 1;
                reader.skip_ws();
                if reader.peek() == Some(b']') {
                    reader.pos += 1;
                    close(&mut stack)
                } else {
                    None
                }
            }
            _ => Some(reader.scalar()?),
        };
        if stack.len() > MAX_DEPTH {
            return Err(NotJson);
        }
        let Some(mut node) = value else { continue };
        // Attach the finished value to its parent, closing collections as they end.
        loop {
            let Some(frame) = stack.last_mut() else {
                reader.skip_ws();
                return if reader.pos == reader.bytes.len() { Ok(node) } else { Err(NotJson) };
            };
            match frame {
                Frame::Seq { items, .. } => items.push(node),
                Frame::Map { entries, key, .. } => {
                    let key = key.take().ok_or(NotJson)?;
                    entries.push((key, node));
                }
            }
            reader.skip_ws();
            match (reader.peek(), stack.last()) {
                (Some(b','), Some(Frame::Seq { .. })) => {
                    reader.pos += 1;
                    reader.skip_ws();
                    break;
                }
                (Some(b','), Some(Frame::Map { .. })) => {
                    reader.pos += 1;
                    let key = reader.key()?;
                    set_key(&mut stack, key)?;
                    break;
                }
                (Some(b']'), Some(Frame::Seq { .. })) | (Some(b'}'), Some(Frame::Map { .. })) => {
                    reader.pos += 1;
                    node = close(&mut stack).ok_or(NotJson)?;
                }
                _ => return Err(NotJson),
            }
        }
    }
}

fn set_key(stack: &mut [Frame], new_key: Node) -> Result<(), NotJson> {
    match stack.last_mut() {
        Some(Frame::Map { entries, key, seen, .. }) => {
            let Value::Str(name) = &new_key.value else { return Err(NotJson) };
            let duplicate = if entries.len() < SCAN_LIMIT {
                entries.iter().any(|(k, _)| k.value == new_key.value)
            } else {
                if seen.is_empty() {
                    seen.extend(entries.iter().filter_map(|(k, _)| match &k.value {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    }));
                }
                !seen.insert(name.clone())
            };
            if duplicate {
                return Err(NotJson);
            }
            *key = Some(new_key);
            Ok(())
        }
        _ => Err(NotJson),
    }
}

fn close(stack: &mut Vec<Frame>) -> Option<Node> {
    Some(match stack.pop()? {
        Frame::Seq { start, items } => Node { value: Value::Seq(items), span: Span::new(start, 1) },
        Frame::Map { start, entries, .. } => Node { value: Value::Map(entries), span: Span::new(start, 1) },
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Reads `"key"` and the `:` after it.
    fn key(&mut self) -> Result<Node, NotJson> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(NotJson);
        }
        let key = self.scalar()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(NotJson);
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    fn scalar(&mut self) -> Result<Node, NotJson> {
        let start = self.pos;
        let value = match self.peek().ok_or(NotJson)? {
            b'"' => Value::Str(self.string()?),
            b't' => self.word("true", Value::Bool(true))?,
            b'f' => self.word("false", Value::Bool(false))?,
            b'n' => self.word("null", Value::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(NotJson),
        };
        Ok(Node { value, span: Span::new(start, self.pos - start) })
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, NotJson> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(NotJson)
        }
    }

    fn number(&mut self) -> Result<Value, NotJson> {
        let start = self.pos;
        let mut float = false;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.pos += 1;
        }
        let token = &self.text[start..self.pos];
        let digits = token.strip_prefix('-').unwrap_or(token);
        // JSON forbids leading zeros; YAML would read them differently, so leave those to it.
        if digits.len() > 1 && digits.starts_with('0') && !digits[1..].starts_with(['.', 'e', 'E']) {
            return Err(NotJson);
        }
        if !float {
            if let Ok(int) = token.parse::<i64>() {
                return Ok(Value::Int(int));
            }
        }
        let number: f64 = token.parse().map_err(|_| NotJson)?;
        if !digits.starts_with(|c: char| c.is_ascii_digit()) || !number.is_finite() {
            return Err(NotJson);
        }
        Ok(Value::Float(number))
    }

    fn string(&mut self) -> Result<String, NotJson> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek().ok_or(NotJson)? {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = self.peek().ok_or(NotJson)?;
                    self.pos += 1;
                    match escaped {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(NotJson),
                    }
                }
                _ => return Err(NotJson),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, NotJson> {
        let hex = self.text.get(self.pos..self.pos + 4).ok_or(NotJson)?;
        let code = u32::from_str_radix(hex, 16).map_err(|_| NotJson)?;
        self.pos += 4;
        Ok(code)
    }

    fn unicode_escape(&mut self) -> Result<char, NotJson> {
        let high = self.hex4()?;
        if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.pos..].starts_with(b"\\u") {
                return Err(NotJson);
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(NotJson);
            }
            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or(NotJson)
        } else {
            char::from_u32(high).ok_or(NotJson)
        }
    }
}
