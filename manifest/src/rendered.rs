//! A diagnostic or critic finding with the source it points into, ready for miette to render.

use std::fmt;
use std::sync::OnceLock;

use crate::diagnostic::Severity;
use crate::snippet::Snippet;
use crate::source::{Source, Span};

/// A report miette can draw: message, code, help, and labelled spans of a source. The snippet
/// text is chosen on first use (see [`Snippet`]), so a report that is never drawn costs nothing.
#[derive(Debug)]
pub struct Rendered {
    code: String,
    severity: Severity,
    message: String,
    help: Option<String>,
    source: Source,
    /// The primary label first, then the secondary ones.
    labels: Vec<(Span, String)>,
    snippet: OnceLock<(Snippet, Vec<Option<Span>>)>,
}

impl Rendered {
    /// A report on `source` with no labels yet.
    pub fn new(source: &Source, code: String, severity: Severity, message: String, help: Option<String>) -> Self {
        Rendered { code, severity, message, help, source: source.clone(), labels: Vec::new(), snippet: OnceLock::new() }
    }

    /// Adds a label; the first one added is the primary label.
    pub fn label(mut self, span: Span, text: impl Into<String>) -> Self {
        self.labels.push((span, text.into()));
        self
    }

    /// Adds secondary labels.
    pub fn related(mut self, labels: &[(Span, String)]) -> Self {
        self.labels.extend_from_slice(labels);
        self
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        &self.code
    }

    fn snippet(&self) -> &(Snippet, Vec<Option<Span>>) {
        self.snippet.get_or_init(|| {
            let spans: Vec<Span> = self.labels.iter().map(|(span, _)| *span).collect();
            Snippet::new(&self.source, &spans)
        })
    }
}

impl fmt::Display for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Rendered {}

impl miette::Diagnostic for Rendered {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Info => miette::Severity::Advice,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.snippet().0)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let spans = &self.snippet().1;
        let labels = self.labels.iter().zip(spans).enumerate().filter_map(|(i, ((_, text), span))| {
            let span = (*span)?;
            let text = Some(text.clone());
            Some(if i == 0 {
                miette::LabeledSpan::new_primary_with_span(text, span)
            } else {
                miette::LabeledSpan::new_with_span(text, span)
            })
        });
        Some(Box::new(labels))
    }
}
