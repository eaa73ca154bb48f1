//! `runner critic`: the critic's findings, scores and metrics in four formats, for a plan and
//! for each sub-plan file it includes (under that file's name, scored on its own).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use engine::forecast::{Forecast, History};
use manifest::critic::{Dimension, Finding, Metrics, Review, Scores};
use manifest::plan::Vars;
use manifest::{Loaded, Severity, Source};
use serde::Serialize;

use crate::diagnostics::{
    NOTES_HINT, color_stdout, files, hint, json_diagnostics, kind_of, print, print_json, render_groups, render_loaded,
};
use crate::format::CriticFormat;

/// Exit code when the plan scores below `--min-score`.
pub const EXIT_LOW_SCORE: u8 = 1;

/// Reviews a plan and prints the report to stdout in every format; exit 0 when it has no errors
/// and scores at least `min_score`, 1 when it scores lower, 2 when it has errors (the loader's, or
/// a budget the plan cannot keep).
pub fn run(path: &Path, format: CriticFormat, min_score: f64, history: &History) -> anyhow::Result<u8> {
    let loaded = manifest::load_file(path);
    let forecast = crate::forecast::of(&loaded, history);
    let review = review_with(&loaded, forecast.as_ref());
    let subplans = subplan_reviews(&loaded);
    let forecast = forecast.as_ref();
    match format {
        CriticFormat::Human => print(&human_review(&loaded, &review, forecast, color_stdout()).text)?,
        CriticFormat::Json => print_json_report(&loaded, &review, &subplans, forecast)?,
        CriticFormat::Sarif => print_json(&crate::sarif::report(&loaded, &review, &subplans, forecast))?,
        CriticFormat::Markdown => print(&markdown(&loaded, &review, &subplans, forecast))?,
    }
    let code = if !loaded.is_valid() {
        crate::validate::exit_code(&loaded, path)
    } else if has_errors(&review) {
        crate::exit::EXIT_USAGE
    } else if review.scores.overall < min_score {
        EXIT_LOW_SCORE
    } else {
        0
    };
    // The process ends next: freeing a large plan's allocations one by one would only delay it.
    std::mem::forget(subplans);
    std::mem::forget(review);
    std::mem::forget(loaded);
    Ok(code)
}

/// The critic's review of a loaded plan, with the forecast's findings on its budget (the forecast
/// is made for them, from the documented defaults, when the plan has a budget); a plan with
/// errors is unrunnable and scores 0.
pub fn review(loaded: &Loaded) -> Review<'_> {
    let budgeted = loaded.valid().is_some_and(|(plan, _)| plan.control.budget.is_some());
    let forecast = if budgeted { crate::forecast::of(loaded, &History::default()) } else { None };
    review_with(loaded, forecast.as_ref())
}

/// The critic's review of a loaded plan, with `forecast`'s findings on its budget.
pub fn review_with<'a>(loaded: &'a Loaded, forecast: Option<&Forecast>) -> Review<'a> {
    let Some((plan, graph)) = loaded.valid() else { return Review::unrunnable() };
    let mut review = manifest::critic::review(plan, graph);
    for finding in forecast.map(|f| engine::forecast::budget::findings(plan, f)).unwrap_or_default() {
        review.add(finding);
    }
    review
}

/// Whether the review has an error: a budget the plan cannot keep.
pub fn has_errors(review: &Review<'_>) -> bool {
    (0..review.len()).any(|i| review.severity(i) == manifest::Severity::Error)
}

/// The review of each sub-plan file a plan includes, in the order of `loaded.included`; a file
/// with errors is unrunnable and scores 0, as a plan does.
pub fn subplan_reviews(loaded: &Loaded) -> Vec<Review<'_>> {
    loaded.included.iter().map(|included| review(&included.loaded)).collect()
}

/// The plan's name, or the file's when it could not be read.
fn plan_name(loaded: &Loaded) -> String {
    loaded.plan.as_ref().map_or_else(|| loaded.source.name.clone(), |p| p.name.clone())
}

/// The variables the plan declares it takes (`spec.vars`), with their defaults; `None` when it
/// declares none, or could not be read.
fn declared_vars(loaded: &Loaded) -> Option<&Vars> {
    loaded.plan.as_ref().and_then(|plan| plan.vars.as_ref())
}

