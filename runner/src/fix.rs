//! `runner critic --fix`: the mechanical fixes the loader and the critic offer, applied to the
//! plan file in place as edits at their spans (comments, order and formatting stay), or shown as
//! a unified diff with `--diff`; then the result is checked again.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use manifest::critic::Finding;
use manifest::fix::{Edit, Fix};
use manifest::{Loaded, Source};

use crate::diagnostics::print;
use crate::exit::{EXIT_IO, EXIT_USAGE};

/// How many times the fixes are applied and the plan read again: a typo fixed can make the
/// plan valid, and only then does the critic offer its own fixes.
const ROUNDS: usize = 4;

/// The most findings and diagnostics left that the report lists one by one.
const LISTED: usize = 20;

/// One fix on offer: the code of what it fixes, where, and the edits.
pub struct Offered {
    /// The diagnostic or finding code, such as `plan::unknown_dependency`.
    pub code: String,
    /// The span of the diagnostic or finding.
    pub span: manifest::Span,
    /// The edits.
    pub fix: Fix,
}

/// Every mechanical fix for a plan read from `text`: the loader's, and those of the critic's
/// `findings` (none when the plan is not valid).
pub fn offered(loaded: &Loaded, findings: &[Finding], text: &str) -> Vec<Offered> {
    let mut out: Vec<Offered> = loaded
        .diagnostics
        .iter()
        .filter_map(|d| d.fix.clone().map(|fix| Offered { code: d.code(), span: d.loc.span, fix }))
        .collect();
    if let Some(plan) = loaded.valid().map(|(plan, _)| plan) {
        for finding in findings {
            if let Some(fix) = manifest::critic::fix(finding, plan, text) {
                out.push(Offered { code: finding.lint.code_str().to_owned(), span: finding.loc.span, fix });
            }
        }
    }
    out
}

/// Applies the fixes to the plan at `path` (or, with `diff`, prints what they would change);
/// exit 0 when the result has no errors, 2 when errors are left, 6 when the file cannot be read
/// or written.
pub fn run(path: &Path, diff: bool) -> anyhow::Result<u8> {
    let loaded = manifest::load_file(path);
    let unread = |p: &manifest::Problem| {
        matches!(
            p,
            manifest::Problem::Io { .. } | manifest::Problem::TooLarge { .. } | manifest::Problem::NotUtf8 { .. }
        )
    };
    if loaded.errors().any(|e| unread(&e.problem)) {
        // The file could not be read as text: there is nothing to fix in it.
        print(&crate::diagnostics::render_loaded(&loaded, crate::diagnostics::color_stdout()))?;
        return Ok(crate::validate::exit_code(&loaded, path));
    }
    let raw = match std::fs::read_to_string(path) {
        Ok(raw) => raw,
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", path.display());
            return Ok(EXIT_IO);
        }
    };
    let (bom, original) = match raw.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest.to_owned()),
        None => ("", raw),
    };
    let name = path.display().to_string();
    let stem = path.file_stem().map_or_else(|| "plan".to_owned(), |s| s.to_string_lossy().into_owned());
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let files = |file: &str| base.join(file).is_file();

    let mut text = original.clone();
    let mut made: Vec<String> = Vec::new();
    for _ in 0..ROUNDS {
        let loaded = manifest::load_str(&name, &stem, &text, &files);
        let findings = findings_of(&loaded);
        let offered = offered(&loaded, &findings, &text);
        let mut taken: Vec<Edit> = Vec::new();
        for offer in offered {
            let overlaps = offer.fix.edits.iter().any(|e| taken.iter().any(|t| overlap(t, e)));
            if overlaps {
                continue;
            }
            let (line, _) = loaded.source.line_column(offer.span.offset());
            made.push(format!("line {line}: {} ({})", offer.fix.title, offer.code));
            taken.extend(offer.fix.edits);
        }
        if taken.is_empty() {
            break;
        }
        text = manifest::fix::apply(&text, &taken).0;
    }

    let fixed = manifest::load_str(&name, &stem, &text, &files);
    if diff {
        // Later rounds edit the text earlier ones made, so the diff is taken between the texts.
        let shown = crate::unified::diff(&name, &original, &crate::unified::line_edits(&original, &text));
        print(&shown)?;
        eprint!("{}", report(&made, &fixed, false));
    } else {
        if !made.is_empty() {
            write_in_place(path, &format!("{bom}{text}"))?;
        }
        print(&report(&made, &fixed, true))?;
    }
    Ok(if fixed.is_valid() { 0 } else { EXIT_USAGE })
}

/// The critic's findings on a loaded plan; none when it is not valid.
fn findings_of(loaded: &Loaded) -> Vec<Finding> {
    crate::critic::review(loaded).findings().collect()
}

/// Whether two edits touch the same bytes (two insertions at one place count as overlapping).
fn overlap(a: &Edit, b: &Edit) -> bool {
    let (a0, a1) = (a.span.offset(), a.span.offset() + a.span.len());
    let (b0, b1) = (b.span.offset(), b.span.offset() + b.span.len());
    a0 < b1 && b0 < a1 || a0 == b0
}

/// What was changed and what is left: every fix made, then each error, warning and finding
/// still there (the first [`LISTED`]), by line.
fn report(made: &[String], fixed: &Loaded, written: bool) -> String {
    let mut out = String::new();
    let verb = if written { "fixed" } else { "would fix" };
    if made.is_empty() {
        out.push_str("nothing to fix\n");
    }
    for line in made {
        let _ = writeln!(out, "{verb}: {line}");
    }
    let mut left: Vec<String> = fixed
        .diagnostics
        .iter()
        .filter(|d| d.severity != manifest::Severity::Info)
        .map(|d| left_line(&fixed.source, d.loc.span.offset(), d.severity, &d.code(), &d.to_string()))
        .collect();
    for finding in findings_of(fixed) {
        let (offset, code) = (finding.loc.span.offset(), finding.lint.code_str());
        left.push(left_line(&fixed.source, offset, finding.severity, code, &finding.to_string()));
    }
    if left.is_empty() {
        out.push_str("left: nothing\n");
    }
    for line in left.iter().take(LISTED) {
        let _ = writeln!(out, "left: {line}");
    }
    if left.len() > LISTED {
        let _ = writeln!(out, "left: ... and {} more (see `runner critic`)", left.len() - LISTED);
    }
    out
}

fn left_line(source: &Source, offset: usize, severity: manifest::Severity, code: &str, message: &str) -> String {
    let (line, _) = source.line_column(offset);
    format!("line {line}: {} {code}: {message}", severity.as_str())
}

/// Replaces the file's text: written to a sibling file, flushed to disk, then renamed over the
/// plan, so a crash leaves the old plan or the new one, never half of one.
fn write_in_place(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path.file_name().map_or_else(|| "plan".into(), |n| n.to_string_lossy().into_owned());
    let temporary = path.with_file_name(format!(".{name}.fix-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        if let Ok(metadata) = std::fs::metadata(path) {
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    };
    write().map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        anyhow::Error::new(error).context(format!("cannot write {}", path.display()))
    })
}
