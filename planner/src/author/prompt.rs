//! The author's prompt, versioned by [`PROMPT_VERSION`]: the instructions (with the rules for
//! variables, conditions, maps and steps planned at run time), what the template makes
//! available, the manifest's JSON Schema (without the sub-plan fields, which name files) and
//! two examples (the optional [`Parts`], left out of a prompt too large for the
//! model's context window); and the repair message.

use manifest::Plan;
use manifest::plan::{DEFAULT_MAX_OUTPUT_BYTES, Runtime};
use serde_json::{Map, Value, json};

/// The version of the prompt below; change it whenever the prompt's text changes, so that
/// provenance and per-model reliability can be compared across versions.
pub const PROMPT_VERSION: &str = "author-4";

/// A small research plan: a parallel group, a synthesis gate and a writer.
pub(crate) const RESEARCH_EXAMPLE: &str = include_str!("examples/research.json");
/// A sequential plan: a plain ordered list run as a chain.
pub(crate) const SEQUENTIAL_EXAMPLE: &str = include_str!("examples/sequential.json");
/// A map over a search's results, at most `max_items` of them, and the synthesis gate that
/// combines the item outputs: two tasks of a workflow.
pub(crate) const MAP_EXAMPLE: &str = r#"{"id": "read_source", "agent": "researcher", "depends_on": ["search"], "for_each": "tasks.search.output.results", "max_items": 10, "input": "Summarise {{ item.url }} for {{ vars.audience }}."}, {"id": "combine", "type": "synthesis_gate", "inputs": ["read_source"], "agent": "editor"}"#;
/// A task that runs only when a triage task's output says so.
pub(crate) const WHEN_EXAMPLE: &str = r#"{"id": "fetch_page", "agent": "researcher", "depends_on": ["triage"], "when": "tasks.triage.output.kind == \"web\"", "input": "Fetch the page."}"#;
/// A compound step whose agent writes its plan once the triage has run, at most `max_tasks` tasks.
pub(crate) const EXPAND_EXAMPLE: &str = r#"{"id": "investigate", "type": "expand", "agent": "planner", "depends_on": ["triage"], "max_tasks": 6, "input": "Plan the investigation of: {{ tasks.triage.output }}"}"#;
/// The `spec.vars` the examples read.
pub(crate) const VARS_EXAMPLE: &str = r#"{"audience": "tea buyers"}"#;

/// The optional parts of the system message, from all of them to none, in the order they are
/// left out: the research example, the other example, the schema's descriptions, then the JSON
/// Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parts {
    /// The JSON Schema and both examples.
    All,
    /// The JSON Schema and the sequential example.
    OneExample,
    /// The JSON Schema alone.
    Schema,
    /// The JSON Schema without its descriptions: the fields, their types and their words.
    BareSchema,
    /// None: the rules, the template and a skeleton of the manifest.
    Essentials,
}

impl Parts {
    /// Every choice, largest first.
    pub(crate) const LARGEST_FIRST: [Parts; 5] =
        [Parts::All, Parts::OneExample, Parts::Schema, Parts::BareSchema, Parts::Essentials];

    /// What is left out, for messages; empty for [`Parts::All`].
    pub(crate) fn left_out(self) -> &'static str {
        match self {
            Parts::All => "",
            Parts::OneExample => "the research example",
            Parts::Schema => "both examples",
            Parts::BareSchema => "both examples and the JSON Schema's descriptions",
            Parts::Essentials => "both examples and the JSON Schema",
        }
    }
}

