//! The field tables of a plan test (`kind: PlanTest`): the same kind of description as the
//! plan's, so the reader and the published schema come from one place.

use crate::fields::{DURATION, Field, Kind, Named, Section, Shape, TEXT_MAP, TEXTS};

/// The kind a plan test's envelope names.
pub const KIND: &str = "PlanTest";

/// The run statuses an expectation may name.
pub const RUN_STATUSES: [&str; 5] = ["succeeded", "failed", "partial", "paused", "cancelled"];

/// The task status an expectation may name besides those of the run log: a task a replan took
/// out of the plan.
pub const REPLACED: &str = "replaced";

/// The whole document.
pub(crate) static TEST_ENVELOPE: Section = Section::of(&[
    Field::new("apiVersion", Shape::Const(crate::fields::API_VERSION), "The format; always `runner/v1`.").required(),
    Field::new("kind", Shape::Const(KIND), "The kind of document; always `PlanTest`.").required(),
    Field::new("metadata", Shape::Named(&TEST_METADATA_DEF), "The scenario's name and description.").required(),
    Field::new("spec", Shape::Named(&TEST_SPEC_DEF), "The plan under test, its overrides and expectations.").required(),
]);

/// What a plan test is, for the schema's root.
pub(crate) const TEST_DOC: &str = "A runner plan test: a plan (or a request to plan), scripted agents and tools, \
     and what the run must come to, checked in virtual time.";

/// `metadata`.
pub(crate) static TEST_METADATA: Section = Section::of(&[
    Field::new("name", Shape::Text, "The scenario's name, shown in reports and matched by `--filter`.").required(),
    Field::new("description", Shape::Text, "What the scenario checks, for people reading it."),
]);

static TEST_METADATA_DEF: Named =
    Named { name: "TestMetadata", doc: "What the scenario is called.", kind: Kind::Mapping(&TEST_METADATA) };

/// `spec`.
pub(crate) static TEST_SPEC: Section = Section::of(&[
    Field::new("plan", Shape::Text, "The plan file, relative to this file. Give `plan` or `request`."),
    Field::new(
        "request",
        Shape::Text,
        "A request that `runner plan`'s deterministic planner turns into the plan under test.",
    ),
    Field::new(
        "vars",
        Shape::Map(&Shape::Json),
        "Values for `{{ vars.NAME }}` (any YAML value), as `--var` gives them: they override the plan's `spec.vars`.",
    ),
    Field::new(
        "strategy",
        Shape::Named(&crate::fields::STRATEGY),
        "Schedule with this strategy instead of the plan's, as `runner apply --strategy` does.",
    ),
    Field::new("overrides", Shape::Named(&OVERRIDES_DEF), "Scripted agents, tasks, tools and planner."),
    Field::new("answers", TEXT_MAP, "The answer to each task's clarifying question, by task id."),
    Field::new("reviews", Shape::Map(&Shape::Named(&DECISION_DEF)), "The decision of each review, by task id."),
    Field::new(
        "cache",
        TEXT_MAP,
        "Outputs the task cache holds before the run, by task id, each stored for the key the run gives that task; a task whose `cache` is on (or every task, with `reuse`) takes its output instead of running when its dependencies are reused too.",
    ),
    Field::new(
        "reuse",
        Shape::Bool,
        "Reuse every stored output whatever the tasks' `cache`, as `runner apply --reuse` does.",
    ),
    Field::new("expect", Shape::Named(&EXPECT_DEF), "What the run must come to."),
]);

static TEST_SPEC_DEF: Named = Named { name: "TestSpec", doc: "The scenario.", kind: Kind::Mapping(&TEST_SPEC) };

/// `spec.overrides`.
pub(crate) static OVERRIDES: Section = Section::of(&[
    Field::new("agents", Shape::Map(&Shape::Named(&SCRIPT_DEF)), "Scripts by agent name: every task of the agent."),
    Field::new("tasks", Shape::Map(&Shape::Named(&SCRIPT_DEF)), "Scripts by task id; they win over the agent's."),
    Field::new("tools", Shape::Map(&Shape::Named(&TOOL_RESULT_DEF)), "Scripted tool results, by tool name."),
    Field::new("planner", Shape::List(&Shape::Named(&REPLY_DEF)), "The planner's replies on replan, by round."),
]);

static OVERRIDES_DEF: Named =
    Named { name: "Overrides", doc: "Scripted behaviour for this test only.", kind: Kind::Mapping(&OVERRIDES) };

/// A script of replies.
pub(crate) static SCRIPT: Section = Section::of(&[
    Field::new("replies", Shape::List(&Shape::Named(&REPLY_DEF)), "One reply per attempt; the last repeats."),
    Field::new("latency", Shape::Named(&DURATION), "How long each reply takes, in virtual time."),
]);

static SCRIPT_DEF: Named = Named { name: "Script", doc: "Replies by attempt.", kind: Kind::Mapping(&SCRIPT) };

/// One scripted reply spelled out.
pub(crate) static REPLY: Section = Section::one_of_leading(
    6,
    &[
        Field::new("output", Shape::Text, "Succeed with this text."),
        Field::new("json", Shape::Json, "Succeed with this value, written as JSON."),
        Field::new("fail", Shape::Text, "Fail with this error (a retry may fix it)."),
        Field::new("transient", Shape::Text, "Fail as a service does (429, 503): what `retry_on: transient` retries."),
        Field::new("clarify", Shape::Text, "Ask this question; `answers` gives the reply."),
        Field::new("tool", Shape::Text, "Call this tool; its scripted result is the output."),
        Field::new("arguments", Shape::Json, "The tool call's arguments.").only_for(&["tool"]),
        Field::new(
            "tokens",
            Shape::Named(&crate::fields::USAGE_DEF),
            "The token usage the reply reports, counted as a server's `usage` is (budgets, `runner status`).",
        ),
    ],
);

