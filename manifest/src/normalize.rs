//! From the spanned tree to a normalised [`Plan`], in either form.

use std::collections::{BTreeMap, HashSet};

use crate::diagnostic::{Diagnostic, Problem};
use crate::plan::{
    Action, Agent, At, Attachment, Complexity, ControlLogic, DEFAULT_AGENT, DEFAULT_MAX_OUTPUT_BYTES, FailurePolicy,
    Form, Generation, GroupLimit, MissionAnalysis, MockResponse, Plan, Provider, RetryOn, Runtime, Strategy, Task,
    TaskKind, Tool, ToolChoice, Verification,
};
use crate::read::{Entry, Field, Fields, Foreign, Reader, aliased, bare, field, scalar_text};
use crate::source::{Loc, join_index, join_key};
use crate::template;
use crate::tree::{Node, Value};

/// The line that starts the dependency outputs appended to a bare-form task's input.
pub const DEPENDENCY_OUTPUTS: &str = "Results of the tasks this one depends on:";

/// The turn limit of the built-in `default` agent of bare-form plans.
pub const BUILT_IN_MAX_TURNS: u32 = 10;

/// The only `apiVersion` this loader reads.
pub const API_VERSION: &str = "runner/v1";

/// The tokenizer names a provider may give (the engine counts tokens with these).
pub const TOKENIZERS: [&str; 4] = ["o200k_base", "o200k", "cl100k_base", "cl100k"];

const ENVELOPE: &[Field] = &[field("apiVersion"), field("kind"), field("metadata"), field("spec")];
const METADATA: &[Field] = &[field("name"), field("description"), field("labels")];
const SPEC: &[Field] = &[
    field("mission"),
    field("mission_analysis"),
    field("providers"),
    field("tools"),
    aliased("agent_definitions", &["agents", "workers"]),
    aliased("workflow", &["tasks", "steps", "phases"]),
    field("control_logic"),
    bare("plan", &[], "put `workflow` and `agent_definitions` directly in `spec`"),
];
const NESTED_PLAN: &[Field] =
    &[aliased("agent_definitions", &["agents", "workers"]), aliased("workflow", &["tasks", "steps", "phases"])];
const MISSION_ANALYSIS: &[Field] =
    &[field("estimated_complexity"), field("critical_path"), field("required_capabilities")];
const PROVIDER: &[Field] = &[
    field("kind"),
    field("base_url"),
    field("api_key_env"),
    field("model"),
    field("context_window"),
    field("max_concurrency"),
    field("requests_per_minute"),
    field("tokenizer"),
    field("timeout"),
    field("idle_timeout"),
    field("stream"),
    field("max_tokens"),
    field("temperature"),
    field("seed"),
];
const TOOL: &[Field] =
    &[field("description"), field("command"), field("input_schema"), field("timeout"), field("destructive")];
const AGENT: &[Field] = &[
    field("runtime"),
    field("provider"),
    field("model"),
    aliased("system_prompt", &["prompt", "description", "role"]),
    aliased("tools", &["capabilities"]),
    field("reliability_weight"),
    field("max_turns"),
    field("tool_choice"),
    field("max_tokens"),
    field("temperature"),
    field("seed"),
    field("timeout"),
    field("command"),
    field("max_output_bytes"),
    field("latency"),
    field("default"),
    field("responses"),
    field("url"),
    field("api_key_env"),
    field("headers_env"),
];
const TASK: &[Field] = &[
    aliased("id", &["step_id", "name"]),
    field("type"),
    aliased("agent", &["worker", "assigned_to"]),
    aliased("input", &["query", "action", "description"]),
    field("prompt"),
    aliased("depends_on", &["requires", "after", "dependencies"]),
    field("inputs"),
    field("parallel_group"),
    field("verification"),
    field("on_failure"),
    field("critical"),
    field("timeout"),
    field("attachments"),
    field("max_output_tokens"),
    // A second way to say `on_failure: retry`, read only from plans LLMs wrote.
    bare("max_retries", &["retries"], "write `on_failure: {action: retry, max_attempts: N}`"),
];
const PHASE: &[Field] = &[
    aliased("id", &["step_id", "name"]),
    aliased("tasks", &["steps"]),
    aliased("depends_on", &["requires", "after", "dependencies"]),
];
const FOREIGN_TASK: &[Foreign] = &[
    Foreign {
        name: "signature",
        what: "`signature` (a PTC-Lisp output signature)",
        instead: "to require fields in the output, add `verification: {type: schema_check, schema: ...}`",
    },
    Foreign {
        name: "output_signature",
        what: "`output_signature` (a PTC-Lisp output signature)",
        instead: "to require fields in the output, add `verification: {type: schema_check, schema: ...}`",
    },
    Foreign {
        name: "output",
        what: "`output` (a PTC-Lisp output mode)",
        instead: "outputs are text; JSON outputs are read as JSON by templates",
    },
    Foreign {
        name: "quality_gate",
        what: "`quality_gate`",
        instead: "use `verification: {type: llm_reviewer, agent: ..., criteria: ...}`",
    },
    Foreign {
        name: "on_verification_failure",
        what: "`on_verification_failure`",
        instead: "a failed verification is a failed attempt, handled by `on_failure`",
    },
];
const FAILURE: &[Field] =
    &[field("action"), field("max_attempts"), field("backoff"), field("max_backoff"), field("then"), field("retry_on")];
const CONTROL: &[Field] = &[
    field("strategy"),
    field("max_concurrency"),
    field("parallel_groups"),
    field("max_turns_per_phase"),
    field("replan_on_empty_result"),
    field("max_replans"),
    field("planner"),
    field("compactor"),
    field("token_budget"),
    field("context_budget"),
    field("summary_budget"),
    field("error_char_limit"),
    field("allow_clarification"),
    field("synthesis_gates"),
];
const GATE: &[Field] = &[field("id"), field("after_tasks"), field("agent"), field("max_output_tokens")];
const GROUP: &[Field] = &[field("max_concurrency")];
const VERIFICATION: &[Field] = &[field("type"), field("schema"), field("agent"), field("criteria"), field("command")];
const ATTACHMENT: &[Field] = &[field("link"), field("file")];