/// The system message: everything but the request itself, with the optional `parts`.
pub(crate) fn system(name: &str, template: Option<&Plan>, parts: Parts) -> String {
    let with_schema = parts != Parts::Essentials;
    let shape = if with_schema {
        " matching the JSON Schema below".to_owned()
    } else {
        " shaped like {\"apiVersion\": \"runner/v1\", \"kind\": \"Plan\", \"metadata\": {\"name\": ...}, \"spec\": \
         {\"mission\": ..., \"agent_definitions\": {\"NAME\": {\"runtime\": ...}}, \"workflow\": [{\"id\": ..., \
         \"agent\": ..., \"input\": ..., \"depends_on\": [...]}]}}"
            .to_owned()
    };
    let mut optional = String::new();
    if with_schema {
        let mut schema = for_authors(manifest::schema::manifest_schema());
        if parts == Parts::BareSchema {
            schema = without_descriptions(&schema);
        }
        let schema = serde_json::to_string(&schema).unwrap_or_default();
        optional.push_str(&format!("\n\n## JSON Schema of the manifest\n{schema}"));
    }
    if parts == Parts::All {
        optional.push_str(&format!(
            "\n\n## Example: research with a parallel group and a synthesis gate\n{RESEARCH_EXAMPLE}"
        ));
    }
    if matches!(parts, Parts::All | Parts::OneExample) {
        let separator = if parts == Parts::All { "\n" } else { "\n\n" };
        optional.push_str(&format!("{separator}## Example: a sequential plan\n{SEQUENTIAL_EXAMPLE}"));
    }
    let available = match template {
        Some(plan) => format!(
            "## Available agents, tools and providers\n\
             Use these agents by name. Copy the definitions you use into `spec` unchanged (leave out the ones \
             you do not use). You may add `runtime: mock` agents for steps no available agent fits, and `llm` \
             agents with their own system_prompt on an available provider. Never define other providers, \
             tools or command agents.\n{}\n\n{}",
            describe(plan),
            serde_json::to_string_pretty(&available_spec(plan)).unwrap_or_default()
        ),
        None => "## Agents\nNo agents are available yet. Define one placeholder agent per role with \
                 `\"runtime\": \"mock\"`, named for the role (researcher, writer, reviewer...); real agents will be \
                 bound to them later. Define no providers, tools, llm agents or command agents."
            .to_owned(),
    };
    let dynamic = dynamic();
    format!(
        "You are the plan author of `runner`, a DAG workflow engine for multi-agent work (prompt {PROMPT_VERSION}).\n\
         Turn the user's request into a runner plan manifest.\n\n\
         ## Answer\n\
         Answer with exactly one JSON object and nothing else: no prose, no code fence. Either\n\
         - a manifest: {{\"apiVersion\": \"runner/v1\", \"kind\": \"Plan\", \"metadata\": {{...}}, \"spec\": {{...}}}}\
         {shape}, or\n\
         - {{\"questions\": [\"...\"]}} with at most three short questions, only when the request is too ambiguous \
         to plan at all.\n\n\
         ## Rules\n\
         - `metadata.name` is \"{name}\"; `spec.mission` restates the request in one or two sentences.\n\
         {TASK_RULES}\
         - Task ids are unique snake_case; the dependencies form no cycle; attach no files.\n\
         - Prefer few tasks: as many as the request needs, no more.\n\n\
         {dynamic}\n\n\
         {available}{optional}"
    )
}

/// The rules for tasks that every plan author's prompt gives, whole plan or line by line.
pub(crate) const TASK_RULES: &str = "- Each task does one thing, and its `input` says exactly what to produce.\n\
    - Tasks that do not need each other's output run in parallel: the same `parallel_group`, no `depends_on` \
    between them.\n\
    - Where several results are combined, add a `synthesis_gate` task with those `inputs`; later tasks depend on \
    the gate and read its output.\n\
    - A task reads another task's output only as `{{ tasks.ID.output }}`, and only from a task it depends on, \
    directly or through others. The mission is `{{ mission }}`.\n\
    - Give tasks that may fail a fallback: `on_failure` with `retry`, and `then: skip` where the plan can do \
    without the result. Mark the task that produces the final result `critical: true` with a retry.\n";

/// The rules for the fields that shape a plan at run time (`vars`, `when`, `for_each`,
/// `max_items`, `type: expand` with `max_tasks`), each with a short example, and the one task
/// type never to write. Always sent, so it is kept short: the schema is close to filling the
/// default context window on its own.
pub(crate) fn dynamic() -> String {
    format!(
        "## Variables, conditions, maps and steps planned later (only when the request needs them)\n\
         - `vars` in `spec` declares variables with defaults (any JSON value), read as `{{{{ vars.NAME }}}}`; \
         declare every one you read: \"vars\": {VARS_EXAMPLE}\n\
         - `when`: a condition over what templates read, without braces; when false the task is skipped and its \
         dependents still run. Depend on the tasks it reads: {WHEN_EXAMPLE}\n\
         - `for_each` runs the task once per item of a list, written out or an expression such as \
         `tasks.ID.output.FIELD` of a task it depends on that answers in JSON; then `max_items` (more items fail \
         the task) is required. The input reads `{{{{ item }}}}`, `{{{{ item.FIELD }}}}`, `{{{{ index }}}}` (from \
         0); the output is a JSON array of the item outputs, combined by a `synthesis_gate`: {MAP_EXAMPLE}\n\
         - `type: expand` is a compound step that can only be broken down once the steps before it have run: its \
         `agent` writes the step's plan then, and the step's output is that plan's last task's output. Set \
         `max_tasks`, the most tasks it may write: {EXPAND_EXAMPLE}\n\
         - Never write `type: plan`, `plan` or `with`: they run plan files people wrote."
    )
}

