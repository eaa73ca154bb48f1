//! `runner validate`: every error in a plan, with its location.

use std::path::Path;

use manifest::{Loaded, Severity};
use serde::Serialize;

use crate::diagnostics::{JsonDiagnostic, color_stdout, files, json_diagnostics, print, print_json, render_loaded};
use crate::exit::{EXIT_IO, EXIT_USAGE};
use crate::format::Format;

/// Validates a plan and prints the report (the plan's errors included: they are the result),
/// with those of the sub-plan files it includes at their own files and lines, to stdout; exit 0
/// when valid, 2 when not (6 when the file cannot be read).
pub fn run(path: &Path, format: Format) -> anyhow::Result<u8> {
    let loaded = manifest::load_file(path);
    match format {
        Format::Human => {
            let report = render_loaded(&loaded, color_stdout());
            print(&format!("{report}{}\n", summary(&loaded)))?;
        }
        Format::Json => {
            let diagnostics = json_diagnostics(&loaded, |d| d.severity != Severity::Info);
            let document = ValidateReport { valid: loaded.is_valid(), diagnostics };
            print_json(&document)?;
        }
    }
    let code = exit_code(&loaded, path);
    // The process ends next: freeing a large plan's allocations one by one would only delay it.
    std::mem::forget(loaded);
    Ok(code)
}

/// 0 for a valid plan; [`EXIT_IO`] when the file at `path` exists but could not be read;
/// [`EXIT_USAGE`] when the plan has errors or there is no such file (a mistyped path).
pub fn exit_code(loaded: &Loaded, path: &Path) -> u8 {
    if loaded.is_valid() {
        0
    } else if loaded.errors().any(|e| matches!(e.problem, manifest::Problem::Io { .. })) && path.exists() {
        EXIT_IO
    } else {
        EXIT_USAGE
    }
}

/// The JSON document `validate --format json` prints.
#[derive(Serialize)]
struct ValidateReport {
    valid: bool,
    diagnostics: Vec<JsonDiagnostic>,
}

/// One line that says whether the plan is valid and what it holds; its counts take in the
/// sub-plan files it includes.
pub fn summary(loaded: &Loaded) -> String {
    let count = |severity| files(loaded).flat_map(|(_, found)| found).filter(|d| d.severity == severity).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let warnings = if warnings > 0 { format!(", {}", plural(warnings, "warning")) } else { String::new() };
    match loaded.valid() {
        Some((plan, graph)) => {
            let subplans = match loaded.included.len() {
                0 => String::new(),
                n => format!(", {}", plural(n, "sub-plan")),
            };
            format!(
                "{}: plan `{}` is valid: {} in {}{subplans}{warnings}",
                loaded.source.name,
                plan.name,
                plural(plan.tasks.len(), "task"),
                plural(graph.phases().len(), "phase"),
            )
        }
        None => {
            let elsewhere = loaded.included.iter().map(|i| i.loaded.errors().count()).sum::<usize>();
            let elsewhere = if elsewhere > 0 { format!(" ({elsewhere} in sub-plans)") } else { String::new() };
            format!("{}: invalid plan: {}{elsewhere}{warnings}", loaded.source.name, plural(errors, "error"))
        }
    }
}
