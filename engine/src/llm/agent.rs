//! `LlmRuntime`: one `llm` agent's turn loop.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use manifest::plan::ToolChoice;

use super::client::Endpoint;
use super::error::LlmError;
use super::prompt::user_message;
use super::protocol::{ChatRequest, Message, Sampling};
use super::redact::excerpt;
use super::tools::{Outcome, Toolbox};
use super::{DEFAULT_MAX_TOKENS, Substitutions};
use crate::event::{ErrorClass, Tokens};
use crate::runtime::{AgentRuntime, Attempt, Pending, Reply};

/// How much of the model name a server answers with a warning quotes.
const MODEL_NAME_CHARS: usize = 120;

/// Turns an attempt may take when the agent sets no `max_turns`.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// Runs an `llm` agent's attempts: a chat with its provider, tool calls carried out between
/// turns, until a final answer, a question for a person, or `max_turns` requests.
#[derive(Debug, Clone)]
pub struct LlmRuntime {
    pub(super) endpoint: Arc<Endpoint>,
    pub(super) model: String,
    pub(super) system_prompt: Option<String>,
    pub(super) toolbox: Toolbox,
    pub(super) max_turns: u32,
    pub(super) tool_choice: ToolChoice,
    pub(super) sampling: Sampling,
    pub(super) substitutions: Substitutions,
}

impl LlmRuntime {
    /// One attempt; the tokens of every answer are added to `used`, whatever the attempt
    /// comes to.
    async fn attempt(&self, attempt: &Attempt, used: &mut Option<Tokens>) -> Result<Reply, LlmError> {
        let mut messages = Vec::new();
        if let Some(system) = self.system_prompt.as_ref().filter(|s| !s.trim().is_empty()) {
            messages.push(Message::System { content: system.clone() });
        }
        messages.push(Message::User { content: user_message(attempt).await? });
        let tools = self.toolbox.definitions(attempt.may_ask);
        let tool_choice = (!tools.is_empty()).then(|| self.tool_choice.as_str());
        let response_format = attempt.schema.as_ref().map(|_| json!({"type": "json_object"}));
        for turn in 1..=self.max_turns {
            let request = ChatRequest {
                model: &self.model,
                messages: &messages,
                tools: &tools,
                tool_choice,
                response_format: response_format.clone(),
            };
            let answer = self.endpoint.answer(&request, self.sampling).await?;
            if let Some(usage) = answer.usage {
                let total = used.get_or_insert_with(Tokens::default);
                total.prompt += usage.prompt_tokens.unwrap_or(0);
                total.completion += usage.completion_tokens.unwrap_or(0);
            }
            if let Some(answered) = &answer.model {
                let answered = excerpt(&self.endpoint.redactor.apply(answered), MODEL_NAME_CHARS);
                self.substitutions.notice(&self.endpoint.name, &self.model, &answered);
            }
            if answer.finish_reason.as_deref() == Some("length") {
                return Err(LlmError::Length { max_tokens: self.sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS) });
            }
            let mut message = answer.message;
            if message.tool_calls.is_empty() {
                return Ok(Reply::Output { text: message.content.unwrap_or_default(), tokens: *used });
            }
            for (i, call) in message.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("call_{turn}_{i}");
                }
            }
            let calls = message.tool_calls.clone();
            let content = message.content.unwrap_or_default();
            messages.push(Message::Assistant { content, tool_calls: message.tool_calls });
            for call in calls {
                match self.toolbox.call(&call, attempt.may_ask, &attempt.workdir).await {
                    Outcome::Question(question) => return Ok(Reply::Question(question, *used)),
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
            let mut used = None;
            let result = tokio::select! {
                result = runtime.attempt(&attempt, &mut used) => Some(result),
                () = cancel.cancelled() => None,
            };
            let reply = match result {
                Some(Ok(reply)) => reply,
                Some(Err(error)) => to_reply(&error, used),
                None => Reply::Failure { error: "cancelled".to_owned(), class: ErrorClass::Cancelled, tokens: used },
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
        Box::pin(std::future::ready(to_reply(&self.0, None)))
    }
}

/// The reply for an error, with the tokens the attempt used before it.
fn to_reply(error: &LlmError, tokens: Option<Tokens>) -> Reply {
    Reply::Failure { error: error.to_string(), class: error.class(), tokens }
}

/// A reply with the API key removed from every text.
fn redact(reply: Reply, redactor: &super::redact::Redactor) -> Reply {
    match reply {
        Reply::Output { text, tokens } => Reply::Output { text: redactor.apply(&text), tokens },
        Reply::Failure { error, class, tokens } => Reply::Failure { error: redactor.apply(&error), class, tokens },
        Reply::Question(question, tokens) => Reply::Question(redactor.apply(&question), tokens),
    }
}
