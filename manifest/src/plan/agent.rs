//! Providers, tools and agents: who does a task and how.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::At;
use crate::duration::Duration;
use crate::source::Loc;

/// An OpenAI-compatible chat-completions endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    /// The API dialect; only `openai` for now.
    pub kind: String,
    /// The endpoint's base URL, such as `http://localhost:11434/v1`.
    pub base_url: String,
    /// The name of the environment variable holding the API key.
    pub api_key_env: Option<At<String>>,
    /// The default model.
    pub model: Option<String>,
    /// The model's context window in tokens.
    pub context_window: Option<u64>,
    /// Requests in flight at once.
    pub max_concurrency: Option<u32>,
    /// Requests started per minute.
    pub requests_per_minute: Option<u32>,
    /// The tokenizer used to count tokens (`o200k_base` by default).
    pub tokenizer: Option<String>,
    /// How long one request may take.
    pub timeout: Option<Duration>,
    /// How long a streamed answer may go without a new event.
    pub idle_timeout: Option<Duration>,
    /// Whether agents' requests are streamed (`true` when not set).
    pub stream: Option<bool>,
    /// How the server is asked to hold an answer to a JSON Schema; the kind's default when not set.
    pub schema_dialect: Option<SchemaDialect>,
    /// The generation settings of every agent on this provider, unless the agent sets its own.
    #[serde(default, skip_serializing_if = "Generation::is_unset")]
    pub generation: Generation,
    /// What its tokens cost, when the manifest says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Where the provider was defined.
    #[serde(skip)]
    pub loc: Loc,
}

impl Provider {
    /// How the server is asked to hold an answer to a JSON Schema: the manifest's word, else the
    /// default of the provider's `kind` (`json_schema` for `openai`).
    pub fn schema_dialect(&self) -> SchemaDialect {
        self.schema_dialect.unwrap_or(SchemaDialect::JsonSchema)
    }
}

/// How a server is asked to hold an answer to a JSON Schema: servers speak different dialects, and
/// some accept a schema they then ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaDialect {
    /// `response_format: {"type": "json_schema", "json_schema": {...}}`: OpenAI, vLLM, llama.cpp's
    /// `llama-server`, Ollama's `/v1`.
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": ...}`: llama-cpp-python.
    JsonObject,
    /// A top-level `format: SCHEMA`: Ollama's own API.
    Ollama,
    /// No schema: JSON mode only (`{"type": "json_object"}`).
    None,
}

impl SchemaDialect {
    /// Every dialect, in the order `runner probe` tries them.
    pub const ALL: [SchemaDialect; 4] =
        [SchemaDialect::JsonSchema, SchemaDialect::JsonObject, SchemaDialect::Ollama, SchemaDialect::None];

    /// The word a manifest gives.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaDialect::JsonSchema => "json_schema",
            SchemaDialect::JsonObject => "json_object",
            SchemaDialect::Ollama => "ollama",
            SchemaDialect::None => "none",
        }
    }
}

/// A program an llm agent can call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// What the tool does, shown to the model.
    pub description: String,
    /// The argv to run; the call's arguments arrive as JSON on stdin.
    pub command: Vec<String>,
    /// The JSON Schema of the arguments.
    pub input_schema: Option<At<serde_json::Value>>,
    /// How long one call may take.
    pub timeout: Option<Duration>,
    /// Whether the tool changes the world (the critic wants a human review before it).
    pub destructive: bool,
    /// When a call of the tool waits for a person's approval.
    #[serde(default, skip_serializing_if = "Approval::is_default")]
    pub approval: Approval,
    /// Where the tool was defined.
    #[serde(skip)]
    pub loc: Loc,
}

/// An agent: who does a task and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// How the agent runs.
    pub runtime: Runtime,
    /// The system prompt (llm agents).
    pub system_prompt: Option<String>,
    /// The author's trust in this agent, 0.0 to 1.0.
    pub reliability_weight: Option<f64>,
    /// How long one attempt may take.
    pub timeout: Option<Duration>,
    /// Whether its tasks' outputs are reused from earlier runs, unless a task says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<super::Cache>,
    /// Where the agent was defined.
    #[serde(skip)]
    pub loc: Loc,
}

