//! A fast reader for plans written as JSON, building the same spanned tree as the YAML reader.
//!
//! JSON is YAML, so every JSON plan could go through serde-saphyr; this reader exists because
//! machine-written plans are JSON and large ones parse several times faster here. It is
//! iterative (no recursion), rejects duplicate keys and nesting deeper than the YAML reader
//! allows, and gives up on anything it does not understand so the YAML reader can report it.

use std::collections::HashSet;

use crate::source::Span;
use crate::tree::{Node, Value};

mod scalars;
mod strings;
#[cfg(test)]
mod tests;

/// The deepest nesting either reader accepts.
/// Deep enough for realistic manifests (each object of a verification schema takes two levels,
/// so a schema of 21 nested objects fits) and shallow enough that the YAML reader, which
/// recurses once per level, fits in the 2 MiB stack of a spawned thread.
pub const MAX_DEPTH: usize = 48;

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
                // Counted before an empty collection closes, as the YAML reader counts it.
                if stack.len() > MAX_DEPTH {
                    return Err(NotJson);
                }
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
                // Counted before an empty collection closes, as the YAML reader counts it.
                if stack.len() > MAX_DEPTH {
                    return Err(NotJson);
                }
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
                        Value::Str(s) => Some(s.to_string()),
                        _ => None,
                    }));
                }
                !seen.insert(name.to_string())
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
        Frame::Seq { start, items } => Node::new(Value::Seq(items.into_boxed_slice()), Span::new(start, 1)),
        Frame::Map { start, entries, .. } => Node::new(Value::Map(entries.into_boxed_slice()), Span::new(start, 1)),
    })
}

/// The reading position in a JSON text; `scalars.rs` and `strings.rs` read its tokens.
struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}
