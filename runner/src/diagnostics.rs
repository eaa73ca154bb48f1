//! Printing diagnostics: miette snippets for people, the documented JSON shape for tools.

use std::io::{IsTerminal, Write};

use manifest::{Diagnostic, Severity, Source};
use miette::{GraphicalReportHandler, GraphicalTheme};
use serde::Serialize;

/// Where a diagnostic or finding is, as the JSON reports print it: 1-based line and column.
#[derive(Debug, Serialize)]
pub struct JsonLocation {
    file: String,
    line: usize,
    column: usize,
    path: String,
}

impl JsonLocation {
    /// The location of a span's start in a source, with its YAML path.
    pub fn new(loc: &manifest::Loc, source: &Source) -> Self {
        let (line, column) = source.line_column(loc.span.offset);
        JsonLocation { file: source.name.clone(), line, column, path: loc.path.clone() }
    }
}

/// One diagnostic in the JSON output of `validate` (and the `errors` of `critic`).
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic {
    code: String,
    severity: &'static str,
    message: String,
    help: Option<String>,
    #[serde(flatten)]
    at: JsonLocation,
}

impl JsonDiagnostic {
    /// The JSON form of a diagnostic.
    pub fn new(diagnostic: &Diagnostic, source: &Source) -> Self {
        JsonDiagnostic {
            code: diagnostic.code(),
            severity: diagnostic.severity.as_str(),
            message: diagnostic.to_string(),
            help: diagnostic.help.clone(),
            at: JsonLocation::new(&diagnostic.loc, source),
        }
    }
}

/// Whether to colour output written to stderr.
pub fn color_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Whether to colour output written to stdout.
pub fn color_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// The miette renderer every command uses: fixed width, so output does not depend on the terminal.
pub fn handler(color: bool) -> GraphicalReportHandler {
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    GraphicalReportHandler::new_themed(theme).with_width(100).with_links(false)
}

/// Renders errors and warnings with source snippets, then notes as one line each.
pub fn render_human(diagnostics: &[Diagnostic], source: &Source, color: bool) -> String {
    let handler = handler(color);
    let mut out = String::new();
    for diagnostic in diagnostics.iter().filter(|d| d.severity != Severity::Info) {
        let report = diagnostic.with_source(source);
        // Writing into a String cannot fail.
        let _ = handler.render_report(&mut out, &report);
    }
    let notes: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.severity == Severity::Info).collect();
    if !notes.is_empty() {
        out.push_str("notes:\n");
        for note in notes {
            let (line, column) = source.line_column(note.loc.span.offset);
            out.push_str(&format!("  {}:{line}:{column}: {} [{}]\n", source.name, note, note.code()));
        }
    }
    out
}

/// Writes text to stdout, turning a closed pipe into an error `main` ignores.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
