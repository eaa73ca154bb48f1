//! The normalised plan: one typed shape, whatever form the manifest was written in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::source::Loc;
use crate::text::Text;

mod task_json;

/// A value and where it was written. Serialises as the bare value; the location is only
/// meaningful next to the source it came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct At<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    #[serde(skip)]
    pub loc: Loc,
}

impl<T> At<T> {
    /// A value at a location.
    pub fn new(value: T, loc: Loc) -> Self {
        At { value, loc }
    }
}

/// The form a manifest was written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// `apiVersion: runner/v1`, `kind: Plan`, `metadata`, `spec`.
    #[default]
    Enveloped,
    /// The seed schema at top level, as LLMs write it.
    Bare,
}

/// A whole plan, normalised: gates from `control_logic` are tasks, gate inputs are
/// dependencies, sequential plans are chains and every default is filled in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `metadata.name`, or the file's stem for the bare form.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The form it was written in.
    pub form: Form,
    /// What the plan is for; templates read it as `{{ mission }}`.
    pub mission: Option<String>,
    /// The author's own analysis, which the critic checks.
    pub mission_analysis: Option<MissionAnalysis>,
    /// LLM endpoints by name.
    pub providers: BTreeMap<String, Provider>,
    /// Tools callable by llm agents, by name.
    pub tools: BTreeMap<String, Tool>,
    /// Agents by name.
    pub agents: BTreeMap<String, Agent>,
    /// The tasks, in workflow order.
    pub tasks: Vec<Task>,
    /// Scheduling, budgets and replanning.
    pub control: ControlLogic,
}

/// The author's analysis of the mission.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MissionAnalysis {
    /// `trivial`, `low`, `medium` or `high`.
    pub estimated_complexity: Option<Complexity>,
    /// The chain of task ids the author expects to take longest.
    pub critical_path: Vec<At<String>>,
    /// Capabilities the mission needs.
    pub required_capabilities: Vec<String>,
}

/// The author's estimate of a mission's difficulty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// One obvious step.
    Trivial,
    /// A few steps.
    Low,
    /// Several steps with some parallel work.
    Medium,
    /// Many steps, branching and review.
    High,
}

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
    /// The generation settings of every agent on this provider, unless the agent sets its own.
    #[serde(default, skip_serializing_if = "Generation::is_unset")]
    pub generation: Generation,
    /// Where the provider was defined.
    #[serde(skip)]
    pub loc: Loc,
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

/// What kind of step a task is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// An agent does work.
    #[default]
    Task,
    /// An agent (or the extractive compactor) condenses upstream outputs under a cap.
    SynthesisGate,
    /// A person approves or rejects upstream outputs.
    HumanReview,
}

impl TaskKind {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Task => "task",
            TaskKind::SynthesisGate => "synthesis_gate",
            TaskKind::HumanReview => "human_review",
        }
    }
}

/// One step of the workflow. A field at its default is left out of the plan's JSON (a run's
/// `RunCreated` holds every task) and read back as the default; see `plan/task_json.rs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Task {
    /// The unique id.
    pub id: At<Text>,
    /// What kind of step it is.
    pub kind: TaskKind,
    /// The agent that does it; `None` for human reviews and agent-less gates.
    pub agent: Option<At<Text>>,
    /// The input template.
    pub input: Option<At<String>>,
    /// Tasks that must finish first (gate inputs included).
    pub depends_on: Vec<At<Text>>,
    /// What happens when it fails.
    pub on_failure: At<FailurePolicy>,
    /// Whether the run fails when this task does not succeed.
    pub critical: bool,
    /// The previous task in list order, when `strategy: sequential` added that dependency
    /// and the author did not write it. Not among the extras: a sequential plan sets it on
    /// every task but the first.
    pub chained_after: Option<Box<str>>,
    /// The upstream outputs its templates read, each at the place it is read; filled in by the
    /// loader's validation.
    pub reads: Vec<Read>,
    /// Where the task was written (its mapping).
    pub loc: Loc,
    /// The fields few tasks set, read with [`Task::extras`] and set with [`Task::set_extras`].
    pub extras: ExtrasBox,
}

/// A task's [`Extras`], boxed only once one is set; two compare equal when what they hold does.
#[derive(Debug, Clone, Default)]
pub struct ExtrasBox(Option<Box<Extras>>);

impl PartialEq for ExtrasBox {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_deref().unwrap_or(&NO_EXTRAS) == other.0.as_deref().unwrap_or(&NO_EXTRAS)
    }
}

