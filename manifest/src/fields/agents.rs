//! Providers, tools and agents, with the words and scripts of their fields.

use super::declare::declare_section;
use super::{
    ARGV, CACHE_DEF, DURATION, Field, Kind, MAX_TOKENS, Named, SEED, Section, Shape, TEMPERATURE, TEXT_MAP, TEXTS, URL,
};

/// The tokenizer names a provider may give (the engine counts tokens with these).
pub const TOKENIZERS: [&str; 4] = ["o200k_base", "o200k", "cl100k_base", "cl100k"];

/// `spec.providers`.
pub(crate) const PROVIDERS: Shape = Shape::Map(&Shape::Named(&PROVIDER_DEF));
/// `spec.tools`.
pub(crate) const TOOLS: Shape = Shape::Map(&Shape::Named(&TOOL_DEF));
/// `spec.agent_definitions`.
pub(crate) const AGENTS: Shape = Shape::Map(&Shape::Named(&AGENT_DEF));

/// A provider.
pub(crate) static PROVIDER: Section = Section::of(&[
    Field::new("kind", Shape::Named(&PROVIDER_KIND), "The API dialect; only `openai` for now."),
    Field::new("base_url", URL, "The endpoint's base URL, such as `http://localhost:11434/v1`.").required(),
    Field::new(
        "api_key_env",
        Shape::Text,
        "The name of the environment variable holding the API key; never the key itself.",
    ),
    Field::new("model", Shape::Text, "The model used by agents that name none."),
    Field::new("context_window", Shape::Integer { min: 1 }, "The model's context window in tokens."),
    Field::new("max_concurrency", Shape::Count { min: 1 }, "Requests to this provider in flight at once."),
    Field::new("requests_per_minute", Shape::Count { min: 1 }, "Requests started per minute."),
    Field::new(
        "tokenizer",
        Shape::Choice(&TOKENIZERS),
        "The tokenizer used to count tokens (`o200k_base` by default).",
    ),
    Field::new(
        "timeout",
        Shape::Named(&DURATION),
        "How long one request may take: 120 s when not given, except for agents' streamed requests, which have no overall limit unless one is given.",
    ),
    Field::new(
        "idle_timeout",
        Shape::Named(&DURATION),
        "How long a streamed answer may go without a new event before the request is given up (60 s when not given).",
    ),
    Field::new(
        "stream",
        Shape::Bool,
        "Whether agents' requests are streamed (`true` when not given); set `false` for a server that cannot stream tool calls.",
    ),
    Field::new(
        "schema_dialect",
        Shape::Named(&SCHEMA_DIALECT),
        "How the server is asked to hold an answer to a JSON Schema (a task's `schema_check`): `json_schema` (the default: OpenAI, vLLM, llama.cpp's server, Ollama's `/v1`), `json_object` (llama-cpp-python), `ollama` (a top-level `format`) or `none` (JSON mode only). `runner probe` finds the one a server honours.",
    ),
    Field::new(
        "max_tokens",
        MAX_TOKENS,
        "The most tokens one answer may have, for agents that set none (4096 when neither sets it).",
    ),
    Field::new(
        "temperature",
        TEMPERATURE,
        "The sampling temperature, for agents that set none (the server's default when neither sets it).",
    ),
    Field::new("seed", SEED, "The sampling seed, for agents that set none (sent only when set)."),
    Field::new(
        "price",
        Shape::Named(&PRICE_DEF),
        "What the provider's tokens cost, for the critic's forecast (none when not given: runner has no price list of its own).",
    ),
]);

static PRICE_DEF: Named = Named {
    name: "Price",
    doc: "What a provider's tokens cost: per million prompt (input) and completion (output) tokens.",
    kind: Kind::Mapping(&PRICE),
};

/// The fields of a provider's `price`.
pub(crate) static PRICE: Section = Section::of(&[
    Field::new("input_per_mtok", PER_MTOK, "The price of a million prompt tokens.").required(),
    Field::new("output_per_mtok", PER_MTOK, "The price of a million completion tokens.").required(),
    Field::new("currency", Shape::Pattern("^[A-Z]{3}$"), "The currency, three capital letters (`USD` when not given)."),
]);

/// A price per million tokens.
const PER_MTOK: Shape = Shape::Number { min: 0.0, max: 1.0e9 };

static PROVIDER_DEF: Named = Named {
    name: "Provider",
    doc: "An OpenAI-compatible chat-completions endpoint (Ollama, vLLM, llama.cpp server, OpenAI).",
    kind: Kind::Mapping(&PROVIDER),
};

/// The words of a provider's `kind`.
pub(crate) static PROVIDER_KIND: Named =
    Named { name: "ProviderKind", doc: "The API dialect of a provider.", kind: Kind::Words(&["openai"]) };

