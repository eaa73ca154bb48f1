//! The JSON Schema of the manifest, for editors and other tools.
//!
//! The types here exist only to produce the schema: they mirror what `normalize.rs` accepts
//! in the enveloped form, field for field, and a test keeps the two in step.
#![expect(dead_code, reason = "the document types are read only by their `JsonSchema` derives")]

use std::collections::BTreeMap;

use schemars::generate::SchemaSettings;
use schemars::transform::transform_subschemas;
use schemars::{JsonSchema, Schema};
use serde::Deserialize;
use serde_json::Value;

use crate::normalize::API_VERSION;

/// The JSON Schema (draft-07) of the enveloped manifest, with a description on every field,
/// the words of every enumeration and `additionalProperties: false` on every mapping.
pub fn manifest_schema() -> Value {
    let mut settings = SchemaSettings::draft07();
    // First, so that draft-07's handling of `$ref` siblings sees the schemas without `null`.
    settings.transforms.insert(0, Box::new(forbid_null));
    settings.into_generator().into_root_schema_for::<Manifest>().to_value()
}

/// Optional fields are `Option`s here, which schemars makes nullable; the loader rejects an
/// explicit `null` in almost every field, so the schema does not offer it.
fn forbid_null(schema: &mut Schema) {
    transform_subschemas(&mut forbid_null, schema);
    let Some(object) = schema.as_object_mut() else { return };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    let null = serde_json::json!({"type": "null"});
    if let Some(Value::Array(alternatives)) = object.get_mut("anyOf") {
        alternatives.retain(|a| *a != null);
        if let [Value::Object(only)] = alternatives.as_slice() {
            let only = only.clone();
            object.remove("anyOf");
            for (key, value) in only {
                object.entry(key).or_insert(value);
            }
        }
    }
}

/// A runner plan: a mission, the agents that work on it and the workflow they follow.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "runner plan manifest")]
struct Manifest {
    /// The manifest format; always `runner/v1`.
    #[serde(rename = "apiVersion")]
    #[schemars(extend("const" = API_VERSION))]
    api_version: String,
    /// The kind of document; always `Plan`.
    #[schemars(extend("const" = "Plan"))]
    kind: String,
    /// The plan's name, description and labels.
    metadata: Metadata,
    /// The mission, providers, tools, agents, workflow and control logic.
    spec: Spec,
}

/// What the plan is called and how it is labelled.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Metadata {
    /// The plan's name, used in run directories and reports.
    name: String,
    /// What the plan does, for people reading it.
    description: Option<String>,
    /// Free-form key-value labels, such as `team: research`.
    labels: Option<BTreeMap<String, String>>,
}

/// The plan itself.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Spec {
    /// What the plan is for; templates read it as `{{ mission }}`.
    mission: Option<String>,
    /// The author's own analysis of the mission, which the critic checks.
    mission_analysis: Option<MissionAnalysis>,
    /// OpenAI-compatible LLM endpoints, by name.
    providers: Option<BTreeMap<String, Provider>>,
    /// Programs llm agents can call, by name.
    tools: Option<BTreeMap<String, Tool>>,
    /// The agents that do the tasks, by name.
    agent_definitions: Option<BTreeMap<String, Agent>>,
    /// The tasks, in order; dependencies, not the order, decide when each runs (except under `sequential`).
    #[schemars(length(min = 1))]
    workflow: Vec<Task>,
    /// Scheduling, budgets, replanning and context settings.
    control_logic: Option<ControlLogic>,
}

/// The author's analysis of the mission; informational, checked by the critic.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MissionAnalysis {
    /// How hard the author expects the mission to be.
    estimated_complexity: Option<Complexity>,
    /// The chain of task ids the author expects to take longest.
    critical_path: Option<Vec<String>>,
    /// Capabilities the mission needs, such as `search` or `summarize`.
    required_capabilities: Option<Vec<String>>,
}

/// A mission's difficulty: `trivial`, `low`, `medium` or `high`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Complexity {
    Trivial,
    Low,
    Medium,
    High,
}