/// The longest a default is shown in the human and markdown reports, in characters.
const SHOWN_DEFAULT: usize = 80;

/// A variable's default as compact JSON, cut to [`SHOWN_DEFAULT`] characters with `…`.
fn shown_default(value: &serde_json::Value) -> String {
    let json = value.to_string();
    if json.chars().count() <= SHOWN_DEFAULT {
        return json;
    }
    let mut cut: String = json.chars().take(SHOWN_DEFAULT - 1).collect();
    cut.push('…');
    cut
}

/// The human report's list of the variables a plan takes.
fn vars_list(vars: &Vars) -> String {
    if vars.is_empty() {
        return "variables: none\n".to_owned();
    }
    let width = vars.keys().map(|name| name.chars().count()).max().unwrap_or(0);
    let mut out = String::from("variables:\n");
    for (name, value) in vars {
        let _ = writeln!(out, "  {name:<width$}  {}", shown_default(value));
    }
    out
}

/// The markdown report's table of the variables a plan takes.
fn vars_table(vars: &Vars) -> String {
    if vars.is_empty() {
        return "\nThe plan takes no variables.\n".to_owned();
    }
    let mut out = String::from("\n### Variables\n\n| Variable | Default |\n| --- | --- |\n");
    for (name, value) in vars {
        let _ = writeln!(out, "| {} | {} |", code_span(name), code_span(&shown_default(value)));
    }
    out
}

/// Text as a markdown code span inside a table cell: fenced with more backticks than it holds in
/// a row, its pipes escaped.
fn code_span(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if longest > 0 { " " } else { "" };
    format!("{fence}{pad}{}{pad}{fence}", text.replace('|', "\\|"))
}

/// The dimensions' scores as the JSON report writes them: an object keyed by each dimension's
/// name, in [`Dimension::ALL`] order.
struct JsonDimensions<'a>(&'a Scores);

impl Serialize for JsonDimensions<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(Dimension::ALL.len()))?;
        for dimension in Dimension::ALL {
            map.serialize_entry(dimension.as_str(), &self.0.of_dimension(dimension))?;
        }
        map.end()
    }
}

/// Prints the JSON report (see [`write_json`]) and a newline; a closed pipe is an error `main`
/// ignores.
fn print_json_report(
    loaded: &Loaded,
    review: &Review<'_>,
    subplans: &[Review<'_>],
    forecast: Option<&Forecast>,
) -> anyhow::Result<()> {
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    write_json(&mut stdout, loaded, review, subplans, forecast, PIECE)?;
    stdout.write_all(b"\n")?;
    stdout.flush()?;
    Ok(())
}

/// Findings a piece of the JSON report holds: enough that handing a piece from one thread to
/// the other costs nothing beside making it, few enough that the pieces in hand stay small.
const PIECE: usize = 1024;

/// Writes the JSON report: the documented shape, in this key order, laid out as `serde_json`'s
/// pretty printer lays it out. The findings are written here, made a piece at a time on two
/// threads and written in order, so a report of 300,000 findings holds a few pieces at a time;
/// the other parts, sub-plans' reviews included, are small and go through `serde_json`.
fn write_json(
    out: &mut impl Write,
    loaded: &Loaded,
    review: &Review<'_>,
    subplans: &[Review<'_>],
    forecast: Option<&Forecast>,
    piece: usize,
) -> std::io::Result<()> {
    let dimensions = JsonDimensions(&review.scores);
    let errors = json_diagnostics(loaded, manifest::Diagnostic::is_error);
    out.write_all(b"{\n  \"plan\": ")?;
    serde_json::to_writer(&mut *out, &plan_name(loaded))?;
    if let Some(vars) = declared_vars(loaded) {
        out.write_all(b",\n  \"vars\": ")?;
        nested(out, vars)?;
    }
    out.write_all(b",\n  \"score\": ")?;
    serde_json::to_writer(&mut *out, &review.scores.overall)?;
    out.write_all(b",\n  \"dimensions\": ")?;
    nested(out, &dimensions)?;
    out.write_all(b",\n  \"errors\": ")?;
    nested(out, &errors)?;
    out.write_all(b",\n  \"findings\": [")?;
    let pieces = Pieces { review, source: &loaded.source, file: serde_json::to_vec(&loaded.source.name)?, size: piece };
    pieces.write(out)?;
    out.write_all(if review.is_empty() { b"],\n  \"metrics\": " } else { b"\n  ],\n  \"metrics\": " })?;
    nested(out, &review.metrics)?;
    if let Some(forecast) = forecast {
        out.write_all(b",\n  \"forecast\": ")?;
        nested(out, forecast)?;
    }
    if !subplans.is_empty() {
        out.write_all(b",\n  \"subplans\": ")?;
        nested(out, &json_subplans(loaded, subplans))?;
    }
    out.write_all(b"\n}")
}

/// One sub-plan file's review in the JSON report's `subplans`: the report's shape less `errors`
/// (which list every file's), with the file it is in.
#[derive(Serialize)]
struct JsonSubplan<'a> {
    file: &'a str,
    plan: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    vars: Option<&'a Vars>,
    score: f64,
    dimensions: JsonDimensions<'a>,
    findings: Vec<JsonFinding>,
    metrics: &'a Metrics,
}

/// The `subplans` of the JSON report, in the order of `loaded.included`.
fn json_subplans<'a>(loaded: &'a Loaded, subplans: &'a [Review<'a>]) -> Vec<JsonSubplan<'a>> {
    loaded
        .included
        .iter()
        .zip(subplans)
        .map(|(included, review)| {
            let child = &included.loaded;
            JsonSubplan {
                file: &child.source.name,
                plan: plan_name(child),
                vars: declared_vars(child),
                score: review.scores.overall,
                dimensions: JsonDimensions(&review.scores),
                findings: review.findings().map(|f| JsonFinding::new(&f, &child.source)).collect(),
                metrics: &review.metrics,
            }
        })
        .collect()
}

