//! An llm task's conversation: its model turns and tool calls, recorded as they happen, and
//! the approval a tool call may wait for. What the machine decides here: whether a call runs
//! now, waits for a person, or already has its result (a rejection, or a call that finished
//! before the process that made it ended).

use super::RunState;
use super::transitions::Spender;
use crate::conversation::{Approval, CallState, ToolCallRecord, Turn};
use crate::error::EngineError;
use crate::event::{
    Event, ModelTurn, Tokens, ToolApprovalDecided, ToolApprovalRequested, ToolCallFinished, ToolCallStarted,
};
use crate::task::TaskStatus;
use crate::tokens::TokenCounter;

/// The most bytes of a tool call's arguments an approval request shows; the call itself keeps
/// them whole in its turn.
const ARGUMENTS_SHOWN: usize = 16 * 1024;

impl<C: TokenCounter> RunState<C> {
    /// `ModelTurn`: records the answer of the attempt's latest request.
    pub(super) fn model_turn(&mut self, turn: ModelTurn, out: &mut Vec<Event>) -> Result<bool, EngineError> {
        let i = self.task_index(&turn.task)?;
        if !self.takes_result(i, turn.attempt) {
            return Ok(false);
        }
        self.emit(Event::ModelTurn(Box::new(turn)), out);
        Ok(true)
    }

    /// `CallTool`: the call runs (`ToolCallStarted`), waits for a person
    /// (`ToolApprovalRequested`), or is answered with a rejection (`ToolCallFinished`). A
    /// call that started before and has no result runs again only when its tool is not
    /// destructive; a destructive one asks first, whatever its policy.
    pub(super) fn call_tool(
        &mut self,
        task: String,
        attempt: u32,
        turn: u32,
        call: ToolCallRecord,
        reason: String,
        out: &mut Vec<Event>,
    ) -> Result<bool, EngineError> {
        let i = self.task_index(&task)?;
        if !self.takes_result(i, attempt) {
            return Ok(false);
        }
        let state = self.conversations.get(&task).and_then(|c| c.call(&call.id)).cloned();
        let destructive = self.plan.tools.get(&call.name).is_some_and(|t| t.destructive);
        let ToolCallRecord { id: call_id, name: tool, arguments } = call;
        let waits = match state {
            Some(CallState::Finished(_)) => return Ok(false),
            Some(CallState::Rejected(comment)) => {
                let output = match comment {
                    Some(comment) => format!("error: a person rejected this call of `{tool}`: {comment}"),
                    None => format!("error: a person rejected this call of `{tool}`; do it another way"),
                };
                let finished = ToolCallFinished { task, attempt, call_id, tool, ok: false, output };
                self.emit(Event::ToolCallFinished(Box::new(finished)), out);
                return Ok(true);
            }
            Some(CallState::Approved) => false,
            Some(CallState::Started) => destructive,
            Some(CallState::Asked) => true,
            None => self.asks_approval(i, &tool),
        };
        let event = match waits {
            true => {
                let arguments = shown(arguments);
                let request = ToolApprovalRequested { task, attempt, call_id, tool, arguments, reason };
                Event::ToolApprovalRequested(Box::new(request))
            }
            false => {
                Event::ToolCallStarted(Box::new(ToolCallStarted { task, attempt, turn, call_id, tool, arguments }))
            }
        };
        self.emit(event, out);
        Ok(true)
    }

    /// `ToolResult`: records a call's result.
    pub(super) fn tool_result(
        &mut self,
        finished: ToolCallFinished,
        out: &mut Vec<Event>,
    ) -> Result<bool, EngineError> {
        let i = self.task_index(&finished.task)?;
        let call = self.conversations.get(&finished.task).and_then(|c| c.call(&finished.call_id));
        if !self.takes_result(i, finished.attempt) || call != Some(&CallState::Started) {
            return Ok(false);
        }
        self.emit(Event::ToolCallFinished(Box::new(finished)), out);
        Ok(true)
    }

    /// `Decide` for a task whose tool call waits for approval, if `task` is one.
    pub(super) fn decide_tool(
        &mut self,
        task: &str,
        approved: bool,
        comment: &Option<String>,
        out: &mut Vec<Event>,
    ) -> Option<()> {
        let i = self.index_of(task)?;
        let waiting = self.conversations.get(task)?.waiting.as_ref()?;
        if self.tasks[i].status != TaskStatus::Paused {
            return None;
        }
        let event = Event::ToolApprovalDecided(Box::new(ToolApprovalDecided {
            task: task.to_owned(),
            call_id: waiting.call_id.clone(),
            tool: waiting.tool.clone(),
            approved,
            comment: comment.clone(),
        }));
        self.emit(event, out);
        Some(())
    }