/// An OpenAI-compatible chat-completions endpoint (Ollama, vLLM, llama.cpp server, OpenAI).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Provider {
    /// The API dialect; only `openai` for now.
    kind: Option<ProviderKind>,
    /// The endpoint's base URL, such as `http://localhost:11434/v1`.
    #[schemars(regex(pattern = r"^https?://"))]
    base_url: String,
    /// The name of the environment variable holding the API key; never the key itself.
    api_key_env: Option<String>,
    /// The model used by agents that name none.
    model: Option<String>,
    /// The model's context window in tokens.
    #[schemars(range(min = 1))]
    context_window: Option<u64>,
    /// Requests to this provider in flight at once.
    #[schemars(range(min = 1))]
    max_concurrency: Option<u32>,
    /// Requests started per minute.
    #[schemars(range(min = 1))]
    requests_per_minute: Option<u32>,
    /// The tokenizer used to count tokens (`o200k_base` by default).
    #[schemars(extend("enum" = crate::normalize::TOKENIZERS))]
    tokenizer: Option<String>,
    /// How long one request may take: 120 s when not given, except for agents' streamed requests, which have no overall limit unless one is given.
    timeout: Option<Duration>,
    /// How long a streamed answer may go without a new event before the request is given up (60 s when not given).
    idle_timeout: Option<Duration>,
    /// Whether agents' requests are streamed (`true` when not given); set `false` for a server that cannot stream tool calls.
    stream: Option<bool>,
    /// The most tokens one answer may have, for agents that set none (4096 when neither sets it).
    #[schemars(range(min = 1))]
    max_tokens: Option<u32>,
    /// The sampling temperature, for agents that set none (the server's default when neither sets it).
    #[schemars(range(min = 0.0, max = 2.0))]
    temperature: Option<f64>,
    /// The sampling seed, for agents that set none (sent only when set).
    #[schemars(range(min = 0))]
    seed: Option<u64>,
}

/// Whether an llm agent's model may call the tools it is offered.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ToolChoiceWord {
    Auto,
    Required,
    None,
}

/// The API dialect of a provider.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ProviderKind {
    Openai,
}

/// A program an llm agent can call; the call's arguments arrive as JSON on stdin.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Tool {
    /// What the tool does, shown to the model.
    description: Option<String>,
    /// The argv to run, never passed through a shell.
    command: Argv,
    /// The JSON Schema of the call's arguments.
    input_schema: Option<serde_json::Value>,
    /// How long one call may take.
    timeout: Option<Duration>,
    /// Whether the tool changes the world; the critic wants a `human_review` before a task that may call it.
    destructive: Option<bool>,
}

/// An agent; `runtime` decides which of the other fields apply.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Agent {
    /// How the agent runs (`llm` when not given).
    runtime: Option<Runtime>,
    /// The provider's name (llm agents); the provider named `default` when not given.
    provider: Option<String>,
    /// The model, overriding the provider's (llm agents).
    model: Option<String>,
    /// The system prompt (llm agents).
    system_prompt: Option<String>,
    /// Tools offered to the model, by name (llm agents).
    tools: Option<Vec<String>>,
    /// The author's trust in this agent, from 0.0 to 1.0.
    #[schemars(range(min = 0.0, max = 1.0))]
    reliability_weight: Option<f64>,
    /// The most model turns one attempt may take (llm agents).
    #[schemars(range(min = 1))]
    max_turns: Option<u32>,
    /// Whether the model may (`auto`, the default), must (`required`) or must not (`none`) call the tools offered (llm agents).
    tool_choice: Option<ToolChoiceWord>,
    /// The most tokens one answer may have, overriding the provider's (llm agents; 4096 when neither sets it).
    #[schemars(range(min = 1))]
    max_tokens: Option<u32>,
    /// The sampling temperature, overriding the provider's (llm agents).
    #[schemars(range(min = 0.0, max = 2.0))]
    temperature: Option<f64>,
    /// The sampling seed, overriding the provider's (llm agents).
    #[schemars(range(min = 0))]
    seed: Option<u64>,
    /// How long one attempt may take.
    timeout: Option<Duration>,
    /// The argv to run, with the task input on stdin and the output from stdout (command agents).
    command: Option<Argv>,
    /// The most output bytes kept before the attempt fails (command and http agents; 1 MiB when not given).
    #[schemars(range(min = 1))]
    max_output_bytes: Option<u64>,
    /// Simulated time per attempt (mock agents).
    latency: Option<Duration>,
    /// The response for tasks with no script (mock agents): `echo` returns the rendered input, other text itself.
    default: Option<String>,
    /// Scripted responses by task id (mock agents): one, or a list with one per attempt (the last repeats).
    responses: Option<BTreeMap<String, MockScript>>,
    /// Where the input is POSTed (http agents).
    #[schemars(regex(pattern = r"^https?://"))]
    url: Option<String>,
    /// The variable holding the bearer token (http agents).
    api_key_env: Option<String>,
    /// Header name to the variable holding its value (http agents).
    headers_env: Option<BTreeMap<String, String>>,
}

