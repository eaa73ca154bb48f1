//! An open document: its text, its version, and conversion between byte offsets and the
//! client's positions (lines and columns counted in UTF-8 bytes or UTF-16 units).

use lsp_types::{Position, Range, TextDocumentContentChangeEvent};
use manifest::Span;

/// How the client counts columns, agreed at initialisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Bytes of UTF-8.
    Utf8,
    /// Code units of UTF-16, the protocol's default.
    Utf16,
}

/// The text of one open document and where its lines start.
#[derive(Debug, Clone)]
pub struct Document {
    /// The whole text.
    pub text: String,
    /// The version the client gave with its last change.
    pub version: i32,
    line_starts: Vec<usize>,
}

impl Document {
    /// A document with its text and version.
    pub fn new(text: String, version: i32) -> Self {
        let line_starts = line_starts(&text);
        Document { text, version, line_starts }
    }

    /// Applies one change: a range replaced, or with no range the whole text; a range past the
    /// end is clamped to it, as editors expect.
    pub fn change(&mut self, change: TextDocumentContentChangeEvent, encoding: Encoding) {
        match change.range {
            Some(range) => {
                let start = self.offset(range.start, encoding);
                let end = self.offset(range.end, encoding).max(start);
                self.text.replace_range(start..end, &change.text);
            }
            None => self.text = change.text,
        }
        self.line_starts = line_starts(&self.text);
    }

    /// The byte offset of a position, clamped to the line's end and the text's end, and moved
    /// back to a character boundary.
    pub fn offset(&self, position: Position, encoding: Encoding) -> usize {
        let Some(&start) = self.line_starts.get(position.line as usize) else { return self.text.len() };
        let end = self.line_starts.get(position.line as usize + 1).map_or(self.text.len(), |&next| next);
        let line = &self.text[start..end];
        let line = line.strip_suffix('\n').unwrap_or(line);
        let wanted = position.character as usize;
        match encoding {
            Encoding::Utf8 => {
                let mut at = wanted.min(line.len());
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                start + at
            }
            Encoding::Utf16 => {
                let mut units = 0;
                for (at, c) in line.char_indices() {
                    if units >= wanted {
                        return start + at;
                    }
                    units += c.len_utf16();
                }
                start + line.len()
            }
        }
    }

    /// The position of a byte offset.
    pub fn position(&self, offset: usize, encoding: Encoding) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let before = &self.text[self.line_starts[line]..offset];
        let character = match encoding {
            Encoding::Utf8 => before.len(),
            Encoding::Utf16 => before.chars().map(char::len_utf16).sum(),
        };
        Position { line: line as u32, character: character as u32 }
    }

    /// The range a span covers.
    pub fn range(&self, span: Span, encoding: Encoding) -> Range {
        Range {
            start: self.position(span.offset(), encoding),
            end: self.position(span.offset() + span.len(), encoding),
        }
    }

    /// The span a range covers.
    pub fn span(&self, range: Range, encoding: Encoding) -> Span {
        let start = self.offset(range.start, encoding);
        let end = self.offset(range.end, encoding).max(start);
        Span::new(start, end - start)
    }
}

/// Where each line starts; the first at 0.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    #[test]
    fn utf16_columns_count_surrogate_pairs_twice() {
        let document = Document::new("a: é😀x\nb\n".into(), 1);
        let x = document.text.find('x').expect("x is in the text");
        assert_eq!(document.position(x, Encoding::Utf16), at(0, 6));
        assert_eq!(document.position(x, Encoding::Utf8), at(0, 9));
        assert_eq!(document.offset(at(0, 6), Encoding::Utf16), x);
        assert_eq!(document.offset(at(0, 9), Encoding::Utf8), x);
        // Inside the emoji, past the line's end, past the text's end: clamped, never a panic.
        assert_eq!(document.offset(at(0, 5), Encoding::Utf8), document.text.find('😀').expect("emoji"));
        assert_eq!(document.offset(at(1, 99), Encoding::Utf16), document.text.len() - 1);
        assert_eq!(document.offset(at(9, 0), Encoding::Utf16), document.text.len());
    }

    #[test]
    fn incremental_changes_replace_ranges_and_a_rangeless_one_replaces_all() {
        let mut document = Document::new("id: serach\nnext: 1\n".into(), 1);
        let range = Range { start: at(0, 4), end: at(0, 10) };
        document.change(
            TextDocumentContentChangeEvent { range: Some(range), range_length: None, text: "search".into() },
            Encoding::Utf16,
        );
        assert_eq!(document.text, "id: search\nnext: 1\n");
        let insert = Range { start: at(2, 0), end: at(2, 0) };
        document.change(
            TextDocumentContentChangeEvent { range: Some(insert), range_length: None, text: "last: 2\n".into() },
            Encoding::Utf16,
        );
        assert_eq!(document.position(document.text.len(), Encoding::Utf16), at(3, 0));
        document.change(
            TextDocumentContentChangeEvent { range: None, range_length: None, text: "x".into() },
            Encoding::Utf16,
        );
        assert_eq!(document.text, "x");
        // A range the wrong way round replaces nothing before its start.
        let backwards = Range { start: at(0, 1), end: at(0, 0) };
        document.change(
            TextDocumentContentChangeEvent { range: Some(backwards), range_length: None, text: "y".into() },
            Encoding::Utf8,
        );
        assert_eq!(document.text, "xy");
    }
}
