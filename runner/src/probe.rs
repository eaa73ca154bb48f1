//! `runner probe PROVIDER`: what a server serves, each model's context window, and whether
//! tool calls, JSON mode and each schema dialect actually work there, learnt from one tiny
//! request each, so a user finds out before a run that a server drops tools, ignores JSON mode
//! or accepts a schema it then ignores.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use model::catalog::{self, Catalog};
use model::dialect::{Constraint, SchemaDialect};
use model::protocol::{ChatRequest, ChatResponse, FunctionDefinition, Message, Sampling, ToolDefinition};
use model::redact::excerpt;
use model::{Endpoint, LlmError};
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use crate::diagnostics::print;
use crate::format::Format;
use crate::provenance::ContextWindow;

/// Exit code when the server cannot be reached.
pub const EXIT_UNREACHABLE: u8 = 7;

/// The tool the model is asked to call.
const TOOL: &str = "report_number";
/// How much of an answer a verdict quotes.
const QUOTE: usize = 160;

/// The arguments of `runner probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The server: a base URL, or a provider of `--template` by name.
    pub provider: String,
    /// A manifest whose providers `PROVIDER` may name.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// A model to try; repeatable (default: the provider's model, else the server's only one).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// With a base URL: the environment variable that holds its API key.
    #[arg(long, value_name = "VARIABLE")]
    pub api_key_env: Option<String>,
    /// How long each request may take, such as `30s` (default: the provider's `timeout`, else 120s).
    #[arg(long, value_name = "DURATION", value_parser = manifest::Duration::parse)]
    pub timeout: Option<manifest::Duration>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// What the probe found.
#[derive(Debug, Serialize)]
struct Report {
    provider: String,
    base_url: String,
    /// Whether the server answered at all.
    reachable: bool,
    /// Why it could not be reached, or could not list its models.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The models it lists; `None` when it does not list them.
    served: Option<Vec<String>>,
    /// Each model tried.
    models: Vec<Tried>,
}

/// What one model can do.
#[derive(Debug, Serialize)]
struct Tried {
    model: String,
    /// Whether the server lists it (`None`: it lists nothing).
    listed: Option<bool>,
    /// Its context window, when the server or the provider gives it.
    context_window: Option<ContextWindow>,
    tool_calls: Verdict,
    json_mode: Verdict,
    /// Whether each dialect that sends a schema holds the answer to it.
    #[serde(serialize_with = "by_dialect")]
    schema_dialects: Vec<(SchemaDialect, Verdict)>,
    /// The dialect to give the provider's `schema_dialect`.
    schema_dialect: SchemaDialect,
}

/// The dialects' verdicts as a JSON object keyed by the dialect's word.
fn by_dialect<S: Serializer>(verdicts: &[(SchemaDialect, Verdict)], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(verdicts.iter().map(|(dialect, verdict)| (dialect.as_str(), verdict)))
}

/// Whether a feature works, and what showed it.
#[derive(Debug, Serialize)]
struct Verdict {
    works: bool,
    detail: String,
    /// For a schema dialect: whether the answer held to every rule of the schema, not only to
    /// its keys, types and words.
    #[serde(skip)]
    whole: bool,
}

impl Verdict {
    fn new(works: bool, detail: String) -> Verdict {
        Verdict { works, detail, whole: works }
    }
}