const TASK_KINDS: &[(&str, TaskKind)] =
    &[("task", TaskKind::Task), ("synthesis_gate", TaskKind::SynthesisGate), ("human_review", TaskKind::HumanReview)];
const TASK_KIND_SYNONYMS: &[(&str, &str)] = &[
    ("gate", "synthesis_gate"),
    ("synthesis", "synthesis_gate"),
    ("compress", "synthesis_gate"),
    ("summarize", "synthesis_gate"),
    ("review", "human_review"),
    ("approval", "human_review"),
    ("human_approval", "human_review"),
    ("manual", "human_review"),
];
const ACTIONS: &[(&str, Action)] =
    &[("retry", Action::Retry), ("skip", Action::Skip), ("replan", Action::Replan), ("fail", Action::Fail)];
const ACTION_SYNONYMS: &[(&str, &str)] = &[("stop", "fail")];
const RETRY_ON: &[(&str, RetryOn)] = &[("any", RetryOn::Any), ("transient", RetryOn::Transient)];

/// The field names of every mapping in the enveloped form, for the schema drift test.
#[cfg(test)]
pub(crate) fn field_lists() -> Vec<(&'static str, Vec<&'static str>)> {
    let canonical = |fields: &[Field]| fields.iter().filter(|f| f.bare_only.is_none()).map(|f| f.name).collect();
    vec![
        ("Manifest", canonical(ENVELOPE)),
        ("Metadata", canonical(METADATA)),
        ("Spec", canonical(SPEC)),
        ("MissionAnalysis", canonical(MISSION_ANALYSIS)),
        ("Provider", canonical(PROVIDER)),
        ("Tool", canonical(TOOL)),
        ("Agent", canonical(AGENT)),
        ("Task", canonical(TASK)),
        ("FailurePolicyMap", canonical(FAILURE)),
        ("ControlLogic", canonical(CONTROL)),
        ("SynthesisGate", canonical(GATE)),
        ("GroupLimit", canonical(GROUP)),
        ("Verification", canonical(VERIFICATION)),
        ("Attachment", canonical(ATTACHMENT)),
    ]
}

/// Which form a document is in: the envelope's keys decide.
pub(crate) fn form_of(root: &Node) -> Form {
    let Value::Map(entries) = &root.value else { return Form::Enveloped };
    let enveloped = entries.iter().any(
        |(k, _)| matches!(&k.value, Value::Str(s) if matches!(s.as_str(), "apiVersion" | "kind" | "metadata" | "spec")),
    );
    if enveloped { Form::Enveloped } else { Form::Bare }
}

/// Normalises a document; the plan is returned even when diagnostics hold errors, so that
/// validation can report everything in one pass.
pub(crate) fn normalize(root: &Node, stem: &str, reader: &mut Reader) -> Option<Plan> {
    let mut plan = Plan { form: reader.form, ..Plan::default() };
    let spec = match reader.form {
        Form::Enveloped => {
            let top = reader.fields(root, "", "the manifest", ENVELOPE, &[])?;
            check_envelope(reader, &top);
            if let Some((metadata, path)) = reader.require(&top, "metadata", "the manifest") {
                read_metadata(reader, metadata, path, &mut plan);
            }
            let (spec, path) = reader.require(&top, "spec", "the manifest")?;
            reader.fields(spec.value, path, "spec", SPEC, &[])?
        }
        Form::Bare => {
            plan.name = stem.to_owned();
            if !matches!(root.value, Value::Map(_)) {
                reader.wrong_type(root, "", "a plan", "a mapping with a workflow");
                return None;
            }
            reader.fields(root, "", "the plan", SPEC, &[])?
        }
    };
    read_spec(reader, &spec, &mut plan);
    Some(plan)
}

fn check_envelope(reader: &mut Reader, top: &Fields<'_>) {
    for (name, expected) in [("apiVersion", API_VERSION), ("kind", "Plan")] {
        let Some((entry, path)) = reader.require(top, name, "the manifest") else { continue };
        let Some(value) = reader.string(entry, path, name) else { continue };
        if value.value != expected {
            let field = if name == "kind" { "kind" } else { "apiVersion" };
            reader.push(
                Diagnostic::error(
                    Problem::UnsupportedVersion { field, found: value.value.clone(), expected },
                    value.loc,
                )
                .label("unsupported")
                .help(format!("write `{name}: {expected}`")),
            );
        }
    }
}

fn read_metadata(reader: &mut Reader, entry: Entry<'_>, path: &str, plan: &mut Plan) {
    let Some(meta) = reader.fields(entry.value, path, "metadata", METADATA, &[]) else { return };
    let meta = meta.owned_by(&Loc::new(entry.key.span, path));
    if let Some((entry, path)) = reader.require(&meta, "name", "metadata")
        && let Some(name) = reader.string(entry, path, "metadata.name")
    {
        plan.name = name.value;
    }
    if let Some((entry, path)) = meta.get("description") {
        plan.description = reader.string(entry, path, "metadata.description").map(|d| d.value);
    }
    if let Some((entry, path)) = meta.get("labels") {
        for (key, value, item_path) in reader.named(entry, path, "labels") {
            if let Some(text) = reader.string(Entry { key: value, value }, &item_path, "a label") {
                plan.labels.insert(key.value, text.value);
            }
        }
    }
}