/// One finding as the JSON report writes it, for the parts of the report that go through
/// `serde_json`; [`write_finding`] writes the same keys by hand.
#[derive(Serialize)]
struct JsonFinding {
    code: &'static str,
    dimension: Option<&'static str>,
    severity: &'static str,
    task: Option<String>,
    message: String,
    help: Option<String>,
    file: String,
    line: usize,
    column: usize,
    path: String,
}

impl JsonFinding {
    fn new(finding: &Finding, source: &Source) -> Self {
        let (line, column) = source.line_column(finding.loc.span.offset());
        JsonFinding {
            code: finding.lint.code_str(),
            dimension: finding.dimension().map(Dimension::as_str),
            severity: finding.severity.as_str(),
            task: finding.task.clone(),
            message: finding.to_string(),
            help: finding.help.as_deref().map(str::to_owned),
            file: source.name.clone(),
            line,
            column,
            path: finding.loc.path.to_string(),
        }
    }
}

/// The findings of the JSON report, cut into pieces of `size` findings.
struct Pieces<'a> {
    review: &'a Review<'a>,
    source: &'a Source,
    /// The source's name as a JSON string.
    file: Vec<u8>,
    size: usize,
}

impl Pieces<'_> {
    /// Writes every finding in order. With more than one piece, a second thread makes the odd
    /// pieces while this one makes the even ones and writes them all; when writing fails, the
    /// other thread stops at its next piece, and when it cannot start, this one makes them all.
    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let count = self.review.len().div_ceil(self.size);
        let mut mine = Vec::new();
        if count < 2 {
            self.make(0, &mut mine, &mut Scratch::default());
            return out.write_all(&mine);
        }
        std::thread::scope(|scope| {
            let (made, taken) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
            let (spent, reused) = std::sync::mpsc::channel::<Vec<u8>>();
            // A thread that cannot start drops its sender: this one then makes every piece.
            let _ = std::thread::Builder::new().name("json report".into()).spawn_scoped(scope, move || {
                let mut scratch = Scratch::default();
                for piece in (1..count).step_by(2) {
                    let mut json = reused.try_recv().unwrap_or_default();
                    self.make(piece, &mut json, &mut scratch);
                    if made.send(json).is_err() {
                        return;
                    }
                }
            });
            let mut scratch = Scratch::default();
            for piece in 0..count {
                if piece % 2 == 0 {
                    self.make(piece, &mut mine, &mut scratch);
                    out.write_all(&mine)?;
                } else if let Ok(theirs) = taken.recv() {
                    out.write_all(&theirs)?;
                    // The other thread may have finished; the buffer is then dropped here.
                    let _ = spent.send(theirs);
                } else {
                    self.make(piece, &mut mine, &mut scratch);
                    out.write_all(&mine)?;
                }
            }
            Ok(())
        })
    }

    /// Replaces `json` with piece `piece`'s findings, each after its separator.
    fn make(&self, piece: usize, json: &mut Vec<u8>, scratch: &mut Scratch) {
        json.clear();
        let first = piece * self.size;
        for i in first..self.review.len().min(first + self.size) {
            json.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
            write_finding(json, &self.review.finding(i), self.source, &self.file, scratch);
        }
    }
}

