//! The reports of `runner test`: lines for people, a JSON document, and JUnit XML for CI.

use std::fmt::Write as _;

use serde_json::json;

use super::Verdict;
use super::expect::Failure;

/// The counts of passed, failed (or errored) and invalid scenarios.
fn counts(verdicts: &[Verdict]) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for verdict in verdicts {
        match verdict {
            Verdict::Ran { failures, .. } if failures.is_empty() => counts.0 += 1,
            Verdict::Ran { .. } | Verdict::Error { .. } => counts.1 += 1,
            Verdict::Invalid(_) => counts.2 += 1,
        }
    }
    counts
}

/// A line per scenario, each failure with the events around it, and `N passed, N failed`.
pub fn human(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    for verdict in verdicts {
        match verdict {
            Verdict::Ran { name, path, failures, makespan, kept } => {
                let word = if failures.is_empty() { "ok  " } else { "FAIL" };
                let virtual_time = makespan.as_millis() as f64 / 1000.0;
                let _ = writeln!(out, "{word} {name} ({}, {virtual_time}s virtual)", path.display());
                for failure in failures {
                    out.push_str(&explain(failure));
                }
                if let Some(id) = kept {
                    let _ = writeln!(out, "     kept as run `{id}`");
                }
            }
            Verdict::Invalid(invalid) => {
                let _ = writeln!(out, "INVALID {}", invalid.path.display());
                out.push_str(&invalid.report);
            }
            Verdict::Error { path, message } => {
                let _ = writeln!(out, "ERROR {}: {message}", path.display());
            }
        }
    }
    let (passed, failed, invalid) = counts(verdicts);
    let _ = write!(out, "{passed} passed, {failed} failed");
    if invalid > 0 {
        let _ = write!(out, ", {invalid} invalid");
    }
    out.push('\n');
    out
}

/// One failed expectation for people: what, expected, actual, then the events around it.
pub fn explain(failure: &Failure) -> String {
    let mut out = format!(
        "     {}: expected {}\n     {}  actual {}\n",
        failure.what,
        failure.expected,
        " ".repeat(failure.what.len()),
        failure.actual
    );
    if !failure.around.is_empty() {
        out.push_str("       events around it:\n");
        for line in &failure.around {
            let _ = writeln!(out, "         {line}");
        }
    }
    out
}

/// One JSON document: each scenario with its outcome, and the counts.
pub fn json(verdicts: &[Verdict]) -> anyhow::Result<String> {
    let scenarios: Vec<serde_json::Value> = verdicts
        .iter()
        .map(|verdict| match verdict {
            Verdict::Ran { name, path, failures, makespan, kept } => json!({
                "name": name,
                "file": path.display().to_string(),
                "outcome": if failures.is_empty() { "passed" } else { "failed" },
                "makespan_ms": makespan.as_millis() as u64,
                "failures": failures,
                "kept_run": kept,
            }),
            Verdict::Invalid(invalid) => json!({
                "file": invalid.path.display().to_string(),
                "outcome": "invalid",
                "diagnostics": strip_ansi(&invalid.report),
            }),
            Verdict::Error { path, message } => json!({
                "file": path.display().to_string(),
                "outcome": "error",
                "error": message,
            }),
        })
        .collect();
    let (passed, failed, invalid) = counts(verdicts);
    let document = json!({"scenarios": scenarios, "passed": passed, "failed": failed, "invalid": invalid});
    Ok(format!("{}\n", serde_json::to_string_pretty(&document)?))
}

/// JUnit XML: one testsuite, a testcase per scenario; failures and invalid files as
/// `<failure>` and `<error>`.
pub fn junit(verdicts: &[Verdict]) -> String {
    let (_, failed, invalid) = counts(verdicts);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    let _ = writeln!(
        out,
        "  <testsuite name=\"runner test\" tests=\"{}\" failures=\"{failed}\" errors=\"{invalid}\">",
        verdicts.len()
    );
    for verdict in verdicts {
        match verdict {
            Verdict::Ran { name, path, failures, makespan, .. } => {
                let time = makespan.as_millis() as f64 / 1000.0;
                let head = format!(
                    "    <testcase name=\"{}\" classname=\"{}\" time=\"{time}\"",
                    escape(name),
                    escape(&path.display().to_string())
                );
                if failures.is_empty() {
                    let _ = writeln!(out, "{head}/>");
                    continue;
                }
                let _ = writeln!(out, "{head}>");
                for failure in failures {
                    let message = format!("{}: expected {}, actual {}", failure.what, failure.expected, failure.actual);
                    let _ = writeln!(
                        out,
                        "      <failure message=\"{}\">{}</failure>",
                        escape(&message),
                        escape(&explain(failure))
                    );
                }
                out.push_str("    </testcase>\n");
            }
            Verdict::Invalid(invalid) => {
                let file = escape(&invalid.path.display().to_string());
                let _ = writeln!(out, "    <testcase name=\"{file}\" classname=\"{file}\">");
                let report = escape(&strip_ansi(&invalid.report));
                let _ =
                    writeln!(out, "      <error message=\"invalid scenario file\">{report}</error>\n    </testcase>");
            }
            Verdict::Error { path, message } => {
                let file = escape(&path.display().to_string());
                let _ = writeln!(out, "    <testcase name=\"{file}\" classname=\"{file}\">");
                let _ = writeln!(out, "      <error message=\"{}\"/>\n    </testcase>", escape(message));
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text made safe for XML attributes and content.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Text without terminal colour sequences.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