    /// Whether a call of `tool` by task `i` waits for a person: the tool's policy says so, and
    /// neither the task's agent nor the run allows the tool.
    fn asks_approval(&self, i: usize, tool: &str) -> bool {
        let Some(spec) = self.plan.tools.get(tool) else { return false };
        if !spec.approval.asks(spec.destructive) || self.approved_tools.iter().any(|t| t == tool) {
            return false;
        }
        let agent = self.plan.agent_of(&self.plan.tasks[i]).and_then(|name| self.plan.agents.get(name));
        let allowed = match agent.map(|a| &a.runtime) {
            Some(manifest::plan::Runtime::Llm { allow_tools, .. }) => allow_tools.iter().any(|t| t.value == tool),
            _ => false,
        };
        !allowed
    }

    /// Applies the conversation's events.
    pub(super) fn apply_conversation(&mut self, event: &Event, known: Option<usize>) {
        match event {
            Event::ModelTurn(event) => {
                let ModelTurn { task, attempt, turn, content, tool_calls, tokens, .. } = &**event;
                self.add_tokens(*tokens, Spender::Task(task, known));
                let conversation = self.conversations.entry(task.clone()).or_default();
                if conversation.counted_attempt != *attempt {
                    conversation.counted_attempt = *attempt;
                    conversation.counted = Tokens::default();
                }
                if let Some(tokens) = tokens {
                    conversation.counted.prompt += tokens.prompt;
                    conversation.counted.completion += tokens.completion;
                }
                let turn = Turn { turn: *turn, content: content.clone(), tool_calls: tool_calls.clone() };
                conversation.turns.push(turn);
            }
            Event::ToolCallStarted(event) => {
                let ToolCallStarted { task, call_id, .. } = &**event;
                self.conversations.entry(task.clone()).or_default().calls.insert(call_id.clone(), CallState::Started);
            }
            Event::ToolCallFinished(event) => {
                let ToolCallFinished { task, call_id, output, .. } = &**event;
                let conversation = self.conversations.entry(task.clone()).or_default();
                conversation.calls.insert(call_id.clone(), CallState::Finished(output.clone()));
            }
            Event::ToolApprovalRequested(event) => {
                let ToolApprovalRequested { task, call_id, tool, arguments, reason, .. } = &**event;
                let conversation = self.conversations.entry(task.clone()).or_default();
                conversation.calls.insert(call_id.clone(), CallState::Asked);
                let approval = Approval {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    reason: reason.clone(),
                };
                conversation.waiting = Some(approval);
                let Some(i) = known.or_else(|| self.index_of(task)) else { return };
                self.end_attempt(i);
                self.set_status(i, TaskStatus::Paused);
            }
            Event::ToolApprovalDecided(event) => {
                let ToolApprovalDecided { task, call_id, approved, comment, .. } = &**event;
                let conversation = self.conversations.entry(task.clone()).or_default();
                let state = if *approved { CallState::Approved } else { CallState::Rejected(comment.clone()) };
                conversation.calls.insert(call_id.clone(), state);
                conversation.waiting = None;
                let Some(i) = known.or_else(|| self.index_of(task)) else { return };
                self.set_status(i, TaskStatus::Pending);
                self.enqueue(i);
            }
            _ => {}
        }
    }

    /// The tokens an attempt of `task` (at `known`, when known) reports at its end, less those
    /// its recorded turns counted already; the task's conversation ends with the attempt.
    pub(super) fn settle_tokens(&mut self, task: &str, known: Option<usize>, tokens: Option<Tokens>) -> Option<Tokens> {
        if self.conversations.is_empty() {
            return tokens;
        }
        let Some(conversation) = self.conversations.remove(task) else { return tokens };
        let current = known.or_else(|| self.index_of(task)).map(|i| self.tasks[i].attempts);
        match tokens {
            Some(tokens) if current == Some(conversation.counted_attempt) => Some(Tokens {
                prompt: tokens.prompt.saturating_sub(conversation.counted.prompt),
                completion: tokens.completion.saturating_sub(conversation.counted.completion),
            }),
            tokens => tokens,
        }
    }
}

/// Arguments cut to what an approval request shows, on a character boundary.
fn shown(mut arguments: String) -> String {
    if arguments.len() > ARGUMENTS_SHOWN {
        let mut end = ARGUMENTS_SHOWN;
        while !arguments.is_char_boundary(end) {
            end -= 1;
        }
        arguments.truncate(end);
        arguments.push_str(" …");
    }
    arguments
}
