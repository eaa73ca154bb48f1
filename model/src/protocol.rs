//! The chat-completions wire format: the parts of it this runtime sends and reads.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// The agent's system prompt.
    System {
        /// The text.
        content: String,
    },
    /// The task.
    User {
        /// The text.
        content: String,
    },
    /// What the model said, sent back so it sees its own tool calls.
    Assistant {
        /// The text, empty when the model only called tools: some servers refuse a `null`
        /// content, and every server accepts an empty one.
        content: String,
        /// The tools it called.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call answered.
        tool_call_id: String,
        /// The result or what went wrong.
        content: String,
    },
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, which the tool message names.
    #[serde(default)]
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

fn function() -> String {
    "function".to_owned()
}

/// The function a tool call names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON text. Some servers send an object instead; it is kept as text.
    #[serde(default, deserialize_with = "text_or_json")]
    pub arguments: String,
}

fn text_or_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function.
    pub function: FunctionDefinition,
}

/// A function offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionDefinition {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// The body of `POST /chat/completions`.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    /// The model.
    pub model: &'a str,
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The tools offered.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools: &'a [ToolDefinition],
    /// `auto`, `required` or `none`, sent with the tools: some servers ignore tools without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    /// `{"type": "json_object"}` when the answer must be JSON, or a schema in the server's
    /// [`dialect`](crate::dialect).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// The schema the answer must hold to, in Ollama's dialect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Value>,
}

/// The parts of a chat completion that are read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatResponse {
    /// The choices; the first is used.
    pub choices: Vec<Choice>,
    /// Tokens used, when the server reports them.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// The model that answered, as the server names it.
    #[serde(default)]
    pub model: Option<String>,
}

/// One choice of a completion.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Choice {
    /// The assistant's message.
    pub message: AssistantMessage,
    /// Why the model stopped: `stop`, `tool_calls`, `length` (cut at `max_tokens`)...
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What the model said.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AssistantMessage {
    /// The text, absent when it only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    /// The tools it calls.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tool_calls: Vec<ToolCall>,
}

fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ToolCall>, D::Error> {
    Ok(Option::<Vec<ToolCall>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Tokens a request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// Sampling settings sent next to a [`ChatRequest`]; the default sends none and leaves the
/// server's defaults in place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sampling {
    /// The sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The most tokens the answer may have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The sampling seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// The body actually sent: the request, its sampling settings and, for a streamed answer,
/// `stream: true` with usage asked for in the last chunk.
#[derive(Debug, Serialize)]
pub(crate) struct Body<'a> {
    #[serde(flatten)]
    pub request: &'a ChatRequest<'a>,
    #[serde(flatten)]
    pub sampling: Sampling,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<Value>,
}

/// One `data:` chunk of a streamed chat completion: the parts of it that are read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StreamChunk {
    /// The choices; the first one's delta is used.
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<StreamChoice>,
    /// Tokens used, which servers send in the last chunk when asked.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// An error the server reports in the middle of a stream.
    #[serde(default)]
    pub error: Option<Value>,
    /// The model that answers, as the server names it.
    #[serde(default)]
    pub model: Option<String>,
}

/// One choice of a streamed chunk.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StreamChoice {
    /// What the chunk adds to the message.
    #[serde(default, deserialize_with = "null_as_default")]
    pub delta: Delta,
    /// Why the model stopped, in the last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The piece of the message a chunk adds.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Delta {
    /// The text added, if any.
    #[serde(default)]
    pub content: Option<String>,
    /// Pieces of tool calls: the first piece of a call has its id and name, the arguments'
    /// text arrives in pieces.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a streamed tool call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the message the piece belongs to.
    #[serde(default)]
    pub index: usize,
    /// The call's id, in its first piece.
    #[serde(default)]
    pub id: Option<String>,
    /// The function's name and a piece of its arguments.
    #[serde(default, deserialize_with = "null_as_default")]
    pub function: FunctionDelta,
}

/// A piece of a streamed function call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FunctionDelta {
    /// The function's name, in the first piece.
    #[serde(default)]
    pub name: Option<String>,
    /// A piece of the arguments' text.
    #[serde(default, deserialize_with = "text_or_json")]
    pub arguments: String,
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