/// How an agent runs: `llm` (a chat model calling tools), `command` (a process), `mock` (scripted responses) or `http`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Runtime {
    Llm,
    Command,
    Mock,
    Http,
}

/// A mock agent's script for one task: one response, or one per attempt.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum MockScript {
    One(MockResponse),
    PerAttempt(Vec<MockResponse>),
}

/// One scripted outcome: a text is an output; a mapping gives one of `output`, `fail` or `clarify`.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum MockResponse {
    Text(String),
    Outcome(MockOutcome),
}

/// One scripted outcome, spelled out.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
struct MockOutcome {
    /// Succeed with this output.
    output: Option<String>,
    /// Fail with this error.
    fail: Option<String>,
    /// Ask this clarifying question.
    clarify: Option<String>,
}

/// One step of the workflow.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Task {
    /// The task's unique id; other tasks and templates refer to it.
    id: String,
    /// What kind of step it is (`task` when not given).
    #[serde(rename = "type")]
    kind: Option<TaskKind>,
    /// The agent that does it; a `human_review` has none.
    agent: Option<String>,
    /// The input template, such as `Summarise {{ tasks.search.output }}`.
    input: Option<String>,
    /// The question shown to the reviewer of a `human_review`.
    prompt: Option<String>,
    /// Ids of the tasks that must finish first.
    depends_on: Option<Vec<String>>,
    /// Ids of the tasks whose outputs a `synthesis_gate` condenses; it depends on them.
    inputs: Option<Vec<String>>,
    /// The parallel group it belongs to, limited in `control_logic.parallel_groups`.
    parallel_group: Option<String>,
    /// How its output is checked before it counts as a success.
    verification: Option<Verification>,
    /// What happens when an attempt fails (`fail` when not given).
    on_failure: Option<OnFailure>,
    /// Whether the run fails when this task does not succeed.
    critical: Option<bool>,
    /// How long one attempt may take.
    timeout: Option<Duration>,
    /// Links and files handed to the agent with the input.
    attachments: Option<Vec<Attachment>>,
    /// The output cap of a `synthesis_gate`, in tokens.
    #[schemars(range(min = 1))]
    max_output_tokens: Option<u32>,
}

/// What kind of step a task is: `task` (an agent does work), `synthesis_gate` (an agent condenses its
/// inputs under a cap) or `human_review` (a person approves or rejects).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum TaskKind {
    Task,
    SynthesisGate,
    HumanReview,
}

/// How a task's output is checked; `type` decides which of the other fields apply.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Verification {
    /// The kind of check.
    #[serde(rename = "type")]
    kind: VerificationKind,
    /// The JSON Schema the output must be valid against (`schema_check`).
    schema: Option<serde_json::Value>,
    /// The reviewer agent, which answers `{"pass": bool, "reason": str}` (`llm_reviewer`).
    agent: Option<String>,
    /// What the reviewer checks (`llm_reviewer`).
    criteria: Option<String>,
    /// The argv that reads the output on stdin and passes with exit status 0 (`command`).
    command: Option<Argv>,
}

/// The kind of check: `schema_check` (JSON valid against a schema), `llm_reviewer` (an agent judges),
/// `command` (a program judges) or `none`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum VerificationKind {
    SchemaCheck,
    LlmReviewer,
    Command,
    None,
}

/// What a task does when an attempt fails: a word, or a retry policy spelled out.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum OnFailure {
    Word(Action),
    Map(FailurePolicyMap),
}

/// What to do on failure: `retry` (with backoff, then `then`), `skip` (dependents still run), `replan` (ask
/// the planner agent) or `fail` (fail the run).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    Retry,
    Skip,
    Replan,
    Fail,
}