/// The words of a provider's `schema_dialect`, in the order of `SchemaDialect::ALL`.
pub(crate) static SCHEMA_DIALECT: Named = Named {
    name: "SchemaDialectWord",
    doc: "How a server is asked to hold an answer to a JSON Schema.",
    kind: Kind::Words(&["json_schema", "json_object", "ollama", "none"]),
};

/// A tool.
pub(crate) static TOOL: Section = Section::of(&[
    Field::new("description", Shape::Text, "What the tool does, shown to the model."),
    Field::new("command", Shape::Named(&ARGV), "The argv to run, never passed through a shell.").required(),
    Field::new("input_schema", Shape::Json, "The JSON Schema of the call's arguments."),
    Field::new("timeout", Shape::Named(&DURATION), "How long one call may take."),
    Field::new(
        "destructive",
        Shape::Bool,
        "Whether the tool changes the world; the critic wants a `human_review` before a task that may call it.",
    ),
    Field::new(
        "approval",
        Shape::Named(&APPROVAL),
        "When a call waits for a person's approval (`runner approve`): `never`, `always`, or `destructive` (the default: when the tool is destructive).",
    ),
]);

static TOOL_DEF: Named = Named {
    name: "Tool",
    doc: "A program an llm agent can call; the call's arguments arrive as JSON on stdin.",
    kind: Kind::Mapping(&TOOL),
};

declare_section! {
    /// An agent: the fields of every runtime, each checked against the runtime the agent names.
    static AGENT, examples AGENT_EXAMPLES = [
        Field::new("runtime", Shape::Named(&RUNTIME), "How the agent runs (`llm` when not given).")
            => example r#"{"runtime": "command", "command": ["cat"]}"#,
        Field::new(
            "provider",
            Shape::Text,
            "The provider's name (llm agents); the provider named `default` when not given.",
        )
            .only_for(&["llm"])
            => example r#"{"provider": "other"}"#,
        Field::new("model", Shape::Text, "The model, overriding the provider's (llm agents).")
            .only_for(&["llm"])
            => example r#"{"model": "small"}"#,
        Field::new("system_prompt", Shape::Text, "The system prompt (llm agents).")
            .aliases(&["prompt", "description", "role"])
            .only_for(&["llm"])
            => example r#"{"system_prompt": "Be brief."}"#,
        Field::new("tools", TEXTS, "Tools offered to the model, by name (llm agents).")
            .aliases(&["capabilities"])
            .only_for(&["llm"])
            => example r#"{"tools": ["search"]}"#,
        Field::new(
            "allow_tools",
            TEXTS,
            "Tools this agent may call without a person's approval, whatever their `approval` (llm agents).",
        )
            .only_for(&["llm"])
            => example r#"{"tools": ["search"], "allow_tools": ["search"]}"#,
        Field::new(
            "reliability_weight",
            Shape::Number { min: 0.0, max: 1.0 },
            "The author's trust in this agent, from 0.0 to 1.0.",
        )
            => example r#"{"reliability_weight": 0.5}"#,
        Field::new("max_turns", Shape::Count { min: 1 }, "The most model turns one attempt may take (llm agents).")
            .only_for(&["llm"])
            => example r#"{"max_turns": 3}"#,
        Field::new(
            "tool_choice",
            Shape::Named(&TOOL_CHOICE),
            "Whether the model may (`auto`, the default), must (`required`) or must not (`none`) call the tools offered (llm agents).",
        )
            .only_for(&["llm"])
            => example r#"{"tools": ["search"], "tool_choice": "required"}"#,
        Field::new(
            "max_tokens",
            MAX_TOKENS,
            "The most tokens one answer may have, overriding the provider's (llm agents; 4096 when neither sets it).",
        )
            .only_for(&["llm"])
            => example r#"{"max_tokens": 100}"#,
        Field::new("temperature", TEMPERATURE, "The sampling temperature, overriding the provider's (llm agents).")
            .only_for(&["llm"])
            => example r#"{"temperature": 0.5}"#,
        Field::new("seed", SEED, "The sampling seed, overriding the provider's (llm agents).")
            .only_for(&["llm"])
            => example r#"{"seed": 7}"#,
        Field::new("timeout", Shape::Named(&DURATION), "How long one attempt may take.")
            => example r#"{"timeout": "5s"}"#,
        Field::new(
            "cache",
            Shape::Named(&CACHE_DEF),
            "Whether its tasks' outputs stored by earlier runs are used instead of running (`true`, `false` or `{ttl: 7d, version: 2}`), unless a task says otherwise; for deterministic work.",
        )
            => example r#"{"cache": true}"#,
        Field::new(
            "command",
            Shape::Named(&ARGV),
            "The argv to run, with the task input on stdin and the output from stdout (command agents).",
        )
            .only_for(&["command"])
            => example r#"{"runtime": "command", "command": ["cat"]}"#,
        Field::new(
            "max_output_bytes",
            Shape::Integer { min: 1 },
            "The most output bytes kept before the attempt fails (command and http agents; 1 MiB when not given).",
        )
            .only_for(&["command", "http"])
            => example r#"{"runtime": "command", "command": ["cat"], "max_output_bytes": 10}"#,
        Field::new("latency", Shape::Named(&DURATION), "Simulated time per attempt (mock agents).")
            .only_for(&["mock"])
            => example r#"{"runtime": "mock", "latency": "1s"}"#,
        Field::new(
            "default",
            Shape::Text,
            "The response for tasks with no script (mock agents): `echo` returns the rendered input, other text itself.",
        )
            .only_for(&["mock"])
            => example r#"{"runtime": "mock", "default": "fixed"}"#,
        Field::new(
            "responses",
            Shape::Map(&Shape::Named(&MOCK_SCRIPT)),
            "Scripted responses by task id (mock agents): one, or a list with one per attempt (the last repeats).",
        )
            .only_for(&["mock"])
            => example r#"{"runtime": "mock", "responses": {"a": "done"}}"#,
        Field::new("url", URL, "Where the input is POSTed (http agents).")
            .only_for(&["http"])
            => example r#"{"runtime": "http", "url": "https://example.com/run"}"#,
        Field::new("api_key_env", Shape::Text, "The variable holding the bearer token (http agents).")
            .only_for(&["http"])
            => example r#"{"runtime": "http", "url": "https://example.com/run", "api_key_env": "SERVICE_KEY"}"#,
        Field::new("headers_env", TEXT_MAP, "Header name to the variable holding its value (http agents).")
            .only_for(&["http"])
            => example r#"{"runtime": "http", "url": "https://example.com/run", "headers_env": {"X-Team": "TEAM"}}"#,
    ];
}

