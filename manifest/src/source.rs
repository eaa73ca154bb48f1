//! A plan's source text, byte spans in it, and where a node sits: its span and YAML path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::node_path::NodePath;

/// The largest plan `load_file` reads unless [`set_plan_limit`] says otherwise; larger files
/// are refused before parsing.
pub const MAX_PLAN_BYTES: u64 = 32 * 1024 * 1024;

/// The highest cap a plan can be given (4 GiB less a byte): spans and the line index count
/// bytes and characters in 32 bits, so a longer text could not be located.
pub const PLAN_BYTES_CEILING: u64 = u32::MAX as u64;

/// The cap in force; see [`set_plan_limit`].
static PLAN_LIMIT: AtomicU64 = AtomicU64::new(MAX_PLAN_BYTES);

/// Sets the cap on a plan's size for every later [`crate::load_file`] and splice in this
/// process, clamped to [`PLAN_BYTES_CEILING`]; returns the cap now in force.
pub fn set_plan_limit(bytes: u64) -> u64 {
    let limit = bytes.min(PLAN_BYTES_CEILING);
    PLAN_LIMIT.store(limit, Ordering::Relaxed);
    limit
}

/// The cap on a plan's size in force: [`MAX_PLAN_BYTES`] unless [`set_plan_limit`] changed it.
pub fn plan_limit() -> u64 {
    PLAN_LIMIT.load(Ordering::Relaxed)
}

/// A byte range in a source text, kept in two 32-bit numbers: plans are at most
/// [`PLAN_BYTES_CEILING`] long, and a large plan holds millions of spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Span {
    offset: u32,
    len: u32,
}

impl Span {
    /// A span of `len` bytes starting at `offset`; past 4 GiB, numbers stop at the largest one
    /// rather than wrap.
    pub const fn new(offset: usize, len: usize) -> Self {
        Span { offset: narrow(offset), len: narrow(len) }
    }

    /// Byte offset of the first byte.
    pub const fn offset(self) -> usize {
        self.offset as usize
    }

    /// Length in bytes.
    pub const fn len(self) -> usize {
        self.len as usize
    }

    /// Whether it covers no bytes.
    pub const fn is_empty(self) -> bool {
        self.len == 0
    }
}

/// A byte count in 32 bits, saturating.
const fn narrow(n: usize) -> u32 {
    if n > u32::MAX as usize { u32::MAX } else { n as u32 }
}

impl From<Span> for miette::SourceSpan {
    fn from(span: Span) -> Self {
        (span.offset(), span.len()).into()
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

// A task holds several locations, and each of its dependencies one.
const _: () = assert!(std::mem::size_of::<Loc>() == 24);

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
    /// For a text that is not all ASCII, how many characters precede each [`BLOCK`]-byte block,
    /// so a column is counted from the nearest block, not from the line's start.
    chars_before_block: Option<Arc<[u32]>>,
}

/// The bytes between two entries of [`Source::chars_before_block`].
const BLOCK: usize = 256;

impl Source {
    /// Wraps a text under a name.
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let chars_before_block = (!text.is_ascii()).then(|| {
            let mut before = 0u32;
            let mut blocks = Vec::with_capacity(text.len() / BLOCK + 1);
            for block in text.as_bytes().chunks(BLOCK) {
                blocks.push(before);
                // Plans are at most PLAN_BYTES_CEILING (u32::MAX) bytes long, so the count fits
                // in 32 bits; a longer text given to `load_str` saturates rather than wraps.
                before = before.saturating_add(chars_in(block) as u32);
            }
            blocks.push(before);
            blocks.into()
        });
        Source { name: name.into(), text, line_starts, chars_before_block }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let column = match &self.chars_before_block {
            Some(blocks) if self.text.is_char_boundary(offset) => {
                // Linear in the distance to a block's start, however long the line: reports put
                // thousands of findings on one long line.
                let chars_to =
                    |at: usize| blocks[at / BLOCK] as usize + chars_in(&self.text.as_bytes()[at / BLOCK * BLOCK..at]);
                chars_to(offset) - chars_to(start)
            }
            _ => offset - start,
        };
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
        self.text.get(span.offset()..span.offset() + span.len()).unwrap_or("")
    }
}

/// How many characters start in a run of UTF-8 bytes: every byte but continuation bytes.
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count()
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

    #[test]
    fn line_column_counts_characters_across_blocks_of_a_long_line() {
        let line = "é".repeat(3 * BLOCK) + "x";
        let source = Source::new("x", format!("a\n{line}\n"));
        for chars in [0, 1, BLOCK / 2, BLOCK, 3 * BLOCK] {
            assert_eq!(source.line_column(2 + 2 * chars), (2, chars + 1), "after {chars} characters");
        }
        // Inside a character, the column counts bytes, as before.
        assert_eq!(source.line_column(3), (2, 2));
    }
}
