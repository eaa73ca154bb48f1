//! What can go wrong in a model request or an `llm` attempt, and whether a retry could help.

use std::time::Duration;

use miette::Diagnostic;
use thiserror::Error;

use machine::event::ErrorClass;

use crate::tool_error::ToolError;

/// A model request's or an `llm` attempt's failure, before the engine makes it a reply.
/// Texts that come from a server are excerpts; the API key is redacted when the error
/// becomes a reply.
#[derive(Debug, Clone, PartialEq, Error, Diagnostic)]
#[non_exhaustive]
pub enum LlmError {
    /// The agent names a provider the plan does not define.
    #[error("agent `{agent}` uses provider `{provider}`, which the plan does not define")]
    #[diagnostic(code(llm::unknown_provider), help("define the provider under `providers`, or name one that exists"))]
    UnknownProvider {
        /// The agent.
        agent: String,
        /// The provider it names.
        provider: String,
    },

    /// The provider's API key variable is not set, or is empty.
    #[error("the environment variable `{variable}` (the API key of provider `{provider}`) is not set or is empty")]
    #[diagnostic(code(llm::missing_key), help("export `{variable}` before running the plan"))]
    MissingKey {
        /// The provider.
        provider: String,
        /// The variable's name.
        variable: String,
    },

    /// The agent names a tool the plan does not define, or a tool cannot be offered.
    #[error("agent `{agent}` cannot use tool `{tool}`: {reason}")]
    #[diagnostic(code(llm::tool_config), help("fix the tool under `tools`, or remove it from the agent's `tools`"))]
    ToolConfig {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// What is wrong with it.
        reason: ToolError,
    },

    /// Neither the agent nor its provider names a model.
    #[error("agent `{agent}` has no model: neither it nor provider `{provider}` sets `model`")]
    #[diagnostic(code(llm::no_model), help("set `model` on the provider or the agent"))]
    NoModel {
        /// The agent.
        agent: String,
        /// The provider.
        provider: String,
    },

    /// The agent is not an `llm` agent, or does not exist.
    #[error("`{agent}` is not an llm agent of this plan")]
    #[diagnostic(code(llm::not_llm))]
    NotLlm {
        /// The agent.
        agent: String,
    },

    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    #[diagnostic(code(llm::client))]
    Client(String),

    /// An attached file could not be read.
    #[error("cannot read the attached file `{file}`: {reason}")]
    #[diagnostic(code(llm::attachment), help("check that the file exists relative to the plan's folder"))]
    Attachment {
        /// The file as the plan names it.
        file: String,
        /// Why it could not be read.
        reason: String,
    },

    /// The server answered with an error status.
    #[error("provider `{provider}` answered HTTP {status}: {body}")]
    #[diagnostic(code(llm::http))]
    Http {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// An excerpt of the body.
        body: String,
        /// How long the server asked to wait before trying again.
        retry_after: Option<Duration>,
    },

    /// The server could not be reached.
    #[error("cannot reach provider `{provider}`: {reason}")]
    #[diagnostic(code(llm::connect), help("check the provider's `base_url` and that the server is running"))]
    Connect {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
    },

    /// The request could not be sent or its answer not read.
    #[error("request to provider `{provider}` failed: {reason}")]
    #[diagnostic(code(llm::request))]
    Request {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
        /// Whether trying again could help.
        retryable: bool,
    },

    /// The server did not answer in time.
    #[error("provider `{provider}` did not answer within {after:?}")]
    #[diagnostic(code(llm::timeout), help("raise the provider's `timeout`"))]
    Timeout {
        /// The provider.
        provider: String,
        /// The timeout.
        after: Duration,
    },