/// The manifest's JSON Schema as the author sends it: without the sub-plan task type and its
/// fields (`type: plan`, `plan`, `with`), which name plan files a written plan cannot have.
pub(crate) fn for_authors(mut schema: Value) -> Value {
    if let Some(task) = schema.pointer_mut("/definitions/Task/properties").and_then(Value::as_object_mut) {
        task.remove("plan");
        task.remove("with");
    }
    if let Some(words) = schema.pointer_mut("/definitions/TaskKind/enum").and_then(Value::as_array_mut) {
        words.retain(|word| word != "plan");
    }
    schema
}

/// A JSON Schema without its `description`s, which are more than half of the manifest's; a
/// field of that name under `properties` stays.
pub(crate) fn without_descriptions(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "description")
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("properties" | "definitions", Value::Object(named)) => Value::Object(
                            named.iter().map(|(name, schema)| (name.clone(), without_descriptions(schema))).collect(),
                        ),
                        ("enum" | "const" | "default" | "examples" | "required", value) => value.clone(),
                        (_, value) => without_descriptions(value),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The user message: the request.
pub(crate) fn user(text: &str) -> String {
    format!("Request: {}", text.trim())
}

/// The repair message sent after the previous answer: what was wrong with it and how to
/// answer again.
pub(crate) fn repair(problems: &str) -> String {
    format!(
        "Your answer cannot be used. The problems, one per line (code: message (at path)):\n{problems}\n\n\
         Fix every problem and answer again with the whole corrected manifest as exactly one JSON object and \
         nothing else."
    )
}

/// One line per agent and tool of the template, for a reader in a hurry.
pub(crate) fn describe(plan: &Plan) -> String {
    let mut lines = Vec::new();
    for (name, agent) in &plan.agents {
        let what = agent
            .system_prompt
            .as_deref()
            .and_then(|p| p.lines().map(str::trim).find(|l| !l.is_empty()))
            .unwrap_or("no description");
        let tools = match &agent.runtime {
            Runtime::Llm { tools, .. } if !tools.is_empty() => {
                format!(", tools: {}", tools.iter().map(|t| t.value.as_str()).collect::<Vec<_>>().join(", "))
            }
            _ => String::new(),
        };
        lines.push(format!("- agent `{name}` ({} runtime{tools}): {what}", agent.runtime.name()));
    }
    for (name, tool) in &plan.tools {
        lines.push(format!("- tool `{name}`: {}", tool.description));
    }
    lines.join("\n")
}

