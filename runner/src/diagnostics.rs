//! Printing diagnostics: miette snippets for people, the documented JSON shape for tools.

use std::fmt::Display;
use std::hash::Hash;
use std::io::{IsTerminal, Write};

use manifest::{Diagnostic, Loaded, Severity, Source};
use miette::{GraphicalReportHandler, GraphicalTheme};
use serde::Serialize;

pub use crate::explain::hint;
use crate::grouping::{Fate, Groups, summary_line};

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
        let (line, column) = source.line_column(loc.span.offset());
        JsonLocation { file: source.name.clone(), line, column, path: loc.path.to_string() }
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

/// Every file a plan was loaded from with what was found in it: the plan's own file first, then
/// each sub-plan file its `type: plan` tasks include (however deep), each once.
pub fn files(loaded: &Loaded) -> impl Iterator<Item = (&Source, &[Diagnostic])> {
    let included = loaded.included.iter().map(|i| (&i.loaded.source, i.loaded.diagnostics.as_slice()));
    std::iter::once((&loaded.source, loaded.diagnostics.as_slice())).chain(included)
}

/// The diagnostics of a plan and of its sub-plan files, each file's drawn against its own
/// source by [`render_human`]: what every command that refuses an invalid plan prints.
pub fn render_loaded(loaded: &Loaded, color: bool) -> String {
    files(loaded).map(|(source, diagnostics)| render_human(diagnostics, source, color)).collect()
}

/// The JSON form of the diagnostics `keep` accepts, from the plan's file and then each sub-plan
/// file, each naming the file it is in.
pub fn json_diagnostics(loaded: &Loaded, keep: impl Fn(&Diagnostic) -> bool) -> Vec<JsonDiagnostic> {
    let keep = &keep;
    files(loaded)
        .flat_map(|(source, diagnostics)| {
            diagnostics.iter().filter(move |d| keep(d)).map(move |d| JsonDiagnostic::new(d, source))
        })
        .collect()
}

/// Renders errors and warnings with source snippets, then notes as one line each, grouped by
/// code (see [`crate::grouping`]).
pub fn render_human(diagnostics: &[Diagnostic], source: &Source, color: bool) -> String {
    let handler = handler(color);
    let mut out = String::new();
    let codes: Vec<String> = diagnostics.iter().map(Diagnostic::code).collect();
    let code = |i: usize| codes[i].as_str();
    let kind = |i: usize| kind_of(diagnostics[i].severity);
    let place = |i: usize| format!("line {}", source.line_column(diagnostics[i].loc.span.offset()).0);
    let drawn = (0..diagnostics.len()).filter(|&i| diagnostics[i].severity != Severity::Info);
    render_groups(&mut out, drawn, code, kind, place, |out, i| {
        // Writing into a String cannot fail.
        let _ = handler.render_report(out, &diagnostics[i].with_source(source));
        out.push_str(&hint(code(i)));
    });
    let notes = (0..diagnostics.len()).filter(|&i| diagnostics[i].severity == Severity::Info);
    if notes.clone().next().is_some() {
        out.push_str("notes:\n");
        render_groups(&mut out, notes, code, kind, place, |out, i| {
            let note = &diagnostics[i];
            let (line, column) = source.line_column(note.loc.span.offset());
            out.push_str(&format!("  {}:{line}:{column}: {} [{}]\n", source.name, note, codes[i]));
        });
        out.push_str(NOTES_HINT);
    }
    out
}

/// The line after a list of notes, which name their codes in brackets.
pub const NOTES_HINT: &str = "  help: run `runner explain CODE` for more on a code in brackets\n";

/// Draws reports in order, grouped by code: of `items` (positions in a list of reports), those
/// [`Groups`] hides are replaced by one line after the last drawn report of their code, naming
/// each by `place`. Returns how many were not drawn. The items are walked again rather than
/// kept: once to count each code, and from a summary line's place on to find the reports it
/// stands for.
pub fn render_groups<'a, P: Hash + Eq + Display>(
    out: &mut String,
    items: impl Iterator<Item = usize> + Clone,
    code: impl Fn(usize) -> &'a str,
    kind: impl Fn(usize) -> &'static str,
    place: impl Fn(usize) -> P,
    mut draw: impl FnMut(&mut String, usize),
) -> usize {
    let mut groups = Groups::new(items.clone().map(&code));
    let mut items = items;
    while let Some(item) = items.next() {
        let this = code(item);
        let rest = match groups.next(this) {
            Fate::Hidden => continue,
            Fate::Drawn => {
                draw(out, item);
                continue;
            }
            Fate::DrawnThenSummary(rest) => {
                draw(out, item);
                rest
            }
        };
        let places = items.clone().filter(|&j| code(j) == this).map(&place);
        let line = summary_line(rest, this, kind(item), places);
        match kind(item) {
            "notes" => {
                out.push_str("  ");
                out.push_str(&line);
                out.push('\n');
            }
            _ => {
                out.push_str(&line);
                out.push_str("\n\n");
            }
        }
    }
    groups.hidden()
}

/// What a summary line counts of reports of this severity: `errors`, `warnings` or `notes`.
pub fn kind_of(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "errors",
        Severity::Warning => "warnings",
        Severity::Info => "notes",
    }
}

/// Writes a document to stdout as pretty JSON and a newline, encoding as it writes, so a large
/// report is never held whole in memory; a closed pipe is an error `main` ignores.
pub fn print_json(document: &impl Serialize) -> anyhow::Result<()> {
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut stdout, document).map_err(std::io::Error::from)?;
    stdout.write_all(b"\n")?;
    stdout.flush()?;
    Ok(())
}

/// Writes text to stdout, turning a closed pipe into an error `main` ignores.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