/// The buffers one finding's text is made in, kept from one finding to the next.
#[derive(Default)]
struct Scratch {
    message: String,
    path: String,
}

/// Appends one finding of the JSON report's `findings`, at its depth; `file` is the source's
/// name as a JSON string.
fn write_finding(json: &mut Vec<u8>, finding: &Finding, source: &Source, file: &[u8], scratch: &mut Scratch) {
    field(json, b"    {\n      \"code\": ", Some(finding.lint.code_str()));
    field(json, b",\n      \"dimension\": ", finding.dimension().map(Dimension::as_str));
    field(json, b",\n      \"severity\": ", Some(finding.severity.as_str()));
    field(json, b",\n      \"task\": ", finding.task.as_deref());
    scratch.message.clear();
    // Writing into a String cannot fail.
    let _ = write!(scratch.message, "{finding}");
    field(json, b",\n      \"message\": ", Some(&scratch.message));
    field(json, b",\n      \"help\": ", finding.help.as_deref());
    json.extend_from_slice(b",\n      \"file\": ");
    json.extend_from_slice(file);
    let (line, column) = source.line_column(finding.loc.span.offset());
    json.extend_from_slice(b",\n      \"line\": ");
    json.extend_from_slice(manifest::digits(line as u64, &mut [0; 20]));
    json.extend_from_slice(b",\n      \"column\": ");
    json.extend_from_slice(manifest::digits(column as u64, &mut [0; 20]));
    finding.loc.path.write_into(&mut scratch.path);
    field(json, b",\n      \"path\": ", Some(&scratch.path));
    json.extend_from_slice(b"\n    }");
}

/// Appends `key` and then a JSON string, escaped as `serde_json` escapes it, or `null`.
fn field(json: &mut Vec<u8>, key: &[u8], text: Option<&str>) {
    json.extend_from_slice(key);
    match text {
        // Most text needs no escaping (`serde_json` escapes quotes, backslashes and control
        // characters only): that is checked without a branch per byte, and the text copied whole.
        Some(text) if !text.bytes().fold(false, |escape, b| escape | (b < 0x20) | (b == b'"') | (b == b'\\')) => {
            json.push(b'"');
            json.extend_from_slice(text.as_bytes());
            json.push(b'"');
        }
        // Writing into a Vec cannot fail.
        _ => {
            let _ = serde_json::to_writer(&mut *json, &text);
        }
    }
}

/// Writes a value as `serde_json`'s pretty printer writes it one level down: each line after the
/// first indented by two more spaces (JSON strings hold no raw line breaks).
fn nested(out: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value)?;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.write_all(b"\n  ")?;
        }
        out.write_all(line)?;
    }
    Ok(())
}

/// The human report of a plan and its sub-plans: what it says, how many findings it does not
/// draw, and how many there are in all.
pub struct HumanReview {
    /// The report.
    pub text: String,
    /// The findings it counts without drawing them.
    pub hidden: usize,
    /// Every finding, of the plan and of its sub-plans.
    pub findings: usize,
}

