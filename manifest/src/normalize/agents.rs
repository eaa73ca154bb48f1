//! Providers, tools and agents.

use std::collections::BTreeMap;

use crate::diagnostic::{Diagnostic, Problem};
use crate::fields::{
    AGENT, APPROVAL, MOCK_OUTCOME, PRICE, PROVIDER, PROVIDER_KIND, RUNTIMES, SCHEMA_DIALECT, TOKENIZERS, TOOL,
    TOOL_CHOICE, USAGE,
};
use crate::node_path::NodePath;
use crate::plan::{
    Agent, Approval, At, DEFAULT_MAX_OUTPUT_BYTES, Form, Generation, MockOutcome, MockResponse, Price, Provider,
    Runtime, SchemaDialect, Tool, ToolChoice, Usage,
};
use crate::read::{Entry, Fields, Reader, scalar_text, words_of};
use crate::source::Loc;
use crate::tree::{Node, Value};

/// Reads a provider named `name`.
pub(super) fn read_provider(reader: &mut Reader, node: &Node, path: &NodePath, name: &At<String>) -> Option<Provider> {
    let context = format!("provider `{}`", name.value);
    let fields = reader.fields(node, path, &context, PROVIDER.fields, &[])?.owned_by(&name.loc);
    let mut provider = Provider { kind: "openai".into(), loc: name.loc.clone(), ..Provider::default() };
    if let Some((entry, path)) = fields.get("kind") {
        let kinds: Vec<(&str, ())> = PROVIDER_KIND.words().iter().map(|kind| (*kind, ())).collect();
        reader.word(entry, path, "provider kind", &kinds, &[]);
    }
    if let Some((entry, path)) = reader.require(&fields, "base_url", &context)
        && let Some(url) = reader.string::<String>(entry, path, "base_url")
    {
        check_url(reader, entry, path, "base_url", &url.value);
        provider.base_url = url.value;
    }
    provider.api_key_env = reader.text_of(&fields, "api_key_env");
    provider.model = reader.text_of(&fields, "model").map(|v| v.value);
    provider.context_window = reader.whole_of(&fields, "context_window");
    provider.max_concurrency = reader.count_of(&fields, "max_concurrency");
    provider.requests_per_minute = reader.count_of(&fields, "requests_per_minute");
    if let Some((entry, path)) = fields.get("tokenizer") {
        provider.tokenizer = reader.string(entry, path, "tokenizer").map(|v| v.value);
        if provider.tokenizer.as_deref().is_some_and(|name| !TOKENIZERS.contains(&name)) {
            reader.invalid(entry.value, path, "tokenizer", "the tokenizers are `o200k_base` and `cl100k_base`");
            provider.tokenizer = None;
        }
    }
    provider.timeout = reader.duration_of(&fields, "timeout");
    provider.idle_timeout = reader.duration_of(&fields, "idle_timeout");
    provider.stream = reader.boolean_of(&fields, "stream");
    let dialects = words_of::<SchemaDialect>(&SCHEMA_DIALECT);
    provider.schema_dialect = fields
        .get("schema_dialect")
        .and_then(|(entry, path)| reader.word(entry, path, "schema_dialect", &dialects, &[]));
    provider.generation = read_generation(reader, &fields);
    provider.price = fields.get("price").and_then(|(entry, path)| read_price(reader, entry, path));
    Some(provider)
}

/// Reads a provider's `price: {input_per_mtok, output_per_mtok, currency}`.
fn read_price(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> Option<Price> {
    let fields = reader.fields(entry.value, path, "`price`", PRICE.fields, &[])?;
    let input = reader.require(&fields, "input_per_mtok", "`price`").and(reader.number_of(&fields, "input_per_mtok"));
    let output =
        reader.require(&fields, "output_per_mtok", "`price`").and(reader.number_of(&fields, "output_per_mtok"));
    let mut currency = "USD".to_owned();
    if let Some((entry, path)) = fields.get("currency")
        && let Some(code) = reader.string::<String>(entry, path, "currency")
    {
        if code.value.len() == 3 && code.value.bytes().all(|b| b.is_ascii_uppercase()) {
            currency = code.value;
        } else {
            reader.invalid(
                entry.value,
                path,
                "currency",
                "a currency is three capital letters, such as `USD` or `EUR`",
            );
        }
    }
    Some(Price { input_per_mtok: input?, output_per_mtok: output?, currency })
}

/// Reports a URL the runner would call that is not `http://` or `https://`.
fn check_url(reader: &mut Reader, entry: Entry<'_>, path: &NodePath, what: &str, url: &str) {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        reader.invalid(entry.value, path, what, "must start with http:// or https://");
    }
}

