//! Where a plan came from: every `runner plan` writes `$RUNNER_HOME/plans/<id>/` with the
//! request, each prompt and raw model answer (secrets redacted), the attempts and repairs, the
//! validation and critic results, and the chosen manifest; `runner plan --show ID` prints it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::diagnostics::print;
use crate::home::home;

/// The record of one `runner plan`, written as `provenance.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Provenance {
    /// The plan id (its folder's name).
    pub id: String,
    /// When it was planned, RFC 3339 UTC.
    pub created: String,
    /// The request, as given (secrets redacted).
    pub request: String,
    /// `deterministic`, or `llm` when a model wrote the plan.
    pub planner: String,
    /// Why the complexity detector called the request simple or not.
    pub complexity: Vec<String>,
    /// The version of the prompt template, for model-written plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_version: Option<String>,
    /// The version of the line protocol, for plans written a line at a time (`--lines`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The provider asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Plans asked for per model.
    pub candidates: usize,
    /// Each model's context window, as the prompts were fitted to it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub context_windows: BTreeMap<String, ContextWindow>,
    /// Every request sent to a model, in order.
    pub attempts: Vec<Attempt>,
    /// Why the plan fell back to the deterministic planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Questions the model asked instead of planning, with the answers given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<String>,
    /// The lines dropped from a plan written a line at a time, each with its problem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<LineProblem>,
    /// Why the model stopped short of a whole plan (the request failed midway); the lines
    /// accepted before are the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The manifest chosen, and what validation and the critic said of it.
    pub chosen: Chosen,
}

/// One request to a model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Attempt {
    /// The model.
    pub model: String,
    /// Which of the candidates it was for (1-based).
    pub candidate: usize,
    /// Whether it was a repair prompt.
    pub repair: bool,
    /// How long the answer took.
    pub latency_ms: u64,
    /// `valid`, `invalid`, `parse_failed`, `failed` or `questions`.
    pub outcome: String,
    /// The problems found, the parse error, or the request's error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The critic's score of a valid plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The optional parts of the prompt left out to fit the model's context window.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub left_out: String,
    /// The file holding the prompt.
    pub prompt_file: String,
    /// The file holding the raw answer.
    pub output_file: String,
}

/// A line left out of a plan written a line at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineProblem {
    /// The line's number.
    pub line: usize,
    /// The task it was, when it had an id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The diagnostic code.
    pub code: String,
    /// What is wrong.
    pub message: String,
}

/// A model's context window and where it was learnt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextWindow {
    /// Its size in tokens.
    pub tokens: u64,
    /// Where it comes from: the server's field, the provider's `context_window`, or the default.
    pub from: String,
}

/// The chosen manifest.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Chosen {
    /// Its file in the folder.
    pub file: String,
    /// Errors `runner validate` reports (always 0 for a plan `runner plan` writes).
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// The critic's overall score.
    pub score: f64,
    /// The critic's first findings, one line each.
    pub findings: Vec<String>,
}

/// The folder of one plan's provenance, or none: a plan test plans without leaving a trace.
pub struct PlanDir {
    path: Option<PathBuf>,
    secrets: Vec<String>,
}

impl PlanDir {
    /// Creates `$RUNNER_HOME/plans/<id>/`; `secrets` are replaced by `[redacted]` in every
    /// file written, together with the values of environment variables named `*_KEY` or
    /// `*_TOKEN`.
    pub fn create(id: &str, secrets: Vec<String>) -> anyhow::Result<Self> {
        crate::home::RunDir::new(id)?;
        let path = home().join("plans").join(id);
        std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(PlanDir::with_secrets(Some(path), secrets))
    }

    /// A provenance that writes nothing (redaction still applies to what is shown).
    pub fn unkept() -> Self {
        PlanDir::with_secrets(None, Vec::new())
    }

    fn with_secrets(path: Option<PathBuf>, mut secrets: Vec<String>) -> Self {
        secrets.extend(std::env::vars().filter_map(|(name, value)| {
            let secret = name.ends_with("_KEY") || name.ends_with("_TOKEN");
            (secret && value.len() >= 8).then_some(value)
        }));
        secrets.retain(|s| !s.is_empty());
        // The longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        PlanDir { path, secrets }
    }

    /// Whether this provenance is written to disk.
    pub fn is_kept(&self) -> bool {
        self.path.is_some()
    }

    /// The same folder, with one more secret to redact.
    pub fn with_secret(&self, secret: Option<String>) -> Self {
        let mut secrets = self.secrets.clone();
        secrets.extend(secret.filter(|s| !s.is_empty()));
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        PlanDir { path: self.path.clone(), secrets }
    }

