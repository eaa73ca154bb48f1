//! Tasks: one step of the workflow, the fields few tasks set, and what a task's templates read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{At, Cache, FailurePolicy, ForEach, Verification};
use crate::duration::Duration;
use crate::fields::declare::{is_default, value_is_default};
use crate::fields::{
    ATTACHMENT_DEF, CACHE_DEF, DURATION, FOR_EACH_DEF, Field, ON_FAILURE, Shape, TASK_KIND, TEXTS, VERIFICATION_DEF,
    declare_task,
};
use crate::source::Loc;
use crate::text::Text;

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
    /// Another plan file runs as a child run (`plan`, `with`).
    Plan,
    /// An agent writes a plan for a compound step at run time, which runs as a child run.
    Expand,
}

impl TaskKind {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Task => "task",
            TaskKind::SynthesisGate => "synthesis_gate",
            TaskKind::HumanReview => "human_review",
            TaskKind::Plan => "plan",
            TaskKind::Expand => "expand",
        }
    }
}

// Every field of a task, declared once: the manifest's `TASK` table, `Task`, `Extras` and the
// task's JSON are built from this list (see `fields/declare.rs`); `normalize/tasks.rs` reads
// each field, and `fields/round_trip.rs` loads every example.
declare_task! {
    /// One step of the workflow. A field at its default is left out of the plan's JSON (a run's
    /// `RunCreated` holds every task) and read back as the default; the fields few tasks set are
    /// written as if they were the task's own, so the JSON is the same whether they are boxed.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Task {
        /// The upstream outputs its templates read, each at the place it is read; filled in by
        /// the loader's validation.
        pub reads: Vec<Read>,
        /// Where the task was written (its mapping).
        pub loc: Loc,
        /// The fields few tasks set, read with [`Task::extras`] and set with [`Task::set_extras`].
        pub extras: ExtrasBox,
    }

    /// The fields of a task that few tasks set, kept together behind one box so that a task of a
    /// large plan stays small.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Extras;

    /// The extras of a task that sets none of them.
    static NO_EXTRAS;

    /// A task: the manifest's fields, in the order the reader lists them in suggestions.
    static TASK, examples TASK_EXAMPLES;

    fields {
        /// The unique id.
        core id: At<Text> => required,
            field Field::new("id", Shape::Text, "The task's unique id; other tasks and templates refer to it.")
                .aliases(&["step_id", "name"])
                .required(),
            example r#"{"id": "renamed"}"#;
        /// What kind of step it is.
        core kind: TaskKind => left out if is_default,
            field Field::new("type", Shape::Named(&TASK_KIND), "What kind of step it is (`task` when not given)."),
            example r#"{"type": "synthesis_gate", "depends_on": ["a"]}"#;
        /// The agent that does it; `None` for human reviews and agent-less gates.
        core agent: Option<At<Text>> => left out if Option::is_none,
            field Field::new("agent", Shape::Text, "The agent that does it; a `human_review` has none.")
                .aliases(&["worker", "assigned_to"]),
            example r#"{"agent": "reviewer"}"#;
        /// The input template.
        core input: Option<At<String>> => left out if Option::is_none,
            field Field::new("input", Shape::Text, "The input template, such as `Summarise {{ tasks.search.output }}`.")
                .aliases(&["query", "action", "description"]),
            example r#"{"input": "Check it again."}"#;
        /// The question shown to the reviewer (`human_review`).
        extras prompt: Option<At<String>> => left out if Option::is_none,
            field Field::new("prompt", Shape::Text, "The question shown to the reviewer of a `human_review`."),
            example r#"{"type": "human_review", "agent": null, "prompt": "Good enough?"}"#;
        /// Tasks that must finish first (gate inputs included).
        core depends_on: Vec<At<Text>> => left out if Vec::is_empty,
            field Field::new("depends_on", TEXTS, "Ids of the tasks that must finish first.")
                .aliases(&["requires", "after", "dependencies"]),
            example r#"{"depends_on": ["a"]}"#;
        /// A gate's inputs: the tasks whose outputs it condenses (also in `depends_on`).
        extras inputs: Vec<At<Text>> => left out if Vec::is_empty,
            field Field::new(
                "inputs",
                TEXTS,
                "Ids of the tasks whose outputs a `synthesis_gate` condenses; it depends on them.",
            ),
            example r#"{"type": "synthesis_gate", "inputs": ["a"]}"#;
        /// The previous task in list order, when `strategy: sequential` added that dependency
        /// and the author did not write it. Not among the extras: a sequential plan sets it on
        /// every task but the first.
        core chained_after: Option<Box<str>> => left out if Option::is_none,
            plan only,
            example r#"{"chained_after": "a"}"#;
        /// The parallel group it belongs to.
        extras parallel_group: Option<At<String>> => left out if Option::is_none,
            field Field::new(
                "parallel_group",
                Shape::Text,
                "The parallel group it belongs to, limited in `control_logic.parallel_groups`.",
            ),
            example r#"{"parallel_group": "pair"}"#;
        /// How its output is checked.
        extras verification: Option<Verification> => left out if Option::is_none,
            field Field::new(
                "verification",
                Shape::Named(&VERIFICATION_DEF),
                "How its output is checked before it counts as a success.",
            ),
            example r#"{"verification": {"type": "command", "command": ["true"]}}"#;
        /// What happens when it fails.
        core on_failure: At<FailurePolicy> => left out if value_is_default,
            field Field::new(
                "on_failure",
                Shape::Named(&ON_FAILURE),
                "What happens when an attempt fails (`fail` when not given).",
            ),
            example r#"{"on_failure": "skip"}"#;
        /// Whether the run fails when this task does not succeed.
        core critical: bool => left out if is_default,
            field Field::new("critical", Shape::Bool, "Whether the run fails when this task does not succeed."),
            example r#"{"critical": true}"#;
        /// How long one attempt may take.
        extras timeout: Option<Duration> => left out if Option::is_none,
            field Field::new("timeout", Shape::Named(&DURATION), "How long one attempt may take."),
            example r#"{"timeout": "10s"}"#;
        /// Links and files given to the agent.
        extras attachments: Vec<At<Attachment>> => left out if Vec::is_empty,
            field Field::new(
                "attachments",
                Shape::List(&Shape::Named(&ATTACHMENT_DEF)),
                "Links and files handed to the agent with the input.",
            ),
            example r#"{"attachments": [{"link": "https://example.com/style.pdf"}]}"#;
        /// A gate's output cap in tokens.
        extras max_output_tokens: Option<u32> => left out if Option::is_none,
            field Field::new("max_output_tokens", Shape::Count { min: 1 }, "The output cap of a `synthesis_gate`, in tokens."),
            example r#"{"type": "synthesis_gate", "depends_on": ["a"], "max_output_tokens": 100}"#;
        /// A condition: the task runs only when this expression holds once its dependencies are
        /// done, and is skipped (for that reason) otherwise.
        extras when: Option<At<String>> => left out if Option::is_none,
            field Field::new(
                "when",
                Shape::Text,
                "A condition, such as `tasks.triage.output.kind == \"web\"`: the task runs only when it holds.",
            ),
            example r#"{"when": "vars.deep"}"#;
        /// What it maps over: one item task per element of the list.
        extras for_each: Option<At<ForEach>> => left out if Option::is_none,
            field Field::new(
                "for_each",
                Shape::Named(&FOR_EACH_DEF),
                "A list, or an expression yielding one, such as `tasks.search.output.results`: the task runs once per item.",
            ),
            example r#"{"for_each": ["a", "b"]}"#;
        /// The most items a map over run-time data may have.
        extras max_items: Option<At<u32>> => left out if Option::is_none,
            field Field::new(
                "max_items",
                Shape::Count { min: 1 },
                "The most items `for_each` may yield; a longer list fails the task.",
            ),
            example r#"{"for_each": ["x"], "max_items": 5}"#;
        /// The plan file a `type: plan` task runs as a child run, relative to this plan's file.
        extras plan: Option<At<String>> => left out if Option::is_none,
            field Field::new(
                "plan",
                Shape::Text,
                "The plan file a `type: plan` task runs as a child run, relative to this plan's file.",
            ),
            example r#"{"type": "plan", "agent": null, "plan": "child.yaml"}"#;
        /// The variables a sub-plan's child run gets, each a template (or any YAML value).
        extras with: With => left out if BTreeMap::is_empty,
            field Field::new(
                "with",
                Shape::Map(&Shape::Json),
                "The variables a `type: plan` task gives its child run: a template each, such as `{{ item }}` (one expression passes its value, lists and objects included).",
            ),
            example r#"{"type": "plan", "agent": null, "plan": "child.yaml", "with": {"topic": "{{ vars.topic }}"}}"#;
        /// The most tasks the plan an `expand` step writes may have.
        extras max_tasks: Option<At<u32>> => left out if Option::is_none,
            field Field::new(
                "max_tasks",
                Shape::Count { min: 1 },
                "The most tasks the plan an `expand` step's agent writes may have.",
            ),
            example r#"{"type": "expand", "max_tasks": 5}"#;
        /// Whether its output is reused from earlier runs, over its agent's `cache`.
        extras cache: Option<At<Cache>> => left out if Option::is_none,
            field Field::new(
                "cache",
                Shape::Named(&CACHE_DEF),
                "Whether an output an earlier run stored for the same key (input, agent, attachments, verification) is used instead of running: `true`, `false` or `{ttl: 7d, version: 2}`; over its agent's `cache`.",
            ),
            example r#"{"cache": {"ttl": "7d", "version": 2}}"#;
        // A second way to say `on_failure: retry`, read only from plans LLMs wrote.
        bare max_retries => on_failure,
            field Field::bare("max_retries", Shape::Count { min: 0 }, "write `on_failure: {action: retry, max_attempts: N}`")
                .aliases(&["retries"]),
            example r#"{"max_retries": 2}"#;
    }
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

    /// Whether it has a `when` or a `for_each`: something decided when it is ready.
    pub fn is_dynamic(&self) -> bool {
        let extras = self.extras();
        extras.when.is_some() || extras.for_each.is_some()
    }

    /// Whether its input reads `{{ context_summary }}`, the run's rolling summary of every
    /// output recorded before it.
    pub fn reads_context_summary(&self) -> bool {
        self.input.as_ref().is_some_and(|input| input.value.contains("context_summary"))
    }
}

/// A sub-plan's variables by name, each a template or a YAML value, where it was written.
pub type With = BTreeMap<String, At<serde_json::Value>>;

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

/// Something handed to the agent with the task input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    /// A URL, listed in the prompt.
    Link(String),
    /// A file, read (size-capped) and inlined; relative to the plan's folder.
    File(String),
}