/// The generation settings a provider or an llm agent sets.
fn read_generation(reader: &mut Reader, fields: &Fields<'_>) -> Generation {
    Generation {
        max_tokens: reader.count_of(fields, "max_tokens"),
        temperature: reader.number_of(fields, "temperature"),
        seed: reader.whole_of(fields, "seed"),
    }
}

/// Reads a tool named `name`.
pub(super) fn read_tool(reader: &mut Reader, node: &Node, path: &NodePath, name: &At<String>) -> Option<Tool> {
    let context = format!("tool `{}`", name.value);
    let fields = reader.fields(node, path, &context, TOOL.fields, &[])?.owned_by(&name.loc);
    let mut tool = Tool { loc: name.loc.clone(), ..Tool::default() };
    tool.description = reader.text_of(&fields, "description").map(|d| d.value).unwrap_or_default();
    if let Some((entry, path)) = reader.require(&fields, "command", &context) {
        tool.command = reader.argv(entry, path, "command").unwrap_or_default();
    }
    if let Some((entry, path)) = fields.get("input_schema") {
        tool.input_schema = Some(At::new(reader.json(entry.value), Loc::new(entry.value.span(), path)));
    }
    tool.timeout = reader.duration_of(&fields, "timeout");
    tool.destructive = reader.boolean_of(&fields, "destructive").unwrap_or(false);
    let approvals = words_of::<Approval>(&APPROVAL);
    tool.approval = fields
        .get("approval")
        .and_then(|(entry, path)| reader.word(entry, path, "approval", &approvals, &[]))
        .unwrap_or_default();
    Some(tool)
}

/// Reads an agent named `name`; its `runtime` decides which fields apply.
pub(super) fn read_agent(reader: &mut Reader, node: &Node, path: &NodePath, name: &At<String>) -> Option<Agent> {
    let context = format!("agent `{}`", name.value);
    let mut agent = Agent { loc: name.loc.clone(), ..Agent::default() };
    if reader.form == Form::Bare
        && let Value::Str(prompt) = &node.value
    {
        agent.system_prompt = Some(prompt.to_string());
        return Some(agent);
    }
    let fields = reader.fields(node, path, &context, AGENT.fields, &[])?.owned_by(&name.loc);
    let runtime = match fields.get("runtime") {
        Some((entry, path)) => reader.word(entry, path, "runtime", &RUNTIMES.map(|r| (r, r)), &[])?,
        None => "llm",
    };
    let extras: Vec<_> = fields.not_for(runtime).map(|(field, entry, path)| (field, entry, path.to_owned())).collect();
    for (field, entry, path) in extras {
        {
            let owners = field.only_for;
            let owner = owners.join("` or `");
            reader.push(
                Diagnostic::error(
                    Problem::UnknownField { field: field.name.into(), context: format!("a `{runtime}` agent") },
                    Loc::new(entry.key.span(), path),
                )
                .label(format!("only `{owner}` agents have this"))
                .help(format!("remove it, or set `runtime: {}`", owners[0])),
            );
        }
    }
    agent.system_prompt = reader.text_of(&fields, "system_prompt").map(|p| p.value);
    agent.reliability_weight = reader.number_of(&fields, "reliability_weight");
    agent.timeout = reader.duration_of(&fields, "timeout");
    if let Some((entry, path)) = fields.get("cache") {
        agent.cache = super::cache::read_cache(reader, entry, path).map(|cache| cache.value);
    }
    agent.runtime = match runtime {
        "command" => Runtime::Command {
            command: reader
                .require(&fields, "command", &context)
                .and_then(|(entry, path)| reader.argv(entry, path, "command"))
                .unwrap_or_default(),
            max_output_bytes: reader.whole_of(&fields, "max_output_bytes").unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        },
        "http" => read_http(reader, &fields, &context, &name.loc),
        "mock" => Runtime::Mock {
            latency: reader.duration_of(&fields, "latency"),
            default: reader.text_of(&fields, "default").map_or_else(|| "echo".to_owned(), |d| d.value),
            responses: fields
                .get("responses")
                .map(|(entry, path)| read_responses(reader, entry, path))
                .unwrap_or_default(),
        },
        _ => read_llm(reader, &fields),
    };
    Some(agent)
}