    /// The length of the longest end of `text` that a secret starts with (and that is not a
    /// whole secret): what a stream must hold back until more text arrives.
    pub fn unfinished_secret(&self, text: &str) -> usize {
        let mut longest = 0;
        for secret in &self.secrets {
            for (start, _) in text.char_indices().rev().take(secret.chars().count().saturating_sub(1)) {
                let end = &text[start..];
                if secret.starts_with(end) && end.len() < secret.len() {
                    longest = longest.max(end.len());
                }
            }
        }
        longest
    }

    /// The text with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret, "[redacted]"))
    }

    /// Writes a file into the folder, redacted.
    pub fn write(&self, name: &str, text: &str) -> anyhow::Result<()> {
        let Some(folder) = &self.path else { return Ok(()) };
        let path = folder.join(name);
        std::fs::write(&path, self.redact(text)).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Appends `line` and a line end to a file of the folder, redacted, and flushes it: for a
    /// record written as things happen.
    pub fn append(&self, name: &str, line: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        let Some(folder) = &self.path else { return Ok(()) };
        let path = folder.join(name);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.write_all(format!("{}\n", self.redact(line)).as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Writes `provenance.json`, redacted.
    pub fn finish(&self, provenance: &Provenance) -> anyhow::Result<()> {
        self.write("provenance.json", &(serde_json::to_string_pretty(provenance)? + "\n"))
    }
}

/// `runner plan --show ID`: the record and the chosen manifest.
pub fn show(id: &str) -> anyhow::Result<u8> {
    crate::home::RunDir::new(id)?;
    let path = home().join("plans").join(id);
    let text = std::fs::read_to_string(path.join("provenance.json"))
        .with_context(|| format!("no plan `{id}` under {}", home().join("plans").display()))?;
    let record: Provenance = serde_json::from_str(&text)
        .with_context(|| format!("cannot read {}", path.join("provenance.json").display()))?;
    let mut out = format!(
        "plan `{}` ({}), planned {} by the {} planner\n",
        record.id,
        path.display(),
        record.created,
        record.planner
    );
    let _ = writeln!(out, "request: {}", record.request);
    for reason in &record.complexity {
        let _ = writeln!(out, "complexity: {reason}");
    }
    if let Some(provider) = &record.provider {
        let temperature = record.temperature.map(|t| format!(", temperature {t}")).unwrap_or_default();
        let mut version = record.prompt_version.clone().unwrap_or_else(|| "-".to_owned());
        if let Some(protocol) = &record.protocol {
            version.push_str(&format!(" (line protocol {protocol}, lines.ndjson)"));
        }
        let _ =
            writeln!(out, "provider: {provider}, prompt {version}{temperature}, {} candidate(s)", record.candidates);
    }
    for (model, window) in &record.context_windows {
        let _ = writeln!(out, "context window of {model}: {} tokens ({})", window.tokens, window.from);
    }
    for (n, attempt) in record.attempts.iter().enumerate() {
        let repair = if attempt.repair { " (repair)" } else { "" };
        let score = attempt.score.map(|s| format!(" score {s:.1}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}. {} candidate {}{repair}: {}{score} in {} ms  [{} -> {}]",
            n + 1,
            attempt.model,
            attempt.candidate,
            attempt.outcome,
            attempt.latency_ms,
            attempt.prompt_file,
            attempt.output_file
        );
        if !attempt.left_out.is_empty() {
            let _ = writeln!(out, "       left out to fit the context window: {}", attempt.left_out);
        }
        if !attempt.detail.is_empty() {
            for line in attempt.detail.lines().take(6) {
                let _ = writeln!(out, "       {line}");
            }
        }
    }
    for question in &record.questions {
        let _ = writeln!(out, "asked: {question}");
    }
    for problem in &record.problems {
        let task = problem.task.as_ref().map(|t| format!(" (task `{t}`)")).unwrap_or_default();
        let _ = writeln!(out, "dropped line {}{task}: {}: {}", problem.line, problem.code, problem.message);
    }
    if let Some(why) = &record.failed {
        let _ = writeln!(out, "the model stopped short: {why}");
    }
    if let Some(why) = &record.fallback {
        let _ = writeln!(out, "fell back to the deterministic planner: {why}");
    }
    let chosen = &record.chosen;
    let _ = writeln!(
        out,
        "chosen: {} ({} errors, {} warnings, critic score {:.1})",
        chosen.file, chosen.errors, chosen.warnings, chosen.score
    );
    for finding in &chosen.findings {
        let _ = writeln!(out, "  {finding}");
    }
    let manifest = std::fs::read_to_string(path.join(&chosen.file)).unwrap_or_default();
    let _ = write!(out, "\n{manifest}");
    print(&out)?;
    Ok(0)
}