/// Diagnostics with snippets (every file's, each against its own source), the plan's warnings
/// with snippets and notes one per line, then each sub-plan file's under a line that names it
/// and its score, then the plan's scores and metrics; each kind grouped by code (see
/// [`crate::grouping`]). Only the findings it draws are made whole; the others are counted and
/// named by their place.
pub fn human_review(loaded: &Loaded, review: &Review<'_>, forecast: Option<&Forecast>, color: bool) -> HumanReview {
    let subplans = subplan_reviews(loaded);
    let mut text = render_loaded(loaded, color);
    if !subplans.is_empty() && loaded.is_valid() {
        let _ = writeln!(text, "findings in {}: {}", loaded.source.name, counted(review));
    }
    let mut hidden = findings_human(&mut text, &loaded.source, review, color);
    for (included, sub) in loaded.included.iter().zip(&subplans) {
        let child = &included.loaded;
        let file = &child.source.name;
        if child.is_valid() {
            let (name, score, counted) = (plan_name(child), sub.scores.overall, counted(sub));
            let _ = writeln!(text, "\nfindings in sub-plan {file} (plan `{name}`, score {score:.1}/10): {counted}");
        } else {
            let _ = writeln!(text, "\nsub-plan {file} has errors and cannot run: score 0/10");
        }
        hidden += findings_human(&mut text, &child.source, sub, color);
    }
    text.push('\n');
    text.push_str(&score_table(loaded, review, forecast));
    let findings = review.len() + subplans.iter().map(Review::len).sum::<usize>();
    HumanReview { text, hidden, findings }
}

/// How many warnings and notes a review has, in words.
fn counted(review: &Review<'_>) -> String {
    let (warnings, notes) = severities(review);
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    match (warnings, notes) {
        (0, 0) => "none".to_owned(),
        (w, 0) => plural(w, "warning"),
        (0, n) => plural(n, "note"),
        (w, n) => format!("{}, {}", plural(w, "warning"), plural(n, "note")),
    }
}

/// Appends one file's findings: warnings with snippets, notes one per line; returns how many it
/// does not draw.
fn findings_human(out: &mut String, source: &Source, review: &Review<'_>, color: bool) -> usize {
    let handler = crate::diagnostics::handler(color);
    let code = |i: usize| review.code(i);
    let kind = |i: usize| kind_of(review.severity(i));
    let place = |i: usize| match review.task(i) {
        Some(task) => Cow::Borrowed(task),
        None => Cow::Owned(format!("line {}", source.line_column(review.offset(i)).0)),
    };
    let warnings = (0..review.len()).filter(|&i| review.severity(i) != Severity::Info);
    let mut hidden = render_groups(out, warnings, code, kind, place, |out, i| {
        // Writing into a String cannot fail.
        let _ = handler.render_report(out, &review.finding(i).with_source(source));
        out.push_str(&hint(review.code(i)));
    });
    let notes = (0..review.len()).filter(|&i| review.severity(i) == Severity::Info);
    if notes.clone().next().is_some() {
        out.push_str("critic notes:\n");
        hidden += render_groups(out, notes, code, kind, place, |out, i| {
            let note = review.finding(i);
            let (line, column) = source.line_column(note.loc.span.offset());
            let _ = writeln!(out, "  {}:{line}:{column}: {note} [{}]", source.name, note.code());
        });
        out.push_str(NOTES_HINT);
    }
    hidden
}

/// How many findings each dimension has, in [`Dimension::ALL`] order, and how many are outside
/// them.
fn counts(review: &Review<'_>) -> ([usize; 5], usize) {
    let mut dimensions = [0; 5];
    let mut general = 0;
    for i in 0..review.len() {
        match review.dimension(i).and_then(|d| Dimension::ALL.iter().position(|a| *a == d)) {
            Some(d) => dimensions[d] += 1,
            None => general += 1,
        }
    }
    (dimensions, general)
}

fn score_table(loaded: &Loaded, review: &Review<'_>, forecast: Option<&Forecast>) -> String {
    let mut out = String::new();
    if !loaded.is_valid() {
        let _ = writeln!(out, "plan `{}` has errors and cannot run: score 0/10", plan_name(loaded));
        return out;
    }
    let _ = writeln!(out, "plan `{}`: score {:.1}/10", plan_name(loaded), review.scores.overall);
    let _ = writeln!(out, "  {:<28} {:>5}  {:>8}", "dimension", "score", "findings");
    let (counts, general) = counts(review);
    for (dimension, count) in Dimension::ALL.into_iter().zip(counts) {
        let _ =
            writeln!(out, "  {:<28} {:>5.1}  {:>8}", dimension.title(), review.scores.of_dimension(dimension), count);
    }
    let _ = writeln!(out, "  {:<28} {:>5}  {:>8}", "other checks", "", general);
    let m = &review.metrics;
    let _ = writeln!(out, "metrics:");
    let _ = writeln!(out, "  resilience_score    {:.3}", m.resilience_score);
    let _ = writeln!(out, "  parallelism_ratio   {:.3}", m.parallelism_ratio);
    let _ = writeln!(out, "  prompt_precision    {:.3}", m.prompt_precision);
    let _ = writeln!(out, "  spof_count          {}", m.spof_count);
    let _ = writeln!(out, "  synthesis_coverage  {:.3}", m.synthesis_coverage);
    let _ = writeln!(out, "  phases              {}", m.phases);
    let _ = writeln!(out, "  critical_path       {}", m.critical_path.join(" -> "));
    let _ = writeln!(out, "  estimated_tokens    {}", m.estimated_tokens);
    if let Some(forecast) = forecast {
        out.push_str(&crate::forecast::human(forecast));
    }
    if let Some(vars) = declared_vars(loaded) {
        out.push_str(&vars_list(vars));
    }
    out
}

