//! The source text miette draws a snippet from.
//!
//! miette's own `SourceCode` for a string scans from the start of the text to every span, so a
//! report of many findings in a large plan costs the square of its size; [`Source`] finds a
//! span's lines through its line index instead and hands miette only those lines. A line longer
//! than [`LONG_LINE`] characters (a generated plan's `depends_on` of thousands of ids) is not
//! drawn whole: [`Snippet::Cut`] keeps [`WINDOW`] characters around the label, between `…`.

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

use crate::source::{Source, Span};

/// Lines longer than this many characters are cut around the label.
pub const LONG_LINE: usize = 200;

/// How many characters of a cut line are kept around the label's start.
pub const WINDOW: usize = 100;

/// The text a rendered report reads its snippets from.
#[derive(Debug, Clone)]
pub enum Snippet {
    /// The whole source, read through its line index.
    Whole(Source),
    /// One long line, cut around the label.
    Cut(CutLine),
}

impl Snippet {
    /// The snippet for labels at `spans` (the primary first): the whole source, unless a line
    /// the primary label touches is long, in which case that line cut around it. Returns the
    /// spans as they are in the snippet; a secondary label outside a cut line is dropped.
    pub fn new(source: &Source, spans: &[Span]) -> (Snippet, Vec<Option<Span>>) {
        let Some(primary) = spans.first() else { return (Snippet::Whole(source.clone()), Vec::new()) };
        match CutLine::around(source, *primary) {
            None => (Snippet::Whole(source.clone()), spans.iter().copied().map(Some).collect()),
            Some(cut) => {
                let spans = spans.iter().map(|span| cut.map(*span)).collect();
                (Snippet::Cut(cut), spans)
            }
        }
    }
}

impl SourceCode for Snippet {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        match self {
            Snippet::Whole(source) => source.read_span(span, before, after),
            Snippet::Cut(cut) => cut.read_span(span, before, after),
        }
    }
}

impl SourceCode for Source {
    /// miette's own reading applied to the few lines around the span, then moved back to where
    /// those lines are in the whole text; the result is the same as miette's on the whole text.
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let end = span.offset() + span.len();
        if end > self.text.len() {
            return Err(MietteError::OutOfBounds);
        }
        // One line more than the context before: miette treats an empty span at the start of a
        // line by the newline that ends the line above it.
        let first = self.line_index(span.offset()).saturating_sub(before + 1);
        let last = self.line_index(end.saturating_sub(1).max(span.offset())) + after + 2;
        let start = self.line_start(first);
        let stop = self.line_start(last).min(self.text.len());
        let window = &self.text.as_bytes()[start..stop];
        let shifted = SourceSpan::from((span.offset() - start, span.len()));
        let inner = window.read_span(&shifted, before, after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            (inner.span().offset() + start, inner.span().len()).into(),
            inner.line() + first,
            inner.column(),
            inner.line_count() + first,
        )))
    }
}

/// One long line of a source, cut to a window around a label, with `…` where text was cut.
#[derive(Debug, Clone)]
pub struct CutLine {
    name: String,
    text: String,
    /// The line's 0-based number in the source.
    line: usize,
    /// Where the kept text starts in the source.
    start: usize,
    /// Where the kept text ends in the source.
    end: usize,
    /// Characters of the line before the kept text.
    skipped: usize,
    /// Bytes before the kept text in `text`: the leading `…`, if any.
    lead: usize,
}

impl CutLine {
    /// The primary label's first line cut around it, when that line is long.
    fn around(source: &Source, span: Span) -> Option<CutLine> {
        let index = source.line_index(span.offset().min(source.text.len()));
        let line_start = source.line_start(index);
        let line_end = source.line_start(index + 1).min(source.text.len());
        let line = source.text.get(line_start..line_end)?.trim_end_matches(['\n', '\r']);
        if line.chars().count() <= LONG_LINE {
            return None;
        }
        let offset = span.offset().clamp(line_start, line_start + line.len()) - line_start;
        let before = line[..offset].char_indices().rev().nth(WINDOW / 4 - 1).map_or(0, |(i, _)| i);
        let after = line[before..].char_indices().nth(WINDOW).map_or(line.len(), |(i, _)| before + i);
        let mut text = String::with_capacity(after - before + 8);
        if before > 0 {
            text.push('…');
        }
        let lead = text.len();
        text.push_str(&line[before..after]);
        if after < line.len() {
            text.push('…');
        }
        Some(CutLine {
            name: source.name.clone(),
            text,
            line: index,
            start: line_start + before,
            end: line_start + after,
            skipped: line[..before].chars().count(),
            lead,
        })
    }