// A plan of 100,000 tasks holds 100,000 of these for as long as it runs.
const _: () = assert!(std::mem::size_of::<Task>() == 304);

/// The fields of a task that few tasks set, kept together behind one box so that a task of a
/// large plan stays small.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// The question shown to the reviewer (`human_review`).
    pub prompt: Option<At<String>>,
    /// A gate's inputs: the tasks whose outputs it condenses (also in `depends_on`).
    pub inputs: Vec<At<Text>>,
    /// The parallel group it belongs to.
    pub parallel_group: Option<At<String>>,
    /// How its output is checked.
    pub verification: Option<Verification>,
    /// How long one attempt may take.
    pub timeout: Option<Duration>,
    /// Links and files given to the agent.
    pub attachments: Vec<At<Attachment>>,
    /// A gate's output cap in tokens.
    pub max_output_tokens: Option<u32>,
}

/// The extras of a task that sets none of them.
static NO_EXTRAS: Extras = Extras {
    prompt: None,
    inputs: Vec::new(),
    parallel_group: None,
    verification: None,
    timeout: None,
    attachments: Vec::new(),
    max_output_tokens: None,
};

impl Task {
    /// The fields few tasks set (prompt, gate inputs, group, verification, timeout,
    /// attachments, ...), each at its default when the task sets none.
    pub fn extras(&self) -> &Extras {
        self.extras.0.as_deref().unwrap_or(&NO_EXTRAS)
    }

    /// Sets the fields few tasks set, boxing them only when one is set.
    pub fn set_extras(&mut self, extras: Extras) {
        self.extras.0 = (extras != NO_EXTRAS).then(|| Box::new(extras));
    }

    /// The fields few tasks set, to change them; boxed on first use.
    pub fn extras_mut(&mut self) -> &mut Extras {
        self.extras.0.get_or_insert_default()
    }

    /// Whether its input reads `{{ context_summary }}`, the run's rolling summary of every
    /// output recorded before it.
    pub fn reads_context_summary(&self) -> bool {
        self.input.as_ref().is_some_and(|input| input.value.contains("context_summary"))
    }
}

/// One place where a task's template reads another task: `tasks.ID.output[.FIELD]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// The task read.
    pub task: String,
    /// What is read: `output`, `status`, ...
    pub attribute: Option<String>,
    /// The field of a JSON output, for `tasks.ID.output.FIELD`.
    pub field: Option<String>,
    /// Where the template names it.
    pub loc: Loc,
}

/// What a task does when an attempt fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run again with backoff, then apply `then`.
    Retry,
    /// Mark it skipped; dependents still run.
    Skip,
    /// Ask the planner agent for a replacement.
    Replan,
    /// Cancel what runs and fail the run.
    #[default]
    Fail,
}

impl Action {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Skip => "skip",
            Action::Replan => "replan",
            Action::Fail => "fail",
        }
    }
}

/// A failure policy with every default filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailurePolicy {
    /// The first thing to do.
    pub action: Action,
    /// Total attempts when the action is `retry` (the first attempt included).
    pub max_attempts: u32,
    /// The delay before the second attempt.
    pub backoff: Duration,
    /// The factor each further delay grows by.
    pub factor: u32,
    /// The longest delay.
    pub max_backoff: Duration,
    /// What to do when retries run out: `skip`, `replan` or `fail`.
    pub then: Action,
    /// Which failures are retried; the others go straight to `then`.
    #[serde(default)]
    pub retry_on: RetryOn,
}

/// Which failures a `retry` policy retries, like Argo's `retryPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// Every failure a retry could fix.
    #[default]
    Any,
    /// Only timeouts and failures of the service rather than the work: 408, 429, 5xx,
    /// connection errors, broken streams.
    Transient,
}

impl RetryOn {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryOn::Any => "any",
            RetryOn::Transient => "transient",
        }
    }
}

impl Default for FailurePolicy {
    fn default() -> Self {
        FailurePolicy::of(Action::Fail)
    }
}

impl FailurePolicy {
    /// The policy for a bare word, with the documented retry defaults.
    pub fn of(action: Action) -> Self {
        FailurePolicy {
            action,
            max_attempts: if action == Action::Retry { 3 } else { 1 },
            backoff: Duration::from_millis(1000),
            factor: 2,
            max_backoff: Duration::from_millis(60_000),
            then: Action::Fail,
            retry_on: RetryOn::Any,
        }
    }