fn read_spec(reader: &mut Reader, spec: &Fields<'_>, plan: &mut Plan) {
    if let Some((entry, path)) = spec.get("mission") {
        plan.mission = reader.string(entry, path, "mission").map(|m| m.value);
    }
    if let Some((entry, path)) = spec.get("mission_analysis") {
        plan.mission_analysis = read_mission_analysis(reader, entry.value, path);
    }
    if let Some((entry, path)) = spec.get("providers") {
        for (name, node, item_path) in reader.named(entry, path, "providers") {
            if let Some(provider) = read_provider(reader, node, &item_path, &name) {
                plan.providers.insert(name.value, provider);
            }
        }
    }
    if let Some((entry, path)) = spec.get("tools") {
        for (name, node, item_path) in reader.named(entry, path, "tools") {
            if let Some(tool) = read_tool(reader, node, &item_path, &name) {
                plan.tools.insert(name.value, tool);
            }
        }
    }
    let nested = spec.get("plan").and_then(|(entry, path)| reader.fields(entry.value, path, "plan", NESTED_PLAN, &[]));
    let agents = spec.get("agent_definitions").or_else(|| nested.as_ref().and_then(|n| n.get("agent_definitions")));
    if let Some((entry, path)) = agents {
        for (name, node, item_path) in reader.named(entry, path, "agent_definitions") {
            if let Some(agent) = read_agent(reader, node, &item_path, &name) {
                plan.agents.insert(name.value, agent);
            }
        }
    }
    let workflow = spec.get("workflow").or_else(|| nested.as_ref().and_then(|n| n.get("workflow")));
    match workflow {
        Some((entry, path)) => plan.tasks = read_workflow(reader, entry.value, path),
        None => {
            let at = nested.as_ref().map_or(spec.loc.clone(), |n| n.loc.clone());
            reader.push(
                Diagnostic::error(Problem::EmptyWorkflow, at)
                    .label("no `workflow` here")
                    .help("add `workflow:` with a list of tasks"),
            );
        }
    }
    let mut gates = Vec::new();
    if let Some((entry, path)) = spec.get("control_logic") {
        plan.control = read_control(reader, entry.value, path, &mut gates);
    }
    add_gates(plan, gates);
    if plan.control.strategy == Strategy::Sequential {
        chain_in_list_order(&mut plan.tasks);
    }
    if reader.form == Form::Bare {
        for task in &mut plan.tasks {
            append_dependency_outputs(reader, task);
        }
    }
    if reader.form == Form::Bare {
        add_built_in_agent(plan);
    }
}

/// Bare-form plans may leave a task's agent out: when one does and the plan defines no
/// `default` agent, the built-in one (an llm agent on the `default` provider) is added.
pub(crate) fn add_built_in_agent(plan: &mut Plan) {
    if !plan.agents.contains_key(DEFAULT_AGENT) {
        let uses_default = plan.tasks.iter().any(|t| plan.agent_of(t) == Some(DEFAULT_AGENT));
        if uses_default {
            let runtime = Runtime::Llm {
                provider: None,
                model: None,
                tools: Vec::new(),
                max_turns: Some(BUILT_IN_MAX_TURNS),
                tool_choice: None,
                generation: Generation::default(),
            };
            plan.agents.insert(DEFAULT_AGENT.into(), Agent { runtime, ..Agent::default() });
        }
    }
}

fn read_mission_analysis(reader: &mut Reader, node: &Node, path: &str) -> Option<MissionAnalysis> {
    let fields = reader.fields(node, path, "mission_analysis", MISSION_ANALYSIS, &[])?;
    let mut analysis = MissionAnalysis::default();
    if let Some((entry, path)) = fields.get("estimated_complexity") {
        analysis.estimated_complexity = reader.word(
            entry,
            path,
            "estimated_complexity",
            &[
                ("trivial", Complexity::Trivial),
                ("low", Complexity::Low),
                ("medium", Complexity::Medium),
                ("high", Complexity::High),
            ],
            &[],
        );
    }
    if let Some((entry, path)) = fields.get("critical_path") {
        analysis.critical_path = reader.strings(entry, path, "a task id");
    }
    if let Some((entry, path)) = fields.get("required_capabilities") {
        analysis.required_capabilities =
            reader.strings(entry, path, "a capability").into_iter().map(|c| c.value).collect();
    }
    Some(analysis)
}

fn read_provider(reader: &mut Reader, node: &Node, path: &str, name: &At<String>) -> Option<Provider> {
    let context = format!("provider `{}`", name.value);
    let fields = reader.fields(node, path, &context, PROVIDER, &[])?.owned_by(&name.loc);
    let mut provider = Provider { kind: "openai".into(), loc: name.loc.clone(), ..Provider::default() };
    if let Some((entry, path)) = fields.get("kind") {
        reader.word(entry, path, "provider kind", &[("openai", ())], &[]);
    }
    if let Some((entry, path)) = reader.require(&fields, "base_url", &context)
        && let Some(url) = reader.string(entry, path, "base_url")
    {
        if !(url.value.starts_with("http://") || url.value.starts_with("https://")) {
            reader.invalid(entry.value, path, "base_url", "must start with http:// or https://");
        }
        provider.base_url = url.value;
    }
    if let Some((entry, path)) = fields.get("api_key_env") {
        provider.api_key_env = reader.string(entry, path, "api_key_env");
    }
    if let Some((entry, path)) = fields.get("model") {
        provider.model = reader.string(entry, path, "model").map(|v| v.value);
    }
    if let Some((entry, path)) = fields.get("context_window") {
        provider.context_window = reader.integer(entry, path, "context_window", 1, u64::MAX >> 1);
    }
    if let Some((entry, path)) = fields.get("max_concurrency") {
        provider.max_concurrency = reader.count(entry, path, "max_concurrency", 1);
    }
    if let Some((entry, path)) = fields.get("requests_per_minute") {
        provider.requests_per_minute = reader.count(entry, path, "requests_per_minute", 1);
    }
    if let Some((entry, path)) = fields.get("tokenizer") {
        provider.tokenizer = reader.string(entry, path, "tokenizer").map(|v| v.value);
        if provider.tokenizer.as_deref().is_some_and(|name| !TOKENIZERS.contains(&name)) {
            reader.invalid(entry.value, path, "tokenizer", "the tokenizers are `o200k_base` and `cl100k_base`");
            provider.tokenizer = None;
        }
    }
    if let Some((entry, path)) = fields.get("timeout") {
        provider.timeout = reader.duration(entry, path, "timeout");
    }
    if let Some((entry, path)) = fields.get("idle_timeout") {
        provider.idle_timeout = reader.duration(entry, path, "idle_timeout");
    }
    if let Some((entry, path)) = fields.get("stream") {
        provider.stream = reader.boolean(entry, path, "stream");
    }
    provider.generation = read_generation(reader, &fields);
    Some(provider)
}