    /// A source span as it is in the cut text: clamped to the kept text, or `None` when it
    /// starts outside it.
    fn map(&self, span: Span) -> Option<Span> {
        if span.offset() < self.start || span.offset() > self.end {
            return None;
        }
        let end = (span.offset() + span.len()).min(self.end);
        Some(Span::new(span.offset() - self.start + self.lead, end - span.offset()))
    }

    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        _after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let offset = span.offset();
        let Some(head) = self.text.get(..offset) else { return Err(MietteError::OutOfBounds) };
        if offset + span.len() > self.text.len() {
            return Err(MietteError::OutOfBounds);
        }
        // Without context lines miette wants the text from the span on, and the span's column.
        let (from, column) = if before == 0 {
            let cut = usize::from(self.lead > 0);
            (offset, self.skipped + head.chars().count() - cut)
        } else {
            (0, 0)
        };
        let data = &self.text.as_bytes()[from..];
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            data,
            (from, data.len()).into(),
            self.line,
            column,
            self.line + 1,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(contents: &dyn SpanContents<'_>) -> String {
        String::from_utf8_lossy(contents.data()).into_owned()
    }

    #[test]
    fn reading_through_the_index_matches_reading_the_whole_text() {
        let text = "a: 1\nbb: [x, y]\n\nccc: z\r\ndd: 4\nlast";
        let source = Source::new("p.yaml", text);
        for offset in 0..text.len() {
            for len in 0..=(text.len() - offset).min(9) {
                for context in 0..3 {
                    let span = SourceSpan::from((offset, len));
                    let ours = source.read_span(&span, context, context);
                    let theirs = text.as_bytes().read_span(&span, context, context);
                    let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
                        continue;
                    };
                    let at = format!("span {offset}+{len}, context {context}");
                    assert_eq!(text_of(&*ours), text_of(&*theirs), "{at}");
                    assert_eq!(ours.span(), theirs.span(), "{at}");
                    assert_eq!(ours.line(), theirs.line(), "{at}");
                    assert_eq!(ours.column(), theirs.column(), "{at}");
                    assert_eq!(ours.line_count(), theirs.line_count(), "{at}");
                }
            }
        }
    }

    #[test]
    fn a_span_past_the_end_is_out_of_bounds() {
        let source = Source::new("p.yaml", "a: 1\n");
        assert!(source.read_span(&SourceSpan::from((3, 10)), 1, 1).is_err());
    }

    #[test]
    fn a_long_line_is_cut_around_the_label_and_keeps_its_real_column() {
        let ids: Vec<String> = (0..20_000).map(|i| format!("t{i}")).collect();
        let text = format!("x: 1\ndepends_on: [{}]\n", ids.join(", "));
        let source = Source::new("p.yaml", text.as_str());
        let target = text.find("t12345").expect("the id is in the text");
        let (snippet, spans) = Snippet::new(&source, &[Span::new(target, 6), Span::new(0, 1)]);
        let Snippet::Cut(cut) = &snippet else { panic!("a 100k-character line is cut") };
        assert!(cut.text.starts_with('…') && cut.text.ends_with('…'), "{}", cut.text);
        assert!(cut.text.chars().count() <= WINDOW + 2);
        let primary = spans[0].expect("the primary label is kept");
        assert_eq!(&cut.text[primary.offset()..primary.offset() + primary.len()], "t12345");
        assert_eq!(spans[1], None, "a label on another line is dropped");
        let contents = snippet.read_span(&primary.into(), 0, 0).expect("the label is inside the cut");
        let (line, column) = source.line_column(target);
        assert_eq!((contents.line() + 1, contents.column() + 1), (line, column));
    }

    #[test]
    fn a_label_longer_than_the_window_is_clamped_to_it() {
        let text = format!("k: [{}]\n", "a, ".repeat(5_000));
        let source = Source::new("p.yaml", text.as_str());
        let (snippet, spans) = Snippet::new(&source, &[Span::new(3, text.len() - 4)]);
        let Snippet::Cut(cut) = snippet else { panic!("the line is long") };
        let span = spans[0].expect("kept");
        assert!(span.offset() + span.len() <= cut.text.len());
    }

    #[test]
    fn short_lines_keep_the_whole_source() {
        let source = Source::new("p.yaml", "a: 1\nb: 2\n");
        let (snippet, spans) = Snippet::new(&source, &[Span::new(5, 1), Span::new(0, 1)]);
        assert!(matches!(snippet, Snippet::Whole(_)));
        assert_eq!(spans, vec![Some(Span::new(5, 1)), Some(Span::new(0, 1))]);
    }
}