static REPLY_DEF: Named = Named {
    name: "Reply",
    doc: "A text (the output), or one of `output`, `json`, `fail`, `transient`, `clarify`, `tool`.",
    kind: Kind::AnyOf(&[Shape::Text, Shape::Named(&REPLY_MAP_DEF)]),
};

static REPLY_MAP_DEF: Named = Named { name: "ReplyOutcome", doc: "One reply.", kind: Kind::Mapping(&REPLY) };

/// A tool's scripted result.
pub(crate) static TOOL_RESULT: Section = Section::of(&[Field::new(
    "result",
    Shape::Json,
    "What every call returns (`[]` for a search that finds nothing).",
)
.required()]);

static TOOL_RESULT_DEF: Named =
    Named { name: "ToolResult", doc: "A scripted tool.", kind: Kind::Mapping(&TOOL_RESULT) };

/// A review's decision.
pub(crate) static DECISION: Section = Section::of(&[
    Field::new("approve", Shape::Bool, "Whether the review approves.").required(),
    Field::new("comment", Shape::Text, "The reviewer's comment."),
]);

static DECISION_DEF: Named = Named { name: "Decision", doc: "A review's decision.", kind: Kind::Mapping(&DECISION) };

/// `spec.expect`.
pub(crate) static EXPECT: Section = Section::of(&[
    Field::new("status", Shape::Choice(&RUN_STATUSES), "The run's status at the end."),
    Field::new("tasks", Shape::Map(&Shape::Named(&TASK_EXPECT_DEF)), "Expectations by task id."),
    Field::new(
        "events",
        Shape::List(&Shape::Named(&EVENT_MATCH_DEF)),
        "Events that must (or, `absent`, must not) occur.",
    ),
    Field::new("order", Shape::List(&Shape::Named(&EVENT_MATCH_DEF)), "Events that must occur in this order."),
    Field::new("max_tokens", Shape::Integer { min: 0 }, "The most tokens the whole run may use (prompts and outputs)."),
    Field::new("makespan", Shape::Named(&DURATION), "The longest the run may take, in virtual time."),
    Field::new("critic", Shape::Named(&CRITIC_EXPECT_DEF), "Critic findings that must or must not be reported."),
]);

static EXPECT_DEF: Named = Named { name: "Expect", doc: "What the run must come to.", kind: Kind::Mapping(&EXPECT) };

/// One task's expectations.
pub(crate) static TASK_EXPECT: Section = Section::of(&[
    // One of the run log's task statuses or `replaced`, from the caller's `Vocabulary`.
    Field::new("status", Shape::Text, "The task's status at the end."),
    Field::new("attempts", Shape::Count { min: 0 }, "How many attempts it made."),
    Field::new("output", Shape::Named(&OUTPUT_CHECK_DEF), "What its output must be."),
    Field::new("max_prompt_tokens", Shape::Integer { min: 0 }, "The most tokens any of its rendered inputs may have."),
    Field::new(
        "min_prompt_tokens",
        Shape::Integer { min: 0 },
        "The fewest tokens its largest rendered input may have: states that a prompt overflows.",
    ),
]);

static TASK_EXPECT_DEF: Named =
    Named { name: "TaskExpect", doc: "What one task must come to.", kind: Kind::Mapping(&TASK_EXPECT) };

/// Checks of an output.
pub(crate) static OUTPUT_CHECK: Section = Section::of(&[
    Field::new("equals", Shape::Text, "The output is exactly this."),
    Field::new("contains", Shape::Text, "The output contains this."),
    Field::new("matches", Shape::Text, "The output matches this regular expression."),
    Field::new("pointer", Shape::Text, "A JSON pointer into the output (read as JSON), such as `/findings/0`."),
    Field::new("value", Shape::Json, "What the value at `pointer` equals."),
]);

static OUTPUT_CHECK_DEF: Named =
    Named { name: "OutputCheck", doc: "Checks of a task's output.", kind: Kind::Mapping(&OUTPUT_CHECK) };

/// An event to look for.
pub(crate) static EVENT_MATCH: Section = Section::of(&[
    // One of the run log's event types, from the caller's `Vocabulary`.
    Field::new("type", Shape::Text, "The event's type.").required(),
    Field::new("task", Shape::Text, "The task it is about."),
    Field::new("tool", Shape::Text, "The tool it is about (tool calls and their approvals)."),
    Field::new(
        "arguments",
        Shape::Json,
        "The arguments of the tool call, as JSON (`ToolCallStarted`, `ToolApprovalRequested`).",
    ),
    Field::new("absent", Shape::Bool, "The event must not occur (only under `events`)."),
]);

static EVENT_MATCH_DEF: Named =
    Named { name: "EventMatch", doc: "An event by type and task.", kind: Kind::Mapping(&EVENT_MATCH) };

/// Critic expectations.
pub(crate) static CRITIC_EXPECT: Section = Section::of(&[
    Field::new("reported", TEXTS, "Finding codes the critic must report, such as `critic::single_point_of_failure`."),
    Field::new("not_reported", TEXTS, "Finding codes the critic must not report."),
]);

static CRITIC_EXPECT_DEF: Named =
    Named { name: "CriticExpect", doc: "The critic's findings.", kind: Kind::Mapping(&CRITIC_EXPECT) };