/// The generation settings a provider or an llm agent sets.
fn read_generation(reader: &mut Reader, fields: &Fields<'_>) -> Generation {
    Generation {
        max_tokens: fields.get("max_tokens").and_then(|(entry, path)| reader.count(entry, path, "max_tokens", 1)),
        temperature: fields
            .get("temperature")
            .and_then(|(entry, path)| reader.number(entry, path, "temperature", 0.0, 2.0)),
        seed: fields.get("seed").and_then(|(entry, path)| reader.integer(entry, path, "seed", 0, u64::MAX >> 1)),
    }
}

fn read_tool(reader: &mut Reader, node: &Node, path: &str, name: &At<String>) -> Option<Tool> {
    let context = format!("tool `{}`", name.value);
    let fields = reader.fields(node, path, &context, TOOL, &[])?.owned_by(&name.loc);
    let mut tool = Tool { loc: name.loc.clone(), ..Tool::default() };
    if let Some((entry, path)) = fields.get("description") {
        tool.description = reader.string(entry, path, "description").map(|d| d.value).unwrap_or_default();
    }
    if let Some((entry, path)) = reader.require(&fields, "command", &context) {
        tool.command = reader.argv(entry, path, "command").unwrap_or_default();
    }
    if let Some((entry, path)) = fields.get("input_schema") {
        tool.input_schema = Some(At::new(reader.json(entry.value), Loc::new(entry.value.span, path)));
    }
    if let Some((entry, path)) = fields.get("timeout") {
        tool.timeout = reader.duration(entry, path, "timeout");
    }
    if let Some((entry, path)) = fields.get("destructive") {
        tool.destructive = reader.boolean(entry, path, "destructive").unwrap_or(false);
    }
    Some(tool)
}

/// The runtimes an agent may name.
const RUNTIMES: &[(&str, &str)] = &[("llm", "llm"), ("command", "command"), ("mock", "mock"), ("http", "http")];

/// Fields that belong to some runtimes only.
const RUNTIME_FIELDS: &[(&str, &[&str])] = &[
    ("provider", &["llm"]),
    ("model", &["llm"]),
    ("system_prompt", &["llm"]),
    ("tools", &["llm"]),
    ("max_turns", &["llm"]),
    ("tool_choice", &["llm"]),
    ("max_tokens", &["llm"]),
    ("temperature", &["llm"]),
    ("seed", &["llm"]),
    ("command", &["command"]),
    ("max_output_bytes", &["command", "http"]),
    ("latency", &["mock"]),
    ("default", &["mock"]),
    ("responses", &["mock"]),
    ("url", &["http"]),
    ("api_key_env", &["http"]),
    ("headers_env", &["http"]),
];

fn read_agent(reader: &mut Reader, node: &Node, path: &str, name: &At<String>) -> Option<Agent> {
    let context = format!("agent `{}`", name.value);
    let mut agent = Agent { loc: name.loc.clone(), ..Agent::default() };
    if reader.form == Form::Bare
        && let Value::Str(prompt) = &node.value
    {
        agent.system_prompt = Some(prompt.clone());
        return Some(agent);
    }
    let fields = reader.fields(node, path, &context, AGENT, &[])?.owned_by(&name.loc);
    let runtime = match fields.get("runtime") {
        Some((entry, path)) => reader.word(entry, path, "runtime", RUNTIMES, &[])?,
        None => "llm",
    };
    for (field, owners) in RUNTIME_FIELDS {
        if !owners.contains(&runtime)
            && let Some((entry, path)) = fields.get(field)
        {
            let owner = owners.join("` or `");
            reader.push(
                Diagnostic::error(
                    Problem::UnknownField { field: (*field).into(), context: format!("a `{runtime}` agent") },
                    Loc::new(entry.key.span, path),
                )
                .label(format!("only `{owner}` agents have this"))
                .help(format!("remove it, or set `runtime: {}`", owners[0])),
            );
        }
    }
    if let Some((entry, path)) = fields.get("system_prompt") {
        agent.system_prompt = reader.string(entry, path, "system_prompt").map(|p| p.value);
    }
    if let Some((entry, path)) = fields.get("reliability_weight") {
        agent.reliability_weight = reader.number(entry, path, "reliability_weight", 0.0, 1.0);
    }
    if let Some((entry, path)) = fields.get("timeout") {
        agent.timeout = reader.duration(entry, path, "timeout");
    }
    agent.runtime = match runtime {
        "command" => Runtime::Command {
            command: reader
                .require(&fields, "command", &context)
                .and_then(|(entry, path)| reader.argv(entry, path, "command"))
                .unwrap_or_default(),
            max_output_bytes: read_max_output_bytes(reader, &fields),
        },
        "http" => read_http(reader, &fields, &context, &name.loc),
        "mock" => Runtime::Mock {
            latency: fields.get("latency").and_then(|(entry, path)| reader.duration(entry, path, "latency")),
            default: fields
                .get("default")
                .and_then(|(entry, path)| reader.string(entry, path, "default"))
                .map_or_else(|| "echo".to_owned(), |d| d.value),
            responses: fields
                .get("responses")
                .map(|(entry, path)| read_responses(reader, entry, path))
                .unwrap_or_default(),
        },
        _ => Runtime::Llm {
            provider: fields.get("provider").and_then(|(entry, path)| reader.string(entry, path, "provider")),
            model: fields.get("model").and_then(|(entry, path)| reader.string(entry, path, "model")).map(|m| m.value),
            tools: fields
                .get("tools")
                .map(|(entry, path)| reader.strings(entry, path, "a tool name"))
                .unwrap_or_default(),
            max_turns: fields.get("max_turns").and_then(|(entry, path)| reader.count(entry, path, "max_turns", 1)),
            tool_choice: fields.get("tool_choice").and_then(|(entry, path)| {
                let words =
                    [("auto", ToolChoice::Auto), ("required", ToolChoice::Required), ("none", ToolChoice::None)];
                reader.word(entry, path, "tool_choice", &words, &[])
            }),
            generation: read_generation(reader, &fields),
        },
    };
    Some(agent)
}

/// The cap on a command's stdout or an http response's body.
fn read_max_output_bytes(reader: &mut Reader, fields: &Fields<'_>) -> u64 {
    fields
        .get("max_output_bytes")
        .and_then(|(entry, path)| reader.integer(entry, path, "max_output_bytes", 1, u64::MAX >> 1))
        .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES)
}