/// A review comment: summary, score table, findings grouped by dimension, then each sub-plan
/// file's findings under its name.
pub fn markdown(loaded: &Loaded, review: &Review<'_>, subplans: &[Review<'_>], forecast: Option<&Forecast>) -> String {
    let mut out = String::new();
    let name = plan_name(loaded);
    if !loaded.is_valid() {
        let _ = writeln!(out, "## runner critic: `{name}` cannot run (score 0/10)\n");
        for (source, diagnostics) in files(loaded) {
            // The plan's own errors are where the comment is about; a sub-plan's name their file.
            let file = if std::ptr::eq(source, &loaded.source) { String::new() } else { format!("`{}` ", source.name) };
            for error in diagnostics.iter().filter(|d| d.is_error()) {
                let (line, _) = source.line_column(error.loc.span.offset());
                let message = escape(&error.to_string());
                let _ = writeln!(out, "- **error** `{}` ({file}line {line}): {message}", error.code());
            }
        }
        return out;
    }
    let (warnings, notes) = severities(review);
    let _ = writeln!(out, "## runner critic: `{name}` scores {:.1}/10\n", review.scores.overall);
    let _ = writeln!(out, "{warnings} warning(s) and {notes} note(s). Critical path: {}.\n", critical_path(review));
    out.push_str("| Dimension | Score | Findings |\n| --- | ---: | ---: |\n");
    let (counts, _) = counts(review);
    for (dimension, count) in Dimension::ALL.into_iter().zip(counts) {
        let _ = writeln!(out, "| {} | {:.1} | {count} |", dimension.title(), review.scores.of_dimension(dimension));
    }
    if let Some(forecast) = forecast {
        out.push_str(&crate::forecast::markdown(forecast));
    }
    if let Some(vars) = declared_vars(loaded) {
        out.push_str(&vars_table(vars));
    }
    let mut sections: Vec<(Option<Dimension>, &str)> = Dimension::ALL.iter().map(|d| (Some(*d), d.title())).collect();
    sections.push((None, "Other checks"));
    for (dimension, title) in sections {
        let mut findings = (0..review.len()).filter(|&i| review.dimension(i) == dimension).peekable();
        if findings.peek().is_none() {
            continue;
        }
        let _ = writeln!(out, "\n### {title}\n");
        for finding in findings.map(|i| review.finding(i)) {
            markdown_item(&mut out, &finding, &loaded.source);
        }
    }
    for (included, sub) in loaded.included.iter().zip(subplans) {
        let child = &included.loaded;
        let _ = writeln!(out, "\n### Sub-plan `{}`\n", child.source.name);
        let (warnings, notes) = severities(sub);
        let _ = writeln!(
            out,
            "`{}` scores {:.1}/10: {warnings} warning(s) and {notes} note(s).",
            plan_name(child),
            sub.scores.overall
        );
        if !sub.is_empty() {
            out.push('\n');
        }
        for finding in sub.findings() {
            markdown_item(&mut out, &finding, &child.source);
        }
    }
    let m = &review.metrics;
    let _ = writeln!(
        out,
        "\n<details><summary>Metrics</summary>\n\n| metric | value |\n| --- | ---: |\n| resilience_score | {:.3} |\n| parallelism_ratio | {:.3} |\n| prompt_precision | {:.3} |\n| spof_count | {} |\n| synthesis_coverage | {:.3} |\n| phases | {} |\n| estimated_tokens | {} |\n\n</details>",
        m.resilience_score,
        m.parallelism_ratio,
        m.prompt_precision,
        m.spof_count,
        m.synthesis_coverage,
        m.phases,
        m.estimated_tokens
    );
    out
}

