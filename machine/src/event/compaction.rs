//! The event of text compacted to fit a budget.

use serde::{Deserialize, Serialize};

use super::Tokens;

/// What a compaction made fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The rolling context summary, under `summary_budget`.
    Summary,
    /// A synthesis gate's output, under its `max_output_tokens`.
    Gate,
}

/// Text was compacted to fit a budget: the rolling context summary after a task, or a
/// synthesis gate's output held to its cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextCompacted {
    /// The task whose output was compacted or merged into the summary.
    pub task: String,
    /// What was compacted.
    pub scope: Scope,
    /// Who compacted it: `extractive` or the name of the agent.
    pub by: String,
    /// Tokens before.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The new context summary (scope `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Tokens the compacting agent used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
}
