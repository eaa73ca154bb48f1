//! The reader's position: peeking at bytes, and moving from one line with content to the next
//! past blanks and comments.

use std::collections::HashMap;

use super::Reader;
use crate::yaml::MAX_NODES;

/// Where the first line that is neither blank nor a comment starts.
pub(super) fn first_content_line(bytes: &[u8]) -> usize {
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

impl<'t> Reader<'t> {
    pub(super) fn at(text: &'t str, pos: usize, col: usize) -> Self {
        Reader { text, bytes: text.as_bytes(), pos, col, numbers: HashMap::new(), nodes: 0, deferred: None }
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    pub(super) fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Finishes the current line (only spaces and a comment may be left on it), skips blank
    /// and comment lines, and stands on the next content; `None` at a document marker.
    pub(super) fn next_line(&mut self) -> Option<()> {
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
    pub(super) fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes <= MAX_NODES).then_some(())
    }

    /// Whether the byte after `at` ends an indicator (`-`, `:`): a space, a line break or the end.
    pub(super) fn ends_indicator(&self, at: usize) -> bool {
        matches!(self.bytes.get(at + 1), None | Some(b' ' | b'\n'))
    }
}