/// A failure policy; everything but `action` applies only to `action: retry`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FailurePolicyMap {
    /// The first thing to do.
    action: Action,
    /// Total attempts, the first included (3 when not given).
    #[schemars(range(min = 1))]
    max_attempts: Option<u32>,
    /// The delay before the second attempt, doubled for each further one (1s when not given).
    backoff: Option<Duration>,
    /// The longest delay between attempts (60s when not given).
    max_backoff: Option<Duration>,
    /// What to do when the retries run out (`fail` when not given).
    then: Option<AfterRetries>,
    /// Which failures are retried (`any` when not given); the others go straight to `then`.
    retry_on: Option<RetryOn>,
}

/// `any`: every failure a retry could fix; `transient`: only timeouts, 408, 429, 5xx, connection errors
/// and broken streams.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum RetryOn {
    Any,
    Transient,
}

/// What to do when retries run out: `skip`, `replan` or `fail`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum AfterRetries {
    Skip,
    Replan,
    Fail,
}

/// Something handed to the agent with the task input: give exactly one of `link` or `file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
struct Attachment {
    /// A URL, listed in the prompt.
    link: Option<String>,
    /// A file, read (size-capped) and inlined; relative to the plan's folder.
    file: Option<String>,
}

/// How the run is scheduled, budgeted and replanned.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ControlLogic {
    /// How tasks are scheduled (`eager` when not given).
    strategy: Option<Strategy>,
    /// Tasks running at once across the run.
    #[schemars(range(min = 1))]
    max_concurrency: Option<u32>,
    /// Limits on tasks running at once, by parallel group name.
    parallel_groups: Option<BTreeMap<String, GroupLimit>>,
    /// Agent turns allowed per phase.
    #[schemars(range(min = 1))]
    max_turns_per_phase: Option<u32>,
    /// Whether an empty output counts as a failure that replans.
    replan_on_empty_result: Option<bool>,
    /// Replans allowed in one run (2 when not given).
    max_replans: Option<u32>,
    /// The agent asked for a revised workflow on replan.
    planner: Option<String>,
    /// The agent that compacts context and errors; the extractive compactor when not given.
    compactor: Option<String>,
    /// Tokens the whole run may spend, prompt and completion.
    #[schemars(range(min = 1))]
    token_budget: Option<u64>,
    /// Tokens one task's input may hold; the critic estimates against it.
    #[schemars(range(min = 1))]
    context_budget: Option<u64>,
    /// Tokens the rolling context summary may hold.
    #[schemars(range(min = 1))]
    summary_budget: Option<u64>,
    /// Characters an error keeps after compaction (2000 when not given).
    #[schemars(range(min = 1))]
    error_char_limit: Option<u64>,
    /// Whether llm agents get the `ask_user` tool (true when not given).
    allow_clarification: Option<bool>,
    /// Synthesis gates in the seed form; each becomes a `synthesis_gate` task.
    synthesis_gates: Option<Vec<SynthesisGate>>,
}

/// How tasks are scheduled: `eager` (a task starts once its dependencies are done), `phased` (topological
/// levels, one after another) or `sequential` (one at a time, in list order).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Strategy {
    Eager,
    Phased,
    Sequential,
}

/// A limit on one parallel group.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GroupLimit {
    /// Tasks of the group running at once.
    #[schemars(range(min = 1))]
    max_concurrency: Option<u32>,
}

/// A synthesis gate in the seed form: it condenses the outputs of `after_tasks` for the tasks after them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SynthesisGate {
    /// The gate task's id (`synthesis_gate_N` when not given).
    id: Option<String>,
    /// Ids of the tasks whose outputs the gate condenses.
    after_tasks: Vec<String>,
    /// The agent that condenses; the extractive compactor when not given.
    agent: Option<String>,
    /// The gate's output cap, in tokens.
    #[schemars(range(min = 1))]
    max_output_tokens: Option<u32>,
}

