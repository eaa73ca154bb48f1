//! Verification of a task's output after an attempt produced it: a JSON Schema check, a
//! command, or a reviewer agent.
//!
//! [`verify`] is the one entry point; it returns a [`Verified`]: the [`Verdict`] and the
//! tokens a reviewer used. A failed check is data, not an error: its reason goes into the log
//! and into the next attempt's prompt.

mod command;
mod json;
mod review;
mod schema;

pub use json::{NotJson, extract_json};
pub use review::{ReviewError, parse_review, review_prompt, review_schema};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manifest::plan::Verification;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::event::Tokens;
use crate::runtime::AgentRuntime;

/// How long a verification command may run, when the check sets no timeout, before it is
/// killed and the check fails.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether an output passed its check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The output is accepted.
    Pass,
    /// The output is rejected; the reason is for the log and the next attempt's prompt.
    Fail(String),
}

impl Verdict {
    /// Whether this is [`Verdict::Pass`].
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Pass)
    }
}

/// What a check came to: the verdict and the tokens a reviewer agent used, which count
/// against the run's token budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Pass or fail, with the reason.
    pub verdict: Verdict,
    /// Tokens the reviewer reported; `None` for schema and command checks.
    pub tokens: Option<Tokens>,
}

impl Verified {
    fn plain(verdict: Verdict) -> Self {
        Verified { verdict, tokens: None }
    }
}

/// The attempt being checked: the task, what it was given and what it produced, and what the
/// check may use.
#[derive(Clone)]
pub struct Check<'a> {
    /// The task's id.
    pub task: &'a str,
    /// The task's attempt whose output is checked (1 for the first); a reviewer's attempt
    /// has the same number, so its replies follow the task's attempts.
    pub attempt: u32,
    /// The task's rendered input, shown to a reviewer.
    pub input: &'a str,
    /// The output under check.
    pub output: &'a str,
    /// The folder a verification command runs in: the plan's folder.
    pub workdir: &'a Path,
    /// The runtime of the `llm_reviewer`'s agent; needed only by that check.
    pub reviewer: Option<Arc<dyn AgentRuntime>>,
    /// How long the check may take. `None`: [`DEFAULT_TIMEOUT`] for a command, and no limit
    /// of its own for a reviewer (its runtime's limits and `cancel` apply).
    pub timeout: Option<Duration>,
    /// Environment variables (API keys) a verification command must not see.
    pub hidden: &'a [String],
}

impl<'a> Check<'a> {
    /// A check of attempt `attempt` of `task`, with no reviewer runtime and the default timeout.
    pub fn new(task: &'a str, attempt: u32, input: &'a str, output: &'a str, workdir: &'a Path) -> Self {
        Check { task, attempt, input, output, workdir, reviewer: None, timeout: None, hidden: &[] }
    }

    /// The same check with the runtime of the reviewer agent.
    pub fn with_reviewer(self, reviewer: Arc<dyn AgentRuntime>) -> Self {
        Check { reviewer: Some(reviewer), ..self }
    }

    /// The same check with the environment variables a command must not see.
    pub fn with_hidden(self, hidden: &'a [String]) -> Self {
        Check { hidden, ..self }
    }

    /// The same check with a timeout.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Check { timeout: Some(timeout), ..self }
    }
}

/// Checks `check.output` against `verification`. Never panics and never errors: whatever
/// goes wrong (a bad schema, a command that cannot start or times out, a reviewer that fails
/// or rambles, `cancel` firing) is a [`Verdict::Fail`] that says so.
pub async fn verify(verification: &Verification, check: Check<'_>, cancel: CancellationToken) -> Verified {
    let kind = match verification {
        Verification::SchemaCheck { .. } => "schema_check",
        Verification::Command { .. } => "command",
        Verification::LlmReviewer { .. } => "llm_reviewer",
    };
    let span = crate::spans::verification(check.task, kind);
    let verified = judge(verification, check, cancel).instrument(span.clone()).await;
    span.record("passed", verified.verdict.passed());
    verified
}

async fn judge(verification: &Verification, check: Check<'_>, cancel: CancellationToken) -> Verified {
    match verification {
        Verification::SchemaCheck { schema } => Verified::plain(schema::check(&schema.value, check.output)),
        Verification::Command { command } => Verified::plain(command::check(command, &check, &cancel).await),
        Verification::LlmReviewer { agent, criteria } => {
            review::check(&agent.value, criteria.as_deref(), &check, &cancel).await
        }
    }
}

/// At most `max` characters of `text`, trimmed: the text itself when short enough, else its
/// head and tail, each cut at a line or word boundary, joined by ` … `.
fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    const GAP: &str = " … ";
    let room = max.saturating_sub(GAP.chars().count());
    let head_room = room - room / 2;
    let tail_room = room / 2;
    let head = head_of(text, head_room);
    let tail = tail_of(text, tail_room);
    format!("{}{GAP}{}", head.trim_end(), tail.trim_start())
}

/// The longest prefix of at most `max` characters that ends at a line break or, failing
/// that, a space; a hard cut only when neither occurs in its second half.
fn head_of(text: &str, max: usize) -> &str {
    let end = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let cut = &text[..end];
    let floor = cut.len() / 2;
    let at = cut.rfind('\n').filter(|&i| i >= floor).or_else(|| cut.rfind(' ').filter(|&i| i >= floor));
    at.map_or(cut, |i| &cut[..i])
}

/// The longest suffix of at most `max` characters that starts after a line break or, failing
/// that, a space; a hard cut only when neither occurs in its first half.
fn tail_of(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    let start = text.char_indices().nth(count.saturating_sub(max)).map_or(text.len(), |(i, _)| i);
    let cut = &text[start..];
    let ceiling = cut.len() / 2;
    let at = cut.find('\n').filter(|&i| i <= ceiling).or_else(|| cut.find(' ').filter(|&i| i <= ceiling));
    at.map_or(cut, |i| &cut[i + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole_but_trimmed() {
        assert_eq!(excerpt("  error: boom\n", 500), "error: boom");
    }

    #[test]
    fn long_text_keeps_head_and_tail_at_word_boundaries() {
        let text = format!("first line here\n{}\nlast line here", "word ".repeat(300));
        let short = excerpt(&text, 100);
        assert!(short.chars().count() <= 100, "{short}");
        assert!(short.starts_with("first line here"), "{short}");
        assert!(short.ends_with("last line here"), "{short}");
        assert!(short.contains(" … "), "{short}");
        for part in short.split(" … ") {
            assert!(!part.contains("wor ") && !part.ends_with("wor") && !part.starts_with("ord"), "{short}");
        }
    }

    #[test]
    fn text_without_spaces_is_cut_hard() {
        let text = "x".repeat(1000);
        let short = excerpt(&text, 50);
        assert!(short.chars().count() <= 50);
        assert!(short.starts_with("xxx") && short.ends_with("xxx"));
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é".repeat(1000);
        assert!(excerpt(&text, 21).chars().count() <= 21);
    }
}