/// Probes the server; returns the exit code.
pub fn run(args: &ProbeArgs) -> anyhow::Result<u8> {
    let template = args.template.as_deref().map(crate::plan::load_template).transpose()?;
    let template = template.as_ref().map(|(loaded, _)| loaded);
    let (name, mut provider) = crate::plan::author::provider(&args.provider, args.api_key_env.as_deref(), template)?;
    if args.timeout.is_some() {
        provider.timeout = args.timeout;
    }
    let key = crate::plan::author::api_key(&name, &provider)?;
    let timeout = provider.timeout.map_or(model::DEFAULT_TIMEOUT, |t| t.to_std());
    let endpoint = Endpoint::for_provider(&name, &provider, key.clone()).map_err(|error| anyhow::anyhow!("{error}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut report = Report {
        provider: name.clone(),
        base_url: provider.base_url.clone(),
        reachable: true,
        error: None,
        served: None,
        models: Vec::new(),
    };
    let catalog = match runtime.block_on(catalog::list(&name, &provider.base_url, key.as_deref(), timeout)) {
        Ok(catalog) => {
            report.served = Some(catalog.models.iter().map(|m| m.id.clone()).collect());
            catalog
        }
        Err(error @ (LlmError::Connect { .. } | LlmError::Timeout { .. })) => {
            report.reachable = false;
            report.error = Some(endpoint.redactor.apply(&error.to_string()));
            return finish(&report, args.format);
        }
        Err(error) => {
            report.error =
                Some(format!("the server does not list its models: {}", endpoint.redactor.apply(&error.to_string())));
            Catalog::default()
        }
    };
    let mut models = args.models.clone();
    if models.is_empty() {
        models.extend(provider.model.clone());
    }
    if models.is_empty() && catalog.models.len() == 1 {
        models.push(catalog.models[0].id.clone());
    }
    for model in models {
        let window = crate::plan::author::known_window(&catalog, &provider, &model)
            .map(|w| ContextWindow { tokens: w.tokens, from: w.learnt_from });
        // A server may echo what it was sent; the key never reaches the report.
        let redact = |verdict: Verdict| Verdict { detail: endpoint.redactor.apply(&verdict.detail), ..verdict };
        let tool_calls = redact(runtime.block_on(tools(&endpoint, &model)));
        let json_mode = redact(runtime.block_on(json_mode(&endpoint, &model)));
        let schema_dialects: Vec<(SchemaDialect, Verdict)> = SchemaDialect::ALL
            .into_iter()
            .filter(|dialect| *dialect != SchemaDialect::None)
            .map(|dialect| (dialect, redact(runtime.block_on(schema_dialect(&endpoint, &model, dialect)))))
            .collect();
        report.models.push(Tried {
            listed: report.served.as_ref().map(|served| served.contains(&model)),
            model,
            context_window: window,
            tool_calls,
            json_mode,
            schema_dialect: recommended(&schema_dialects),
            schema_dialects,
        });
    }
    finish(&report, args.format)
}

/// Prints the report; the exit code says whether the server could be reached.
fn finish(report: &Report, format: Format) -> anyhow::Result<u8> {
    match format {
        Format::Json => print(&(serde_json::to_string_pretty(report).context("cannot encode the report")? + "\n"))?,
        Format::Human if !report.reachable => {}
        Format::Human => print(&human(report))?,
    }
    if report.reachable {
        return Ok(0);
    }
    eprintln!(
        "error: {}\nstart the server, or check the base URL of `{}`",
        report.error.as_deref().unwrap_or("the server does not answer"),
        report.provider
    );
    Ok(EXIT_UNREACHABLE)
}

/// The report for people.
fn human(report: &Report) -> String {
    let mut out = if report.provider == report.base_url {
        format!("server {}\n", report.base_url)
    } else {
        format!("server {} (provider `{}`)\n", report.base_url, report.provider)
    };
    match &report.served {
        Some(served) if served.is_empty() => out.push_str("serves: no models listed\n"),
        Some(served) => out.push_str(&format!("serves: {}\n", served.join(", "))),
        None => out.push_str(&format!("serves: unknown ({})\n", report.error.as_deref().unwrap_or("not listed"))),
    }
    if report.models.is_empty() {
        out.push_str("name a model with --model to try tool calls and JSON mode\n");
    }
    for tried in &report.models {
        let listed = if tried.listed == Some(false) { " (not listed by the server)" } else { "" };
        out.push_str(&format!("{}{listed}\n", tried.model));
        let window = match &tried.context_window {
            Some(window) => format!("{} tokens ({})", window.tokens, window.from),
            None => format!(
                "unknown: the server does not say; set the provider's context_window (runner plan assumes {})",
                planner::author::DEFAULT_CONTEXT_WINDOW
            ),
        };
        out.push_str(&format!("  context window: {window}\n"));
        let features =
            [("tool calls work".to_owned(), &tried.tool_calls), ("JSON mode works".to_owned(), &tried.json_mode)];
        let dialects = tried
            .schema_dialects
            .iter()
            .map(|(dialect, verdict)| (format!("schema dialect {}", dialect.as_str()), verdict));
        for (what, verdict) in features.into_iter().chain(dialects) {
            let works = if verdict.works { "yes" } else { "NO" };
            out.push_str(&format!("  {what}: {works}: {}\n", verdict.detail));
        }
        out.push_str(&format!("  recommended schema_dialect: {}\n", tried.schema_dialect.as_str()));
    }
    out
}

/// The longest answer a probe asks for: a tool call or a small JSON object fits, and a model
/// that rambles instead is cut short rather than left to fill its window.
const PROBE_MAX_TOKENS: u32 = 96;

/// Asks `model` to call a tool and says whether it did.
async fn tools(endpoint: &Endpoint, model: &str) -> Verdict {
    let tool = ToolDefinition {
        kind: "function",
        function: FunctionDefinition {
            name: TOOL.to_owned(),
            description: "Reports a number.".to_owned(),
            parameters: json!({"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}),
        },
    };
    let messages = [Message::User { content: format!("Call the {TOOL} tool with the number 7.") }];
    let request = ChatRequest {
        model,
        messages: &messages,
        tools: std::slice::from_ref(&tool),
        tool_choice: Some(manifest::plan::ToolChoice::Auto.as_str()),
        response_format: None,
        format: None,
    };
    let response = match ask(endpoint, &request).await {
        Ok(response) => response,
        Err(failed) => return failed,
    };
    let message = response.choices.into_iter().next().map(|choice| choice.message);
    let calls = message.as_ref().map(|m| m.tool_calls.as_slice()).unwrap_or_default();
    let text = message.as_ref().and_then(|m| m.content.as_deref()).unwrap_or("");
    match calls.iter().find(|call| call.function.name == TOOL) {
        Some(call) => match serde_json::from_str::<Value>(&call.function.arguments) {
            Ok(Value::Object(_)) => {
                Verdict::new(true, format!("called `{TOOL}` with {}", quote(&call.function.arguments)))
            }
            _ => Verdict::new(
                false,
                format!(
                    "called `{TOOL}` with arguments that are not a JSON object: {}",
                    quote(&call.function.arguments)
                ),
            ),
        },
        None if !calls.is_empty() => {
            let names: Vec<&str> = calls.iter().map(|call| call.function.name.as_str()).collect();
            Verdict::new(false, format!("called {} instead of `{TOOL}`", names.join(", ")))
        }
        None => Verdict::new(
            false,
            format!("answered in text instead of calling the tool (the server may drop tools): {}", quote(text)),
        ),
    }
}

/// Asks `model` for a JSON object in JSON mode and says whether the answer is one.
async fn json_mode(endpoint: &Endpoint, model: &str) -> Verdict {
    let messages = [
        Message::System { content: "Answer with one JSON object and nothing else.".to_owned() },
        Message::User {
            content: "Give a JSON object with the key \"answer\" and the number 7 as its value.".to_owned(),
        },
    ];
    let request = ChatRequest {
        model,
        messages: &messages,
        tools: &[],
        tool_choice: None,
        response_format: Some(json!({"type": "json_object"})),
        format: None,
    };
    let response = match ask(endpoint, &request).await {
        Ok(response) => response,
        Err(failed) => return failed,
    };
    let text = response.choices.into_iter().next().and_then(|choice| choice.message.content).unwrap_or_default();
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Object(_)) => Verdict::new(true, format!("answered {}", quote(&text))),
        _ => Verdict::new(false, format!("the answer is not a JSON object: {}", quote(&text))),
    }
}

/// The colours the probe's schema allows: words a model asked for "red" does not give by chance.
const COLOURS: [&str; 2] = ["vermilion", "chartreuse"];

/// The schema each dialect is asked to hold an answer to; the question asks for an answer that
/// breaks it (`red`, `1`), so only a server that holds the answer to it answers one that conforms.
fn probe_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": COLOURS},
            "count": {"type": "integer", "minimum": 3, "maximum": 9},
        },
        "required": ["colour", "count"],
        "additionalProperties": false,
    })
}