/// A duration: a number and a unit, `ms`, `s`, `m` or `h`, such as `500ms`, `30s` or `1.5h`.
#[derive(Deserialize, JsonSchema)]
struct Duration(#[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h)$"))] String);

/// A command as an argv: the program and its arguments, never passed through a shell.
#[derive(Deserialize, JsonSchema)]
struct Argv(#[schemars(length(min = 1))] Vec<String>);

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use serde_json::{Value, json};

    use super::manifest_schema;
    use crate::normalize::field_lists;

    fn properties(schema: &Value) -> BTreeSet<&str> {
        schema["properties"].as_object().map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default()
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::draft7::new(&manifest_schema()).expect("the schema is valid draft-07")
    }

    fn errors(validator: &jsonschema::Validator, manifest: &Value) -> Vec<String> {
        validator.iter_errors(manifest).map(|e| format!("{e} at {}", e.instance_path())).collect()
    }

    /// A valid manifest with one mock agent and one task.
    fn plan() -> Value {
        json!({
            "apiVersion": "runner/v1",
            "kind": "Plan",
            "metadata": {"name": "fixture"},
            "spec": {
                "agent_definitions": {"stub": {"runtime": "mock"}},
                "workflow": [{"id": "a", "agent": "stub", "input": "hello"}],
            },
        })
    }

    #[test]
    fn schema_fields_match_the_loader() {
        let schema = manifest_schema();
        for (name, fields) in field_lists() {
            let definition = if name == "Manifest" { &schema } else { &schema["definitions"][name] };
            assert!(definition.is_object(), "the schema has no definition `{name}`");
            let expected: BTreeSet<&str> = fields.into_iter().collect();
            assert_eq!(properties(definition), expected, "the fields of `{name}`");
        }
    }

    #[test]
    fn every_mapping_rejects_unknown_fields() {
        let schema = manifest_schema();
        let definitions = schema["definitions"].as_object().expect("the schema has definitions");
        let all = std::iter::once(("Manifest", &schema)).chain(definitions.iter().map(|(n, d)| (n.as_str(), d)));
        for (name, definition) in all {
            if definition.get("properties").is_some() {
                assert_eq!(definition["additionalProperties"], json!(false), "`{name}` allows unknown fields");
            }
        }
    }

    #[test]
    fn example_manifests_are_valid() {
        let validator = validator();
        let folder = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
        let Ok(entries) = std::fs::read_dir(folder) else { return };
        for path in entries.map(|e| e.expect("a directory entry").path()) {
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable example");
            let manifest: Value = serde_saphyr::from_str(&text).expect("an example is YAML");
            let found = errors(&validator, &manifest);
            assert!(found.is_empty(), "{} does not match the schema:\n{}", path.display(), found.join("\n"));
        }
    }

    #[test]
    fn an_unknown_task_field_is_invalid() {
        let validator = validator();
        let mut manifest = plan();
        assert_eq!(errors(&validator, &manifest), Vec::<String>::new());
        manifest["spec"]["workflow"][0]["dependson"] = json!(["b"]);
        let found = errors(&validator, &manifest);
        assert!(found.iter().any(|e| e.contains("dependson")), "{found:?}");
    }

    #[test]
    fn the_documented_shapes_are_valid_and_near_misses_are_not() {
        let validator = validator();
        let with = |pointer: &str, value: Value| {
            let mut manifest = plan();
            *manifest.pointer_mut(pointer).expect("the fixture has this field") = value;
            errors(&validator, &manifest).is_empty()
        };
        let task = "/spec/workflow/0";
        let on_failure = |value: Value| with(task, json!({"id": "a", "agent": "stub", "on_failure": value}));
        assert!(on_failure(json!("skip")));
        assert!(on_failure(json!({"action": "retry", "max_attempts": 3, "backoff": "1.5s", "then": "skip"})));
        assert!(!on_failure(json!("stop")), "`stop` is read only in the bare form");
        assert!(!on_failure(json!({"action": "retry", "backoff": "30"})), "a duration needs a unit");
        assert!(!on_failure(json!({"action": "retry", "then": "retry"})));
        let responses =
            |value: Value| with("/spec/agent_definitions/stub", json!({"runtime": "mock", "responses": {"a": value}}));
        assert!(responses(json!("done")));
        assert!(responses(json!({"clarify": "Which year?"})));
        assert!(responses(json!([{"fail": "timeout"}, {"output": "ok"}, "text"])));
        assert!(!responses(json!({"output": "ok", "fail": "no"})), "one outcome per response");
        assert!(!with("/metadata", json!({"name": "x", "description": null})), "the loader rejects an explicit null");
        assert!(!with("/metadata", json!({})), "metadata.name is required");
        assert!(!with("/kind", json!("Workflow")));
    }
}
