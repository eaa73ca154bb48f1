//! Diagnostics: a [`Problem`] at a place in a manifest, with its severity, labels and help.

use std::fmt;

use crate::fix::Fix;
pub use crate::problem::Problem;
use crate::rendered::Rendered;
use crate::source::{Loc, Source, Span};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The plan cannot run.
    Error,
    /// The plan can run, but something in it is probably not what the author meant.
    Warning,
    /// A note, such as a field name that was read under its canonical name.
    Info,
}

impl Severity {
    /// The lower-case name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// A problem at a place in a manifest, with an optional fix and extra labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// What is wrong; its variant gives the stable code.
    pub problem: Problem,
    /// How serious it is.
    pub severity: Severity,
    /// The key or value it is about.
    pub loc: Loc,
    /// The text under the primary label.
    pub label: String,
    /// What to do about it.
    pub help: Option<String>,
    /// Further places that explain it (each edge of a cycle, say).
    pub related: Vec<(Span, String)>,
    /// The edits that carry out the help, when it is mechanical.
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// An error at `loc`.
    pub fn error(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Error, loc)
    }

    /// A warning at `loc`.
    pub fn warning(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Warning, loc)
    }

    /// A note at `loc`.
    pub fn info(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Info, loc)
    }

    /// A diagnostic with the label and help its problem gives.
    fn new(problem: Problem, severity: Severity, loc: Loc) -> Self {
        let label = problem.label();
        let help = miette::Diagnostic::help(&problem).map(|help| help.to_string());
        Diagnostic { problem, severity, loc, label, help, related: Vec::new(), fix: None }
    }

    /// Sets the primary label's text.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the help line.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the help line when there is one.
    pub fn maybe_help(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    /// When `word`, written at `span`, is a likely typo for one of `candidates`: a "did you
    /// mean" help and the fix that replaces it. Otherwise the diagnostic is unchanged.
    pub(crate) fn suggest<'a>(
        mut self,
        text: &str,
        span: Span,
        word: &str,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        if let Some(close) = closest(word, candidates) {
            self.help = Some(format!("did you mean `{close}`?"));
            self.fix = Fix::replace(text, span, word, close);
        }
        self
    }

    /// Sets the fix, when there is one.
    pub(crate) fn with_fix(mut self, fix: Option<Fix>) -> Self {
        self.fix = fix;
        self
    }

    /// Adds a secondary label.
    pub fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    /// The stable code, such as `plan::cycle`.
    pub fn code(&self) -> String {
        miette::Diagnostic::code(&self.problem).map(|c| c.to_string()).unwrap_or_default()
    }

    /// Whether the diagnostic makes the plan unrunnable.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Attaches the source so miette can draw snippets.
    pub fn with_source(&self, source: &Source) -> Rendered {
        Rendered::new(source, self.code(), self.severity, self.to_string(), self.help.clone())
            .label(self.loc.span, self.label.clone())
            .related(&self.related)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.problem.fmt(f)
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(word, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// "did you mean `x`?" for the closest candidate, if any is close.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The edit distance over characters, counting a swap of two neighbours as one edit (the
/// optimal string alignment distance), so `fecth` is as close to `fetch` as `fech`: the measure
/// behind every "did you mean" suggestion. Three rows of memory.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut above: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 0..a.len() {
        row[0] = i + 1;
        for j in 0..b.len() {
            let substitution = above[j] + usize::from(a[i] != b[j]);
            let mut best = (above[j + 1] + 1).min(row[j] + 1).min(substitution);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                best = best.min(before[j - 1] + 1);
            }
            row[j + 1] = best;
        }
        std::mem::swap(&mut before, &mut above);
        std::mem::swap(&mut above, &mut row);
    }
    above[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_a_typo_but_not_a_stranger() {
        let ids = ["search", "summarise", "write"];
        assert_eq!(closest("serach", ids), Some("search"));
        assert_eq!(closest("summarize", ids), Some("summarise"));
        assert_eq!(closest("deploy", ids), None);
    }

    #[test]
    fn a_swap_of_neighbours_is_one_edit() {
        assert_eq!(edit_distance("fecth", "fetch"), 1);
        assert_eq!(edit_distance("tpye", "type"), 1);
        assert_eq!(edit_distance("abc", "ca"), 3, "optimal string alignment, not full Damerau");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn codes_are_namespaced_and_stable() {
        let d = Diagnostic::error(Problem::EmptyWorkflow, Loc::default());
        assert_eq!(d.code(), "plan::empty_workflow");
    }
}