/// The settings of an `llm` agent.
fn read_llm(reader: &mut Reader, fields: &Fields<'_>) -> Runtime {
    let tool_choices = words_of::<ToolChoice>(&TOOL_CHOICE);
    Runtime::Llm {
        provider: reader.text_of(fields, "provider"),
        model: reader.text_of(fields, "model").map(|m| m.value),
        tools: fields.get("tools").map(|(entry, path)| reader.strings(entry, path, "a tool name")).unwrap_or_default(),
        allow_tools: fields
            .get("allow_tools")
            .map(|(entry, path)| reader.strings(entry, path, "a tool name"))
            .unwrap_or_default(),
        max_turns: reader.count_of(fields, "max_turns"),
        tool_choice: fields
            .get("tool_choice")
            .and_then(|(entry, path)| reader.word(entry, path, "tool_choice", &tool_choices, &[])),
        generation: read_generation(reader, fields),
    }
}

/// The settings of an `http` agent: a required `http(s)://` url, and secrets only by the name of
/// the environment variable that holds them.
fn read_http(reader: &mut Reader, fields: &Fields<'_>, context: &str, loc: &Loc) -> Runtime {
    let mut url = At::new(String::new(), loc.clone());
    if let Some((entry, path)) = reader.require(fields, "url", context)
        && let Some(value) = reader.string::<String>(entry, path, "url")
    {
        check_url(reader, entry, path, "url", &value.value);
        url = value;
    }
    let api_key_env = reader.text_of(fields, "api_key_env");
    let mut headers_env = BTreeMap::new();
    if let Some((entry, path)) = fields.get("headers_env") {
        for (header, node, item_path) in reader.named(entry, path, "headers_env") {
            let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            if header.value.is_empty() || !header.value.bytes().all(valid) {
                let problem = Problem::InvalidValue {
                    what: "a header name".into(),
                    reason: "use letters, digits, `-` and `_` only".into(),
                };
                reader.push(Diagnostic::error(problem, header.loc.clone()));
                continue;
            }
            if let Some(variable) = reader.string(Entry { key: node, value: node }, &item_path, "headers_env") {
                headers_env.insert(header.value, variable);
            }
        }
    }
    let max_output_bytes = reader.whole_of(fields, "max_output_bytes").unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
    Runtime::Http { url, api_key_env, headers_env, max_output_bytes }
}

fn read_responses(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> BTreeMap<String, Vec<MockResponse>> {
    let mut responses = BTreeMap::new();
    for (task, node, item_path) in reader.named(entry, path, "responses") {
        let script = match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| read_response(reader, item, &item_path.index(i)))
                .collect(),
            _ => read_response(reader, node, &item_path).into_iter().collect(),
        };
        responses.insert(task.value, script);
    }
    responses
}

fn read_response(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<MockResponse> {
    if let Some(text) = scalar_text(node) {
        return Some(MockOutcome::Output(text).into());
    }
    let fields = reader.fields(node, path, "a mock response", MOCK_OUTCOME.fields, &[])?;
    let given = reader.alternative(&fields, node, path, "mock response", &MOCK_OUTCOME)?;
    let tokens = match fields.get("tokens") {
        Some((entry, path)) => Some(read_usage(reader, entry.value, path)?),
        None => None,
    };
    let text = reader.text_of(&fields, given)?.value;
    let outcome = match given {
        "output" => MockOutcome::Output(text),
        "fail" => MockOutcome::Fail(text),
        "transient" => MockOutcome::Transient(text),
        _ => MockOutcome::Clarify(text),
    };
    Some(MockResponse { outcome, tokens })
}

/// A scripted response's `tokens` (a mock agent's or a plan test's): both counts are required.
pub(crate) fn read_usage(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<Usage> {
    let fields = reader.fields(node, path, "tokens", USAGE.fields, &[])?;
    let prompt = reader.require(&fields, "prompt", "tokens").and(reader.whole_of(&fields, "prompt"));
    let completion = reader.require(&fields, "completion", "tokens").and(reader.whole_of(&fields, "completion"));
    Some(Usage { prompt: prompt?, completion: completion? })
}
