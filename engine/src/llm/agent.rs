//! `LlmRuntime`: one `llm` agent's turn loop.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use manifest::plan::ToolChoice;
use model::dialect::Constraint;
use model::protocol::{AssistantMessage, ChatRequest, FunctionCall, Message, Sampling, ToolCall};
use model::redact::{Redactor, excerpt};
use model::tokens::Tokenizer;
use model::{Endpoint, LlmError};

use super::dialect::{ProviderDialect, refuses_request};
use super::prompt::user_message;
use super::tools::{ASK_USER, Outcome, Toolbox};
use super::{DEFAULT_MAX_TOKENS, Substitutions};
use crate::event::{ErrorClass, ModelTurn, Tokens};
use crate::journal::{Verdict, stopped, waiting};
use crate::runtime::{AgentRuntime, Attempt, Pending, Reply};
use machine::conversation::{CallState, Conversation, ToolCallRecord};

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
    /// Counts a turn's tokens when the server reports no usage.
    pub(super) tokenizer: Tokenizer,
    /// How the provider is asked to hold an answer to the attempt's schema.
    pub(super) dialect: Arc<ProviderDialect>,
}

impl LlmRuntime {
    /// A turn's tokens counted with the provider's tokenizer, for a server that reports no
    /// usage (llama-cpp-python's, when it streams): the request's messages and tools, and the
    /// answer's text and calls. The count leaves out what the server's chat template adds,
    /// so it is a little under what the model saw.
    fn counted(&self, request: &ChatRequest<'_>, answer: &AssistantMessage) -> Tokens {
        let count = |text: &str| model::tokens::count(text, self.tokenizer) as u64;
        let calls = |calls: &[ToolCall]| -> u64 {
            calls.iter().map(|call| count(&call.function.name) + count(&call.function.arguments)).sum()
        };
        let mut prompt = 0;
        for message in request.messages {
            prompt += match message {
                Message::System { content } | Message::User { content } | Message::Tool { content, .. } => {
                    count(content)
                }
                Message::Assistant { content, tool_calls } => count(content) + calls(tool_calls),
            };
        }
        for tool in request.tools {
            let function = &tool.function;
            prompt += count(&function.name) + count(&function.description) + count(&function.parameters.to_string());
        }
        tracing::debug!(provider = %self.endpoint.name, "the server reported no usage: tokens counted here");
        Tokens { prompt, completion: answer.content.as_deref().map_or(0, count) + calls(&answer.tool_calls) }
    }

    /// One attempt; the tokens of every answer are added to `used`, whatever the attempt
    /// comes to. With a journal, the conversation recorded before goes first: its turns are
    /// not asked for again and its finished tool calls not run again, and every new turn and
    /// call is recorded before the attempt goes on.
    async fn attempt(&self, attempt: &Attempt, used: &mut Option<Tokens>) -> Result<Reply, LlmError> {
        let mut messages = Vec::new();
        if let Some(system) = self.system_prompt.as_ref().filter(|s| !s.trim().is_empty()) {
            messages.push(Message::System { content: system.clone() });
        }
        messages.push(Message::User { content: user_message(attempt).await? });
        let journal = attempt.journal.as_ref();
        let mut unanswered = Vec::new();
        let mut first = 1;
        if let Some(journal) = journal {
            first = journal.recorded.last_turn() + 1;
            unanswered = replay(&journal.recorded, &mut messages);
        }
        for (turn, reason, call) in unanswered {
            match self.carry_out(attempt, turn, &reason, call).await {
                Step::Answer(call_id, content) => messages.push(Message::Tool { tool_call_id: call_id, content }),
                Step::End(reply) => return Ok(with_tokens(reply, *used)),
            }
        }
        let tools = self.toolbox.definitions(attempt.may_ask);
        let tool_choice = (!tools.is_empty()).then(|| self.tool_choice.as_str());
        for turn in first..=self.max_turns {
            let constraint = attempt
                .schema
                .as_ref()
                .map(|schema| self.dialect.constraint(&attempt.task, schema))
                .unwrap_or_default();
            let sends_schema = attempt.schema.is_some() && constraint != Constraint::json_mode();
            let request = ChatRequest {
                model: &self.model,
                messages: &messages,
                tools: &tools,
                tool_choice,
                response_format: constraint.response_format,
                format: constraint.format,
            };
            let answer = match self.endpoint.answer(&request, self.sampling).await {
                Err(refusal) if sends_schema && refuses_request(&refusal) => {
                    let json_mode = Constraint::json_mode();
                    let plain = ChatRequest { response_format: json_mode.response_format, format: None, ..request };
                    let answer = self.endpoint.answer(&plain, self.sampling).await;
                    // The same request refused without the schema too: the schema was not the cause.
                    if !answer.as_ref().is_err_and(refuses_request) {
                        self.dialect.refuse(&refusal);
                    }
                    answer?
                }
                answer => answer?,
            };
            let tokens = Some(match answer.usage {
                Some(usage) => Tokens {
                    prompt: usage.prompt_tokens.unwrap_or(0),
                    completion: usage.completion_tokens.unwrap_or(0),
                },
                None => self.counted(&request, &answer.message),
            });
            if let Some(tokens) = tokens {
                let total = used.get_or_insert_with(Tokens::default);
                total.prompt += tokens.prompt;
                total.completion += tokens.completion;
            }
            if let Some(answered) = &answer.model {
                let answered = excerpt(&self.endpoint.redactor.apply(answered), MODEL_NAME_CHARS);
                self.substitutions.notice(&self.endpoint.name, &self.model, &answered);
            }
            let mut message = answer.message;
            for (i, call) in message.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("call_{turn}_{i}");
                }
            }
            let content = message.content.unwrap_or_default();
            if let Some(journal) = journal {
                let record = ModelTurn {
                    content: Some(self.endpoint.redactor.apply(&content)).filter(|c| !c.is_empty()),
                    tool_calls: message.tool_calls.iter().map(|c| record_of(c, &self.endpoint.redactor)).collect(),
                    tokens,
                    finish_reason: answer.finish_reason.clone(),
                    ..journal.model_turn(turn)
                };
                if journal.turn(record).await != Verdict::Recorded {
                    return Ok(stopped(*used));
                }
            }
            if answer.finish_reason.as_deref() == Some("length") {
                return Err(LlmError::Length { max_tokens: self.sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS) });
            }
            if message.tool_calls.is_empty() {
                return Ok(Reply::Output { text: content, tokens: *used });
            }
            let calls = message.tool_calls.clone();
            messages.push(Message::Assistant { content: content.clone(), tool_calls: message.tool_calls });
            for call in calls {
                match self.carry_out(attempt, turn, &content, call).await {
                    Step::Answer(call_id, content) => messages.push(Message::Tool { tool_call_id: call_id, content }),
                    Step::End(reply) => return Ok(with_tokens(reply, *used)),
                }
            }
        }
        Err(LlmError::MaxTurns { turns: self.max_turns })
    }

    /// Carries out one tool call of turn `turn`: asks the journal first (when there is one)
    /// whether it runs, waits for a person or is answered already, and records its result.
    async fn carry_out(&self, attempt: &Attempt, turn: u32, reason: &str, call: ToolCall) -> Step {
        let journal = attempt.journal.as_ref().filter(|_| call.function.name != ASK_USER || !attempt.may_ask);
        if let Some(journal) = journal {
            let record = record_of(&call, &self.endpoint.redactor);
            match journal.call(turn, record, self.endpoint.redactor.apply(reason)).await {
                Verdict::Run => {}
                Verdict::Answered(text) => return Step::Answer(call.id, text),
                Verdict::Wait => return Step::End(waiting(&call.function.name)),
                Verdict::Recorded | Verdict::Stop | Verdict::Conversation(_) => return Step::End(stopped(None)),
            }
        }
        match self.toolbox.call(&call, attempt.may_ask, &attempt.workdir).await {
            Outcome::Question(question) => Step::End(Reply::Question(question, None)),
            Outcome::Result(text, ok) => {
                if let Some(journal) = journal {
                    let text = self.endpoint.redactor.apply(&text);
                    let verdict = journal.result(call.id.clone(), call.function.name.clone(), ok, text).await;
                    if verdict != Verdict::Recorded {
                        return Step::End(stopped(None));
                    }
                }
                Step::Answer(call.id, text)
            }
        }
    }
}