static AGENT_DEF: Named = Named {
    name: "Agent",
    doc: "An agent; `runtime` decides which of the other fields apply.",
    kind: Kind::Mapping(&AGENT),
};

/// The runtimes an agent may name.
pub(crate) static RUNTIMES: [&str; 4] = ["llm", "command", "mock", "http"];

static RUNTIME: Named = Named {
    name: "Runtime",
    doc: "How an agent runs: `llm` (a chat model calling tools), `command` (a process), `mock` (scripted responses) or `http`.",
    kind: Kind::Words(&RUNTIMES),
};

/// The words of a tool's `approval`.
pub(crate) static APPROVAL: Named = Named {
    name: "ApprovalWord",
    doc: "When a call of a tool waits for a person's approval.",
    kind: Kind::Words(&["never", "always", "destructive"]),
};

/// The words of `tool_choice`.
pub(crate) static TOOL_CHOICE: Named = Named {
    name: "ToolChoiceWord",
    doc: "Whether an llm agent's model may call the tools it is offered.",
    kind: Kind::Words(&["auto", "required", "none"]),
};

static MOCK_SCRIPT: Named = Named {
    name: "MockScript",
    doc: "A mock agent's script for one task: one response, or one per attempt.",
    kind: Kind::AnyOf(&[Shape::Named(&MOCK_RESPONSE), Shape::List(&Shape::Named(&MOCK_RESPONSE))]),
};

static MOCK_RESPONSE: Named = Named {
    name: "MockResponse",
    doc: "One scripted outcome: a text is an output; a mapping gives one of `output`, `fail`, `transient` or\n`clarify`, and may state its `tokens`.",
    kind: Kind::AnyOf(&[Shape::Text, Shape::Named(&MOCK_OUTCOME_DEF)]),
};

/// A mock response spelled out as a mapping.
pub(crate) static MOCK_OUTCOME: Section = Section::one_of_leading(
    4,
    &[
        Field::new("output", Shape::Text, "Succeed with this output."),
        Field::new("fail", Shape::Text, "Fail with this error (a retry may fix it)."),
        Field::new("transient", Shape::Text, "Fail as a service does (429, 503): what `retry_on: transient` retries."),
        Field::new("clarify", Shape::Text, "Ask this clarifying question."),
        Field::new(
            "tokens",
            Shape::Named(&USAGE_DEF),
            "The token usage the response reports, counted as a server's `usage` is (budgets, `runner status`).",
        ),
    ],
);

/// A scripted response's token usage (a mock agent's, a plan test's).
pub(crate) static USAGE: Section = Section::of(&[
    Field::new("prompt", Shape::Integer { min: 0 }, "Tokens sent.").required(),
    Field::new("completion", Shape::Integer { min: 0 }, "Tokens received.").required(),
]);

pub(crate) static USAGE_DEF: Named =
    Named { name: "Usage", doc: "Token usage, as a server reports it.", kind: Kind::Mapping(&USAGE) };

static MOCK_OUTCOME_DEF: Named =
    Named { name: "MockOutcome", doc: "One scripted outcome, spelled out.", kind: Kind::Mapping(&MOCK_OUTCOME) };