/// The template's providers, tools and agents as they are written in a manifest's `spec`.
/// Mock agents' scripted responses are left out: they belong to the template's own tasks.
pub(crate) fn available_spec(plan: &Plan) -> Value {
    let providers: Map<String, Value> = plan
        .providers
        .iter()
        .map(|(name, p)| {
            let mut out = Map::new();
            out.insert("kind".into(), json!(p.kind));
            out.insert("base_url".into(), json!(p.base_url));
            insert(&mut out, "api_key_env", p.api_key_env.as_ref().map(|v| json!(v.value)));
            insert(&mut out, "model", p.model.as_ref().map(|m| json!(m)));
            insert(&mut out, "context_window", p.context_window.map(|c| json!(c)));
            insert(&mut out, "max_concurrency", p.max_concurrency.map(|c| json!(c)));
            insert(&mut out, "requests_per_minute", p.requests_per_minute.map(|c| json!(c)));
            insert(&mut out, "tokenizer", p.tokenizer.as_ref().map(|t| json!(t)));
            insert(&mut out, "timeout", p.timeout.map(|t| json!(t.to_string())));
            (name.clone(), Value::Object(out))
        })
        .collect();
    let tools: Map<String, Value> = plan
        .tools
        .iter()
        .map(|(name, t)| {
            let mut out = Map::new();
            out.insert("description".into(), json!(t.description));
            out.insert("command".into(), json!(t.command));
            insert(&mut out, "input_schema", t.input_schema.as_ref().map(|s| s.value.clone()));
            insert(&mut out, "timeout", t.timeout.map(|t| json!(t.to_string())));
            if t.destructive {
                out.insert("destructive".into(), json!(true));
            }
            if !t.approval.is_default() {
                out.insert("approval".into(), json!(t.approval));
            }
            (name.clone(), Value::Object(out))
        })
        .collect();
    let agents: Map<String, Value> = plan
        .agents
        .iter()
        .map(|(name, a)| {
            let mut out = Map::new();
            out.insert("runtime".into(), json!(a.runtime.name()));
            match &a.runtime {
                Runtime::Llm { provider, model, tools, allow_tools, max_turns, .. } => {
                    insert(&mut out, "provider", provider.as_ref().map(|p| json!(p.value)));
                    insert(&mut out, "model", model.as_ref().map(|m| json!(m)));
                    if !tools.is_empty() {
                        out.insert("tools".into(), json!(tools.iter().map(|t| &t.value).collect::<Vec<_>>()));
                    }
                    if !allow_tools.is_empty() {
                        out.insert(
                            "allow_tools".into(),
                            json!(allow_tools.iter().map(|t| &t.value).collect::<Vec<_>>()),
                        );
                    }
                    insert(&mut out, "max_turns", max_turns.map(|m| json!(m)));
                }
                Runtime::Command { command, max_output_bytes } => {
                    out.insert("command".into(), json!(command));
                    if *max_output_bytes != DEFAULT_MAX_OUTPUT_BYTES {
                        out.insert("max_output_bytes".into(), json!(max_output_bytes));
                    }
                }
                Runtime::Mock { latency, default, .. } => {
                    insert(&mut out, "latency", latency.map(|l| json!(l.to_string())));
                    if default != "echo" {
                        out.insert("default".into(), json!(default));
                    }
                }
                Runtime::Http { url, api_key_env, headers_env, max_output_bytes } => {
                    out.insert("url".into(), json!(url.value));
                    insert(&mut out, "api_key_env", api_key_env.as_ref().map(|v| json!(v.value)));
                    if !headers_env.is_empty() {
                        let headers: Map<String, Value> =
                            headers_env.iter().map(|(h, v)| (h.clone(), json!(v.value))).collect();
                        out.insert("headers_env".into(), Value::Object(headers));
                    }
                    if *max_output_bytes != DEFAULT_MAX_OUTPUT_BYTES {
                        out.insert("max_output_bytes".into(), json!(max_output_bytes));
                    }
                }
            }
            insert(&mut out, "system_prompt", a.system_prompt.as_ref().map(|p| json!(p)));
            insert(&mut out, "reliability_weight", a.reliability_weight.map(|w| json!(w)));
            insert(&mut out, "timeout", a.timeout.map(|t| json!(t.to_string())));
            (name.clone(), Value::Object(out))
        })
        .collect();
    let mut spec = Map::new();
    if !providers.is_empty() {
        spec.insert("providers".into(), Value::Object(providers));
    }
    if !tools.is_empty() {
        spec.insert("tools".into(), Value::Object(tools));
    }
    spec.insert("agent_definitions".into(), Value::Object(agents));
    Value::Object(spec)
}