/// What carrying out a tool call comes to.
enum Step {
    /// The call's id and the text of the `tool` message answering it.
    Answer(String, String),
    /// The attempt ends with this reply.
    End(Reply),
}

/// Puts a recorded conversation's turns and results back into `messages`, and returns the
/// calls of its last turn that have no result yet, with their turn and the turn's text.
fn replay(recorded: &Conversation, messages: &mut Vec<Message>) -> Vec<(u32, String, ToolCall)> {
    let mut unanswered = Vec::new();
    for turn in &recorded.turns {
        let content = turn.content.clone().unwrap_or_default();
        let calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .map(|c| ToolCall {
                id: c.id.clone(),
                kind: "function".to_owned(),
                function: FunctionCall { name: c.name.clone(), arguments: c.arguments.clone() },
            })
            .collect();
        if calls.is_empty() {
            continue;
        }
        messages.push(Message::Assistant { content: content.clone(), tool_calls: calls.clone() });
        for call in calls {
            match recorded.call(&call.id) {
                Some(CallState::Finished(output)) => {
                    messages.push(Message::Tool { tool_call_id: call.id, content: output.clone() });
                }
                _ => unanswered.push((turn.turn, content.clone(), call)),
            }
        }
    }
    unanswered
}

/// A tool call as the log records it, with the API key removed.
fn record_of(call: &ToolCall, redactor: &Redactor) -> ToolCallRecord {
    ToolCallRecord {
        id: call.id.clone(),
        name: call.function.name.clone(),
        arguments: redactor.apply(&call.function.arguments),
    }
}

/// `reply` with the attempt's tokens.
fn with_tokens(reply: Reply, used: Option<Tokens>) -> Reply {
    match reply {
        Reply::Question(question, _) => Reply::Question(question, used),
        Reply::Failure { error, class, .. } => Reply::Failure { error, class, tokens: used },
        output @ Reply::Output { .. } => output,
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

/// The reply for an error, with the tokens the attempt used before it. The message starts with
/// the error's code in brackets (`[llm::idle] ...`, where compacting a long error keeps it), so
/// the run's log names the `runner explain` page a reader of the failure wants.
fn to_reply(error: &LlmError, tokens: Option<Tokens>) -> Reply {
    let class = error.class();
    let error = match miette::Diagnostic::code(error) {
        Some(code) => format!("[{code}] {error}"),
        None => error.to_string(),
    };
    Reply::Failure { error, class, tokens }
}

/// A reply with the API key removed from every text.
fn redact(reply: Reply, redactor: &Redactor) -> Reply {
    match reply {
        Reply::Output { text, tokens } => Reply::Output { text: redactor.apply(&text), tokens },
        Reply::Failure { error, class, tokens } => Reply::Failure { error: redactor.apply(&error), class, tokens },
        Reply::Question(question, tokens) => Reply::Question(redactor.apply(&question), tokens),
    }
}