/// The settings of an `http` agent: a required `http(s)://` url, and secrets only by the name of
/// the environment variable that holds them.
fn read_http(reader: &mut Reader, fields: &Fields<'_>, context: &str, loc: &Loc) -> Runtime {
    let mut url = At::new(String::new(), loc.clone());
    if let Some((entry, path)) = reader.require(fields, "url", context)
        && let Some(value) = reader.string(entry, path, "url")
    {
        if !(value.value.starts_with("http://") || value.value.starts_with("https://")) {
            reader.invalid(entry.value, path, "url", "must start with http:// or https://");
        }
        url = value;
    }
    let api_key_env = fields.get("api_key_env").and_then(|(entry, path)| reader.string(entry, path, "api_key_env"));
    let mut headers_env = BTreeMap::new();
    if let Some((entry, path)) = fields.get("headers_env") {
        for (header, node, item_path) in reader.named(entry, path, "headers_env") {
            let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            if header.value.is_empty() || !header.value.bytes().all(valid) {
                let problem = Problem::InvalidValue {
                    what: "a header name".into(),
                    reason: "use letters, digits, `-` and `_` only".into(),
                };
                reader.push(Diagnostic::error(problem, header.loc.clone()).label("invalid"));
                continue;
            }
            if let Some(variable) = reader.string(Entry { key: node, value: node }, &item_path, "headers_env") {
                headers_env.insert(header.value, variable);
            }
        }
    }
    Runtime::Http { url, api_key_env, headers_env, max_output_bytes: read_max_output_bytes(reader, fields) }
}

fn read_responses(reader: &mut Reader, entry: Entry<'_>, path: &str) -> BTreeMap<String, Vec<MockResponse>> {
    let mut responses = BTreeMap::new();
    for (task, node, item_path) in reader.named(entry, path, "responses") {
        let script = match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| read_response(reader, item, &join_index(&item_path, i)))
                .collect(),
            _ => read_response(reader, node, &item_path).into_iter().collect(),
        };
        responses.insert(task.value, script);
    }
    responses
}

fn read_response(reader: &mut Reader, node: &Node, path: &str) -> Option<MockResponse> {
    if let Some(text) = scalar_text(node) {
        return Some(MockResponse::Output(text));
    }
    const KINDS: &[Field] = &[field("output"), field("fail"), field("clarify")];
    let fields = reader.fields(node, path, "a mock response", KINDS, &[])?;
    let mut found = KINDS.iter().filter_map(|k| fields.get(k.name).map(|(entry, path)| (k.name, entry, path)));
    let Some((kind, entry, path)) = found.next() else {
        reader.invalid(node, path, "mock response", "give one of `output`, `fail` or `clarify`");
        return None;
    };
    if found.next().is_some() {
        reader.invalid(node, path, "mock response", "give only one of `output`, `fail` or `clarify`");
        return None;
    }
    let text = reader.string(entry, path, "a mock response")?.value;
    Some(match kind {
        "output" => MockResponse::Output(text),
        "fail" => MockResponse::Fail(text),
        _ => MockResponse::Clarify(text),
    })
}

/// Reads the task list in any of its shapes: a list of tasks, of strings, of phases with
/// nested tasks, or (bare form) a mapping of named phases.
pub(crate) fn read_workflow(reader: &mut Reader, node: &Node, path: &str) -> Vec<Task> {
    let mut tasks = Vec::new();
    match &node.value {
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                read_workflow_item(reader, item, &join_index(path, i), &[], &mut tasks);
            }
        }
        Value::Map(entries) if reader.form == Form::Bare => {
            for (key, phase) in entries {
                let name = scalar_text(key).unwrap_or_default();
                let phase_path = join_key(path, &name);
                match &phase.value {
                    Value::Seq(items) => {
                        for (i, item) in items.iter().enumerate() {
                            read_workflow_item(reader, item, &join_index(&phase_path, i), &[], &mut tasks);
                        }
                    }
                    _ => read_phase(reader, phase, &phase_path, &mut tasks),
                }
            }
        }
        Value::Null => {}
        _ => reader.wrong_type(node, path, "the workflow", "a list of tasks"),
    }
    if tasks.is_empty() {
        reader.push(
            Diagnostic::error(Problem::EmptyWorkflow, Loc::new(node.span, path))
                .label("no tasks")
                .help("add at least one task with an `id`, an `agent` and an `input`"),
        );
    }
    tasks
}

fn is_phase(node: &Node) -> bool {
    let Value::Map(entries) = &node.value else { return false };
    let has = |name: &str| entries.iter().any(|(k, _)| matches!(&k.value, Value::Str(s) if s == name));
    (has("tasks") || has("steps")) && !has("input") && !has("agent")
}

fn read_workflow_item(reader: &mut Reader, item: &Node, path: &str, inherited: &[At<String>], tasks: &mut Vec<Task>) {
    if reader.form == Form::Bare {
        if let Value::Str(text) = &item.value {
            let id = format!("task_{}", tasks.len() + 1);
            let loc = Loc::new(item.span, path);
            reader.push(
                Diagnostic::info(
                    Problem::Alias { written: "a plain string step".into(), canonical: format!("task `{id}`") },
                    loc.clone(),
                )
                .label(format!("read as task `{id}`")),
            );
            tasks.push(Task {
                id: At::new(id, loc.clone()),
                input: Some(At::new(text.clone(), loc.clone())),
                depends_on: inherited.to_vec(),
                loc,
                ..Task::default()
            });
            return;
        }
        if is_phase(item) {
            read_phase(reader, item, path, tasks);
            return;
        }
    }
    if let Some(task) = read_task(reader, item, path, tasks.len() + 1, inherited) {
        tasks.push(task);
    }
}

fn read_phase(reader: &mut Reader, node: &Node, path: &str, tasks: &mut Vec<Task>) {
    let Some(fields) = reader.fields(node, path, "a phase", PHASE, &[]) else { return };
    let depends_on =
        fields.get("depends_on").map(|(entry, path)| reader.strings(entry, path, "a task id")).unwrap_or_default();
    let Some((entry, list_path)) = reader.require(&fields, "tasks", "a phase") else { return };
    let Value::Seq(items) = &entry.value.value else {
        reader.wrong_type(entry.value, list_path, "a phase's tasks", "a list of tasks");
        return;
    };
    for (i, item) in items.iter().enumerate() {
        read_workflow_item(reader, item, &join_index(list_path, i), &depends_on, tasks);
    }
}

