//! A task's conversation in progress: the model turns and tool calls its llm attempts have
//! recorded, so that an attempt cut short (by a crash, or a pause for a tool's approval) goes
//! on from where it was instead of asking the model and running the tools again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::Tokens;

/// A tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The call's id, which the tool's result names.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments, as the model wrote them (JSON text).
    pub arguments: String,
}

/// One model answer of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// 1 for the conversation's first answer.
    pub turn: u32,
    /// The answer's text.
    pub content: Option<String>,
    /// The tools it calls.
    pub tool_calls: Vec<ToolCallRecord>,
}

/// Where one tool call stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallState {
    /// It waits for a person's approval.
    Asked,
    /// A person approved it; it has not started since.
    Approved,
    /// A person rejected it: the model is told so instead of the tool running.
    Rejected(Option<String>),
    /// It started and has no result: the process that ran it ended first.
    Started,
    /// Its result, handed to the model.
    Finished(String),
}

/// A tool call waiting for a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments.
    pub arguments: String,
    /// What the model said in the turn that made the call.
    pub reason: String,
}

/// The turns and tool calls of a task's conversation so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// The model's answers, in order.
    pub turns: Vec<Turn>,
    /// Each tool call's state, by call id.
    pub calls: BTreeMap<String, CallState>,
    /// The call waiting for approval, while the task is paused for it.
    pub waiting: Option<Approval>,
    /// The attempt whose turns `counted` holds.
    pub(crate) counted_attempt: u32,
    /// Tokens of that attempt's turns, already in the run's count: its end adds only the rest.
    pub(crate) counted: Tokens,
}

impl Conversation {
    /// The number of the latest turn, 0 before the first.
    pub fn last_turn(&self) -> u32 {
        self.turns.last().map_or(0, |t| t.turn)
    }

    /// Where call `id` stands.
    pub fn call(&self, id: &str) -> Option<&CallState> {
        self.calls.get(id)
    }
}