    /// A streamed answer went quiet for longer than the provider's `idle_timeout`.
    #[error(
        "provider `{provider}` sent nothing for {after:?} (idle_timeout); the server may be hung or busy with another request"
    )]
    #[diagnostic(
        code(llm::idle),
        help(
            "check that the server is alive; if it is only slow (long prompts, a busy single-slot server), raise the provider's `idle_timeout`"
        )
    )]
    Idle {
        /// The provider.
        provider: String,
        /// The idle timeout.
        after: Duration,
    },

    /// The server failed while streaming its answer: a success status, then an empty, cut-off
    /// or error stream. The server is at fault, not the model.
    #[error("provider `{provider}` failed while streaming its answer: {reason}")]
    #[diagnostic(
        code(llm::stream),
        help(
            "the server's log says why; a server that cannot stream this request (llama-cpp-python cannot stream tool calls) needs `stream: false` on its provider"
        )
    )]
    Stream {
        /// The provider.
        provider: String,
        /// What was wrong with the stream.
        reason: String,
    },

    /// The answer was cut because it reached `max_tokens`.
    #[error("the answer was cut at {max_tokens} tokens (finish_reason `length`), so it is incomplete")]
    #[diagnostic(
        code(llm::length),
        help("raise `max_tokens` on the agent or its provider, or ask for a shorter answer in the task")
    )]
    Length {
        /// The limit sent.
        max_tokens: u32,
    },

    /// A `200 OK` whose body is not a chat completion.
    #[error("malformed response from `{provider}`: {reason}; body: {body}")]
    #[diagnostic(code(llm::malformed))]
    Malformed {
        /// The provider.
        provider: String,
        /// What was wrong.
        reason: String,
        /// An excerpt of the body.
        body: String,
    },

    /// The model was still calling tools after its last turn.
    #[error("the agent used all {turns} turns without a final answer")]
    #[diagnostic(code(llm::max_turns), help("raise the agent's `max_turns`, or simplify the task"))]
    MaxTurns {
        /// The turns allowed.
        turns: u32,
    },

    /// A retryable error that was retried until the tries ran out.
    #[error("{last} (gave up after {tries} tries)")]
    #[diagnostic(code(llm::retries))]
    Exhausted {
        /// The last error.
        last: Box<LlmError>,
        /// The requests made.
        tries: u32,
    },
}

impl LlmError {
    /// Whether trying the request (or the attempt) again could help.
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            LlmError::Connect { .. }
            | LlmError::Timeout { .. }
            | LlmError::Idle { .. }
            | LlmError::Stream { .. }
            | LlmError::Malformed { .. } => true,
            LlmError::Request { retryable, .. } => *retryable,
            LlmError::Exhausted { last, .. } => last.retryable(),
            LlmError::UnknownProvider { .. }
            | LlmError::MissingKey { .. }
            | LlmError::ToolConfig { .. }
            | LlmError::NotLlm { .. }
            | LlmError::NoModel { .. }
            | LlmError::Client(_)
            | LlmError::Attachment { .. }
            | LlmError::MaxTurns { .. }
            | LlmError::Length { .. } => false,
        }
    }

    /// Whether the runtime retries the request itself: rate limits, server errors, network
    /// errors, timeouts and broken streams. A malformed answer and a server gone quiet are left
    /// to the task's retry policy: a hung server is reported after one idle timeout, not three.
    pub fn transient(&self) -> bool {
        match self {
            LlmError::Malformed { .. } | LlmError::Exhausted { .. } | LlmError::Idle { .. } => false,
            _ => self.retryable(),
        }
    }

    /// The class of failure an attempt that ends with this error records.
    pub fn class(&self) -> ErrorClass {
        match self {
            LlmError::Timeout { .. } | LlmError::Idle { .. } => ErrorClass::Timeout,
            LlmError::Http { status: 408, .. } => ErrorClass::Timeout,
            LlmError::Exhausted { last, .. } => last.class(),
            LlmError::Malformed { .. } => ErrorClass::Agent,
            _ if self.retryable() => ErrorClass::Transient,
            _ => ErrorClass::Permanent,
        }
    }

    /// The wait the server asked for before the next try, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
