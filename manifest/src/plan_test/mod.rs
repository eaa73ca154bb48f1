//! Plan tests (`kind: PlanTest`, `*.test.yaml`): a plan or a request, scripted agents and tools
//! that replace the real ones for the test only, and the expectations a run must meet.
//!
//! [`load_test_str`] reads a scenario into a [`PlanTest`] with located diagnostics, like a plan;
//! [`PlanTest::check_against`] reports overrides and expectations that name an agent, task or
//! tool the plan lacks. Running a scenario is the engine's and the CLI's business.

mod check;
mod fields;
mod read;

use std::path::Path;

pub use fields::{KIND, REPLACED, RUN_STATUSES};
pub(crate) use fields::{TEST_DOC, TEST_ENVELOPE};

use crate::diagnostic::Diagnostic;
use crate::duration::Duration;
pub use crate::plan::Usage;
use crate::plan::{At, Strategy};
use crate::source::Source;

/// A scenario: what it tests, how the world behaves in it, and what must come of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanTest {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// The plan under test.
    pub subject: Option<Subject>,
    /// Values for `{{ vars.NAME }}`, any YAML value each, in the order written; they override
    /// the plan's declared defaults as `--var` does.
    pub vars: Vec<(At<String>, serde_json::Value)>,
    /// The strategy the run schedules with instead of the plan's, as `apply --strategy` gives it.
    pub strategy: Option<Strategy>,
    /// Scripted behaviour.
    pub overrides: Overrides,
    /// Answers to clarifying questions, by task.
    pub answers: Vec<(At<String>, String)>,
    /// Review decisions, by task: approved, and the comment.
    pub reviews: Vec<(At<String>, bool, Option<String>)>,
    /// Outputs the task cache holds before the run, by task: each stored for the key the run
    /// gives that task.
    pub cached: Vec<(At<String>, String)>,
    /// Whether the run reuses every stored output whatever the tasks' `cache`, as
    /// `runner apply --reuse` does.
    pub reuse: bool,
    /// What the run must come to.
    pub expect: Expect,
}

/// Where the plan under test comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// A plan file, relative to the scenario.
    Plan(At<String>),
    /// A request for the deterministic planner.
    Request(At<String>),
}

/// Scripts that replace agents, tasks' agents, tools and the planner for one test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Scripts by agent name.
    pub agents: Vec<(At<String>, Script)>,
    /// Scripts by task id; a task's script wins over its agent's.
    pub tasks: Vec<(At<String>, Script)>,
    /// Scripted results by tool name.
    pub tools: Vec<(At<String>, serde_json::Value)>,
    /// The planner's replies on replan, by round (the last repeats).
    pub planner: Vec<Reply>,
}

/// Replies by attempt, and how long each takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    /// One per attempt; the last repeats. Empty: the rendered input is echoed.
    pub replies: Vec<Reply>,
    /// The virtual time each reply takes.
    pub latency: Option<Duration>,
}

/// One scripted reply: what the agent does, and the token usage it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What the reply is.
    pub outcome: Outcome,
    /// The usage it reports, as a server's `usage` does; `None` reports none.
    pub tokens: Option<Usage>,
}

impl From<Outcome> for Reply {
    fn from(outcome: Outcome) -> Self {
        Reply { outcome, tokens: None }
    }
}

/// What a scripted reply is.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Succeed with this text.
    Output(String),
    /// Succeed with this value as JSON.
    Json(serde_json::Value),
    /// Fail with an error a retry may fix.
    Fail(String),
    /// Fail as an unavailable service does.
    Transient(String),
    /// Ask a question.
    Clarify(String),
    /// Call a tool (its scripted result is the output).
    Tool {
        /// The tool's name.
        tool: At<String>,
        /// The call's arguments.
        arguments: serde_json::Value,
    },
}

/// What the run must come to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// The run's final status word.
    pub status: Option<At<String>>,
    /// Expectations by task.
    pub tasks: Vec<(At<String>, TaskExpect)>,
    /// Events that must, or must not, occur.
    pub events: Vec<EventMatch>,
    /// Events that must occur in this order.
    pub order: Vec<EventMatch>,
    /// The most tokens the run may use.
    pub max_tokens: Option<At<u64>>,
    /// The longest the run may take in virtual time.
    pub makespan: Option<At<Duration>>,
    /// Finding codes the critic must report.
    pub reported: Vec<At<String>>,
    /// Finding codes the critic must not report.
    pub not_reported: Vec<At<String>>,
}

