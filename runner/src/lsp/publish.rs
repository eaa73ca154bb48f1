//! The diagnostics published for a document: the loader's and the critic's, each at its range
//! with its stable code, severity and related places.

use lsp_types::{
    Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, PublishDiagnosticsParams,
    Url,
};
use manifest::{Severity, Span};

use super::analysis::Analysis;
use super::document::{Document, Encoding};

/// Every diagnostic of a document's latest reading, for `textDocument/publishDiagnostics`.
pub fn diagnostics(
    uri: &Url,
    document: &Document,
    analysis: &Analysis,
    encoding: Encoding,
) -> PublishDiagnosticsParams {
    let range = |span: Span| document.range(span, encoding);
    let mut out: Vec<Diagnostic> = analysis
        .loaded
        .diagnostics
        .iter()
        .map(|d| {
            let related = d
                .related
                .iter()
                .map(|(span, label)| DiagnosticRelatedInformation {
                    location: Location { uri: uri.clone(), range: range(*span) },
                    message: label.clone(),
                })
                .collect();
            diagnostic(range(d.loc.span), d.severity, d.code(), message(&d.to_string(), d.help.as_deref()), related)
        })
        .collect();
    for finding in &analysis.findings {
        let text = message(&finding.to_string(), finding.help.as_deref());
        out.push(diagnostic(
            range(finding.loc.span),
            finding.severity,
            finding.lint.code_str().to_owned(),
            text,
            Vec::new(),
        ));
    }
    PublishDiagnosticsParams { uri: uri.clone(), diagnostics: out, version: Some(document.version) }
}

fn diagnostic(
    range: lsp_types::Range,
    severity: Severity,
    code: String,
    message: String,
    related: Vec<DiagnosticRelatedInformation>,
) -> Diagnostic {
    Diagnostic {
        range,
        severity: Some(severity_of(severity)),
        code: Some(NumberOrString::String(code)),
        source: Some("runner".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        ..Default::default()
    }
}

/// The LSP severity of a runner severity.
pub fn severity_of(severity: Severity) -> DiagnosticSeverity {
    match severity {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Info => DiagnosticSeverity::INFORMATION,
    }
}

/// The message with its help on a line of its own.
fn message(text: &str, help: Option<&str>) -> String {
    match help {
        Some(help) => format!("{text}\nhelp: {help}"),
        None => text.to_owned(),
    }
}