fn read_task(reader: &mut Reader, node: &Node, path: &str, position: usize, inherited: &[At<String>]) -> Option<Task> {
    let fields = reader.fields(node, path, "a task", TASK, FOREIGN_TASK)?;
    let mut task = Task { loc: Loc::new(node.span, path), ..Task::default() };
    task.id = match fields.get("id").and_then(|(entry, path)| reader.string(entry, path, "a task id")) {
        Some(id) => id,
        None => {
            if !fields.has("id") && reader.form == Form::Enveloped {
                reader.require(&fields, "id", "a task");
            }
            At::new(format!("task_{position}"), task.loc.clone())
        }
    };
    if let Some((entry, path)) = fields.get("type") {
        task.kind = reader
            .word_or(entry, path, "task type", TASK_KINDS, TASK_KIND_SYNONYMS, Some(("task", TaskKind::Task)))
            .unwrap_or_default();
    }
    if let Some((entry, path)) = fields.get("agent") {
        task.agent = reader.string(entry, path, "agent");
    }
    if let Some((entry, path)) = fields.get("input") {
        task.input = reader.string(entry, path, "input");
    }
    if let Some((entry, path)) = fields.get("prompt") {
        task.prompt = reader.string(entry, path, "prompt");
    }
    if task.kind == TaskKind::HumanReview && task.prompt.is_none() && reader.form == Form::Bare {
        task.prompt = task.input.take();
    }
    task.depends_on = inherited.to_vec();
    if let Some((entry, path)) = fields.get("depends_on") {
        task.depends_on.extend(reader.strings(entry, path, "a task id"));
    }
    if let Some((entry, path)) = fields.get("inputs") {
        task.inputs = reader.strings(entry, path, "a task id");
        if task.kind != TaskKind::SynthesisGate {
            reader.invalid(entry.value, path, "inputs", "only a `synthesis_gate` has `inputs`; use `depends_on`");
        }
        for input in &task.inputs {
            if !task.depends_on.iter().any(|d| d.value == input.value) {
                task.depends_on.push(input.clone());
            }
        }
    }
    if task.kind == TaskKind::SynthesisGate && task.inputs.is_empty() {
        task.inputs = task.depends_on.clone();
    }
    if let Some((entry, path)) = fields.get("parallel_group") {
        task.parallel_group = reader.string(entry, path, "parallel_group");
    }
    if let Some((entry, path)) = fields.get("verification") {
        task.verification = read_verification(reader, entry, path);
    }
    task.on_failure = At::new(FailurePolicy::default(), task.id.loc.clone());
    if let Some((entry, path)) = fields.get("on_failure")
        && let Some(policy) = read_failure(reader, entry.value, path)
    {
        task.on_failure = policy;
    }
    if let Some((entry, path)) = fields.get("max_retries")
        && let Some(retries) = reader.count(entry, path, "max_retries", 0)
        && retries > 0
        && task.on_failure.value.action != Action::Retry
    {
        let then = task.on_failure.value.action;
        let mut policy = FailurePolicy::of(Action::Retry);
        policy.max_attempts = retries.saturating_add(1);
        policy.then = then;
        task.on_failure = At::new(policy, Loc::new(entry.value.span, path));
    }
    // The seed planner treats a task as critical unless told otherwise; a task that may be
    // skipped cannot be critical.
    let bare_default = reader.form == Form::Bare && !task.on_failure.value.can_skip();
    task.critical = match fields.get("critical") {
        Some((entry, path)) => reader.boolean(entry, path, "critical").unwrap_or(bare_default),
        None => bare_default,
    };
    if let Some((entry, path)) = fields.get("timeout") {
        task.timeout = reader.duration(entry, path, "timeout");
    }
    if let Some((entry, path)) = fields.get("attachments") {
        task.attachments = read_attachments(reader, entry.value, path);
    }
    if let Some((entry, path)) = fields.get("max_output_tokens") {
        task.max_output_tokens = reader.count(entry, path, "max_output_tokens", 1);
    }
    if reader.form == Form::Bare {
        rewrite_result_references(reader, &mut task);
    }
    if task.kind == TaskKind::HumanReview
        && task.agent.is_some()
        && let Some((entry, path)) = fields.get("agent")
    {
        reader.invalid(
            entry.value,
            path,
            "agent",
            &format!("task `{}` is a `human_review`: a person does it, not an agent", task.id.value),
        );
    }
    Some(task)
}

/// The bare form's `{{ results.X }}` means `{{ tasks.X.output }}`.
fn rewrite_result_references(reader: &mut Reader, task: &mut Task) {
    for text in [task.input.as_mut(), task.prompt.as_mut()].into_iter().flatten() {
        if let Some(rewritten) = template::rewrite_results(&text.value) {
            reader.push(
                Diagnostic::info(
                    Problem::Alias { written: "{{ results.X }}".into(), canonical: "{{ tasks.X.output }}".into() },
                    text.loc.clone(),
                )
                .label("template rewritten"),
            );
            text.value = rewritten;
        }
    }
}