/// One finding as a markdown list item, its line in `source`, and its help under it.
fn markdown_item(out: &mut String, finding: &Finding, source: &Source) {
    let (line, _) = source.line_column(finding.loc.span.offset());
    let _ = write!(
        out,
        "- **{}** `{}` (line {line}): {}",
        finding.severity.as_str(),
        finding.code(),
        escape(&finding.to_string())
    );
    match &finding.help {
        Some(help) => {
            let _ = writeln!(out, "  \n  _{}_", escape(help));
        }
        None => out.push('\n'),
    }
}

/// How many warnings and how many notes a review has.
fn severities(review: &Review<'_>) -> (usize, usize) {
    let warnings = (0..review.len()).filter(|&i| review.severity(i) != Severity::Info).count();
    (warnings, review.len() - warnings)
}

fn critical_path(review: &Review<'_>) -> String {
    review.metrics.critical_path.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(" → ")
}

/// Markdown-escapes text that is not in a code span: backticks stay (they mark ids), the
/// characters that start markup elsewhere are escaped.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::JsonDiagnostic;

    /// The JSON report as a derived `Serialize` document, laid out by `serde_json`'s pretty
    /// printer: what [`write_json`] writes by hand, byte for byte.
    #[derive(Serialize)]
    struct Document<'a> {
        plan: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        vars: Option<&'a Vars>,
        score: f64,
        dimensions: JsonDimensions<'a>,
        errors: Vec<JsonDiagnostic>,
        findings: Vec<JsonFinding>,
        metrics: &'a manifest::critic::Metrics,
        #[serde(skip_serializing_if = "Option::is_none")]
        forecast: Option<engine::forecast::Forecast>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        subplans: Vec<JsonSubplan<'a>>,
    }

    fn document(loaded: &Loaded, review: &Review<'_>, subplans: &[Review<'_>]) -> String {
        let document = Document {
            plan: plan_name(loaded),
            vars: declared_vars(loaded),
            score: review.scores.overall,
            dimensions: JsonDimensions(&review.scores),
            errors: files(loaded)
                .flat_map(|(source, found)| {
                    found.iter().filter(|d| d.is_error()).map(|d| JsonDiagnostic::new(d, source))
                })
                .collect(),
            findings: review.findings().map(|f| JsonFinding::new(&f, &loaded.source)).collect(),
            metrics: &review.metrics,
            forecast: crate::forecast::of(loaded, &History::default()),
            subplans: json_subplans(loaded, subplans),
        };
        serde_json::to_string_pretty(&document).expect("a document of strings and numbers serialises")
    }

    const ODD: &str = r#"apiVersion: runner/v1
kind: Plan
metadata: {name: "naïve \"plan\""}
spec:
  agent_definitions:
    noop: {runtime: mock, default: ok}
    unused: {runtime: mock, default: ok}
  workflow:
    - {id: "é0", agent: noop, input: "x\ty"}
    - {id: "t\"1", agent: noop, input: x, depends_on: ["é0"]}
    - {id: t2, agent: noop, input: "ü {{ tasks['t\"1'].output }}", depends_on: ["é0", "t\"1"]}
    - {id: t3, agent: noop, input: x, depends_on: [t2]}
    - {id: t4, agent: noop, input: x, depends_on: [t3]}