    /// Whether anything but a plain `fail` happens on failure.
    pub fn has_fallback(&self) -> bool {
        self.action != Action::Fail
    }

    /// Whether the task can end up skipped.
    pub fn can_skip(&self) -> bool {
        self.action == Action::Skip || (self.action == Action::Retry && self.then == Action::Skip)
    }

    /// Whether the task can end up replanned.
    pub fn can_replan(&self) -> bool {
        self.action == Action::Replan || (self.action == Action::Retry && self.then == Action::Replan)
    }
}

/// How a task's output is checked before it counts as a success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Verification {
    /// The output must be JSON valid against a schema.
    SchemaCheck {
        /// The JSON Schema.
        schema: At<serde_json::Value>,
    },
    /// A reviewer agent answers `{"pass": bool, "reason": str}`.
    LlmReviewer {
        /// The reviewer agent.
        agent: At<String>,
        /// What the reviewer checks.
        criteria: Option<String>,
    },
    /// A command reads the output on stdin; exit 0 passes.
    Command {
        /// The argv.
        command: Vec<String>,
    },
}

/// Something handed to the agent with the task input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    /// A URL, listed in the prompt.
    Link(String),
    /// A file, read (size-capped) and inlined; relative to the plan's folder.
    File(String),
}

/// How the run is scheduled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A task starts as soon as its dependencies are done.
    #[default]
    Eager,
    /// Topological levels, one after another.
    Phased,
    /// One task at a time, in list order.
    Sequential,
}

impl Strategy {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Eager => "eager",
            Strategy::Phased => "phased",
            Strategy::Sequential => "sequential",
        }
    }
}

/// Scheduling, budgets, replanning and context settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlLogic {
    /// How tasks are scheduled.
    pub strategy: Strategy,
    /// Tasks running at once across the run.
    pub max_concurrency: Option<u32>,
    /// Per-group limits on tasks running at once.
    pub parallel_groups: BTreeMap<String, GroupLimit>,
    /// Agent turns allowed per phase.
    pub max_turns_per_phase: Option<u32>,
    /// Whether an empty output counts as a failure that replans.
    pub replan_on_empty_result: bool,
    /// Replans allowed in one run.
    pub max_replans: u32,
    /// The agent asked for a revised workflow on replan.
    pub planner: Option<At<String>>,
    /// The agent that compacts context and errors (else the extractive compactor).
    pub compactor: Option<At<String>>,
    /// Tokens the whole run may spend, prompt and completion.
    pub token_budget: Option<u64>,
    /// Tokens one task's input may hold; the critic estimates against it.
    pub context_budget: Option<u64>,
    /// Tokens the rolling context summary may hold.
    pub summary_budget: Option<u64>,
    /// Characters an error keeps after compaction.
    pub error_char_limit: u64,
    /// Whether llm agents get the `ask_user` tool.
    pub allow_clarification: bool,
}

impl Default for ControlLogic {
    fn default() -> Self {
        ControlLogic {
            strategy: Strategy::Eager,
            max_concurrency: None,
            parallel_groups: BTreeMap::new(),
            max_turns_per_phase: None,
            replan_on_empty_result: false,
            max_replans: 2,
            planner: None,
            compactor: None,
            token_budget: None,
            context_budget: None,
            summary_budget: None,
            error_char_limit: 2000,
            allow_clarification: true,
        }
    }
}

/// A limit on one parallel group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLimit {
    /// Tasks of the group running at once.
    pub max_concurrency: Option<u32>,
}

/// The name of the agent a task without one uses.
pub const DEFAULT_AGENT: &str = "default";

impl Plan {
    /// The environment variables that hold secrets (the providers' API keys, `http` agents'
    /// keys and headers): hidden from every program a run starts.
    pub fn secret_variables(&self) -> Vec<String> {
        let providers = self.providers.values().filter_map(|p| p.api_key_env.as_ref());
        let agents = self.agents.values().flat_map(|a| a.runtime.secret_variables());
        providers.chain(agents).map(|v| v.value.clone()).collect()
    }

    /// The agent a task runs on: its own, or the `default` agent.
    pub fn agent_of<'a>(&'a self, task: &'a Task) -> Option<&'a str> {
        match (&task.agent, task.kind) {
            (Some(agent), _) => Some(&agent.value),
            (None, TaskKind::Task) => Some(DEFAULT_AGENT),
            (None, _) => None,
        }
    }
}