fn read_verification(reader: &mut Reader, entry: Entry<'_>, path: &str) -> Option<Verification> {
    if reader.form == Form::Bare && matches!(entry.value.value, Value::Str(_)) {
        reader.push(
            Diagnostic::warning(
                Problem::Unsupported { what: "a PTC-Lisp verification predicate".into() },
                Loc::new(entry.value.span, path),
            )
            .label("ignored")
            .help("use `verification: {type: schema_check, schema: ...}` or `{type: command, command: [...]}`"),
        );
        return None;
    }
    let fields = reader.fields(entry.value, path, "a verification", VERIFICATION, &[])?;
    let (kind_entry, kind_path) = reader.require(&fields, "type", "a verification")?;
    let kind = reader.word(
        kind_entry,
        kind_path,
        "verification type",
        &[("schema_check", "schema_check"), ("llm_reviewer", "llm_reviewer"), ("command", "command"), ("none", "none")],
        &[],
    )?;
    let allowed: &[&str] = match kind {
        "schema_check" => &["type", "schema"],
        "llm_reviewer" => &["type", "agent", "criteria"],
        "command" => &["type", "command"],
        _ => &["type"],
    };
    for name in ["schema", "agent", "criteria", "command"] {
        if let Some((extra, extra_path)) = fields.get(name).filter(|_| !allowed.contains(&name)) {
            reader.push(
                Diagnostic::error(
                    Problem::UnknownField { field: name.into(), context: format!("a `{kind}` verification") },
                    Loc::new(extra.key.span, extra_path),
                )
                .label("does not apply here"),
            );
        }
    }
    let context = format!("a `{kind}` verification");
    match kind {
        "schema_check" => {
            let (schema, schema_path) = reader.require(&fields, "schema", &context)?;
            let loc = Loc::new(schema.value.span, schema_path);
            Some(Verification::SchemaCheck { schema: At::new(reader.json(schema.value), loc) })
        }
        "llm_reviewer" => {
            let (agent, agent_path) = reader.require(&fields, "agent", &context)?;
            let agent = reader.string(agent, agent_path, "agent")?;
            let criteria = fields.get("criteria").and_then(|(e, p)| reader.string(e, p, "criteria")).map(|c| c.value);
            Some(Verification::LlmReviewer { agent, criteria })
        }
        "command" => {
            let (command, command_path) = reader.require(&fields, "command", &context)?;
            Some(Verification::Command { command: reader.argv(command, command_path, "command")? })
        }
        _ => None,
    }
}

/// Reads a policy, located at the word that decides what finally happens: the action, or the
/// `then` after retries.
fn read_failure(reader: &mut Reader, node: &Node, path: &str) -> Option<At<FailurePolicy>> {
    if !matches!(node.value, Value::Map(_)) {
        let action = read_action(reader, node, path, "on_failure")?;
        return Some(At::new(FailurePolicy::of(action), Loc::new(node.span, path)));
    }
    let fields = reader.fields(node, path, "on_failure", FAILURE, &[])?;
    let (action_entry, action_path) = reader.require(&fields, "action", "on_failure")?;
    let action = read_action(reader, action_entry.value, action_path, "on_failure.action")?;
    let mut policy = FailurePolicy::of(action);
    let mut loc = Loc::new(action_entry.value.span, action_path);
    for name in ["max_attempts", "backoff", "max_backoff", "then", "retry_on"] {
        if let Some((entry, path)) = fields.get(name).filter(|_| action != Action::Retry) {
            reader.invalid(entry.value, path, name, &format!("`{name}` applies only to `action: retry`"));
        }
    }
    if let Some((entry, path)) = fields.get("max_attempts") {
        policy.max_attempts = reader.count(entry, path, "max_attempts", 1).unwrap_or(policy.max_attempts);
    }
    if let Some((entry, path)) = fields.get("backoff") {
        policy.backoff = reader.duration(entry, path, "backoff").unwrap_or(policy.backoff);
    }
    if let Some((entry, path)) = fields.get("max_backoff") {
        policy.max_backoff = reader.duration(entry, path, "max_backoff").unwrap_or(policy.max_backoff);
    }
    if let Some((entry, path)) = fields.get("retry_on") {
        policy.retry_on = reader.word(entry, path, "retry_on", RETRY_ON, &[]).unwrap_or(policy.retry_on);
    }
    if let Some((entry, path)) = fields.get("then")
        && let Some(then) = read_action(reader, entry.value, path, "on_failure.then")
    {
        if then == Action::Retry {
            reader.invalid(
                entry.value,
                path,
                "then",
                "`then` says what happens after the retries: skip, replan or fail",
            );
        } else {
            policy.then = then;
            loc = Loc::new(entry.value.span, path);
        }
    }
    Some(At::new(policy, loc))
}

fn read_action(reader: &mut Reader, node: &Node, path: &str, what: &str) -> Option<Action> {
    reader.word_or(Entry { key: node, value: node }, path, what, ACTIONS, ACTION_SYNONYMS, Some(("fail", Action::Fail)))
}

fn read_attachments(reader: &mut Reader, node: &Node, path: &str) -> Vec<At<crate::plan::Attachment>> {
    let Value::Seq(items) = &node.value else {
        reader.wrong_type(node, path, "attachments", "a list of `{link: ...}` or `{file: ...}`");
        return Vec::new();
    };
    let mut attachments = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = join_index(path, i);
        let Some(fields) = reader.fields(item, &item_path, "an attachment", ATTACHMENT, &[]) else { continue };
        match (fields.get("link"), fields.get("file")) {
            (Some((entry, path)), None) => {
                if let Some(link) = reader.string(entry, path, "link") {
                    attachments.push(At::new(Attachment::Link(link.value), link.loc));
                }
            }
            (None, Some((entry, path))) => {
                if let Some(file) = reader.string(entry, path, "file") {
                    attachments.push(At::new(Attachment::File(file.value), file.loc));
                }
            }
            _ => reader.invalid(item, &item_path, "attachment", "give exactly one of `link` or `file`"),
        }
    }
    attachments
}

/// A gate written in `control_logic.synthesis_gates`, before it becomes a task.
struct SeedGate {
    id: Option<At<String>>,
    after: Vec<At<String>>,
    agent: Option<At<String>>,
    max_output_tokens: Option<u32>,
    loc: Loc,
}

