//! Talking to OpenAI-compatible model servers, for the engine's `llm` agents and the planner's
//! plan author alike.
//!
//! An [`Endpoint`] is one provider's `POST /chat/completions`: its requests (streamed or not)
//! wait for the provider's [`limiter`], are retried when a retry could help, and fail with a
//! classified [`LlmError`] whose texts never hold the API key ([`redact`]). [`protocol`] holds
//! the wire types, [`dialect`] how a request asks for an answer that holds to a JSON Schema,
//! [`catalog`] what a server lists at `GET /models`, [`tokens`] counting with
//! tiktoken (the [`Tiktoken`](tokens::Tiktoken) counter the engine's run state counts with),
//! and [`spans`] the `tracing` span of a model request.

mod answer;
pub mod catalog;
pub mod dialect;
mod endpoint;
mod error;
mod error_map;
pub mod limiter;
pub mod protocol;
pub mod redact;
mod retry;
pub mod spans;
mod sse;
pub mod tokens;
mod tool_error;

pub use answer::Answer;
pub use endpoint::{DEFAULT_IDLE_TIMEOUT, DEFAULT_TIMEOUT, Endpoint};
pub use error::LlmError;
pub use tool_error::ToolError;
