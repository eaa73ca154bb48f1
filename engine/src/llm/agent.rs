//! `LlmRuntime`: one `llm` agent's turn loop.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::client::Endpoint;
use super::error::LlmError;
use super::prompt::user_message;
use super::protocol::{ChatRequest, Message};
use super::tools::{Outcome, Toolbox};
use crate::event::Tokens;
use crate::runtime::{AgentRuntime, Attempt, Pending, Reply};

/// Turns an attempt may take when the agent sets no `max_turns`.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// Runs an `llm` agent's attempts: a chat with its provider, tool calls carried out between
/// turns, until a final answer, a question for a person, or `max_turns` requests.
#[derive(Debug, Clone)]
pub struct LlmRuntime {
    endpoint: Arc<Endpoint>,
    model: String,
    system_prompt: Option<String>,
    toolbox: Toolbox,
    max_turns: u32,
}

impl LlmRuntime {
    /// A runtime for one agent on `endpoint`.
    pub fn new(
        endpoint: Arc<Endpoint>,
        model: String,
        system_prompt: Option<String>,
        toolbox: Toolbox,
        max_turns: u32,
    ) -> Self {
        LlmRuntime { endpoint, model, system_prompt, toolbox, max_turns: max_turns.max(1) }
    }

    async fn attempt(&self, attempt: &Attempt) -> Result<Reply, LlmError> {
        let mut messages = Vec::new();
        if let Some(system) = self.system_prompt.as_ref().filter(|s| !s.trim().is_empty()) {
            messages.push(Message::System { content: system.clone() });
        }
        messages.push(Message::User { content: user_message(attempt).await? });
        let tools = self.toolbox.definitions(attempt.may_ask);
        let response_format = attempt.schema.as_ref().map(|_| json!({"type": "json_object"}));
        let mut tokens: Option<Tokens> = None;
        for turn in 1..=self.max_turns {
            let request = ChatRequest {
                model: &self.model,
                messages: &messages,
                tools: &tools,
                response_format: response_format.clone(),
            };
            let response = self.endpoint.complete(&request).await?;
            if let Some(usage) = response.usage {
                let total = tokens.get_or_insert_with(Tokens::default);
                total.prompt += usage.prompt_tokens.unwrap_or(0);
                total.completion += usage.completion_tokens.unwrap_or(0);
            }
            let Some(choice) = response.choices.into_iter().next() else {
                return Err(LlmError::Malformed {
                    provider: self.endpoint.name.clone(),
                    reason: "no choices".to_owned(),
                    body: String::new(),
                });
            };
            let mut message = choice.message;
            if message.tool_calls.is_empty() {
                return Ok(Reply::Output { text: message.content.unwrap_or_default(), tokens });
            }
            for (i, call) in message.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("call_{turn}_{i}");
                }
            }
            let calls = message.tool_calls.clone();
            messages.push(Message::Assistant { content: message.content, tool_calls: message.tool_calls });
            for call in calls {
                match self.toolbox.call(&call, attempt.may_ask, &attempt.workdir).await {
                    Outcome::Question(question) => return Ok(Reply::Question(question)),
                    Outcome::Result(content) => messages.push(Message::Tool { tool_call_id: call.id, content }),
                }
            }
        }
        Err(LlmError::MaxTurns { turns: self.max_turns })
    }
}

impl AgentRuntime for LlmRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let runtime = self.clone();
        Box::pin(async move {
            let reply = tokio::select! {
                result = runtime.attempt(&attempt) => match result {
                    Ok(reply) => reply,
                    Err(error) => to_reply(&error),
                },
                () = cancel.cancelled() => Reply::refused("cancelled"),
            };
            redact(reply, &runtime.endpoint.redactor)
        })
    }
}

/// Refuses every attempt: the agent cannot run as configured.
#[derive(Debug, Clone)]
pub struct Misconfigured(pub LlmError);

impl AgentRuntime for Misconfigured {
    fn run(&self, _: Attempt, _: CancellationToken) -> Pending {
        Box::pin(std::future::ready(to_reply(&self.0)))
    }
}

/// The reply for an error.
fn to_reply(error: &LlmError) -> Reply {
    Reply::Failure { error: error.to_string(), retryable: error.retryable() }
}

/// A reply with the API key removed from every text.
fn redact(reply: Reply, redactor: &super::redact::Redactor) -> Reply {
    match reply {
        Reply::Output { text, tokens } => Reply::Output { text: redactor.apply(&text), tokens },
        Reply::Failure { error, retryable } => Reply::Failure { error: redactor.apply(&error), retryable },
        Reply::Question(question) => Reply::Question(redactor.apply(&question)),
    }
}