/// How an agent runs, with the settings of that runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "runtime", rename_all = "snake_case")]
pub enum Runtime {
    /// An OpenAI-compatible chat model with tool calling.
    Llm {
        /// The provider's name; `None` means the provider named `default`.
        provider: Option<At<String>>,
        /// The model, overriding the provider's.
        model: Option<String>,
        /// Tools offered to the model, by name.
        tools: Vec<At<String>>,
        /// Tools this agent may call without a person's approval, whatever their `approval`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow_tools: Vec<At<String>>,
        /// The most model turns one attempt may take.
        max_turns: Option<u32>,
        /// Whether the model may, must or must not call the tools offered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_choice: Option<ToolChoice>,
        /// Generation settings, overriding the provider's.
        #[serde(default, skip_serializing_if = "Generation::is_unset")]
        generation: Generation,
    },
    /// A process: the task input on stdin, the output from stdout.
    Command {
        /// The argv; never passed through a shell.
        command: Vec<String>,
        /// The most stdout bytes kept before the attempt fails.
        max_output_bytes: u64,
    },
    /// Deterministic scripted responses, for tests, dry runs and examples.
    Mock {
        /// Simulated time per attempt.
        latency: Option<Duration>,
        /// The response for tasks with no script: `echo` returns the rendered input.
        default: String,
        /// Scripted responses by task id, one per attempt (the last repeats).
        responses: BTreeMap<String, Vec<MockResponse>>,
    },
    /// A web service: the task input is POSTed to `url`, the response body is the output.
    Http {
        /// The address the input is POSTed to; `http://` or `https://`.
        url: At<String>,
        /// The environment variable whose value is sent as `Authorization: Bearer <value>`.
        api_key_env: Option<At<String>>,
        /// More headers to send: header name to the environment variable holding its value.
        headers_env: BTreeMap<String, At<String>>,
        /// The most response bytes kept before the attempt fails.
        max_output_bytes: u64,
    },
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::Llm {
            provider: None,
            model: None,
            tools: Vec::new(),
            allow_tools: Vec::new(),
            max_turns: None,
            tool_choice: None,
            generation: Generation::default(),
        }
    }
}

/// What a provider's tokens cost, per million prompt and completion tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// The price of a million prompt tokens.
    pub input_per_mtok: f64,
    /// The price of a million completion tokens.
    pub output_per_mtok: f64,
    /// The currency: three capital letters, `USD` by default.
    pub currency: String,
}

impl Price {
    /// What `prompt` and `completion` tokens cost.
    pub fn cost(&self, prompt: u64, completion: u64) -> f64 {
        (prompt as f64 * self.input_per_mtok + completion as f64 * self.output_per_mtok) / 1_000_000.0
    }
}

/// Settings of how a model generates an answer, sent with each request when set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The most tokens one answer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The sampling seed, for repeatable answers where the server supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Generation {
    /// Whether nothing is set.
    pub fn is_unset(&self) -> bool {
        *self == Generation::default()
    }

    /// These settings, with `fallback`'s where these set none.
    pub fn or(self, fallback: Generation) -> Generation {
        Generation {
            max_tokens: self.max_tokens.or(fallback.max_tokens),
            temperature: self.temperature.or(fallback.temperature),
            seed: self.seed.or(fallback.seed),
        }
    }
}

/// When a call of a tool waits for a person's approval (`runner approve`) before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Calls run without asking.
    Never,
    /// Every call asks.
    Always,
    /// Calls ask when the tool is `destructive`.
    #[default]
    Destructive,
}

impl Approval {
    /// Whether it is the default, which the recorded plan leaves out.
    pub fn is_default(&self) -> bool {
        *self == Approval::Destructive
    }

    /// Whether a call of a tool with this policy asks first.
    pub fn asks(self, destructive: bool) -> bool {
        match self {
            Approval::Never => false,
            Approval::Always => true,
            Approval::Destructive => destructive,
        }
    }
}

/// Whether an llm agent's model may call the tools it is offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call a tool.
    Required,
    /// The model must not call a tool.
    None,
}

impl ToolChoice {
    /// The word sent as `tool_choice`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
        }
    }
}

impl Runtime {
    /// `llm`, `command`, `mock` or `http`.
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::Llm { .. } => "llm",
            Runtime::Command { .. } => "command",
            Runtime::Mock { .. } => "mock",
            Runtime::Http { .. } => "http",
        }
    }

    /// The environment variables this runtime reads secrets from (an `http` agent's key and
    /// headers).
    pub fn secret_variables(&self) -> Vec<&At<String>> {
        match self {
            Runtime::Http { api_key_env, headers_env, .. } => api_key_env.iter().chain(headers_env.values()).collect(),
            _ => Vec::new(),
        }
    }
}

/// The default cap on a command agent's output.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// One scripted response of a mock agent: what it does, and the token usage it reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MockResponse {
    /// What the response is.
    #[serde(flatten)]
    pub outcome: MockOutcome,
    /// The usage it reports, as a server's `usage` does; `None` reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Usage>,
}

impl From<MockOutcome> for MockResponse {
    fn from(outcome: MockOutcome) -> Self {
        MockResponse { outcome, tokens: None }
    }
}

/// What a mock response is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MockOutcome {
    /// Succeed with this output.
    Output(String),
    /// Fail with this error, as the agent (a retry may fix it).
    Fail(String),
    /// Fail as an unavailable service does: what `retry_on: transient` retries.
    Transient(String),
    /// Ask this clarifying question.
    Clarify(String),
}

/// The tokens a scripted reply (a mock agent's, a plan test's) says it used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent.
    pub prompt: u64,
    /// Tokens received.
    pub completion: u64,
}