fn read_control(reader: &mut Reader, node: &Node, path: &str, gates: &mut Vec<SeedGate>) -> ControlLogic {
    let mut control = ControlLogic::default();
    let Some(fields) = reader.fields(node, path, "control_logic", CONTROL, &[]) else { return control };
    if let Some((entry, path)) = fields.get("strategy") {
        control.strategy = reader
            .word(
                entry,
                path,
                "strategy",
                &[("eager", Strategy::Eager), ("phased", Strategy::Phased), ("sequential", Strategy::Sequential)],
                &[],
            )
            .unwrap_or_default();
    }
    let count = |reader: &mut Reader, name: &str, min: u32| {
        fields.get(name).and_then(|(entry, path)| reader.count(entry, path, name, min))
    };
    control.max_concurrency = count(reader, "max_concurrency", 1);
    control.max_turns_per_phase = count(reader, "max_turns_per_phase", 1);
    control.max_replans = count(reader, "max_replans", 0).unwrap_or(control.max_replans);
    let big = |reader: &mut Reader, name: &str| {
        fields.get(name).and_then(|(entry, path)| reader.integer(entry, path, name, 1, u64::MAX >> 1))
    };
    control.token_budget = big(reader, "token_budget");
    control.context_budget = big(reader, "context_budget");
    control.summary_budget = big(reader, "summary_budget");
    control.error_char_limit = big(reader, "error_char_limit").unwrap_or(control.error_char_limit);
    if let Some((entry, path)) = fields.get("replan_on_empty_result") {
        control.replan_on_empty_result = reader.boolean(entry, path, "replan_on_empty_result").unwrap_or(false);
    }
    if let Some((entry, path)) = fields.get("allow_clarification") {
        control.allow_clarification = reader.boolean(entry, path, "allow_clarification").unwrap_or(true);
    }
    if let Some((entry, path)) = fields.get("planner") {
        control.planner = reader.string(entry, path, "planner");
    }
    if let Some((entry, path)) = fields.get("compactor") {
        control.compactor = reader.string(entry, path, "compactor");
    }
    if let Some((entry, path)) = fields.get("parallel_groups") {
        for (name, node, item_path) in reader.named(entry, path, "parallel_groups") {
            let context = format!("parallel group `{}`", name.value);
            let Some(group) = reader.fields(node, &item_path, &context, GROUP, &[]) else { continue };
            let max_concurrency =
                group.get("max_concurrency").and_then(|(e, p)| reader.count(e, p, "max_concurrency", 1));
            control.parallel_groups.insert(name.value, GroupLimit { max_concurrency });
        }
    }
    if let Some((entry, path)) = fields.get("synthesis_gates") {
        match &entry.value.value {
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    let item_path = join_index(path, i);
                    let Some(gate) = reader.fields(item, &item_path, "a synthesis gate", GATE, &[]) else { continue };
                    gates.push(SeedGate {
                        id: gate.get("id").and_then(|(e, p)| reader.string(e, p, "id")),
                        after: reader
                            .require(&gate, "after_tasks", "a synthesis gate")
                            .map(|(e, p)| reader.strings(e, p, "a task id"))
                            .unwrap_or_default(),
                        agent: gate.get("agent").and_then(|(e, p)| reader.string(e, p, "agent")),
                        max_output_tokens: gate
                            .get("max_output_tokens")
                            .and_then(|(e, p)| reader.count(e, p, "max_output_tokens", 1)),
                        loc: Loc::new(item.span, item_path),
                    });
                }
            }
            _ => reader.wrong_type(entry.value, path, "synthesis_gates", "a list of gates"),
        }
    }
    control
}

/// Turns seed-form gates into gate tasks. A task that depended on every input of a gate
/// now depends on the gate instead, so it reads the condensed output, not the raw inputs.
fn add_gates(plan: &mut Plan, gates: Vec<SeedGate>) {
    let mut taken: HashSet<String> = plan.tasks.iter().map(|t| t.id.value.clone()).collect();
    for (n, gate) in gates.into_iter().enumerate() {
        let id = gate.id.unwrap_or_else(|| {
            let mut candidate = format!("synthesis_gate_{}", n + 1);
            while taken.contains(&candidate) {
                candidate.push('_');
            }
            At::new(candidate, gate.loc.clone())
        });
        taken.insert(id.value.clone());
        let after: HashSet<&str> = gate.after.iter().map(|a| a.value.as_str()).collect();
        if !after.is_empty() {
            for task in &mut plan.tasks {
                let reads_all = after.iter().all(|a| task.depends_on.iter().any(|d| d.value == *a));
                if reads_all && !after.contains(task.id.value.as_str()) {
                    task.depends_on.retain(|d| !after.contains(d.value.as_str()));
                    task.depends_on.push(At::new(id.value.clone(), gate.loc.clone()));
                }
            }
        }
        plan.tasks.push(Task {
            id,
            kind: TaskKind::SynthesisGate,
            agent: gate.agent,
            depends_on: gate.after.clone(),
            inputs: gate.after,
            max_output_tokens: gate.max_output_tokens,
            on_failure: At::new(FailurePolicy::default(), gate.loc.clone()),
            loc: gate.loc,
            ..Task::default()
        });
    }
}

/// `strategy: sequential` runs the list as a chain: each task waits for the one before it.
pub(crate) fn chain_in_list_order(tasks: &mut [Task]) {
    for i in 1..tasks.len() {
        let previous = tasks[i - 1].id.value.clone();
        if !tasks[i].depends_on.iter().any(|d| d.value == previous) {
            let loc = tasks[i].id.loc.clone();
            tasks[i].depends_on.push(At::new(previous.clone(), loc));
            tasks[i].chained_after = Some(previous);
        }
    }
}

/// Seed-form planners hand every task the results of its dependencies; here outputs flow only
/// through templates, so a bare-form task that reads no upstream output gets them appended.
pub(crate) fn append_dependency_outputs(reader: &mut Reader, task: &mut Task) {
    if task.kind != TaskKind::Task || task.depends_on.is_empty() {
        return;
    }
    let text = task.input.as_ref().map_or("", |input| input.value.as_str());
    let reads_tasks = match template::Templates::default().references(text) {
        Ok(references) => references.iter().any(|r| r.root == "tasks"),
        Err(_) => true,
    };
    if reads_tasks {
        return;
    }
    let mut block = String::from(if text.is_empty() { "" } else { "\n\n" });
    block.push_str(DEPENDENCY_OUTPUTS);
    for dep in &task.depends_on {
        block.push_str(&format!("\n- {}: {{{{ {} }}}}", dep.value, template::output_of(&dep.value)));
    }
    let loc = task.input.as_ref().map_or_else(|| task.loc.clone(), |input| input.loc.clone());
    reader.push(
        Diagnostic::info(Problem::ImplicitInputs { task: task.id.value.clone() }, loc.clone()).label("this input"),
    );
    let input = task.input.get_or_insert_with(|| At::new(String::new(), loc));
    input.value.push_str(&block);
}
