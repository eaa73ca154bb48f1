//! Scalars on one line: plain ones in block context, quoted ones with their escapes.

use std::borrow::Cow;

use serde_saphyr::granit_parser::ScalarStyle;

use super::Reader;
use crate::source::Span;
use crate::tree::Node;
use crate::yaml::scalar;

impl<'t> Reader<'t> {
    /// A scalar on one line that starts at `start`, quoted or plain: its value, style and end,
    /// and for a plain one the offset of the `: ` after it when it is a key.
    pub(super) fn line_scalar(&self, start: usize) -> Option<(Cow<'t, str>, ScalarStyle, usize, Option<usize>)> {
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
    pub(super) fn plain_start(&self, at: usize, flow: bool) -> bool {
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
    pub(super) fn block_scalar_value(&mut self) -> Option<Node> {
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
    pub(super) fn quoted(&self, start: usize) -> Option<(Cow<'t, str>, usize)> {
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
}

/// The style of a scalar quoted with `quote`.
pub(super) fn quote_style(quote: u8) -> ScalarStyle {
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