/// What one task must come to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskExpect {
    /// Its final status word.
    pub status: Option<At<String>>,
    /// How many attempts it made.
    pub attempts: Option<At<u32>>,
    /// Checks of its output.
    pub output: Vec<At<OutputCheck>>,
    /// The most tokens any rendered input of it may have.
    pub max_prompt_tokens: Option<At<u64>>,
    /// The fewest tokens its largest rendered input may have.
    pub min_prompt_tokens: Option<At<u64>>,
}

/// One check of an output.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputCheck {
    /// Exactly this text.
    Equals(String),
    /// Contains this text.
    Contains(String),
    /// Matches this regular expression.
    Matches(String),
    /// The JSON value at a pointer equals this.
    Pointer(String, serde_json::Value),
}

/// An event by type and, optionally, task.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMatch {
    /// The event type, such as `Replanned`.
    pub kind: String,
    /// The task it is about.
    pub task: Option<At<String>>,
    /// The tool it is about.
    pub tool: Option<At<String>>,
    /// The tool call's arguments.
    pub arguments: Option<serde_json::Value>,
    /// Whether it must not occur.
    pub absent: bool,
    /// Where the expectation is written.
    pub loc: crate::source::Loc,
}

impl EventMatch {
    /// The event as a reader writes it: `TaskSkipped(search)`, `ToolCallStarted(clean, rm {"path":"x"})`.
    pub fn describe(&self) -> String {
        let mut about: Vec<String> = self.task.iter().map(|t| t.value.clone()).collect();
        if let Some(tool) = &self.tool {
            about.push(match &self.arguments {
                Some(arguments) => format!("{} {arguments}", tool.value),
                None => tool.value.clone(),
            });
        } else if let Some(arguments) = &self.arguments {
            about.push(arguments.to_string());
        }
        match about.is_empty() {
            true => self.kind.clone(),
            false => format!("{}({})", self.kind, about.join(", ")),
        }
    }
}

/// A scenario as read: its source, the test when the document had its shape, and every
/// diagnostic.
#[derive(Debug, Clone)]
pub struct LoadedTest {
    /// The scenario's text.
    pub source: Source,
    /// The scenario, when it could be read.
    pub test: Option<PlanTest>,
    /// Everything found.
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadedTest {
    /// The scenario, when nothing is an error.
    pub fn valid(&self) -> Option<&PlanTest> {
        self.test.as_ref().filter(|_| !self.diagnostics.iter().any(Diagnostic::is_error))
    }
}

/// The words of the run log an expectation may name: its event types and task statuses.
/// `machine` declares them; the caller hands them in, as this crate cannot depend on it.
#[derive(Debug, Clone, Copy)]
pub struct Vocabulary {
    /// The event types (`Event::NAMES`).
    pub events: &'static [&'static str],
    /// The task statuses (`TaskStatus::NAMES`); an expectation may also name [`REPLACED`].
    pub task_statuses: &'static [&'static str],
}

impl Vocabulary {
    /// Puts the words into a plan test schema, as the enumerations of an event's `type` and a
    /// task expectation's `status`.
    pub(crate) fn add_to_schema(&self, schema: &mut serde_json::Value) {
        let definitions = &mut schema["definitions"];
        definitions["EventMatch"]["properties"]["type"]["enum"] = serde_json::json!(self.events);
        let statuses: Vec<&str> = self.task_statuses.iter().copied().chain([REPLACED]).collect();
        definitions["TaskExpect"]["properties"]["status"]["enum"] = serde_json::json!(statuses);
    }
}

/// Reads a scenario file, its event types and task statuses checked against `vocabulary`.
pub fn load_test_file(path: &Path, vocabulary: &Vocabulary) -> LoadedTest {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => load_test_str(&name, &text, vocabulary),
        Err(error) => {
            let problem = crate::Problem::Io { reason: error.to_string() };
            let diagnostic = Diagnostic::error(problem, crate::Loc::default()).label("");
            LoadedTest { source: Source::new(name, ""), test: None, diagnostics: vec![diagnostic] }
        }
    }
}

/// Reads a scenario from text, its event types and task statuses checked against
/// `vocabulary`; `name` is shown in diagnostics.
pub fn load_test_str(name: &str, text: &str, vocabulary: &Vocabulary) -> LoadedTest {
    let source = Source::new(name, text);
    let (test, diagnostics) = read::read(text, vocabulary);
    LoadedTest { source, test, diagnostics }
}
