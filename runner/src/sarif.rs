//! SARIF 2.1.0 output of the critic, as GitHub code scanning reads it: one rule per code with
//! its help, one result per error and finding with its physical location, in the plan's file
//! or in the sub-plan file it is in.

use std::collections::BTreeMap;

use manifest::critic::Review;
use manifest::{Loaded, Severity, Source};
use serde_json::{Value, json};

/// The SARIF log of a plan's errors and findings; `subplans` are the reviews of the sub-plan
/// files it includes, in the order of `loaded.included`.
pub fn report(
    loaded: &Loaded,
    review: &Review<'_>,
    subplans: &[Review<'_>],
    forecast: Option<&engine::forecast::Forecast>,
) -> Value {
    let mut rules: BTreeMap<String, Value> = BTreeMap::new();
    let mut results = Vec::new();
    let mut add = |source: &Source,
                   code: String,
                   severity: Severity,
                   message: String,
                   help: Option<&str>,
                   offset: usize,
                   len: usize| {
        let level = match severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "note",
        };
        rules.entry(code.clone()).or_insert_with(|| {
            let help = help.map_or_else(|| message.clone(), str::to_owned);
            json!({
                "id": code,
                "name": code.replace("::", "/"),
                "shortDescription": {"text": code},
                "help": {"text": help},
                "defaultConfiguration": {"level": level},
            })
        });
        let (start_line, start_column) = source.line_column(offset);
        let (end_line, end_column) = source.line_column(offset + len);
        let text = match help {
            Some(help) => format!("{message}. Help: {help}"),
            None => message,
        };
        results.push(json!({
            "ruleId": code,
            "level": level,
            "message": {"text": text},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": source.name.replace('\\', "/")},
                "region": {"startLine": start_line, "startColumn": start_column, "endLine": end_line, "endColumn": end_column.max(start_column + usize::from(end_line == start_line))},
            }}],
        }));
    };
    for (source, diagnostics) in crate::diagnostics::files(loaded) {
        for e in diagnostics.iter().filter(|d| d.is_error()) {
            add(source, e.code(), e.severity, e.to_string(), e.help.as_deref(), e.loc.span.offset(), e.loc.span.len());
        }
    }
    let sources = std::iter::once(&loaded.source).chain(loaded.included.iter().map(|i| &i.loaded.source));
    for (source, review) in sources.zip(std::iter::once(review).chain(subplans)) {
        for f in review.findings() {
            add(source, f.code(), f.severity, f.to_string(), f.help.as_deref(), f.loc.span.offset(), f.loc.span.len());
        }
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "runner",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules.into_values().collect::<Vec<_>>(),
            }},
            "results": results,
            "properties": {"forecast": forecast},
        }],
    })
}