fn insert(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_carries_version_schema_examples_and_name() {
        let prompt = system("brief", None, Parts::All);
        assert!(prompt.contains(PROMPT_VERSION));
        assert!(prompt.contains("\"brief\""));
        assert!(prompt.contains("\"$schema\""));
        assert!(prompt.contains("tea-market-brief") && prompt.contains("changelog-draft"));
        assert!(prompt.contains("placeholder agent"));
        assert!(prompt.contains("{{ tasks.ID.output }}"));
    }

    #[test]
    fn every_prompt_teaches_the_dynamic_fields_the_manifest_declares() {
        let schema = manifest::schema::manifest_schema();
        let task = &schema["definitions"]["Task"]["properties"];
        let spec = &schema["definitions"]["Spec"]["properties"];
        let fields = [("when", task), ("for_each", task), ("max_items", task), ("max_tasks", task), ("vars", spec)];
        for (field, declared) in fields {
            assert!(declared.get(field).is_some(), "the manifest declares no `{field}`");
            for parts in Parts::LARGEST_FIRST {
                let prompt = system("brief", None, parts);
                assert!(prompt.contains(&format!("`{field}`")), "{parts:?} does not explain `{field}`");
                assert!(prompt.contains(&format!("\"{field}\": ")), "{parts:?} has no example of `{field}`");
            }
        }
        assert!(schema["definitions"]["TaskKind"]["enum"].as_array().is_some_and(|w| w.contains(&json!("expand"))));
        for parts in Parts::LARGEST_FIRST {
            let prompt = system("brief", None, parts);
            assert!(prompt.contains("`type: expand`") && prompt.contains(EXPAND_EXAMPLE), "{parts:?}");
            assert!(prompt.contains("Never write `type: plan`, `plan` or `with`"), "{parts:?}");
        }
    }

    #[test]
    fn the_schema_sent_offers_no_sub_plan_but_every_other_field_and_word() {
        let schema = manifest::schema::manifest_schema();
        let sent = for_authors(schema.clone());
        let fields = |schema: &Value| schema["definitions"]["Task"]["properties"].as_object().cloned().unwrap();
        let words = |schema: &Value| schema["definitions"]["TaskKind"]["enum"].as_array().cloned().unwrap();
        let (declared, offered) = (fields(&schema), fields(&sent));
        assert!(declared.contains_key("plan") && declared.contains_key("with"), "the manifest declares sub-plans");
        let missing: Vec<&String> = declared.keys().filter(|name| !offered.contains_key(*name)).collect();
        assert_eq!(missing, ["plan", "with"]);
        assert!(offered.contains_key("max_tasks"));
        let mut kept = words(&schema);
        kept.retain(|word| word != "plan");
        assert_eq!(words(&sent), kept);
        assert!(kept.contains(&json!("expand")) && kept.len() + 1 == words(&schema).len());
        for parts in [Parts::Schema, Parts::BareSchema] {
            let prompt = system("brief", None, parts);
            assert!(!prompt.contains("\"with\":{") && !prompt.contains("\"plan\":{"), "{parts:?} offers a sub-plan");
        }
    }

    #[test]
    fn the_bare_schema_keeps_every_field_and_word_but_no_description() {
        let schema = for_authors(manifest::schema::manifest_schema());
        let bare = without_descriptions(&schema);
        let text = serde_json::to_string(&bare).unwrap();
        assert!(!text.contains("\"description\":\""), "a description is left: {text}");
        assert!(text.len() * 2 < serde_json::to_string(&schema).unwrap().len(), "descriptions are most of it");
        let metadata = &bare["definitions"]["Metadata"]["properties"];
        assert_eq!(metadata["description"], json!({"type": "string"}), "a field named `description` stays");
        assert_eq!(
            bare["definitions"]["Task"]["properties"].as_object().map(Map::len),
            schema["definitions"]["Task"]["properties"].as_object().map(Map::len)
        );
        assert_eq!(bare["definitions"]["Action"]["enum"], schema["definitions"]["Action"]["enum"]);
        assert!(system("brief", None, Parts::BareSchema).contains(&text));
    }

    #[test]
    fn template_definitions_load_back_unchanged() {
        let text = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: t}
spec:
  providers:
    local: {kind: openai, base_url: "http://localhost:1/v1", api_key_env: KEY, model: m, timeout: 30s}
  tools:
    search: {description: Search the web, command: [python3, s.py], input_schema: {type: object}, approval: always}
  agent_definitions:
    researcher: {runtime: llm, provider: local, tools: [search], allow_tools: [search], system_prompt: "Find things.\nCarefully."}
    counter: {runtime: command, command: [wc, -w]}
  workflow:
    - {id: a, agent: researcher, input: x}
    - {id: b, agent: counter, input: "{{ tasks.a.output }}", depends_on: [a]}
"#;
        let template = manifest::load_str("t.yaml", "t", text, &|_| true).plan.unwrap();
        let mut spec = available_spec(&template);
        spec["workflow"] = json!([{"id": "a", "agent": "researcher", "input": "x"}, {"id": "b", "agent": "counter", "input": "y", "depends_on": ["a"]}]);
        let manifest = json!({"apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "t"}, "spec": spec});
        let loaded = manifest::load_str("m.json", "t", &manifest.to_string(), &|_| true);
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        let plan = loaded.plan.unwrap();
        let same = |plan: &Plan| serde_json::to_value((&plan.providers, &plan.tools, &plan.agents)).unwrap();
        assert_eq!(same(&plan), same(&template));
        let prompt = system("t", Some(&template), Parts::All);
        assert!(prompt.contains("agent `researcher` (llm runtime, tools: search): Find things."), "{prompt}");
        assert!(prompt.contains("tool `search`: Search the web"));
    }
}