"#;

    const CYCLE: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: loop}\nspec:\n  workflow:\n    - {id: a, input: x, depends_on: [b]}\n    - {id: b, input: x, depends_on: [a]}\n";

    const CLEAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: one}\nspec:\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n    - {id: only, agent: noop, input: x, on_failure: {action: retry, max_attempts: 3}}\n";

    const VARS: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: vars}\nspec:\n  vars: {audience: buyers, regions: [EU, \"U|K\"], depth: {max: 2}}\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n    - {id: only, agent: noop, input: \"{{ vars.audience }}\", on_failure: {action: retry, max_attempts: 3}}\n";

    #[test]
    fn the_json_report_is_laid_out_as_serde_json_lays_out_the_document() {
        let plans = [("pl\"an\\é.yaml", ODD), ("cycle.yaml", CYCLE), ("clean.yaml", CLEAN), ("vars.yaml", VARS)];
        for (name, text) in plans.into_iter().chain([("parent.yaml", CLEAN)]) {
            let mut loaded = manifest::load_str(name, "plan", text, &|_| true);
            if name == "parent.yaml" {
                // A plan with sub-plans: one with findings and variables, one with errors.
                loaded.included = [("plans/vars.yaml", VARS), ("plans/odd.yaml", ODD), ("plans/loop.yaml", CYCLE)]
                    .map(|(file, text)| manifest::subplan::Included {
                        path: file.into(),
                        loaded: manifest::load_str(file, "plan", text, &|_| true),
                    })
                    .into();
            }
            let review = review(&loaded);
            let subplans = subplan_reviews(&loaded);
            // One piece, and as many pieces as findings or half as many: the threaded path
            // writes them in order with their separators.
            for piece in [PIECE, 1, 2] {
                let mut written = Vec::new();
                write_json(
                    &mut written,
                    &loaded,
                    &review,
                    &subplans,
                    crate::forecast::of(&loaded, &History::default()).as_ref(),
                    piece,
                )
                .expect("writing to memory cannot fail");
                let expected = document(&loaded, &review, &subplans);
                assert_eq!(String::from_utf8(written).expect("UTF-8"), expected, "{name} by {piece}");
            }
            if name == "parent.yaml" {
                let report: serde_json::Value =
                    serde_json::from_str(&document(&loaded, &review, &subplans)).expect("the report is JSON");
                let files: Vec<&str> = report["subplans"]
                    .as_array()
                    .expect("subplans")
                    .iter()
                    .filter_map(|s| s["file"].as_str())
                    .collect();
                assert_eq!(files, ["plans/vars.yaml", "plans/odd.yaml", "plans/loop.yaml"]);
                assert!(report["subplans"][1]["findings"].as_array().is_some_and(|f| f.len() >= 5), "{report:#}");
                assert!(
                    report["subplans"][1]["findings"]
                        .as_array()
                        .expect("findings")
                        .iter()
                        .all(|f| f["file"] == "plans/odd.yaml")
                );
                assert_eq!(report["subplans"][2]["score"], 0.0, "a sub-plan with errors scores 0");
                assert!(
                    report["errors"].as_array().expect("errors").iter().any(|e| e["file"] == "plans/loop.yaml"),
                    "{report:#}"
                );
            }
        }
        let odd = manifest::load_str("odd.yaml", "odd", ODD, &|_| true);
        assert!(review(&odd).len() >= 5, "the odd plan has findings of several codes");
        assert!(manifest::load_str("c.yaml", "c", CYCLE, &|_| true).errors().next().is_some(), "the cycle is an error");
        assert!(review(&manifest::load_str("c.yaml", "c", CLEAN, &|_| true)).is_empty(), "the clean plan has none");
        let vars = manifest::load_str("v.yaml", "v", VARS, &|_| true);
        assert!(vars.is_valid() && declared_vars(&vars).is_some_and(|v| v.len() == 3), "the vars plan declares three");
    }

    #[test]
    fn defaults_are_shown_as_json_and_long_ones_cut() {
        assert_eq!(shown_default(&serde_json::json!("buyers")), "\"buyers\"");
        assert_eq!(shown_default(&serde_json::json!(["EU", "UK"])), "[\"EU\",\"UK\"]");
        let long = shown_default(&serde_json::json!("é".repeat(200)));
        assert_eq!(long.chars().count(), SHOWN_DEFAULT);
        assert!(long.ends_with('…'), "{long}");
        assert_eq!(code_span("a|b"), "`a\\|b`");
        assert_eq!(code_span("x`y"), "`` x`y ``");
    }

    /// A writer that takes `room` bytes and then fails, as a closed pipe does.
    struct Closing {
        room: usize,
    }

    impl Write for Closing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let taken = buf.len().min(self.room);
            self.room -= taken;
            Ok(taken)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_report_whose_reader_goes_away_ends_with_the_error() {
        let loaded = manifest::load_str("odd.yaml", "odd", ODD, &|_| true);
        let review = review(&loaded);
        for room in [0, 300, 1200] {
            let error = write_json(&mut Closing { room }, &loaded, &review, &[], None, 1)
                .expect_err("the pipe closes mid-report");
            assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "after {room} bytes");
        }
    }
}
