//! A plan's source text, byte spans in it, and where a node sits: its span and YAML path.

use std::sync::Arc;

use crate::node_path::NodePath;

/// The largest plan file `load_file` reads; larger files are refused before parsing.
pub const MAX_PLAN_BYTES: u64 = 32 * 1024 * 1024;

/// A byte range in a source text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Byte offset of the first byte.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Span {
    /// A span of `len` bytes starting at `offset`.
    pub const fn new(offset: usize, len: usize) -> Self {
        Span { offset, len }
    }
}

impl From<Span> for miette::SourceSpan {
    fn from(span: Span) -> Self {
        (span.offset, span.len).into()
    }
}

/// Where something sits in a manifest: its byte span and its YAML path
/// (`spec.workflow[1].depends_on[0]`), an id into the document's table of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loc {
    /// The bytes of the key or value.
    pub span: Span,
    /// The YAML path of the node.
    pub path: NodePath,
}

impl Loc {
    /// A location from a span and a path.
    pub fn new(span: Span, path: impl Into<NodePath>) -> Self {
        Loc { span, path: path.into() }
    }
}

/// A named source text: the file a plan was read from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name shown in diagnostics, usually the path as the user typed it.
    pub name: String,
    /// The whole text.
    pub text: Arc<str>,
    line_starts: Arc<[usize]>,
}

impl Source {
    /// Wraps a text under a name.
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Source { name: name.into(), text, line_starts }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let column = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count());
        (line, column + 1)
    }

    /// The 0-based line a byte offset is on.
    pub(crate) fn line_index(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset).saturating_sub(1)
    }

    /// Where a 0-based line starts; the text's length for lines past its end.
    pub(crate) fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line).copied().unwrap_or(self.text.len())
    }

    /// The text a span covers, or `""` when the span is outside the text.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.offset..span.offset + span.len).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_characters_from_one() {
        let source = Source::new("x", "ab\nçd: e\n");
        assert_eq!(source.line_column(0), (1, 1));
        assert_eq!(source.line_column(3), (2, 1));
        assert_eq!(source.line_column(5), (2, 2));
        assert_eq!(source.line_column(100), (3, 1));
    }
}