/// The probe's schema without its integer bounds, which some servers' grammars leave out
/// (llama-cpp-python holds keys, types and enums, not `minimum` and `maximum`).
fn unbounded_schema() -> Value {
    let mut schema = probe_schema();
    if let Some(count) = schema.pointer_mut("/properties/count").and_then(Value::as_object_mut) {
        count.remove("minimum");
        count.remove("maximum");
    }
    schema
}

/// Asks `model` for an answer held to [`probe_schema`] in `dialect`, and says whether the
/// answer conforms: the status code alone proves nothing, as some servers accept a schema and
/// ignore it.
async fn schema_dialect(endpoint: &Endpoint, model: &str, dialect: SchemaDialect) -> Verdict {
    let schema = probe_schema();
    let messages = [
        Message::System { content: "Answer with one JSON object and nothing else.".to_owned() },
        Message::User {
            content: "Give a JSON object with the key \"colour\" set to \"red\" and the key \"count\" set to 1."
                .to_owned(),
        },
    ];
    let constraint = Constraint::new(dialect, "probe", &schema);
    let request = ChatRequest {
        model,
        messages: &messages,
        tools: &[],
        tool_choice: None,
        response_format: constraint.response_format,
        format: constraint.format,
    };
    let response = match ask(endpoint, &request).await {
        Ok(response) => response,
        Err(failed) => return failed,
    };
    let text = response.choices.into_iter().next().and_then(|choice| choice.message.content).unwrap_or_default();
    let Ok(answer) = serde_json::from_str::<Value>(text.trim()) else {
        return Verdict::new(false, format!("accepted the schema but the answer is not JSON: {}", quote(&text)));
    };
    if jsonschema::is_valid(&schema, &answer) {
        return Verdict::new(true, format!("the answer holds to the schema: {}", quote(&text)));
    }
    if jsonschema::is_valid(&unbounded_schema(), &answer) {
        return Verdict {
            works: true,
            detail: format!(
                "the answer holds to the schema's keys, types and enum but not its integer bounds: {}",
                quote(&text)
            ),
            whole: false,
        };
    }
    Verdict::new(false, format!("accepted the schema but the answer ignores it: {}", quote(&text)))
}

/// The dialect to use: the first that held the answer to the whole schema, else the first that
/// held it in part, else `none` (JSON mode).
fn recommended(verdicts: &[(SchemaDialect, Verdict)]) -> SchemaDialect {
    let first = |holds: fn(&Verdict) -> bool| verdicts.iter().find(|(_, verdict)| holds(verdict)).map(|(d, _)| *d);
    first(|verdict| verdict.whole).or_else(|| first(|verdict| verdict.works)).unwrap_or(SchemaDialect::None)
}

/// One request at temperature 0 with a short answer; a failed one is a verdict saying why.
async fn ask(endpoint: &Endpoint, request: &ChatRequest<'_>) -> Result<ChatResponse, Verdict> {
    let sampling = Sampling { temperature: Some(0.0), max_tokens: Some(PROBE_MAX_TOKENS), seed: None };
    endpoint.complete_with(request, sampling).await.map_err(|error| {
        Verdict::new(false, format!("the request failed: {}", endpoint.redactor.apply(&error.to_string())))
    })
}

/// An answer on one line, cut to a readable length.
fn quote(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() { "(nothing)".to_owned() } else { format!("`{}`", excerpt(&line, QUOTE)) }
}
