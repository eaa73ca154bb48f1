//! The events of an llm attempt's conversation: model turns, tool calls and their approvals.

use serde::{Deserialize, Serialize};

use super::Tokens;
use crate::conversation::ToolCallRecord;

/// An llm attempt's model answered: one turn of its conversation, recorded before any tool
/// it calls runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTurn {
    /// The task.
    pub task: String,
    /// The attempt.
    pub attempt: u32,
    /// 1 for the conversation's first answer (a resumed conversation goes on counting).
    pub turn: u32,
    /// The answer's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tools it calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens of this request, counted against the budget as it is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// A tool call is about to run; durable before its process starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallStarted {
    /// The task.
    pub task: String,
    /// The attempt.
    pub attempt: u32,
    /// The turn that made the call.
    pub turn: u32,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments (JSON text).
    pub arguments: String,
}

/// A tool call's result, as handed to the model (capped like outputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFinished {
    /// The task.
    pub task: String,
    /// The attempt.
    pub attempt: u32,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Whether the tool ran and exited with status 0.
    pub ok: bool,
    /// The result.
    pub output: String,
}

/// A tool call waits for a person's approval; the task pauses until a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolApprovalRequested {
    /// The task.
    pub task: String,
    /// The attempt that made the call.
    pub attempt: u32,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments (JSON text).
    pub arguments: String,
    /// What the model said in the turn that made the call.
    pub reason: String,
}

/// Somebody approved or rejected a tool call; the task goes on with its conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolApprovalDecided {
    /// The task.
    pub task: String,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Whether the call may run.
    pub approved: bool,
    /// The person's comment, told to the model with a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}
