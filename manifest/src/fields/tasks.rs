//! Tasks and what hangs off them: verification, failure policies, attachments, phases.

use super::{ARGV, DURATION, Field, Kind, Named, Section, Shape, TEXTS};
use crate::plan::task::TASK;

/// `spec.workflow`: at least one task.
pub(crate) const WORKFLOW: Shape = Shape::NonEmptyList(&Shape::Named(&TASK_DEF));

/// A task, defined once in the schema.
static TASK_DEF: Named = Named { name: "Task", doc: "One step of the workflow.", kind: Kind::Mapping(&TASK) };

/// The words of a task's `type`.
pub(crate) static TASK_KIND: Named = Named {
    name: "TaskKind",
    doc: "What kind of step a task is: `task` (an agent does work), `synthesis_gate` (an agent condenses its\ninputs under a cap), `human_review` (a person approves or rejects), `plan` (another plan file runs as a\nchild run) or `expand` (an agent writes a plan for the step, which runs as a child run).",
    kind: Kind::Words(&["task", "synthesis_gate", "human_review", "plan", "expand"]),
};

/// A bare-form phase: tasks that share dependencies.
pub(crate) static PHASE: Section = Section::of(&[
    Field::new("id", Shape::Text, "The phase's name.").aliases(&["step_id", "name"]),
    Field::new("tasks", Shape::List(&Shape::Named(&TASK_DEF)), "The phase's tasks.").aliases(&["steps"]),
    Field::new("depends_on", TEXTS, "Ids of the tasks every task of the phase waits for.").aliases(&[
        "requires",
        "after",
        "dependencies",
    ]),
]);

/// A task's `verification`.
pub(crate) static VERIFICATION: Section = Section::of(&[
    Field::new("type", Shape::Named(&VERIFICATION_KIND), "The kind of check.").required(),
    Field::new("schema", Shape::Json, "The JSON Schema the output must be valid against (`schema_check`).")
        .only_for(&["schema_check"]),
    Field::new(
        "agent",
        Shape::Text,
        "The reviewer agent, which answers `{\"pass\": bool, \"reason\": str}` (`llm_reviewer`).",
    )
    .only_for(&["llm_reviewer"]),
    Field::new("criteria", Shape::Text, "What the reviewer checks (`llm_reviewer`).").only_for(&["llm_reviewer"]),
    Field::new(
        "command",
        Shape::Named(&ARGV),
        "The argv that reads the output on stdin and passes with exit status 0 (`command`).",
    )
    .only_for(&["command"]),
]);

pub(crate) static VERIFICATION_DEF: Named = Named {
    name: "Verification",
    doc: "How a task's output is checked; `type` decides which of the other fields apply.",
    kind: Kind::Mapping(&VERIFICATION),
};

/// The words of a verification's `type`.
pub(crate) static VERIFICATION_KIND: Named = Named {
    name: "VerificationKind",
    doc: "The kind of check: `schema_check` (JSON valid against a schema), `llm_reviewer` (an agent judges),\n`command` (a program judges) or `none`.",
    kind: Kind::Words(&["schema_check", "llm_reviewer", "command", "none"]),
};

pub(crate) static ON_FAILURE: Named = Named {
    name: "OnFailure",
    doc: "What a task does when an attempt fails: a word, or a retry policy spelled out.",
    kind: Kind::AnyOf(&[Shape::Named(&ACTION), Shape::Named(&FAILURE_DEF)]),
};

/// `for_each`: an expression that yields a list when the task is ready, or a list written out.
pub(crate) static FOR_EACH_DEF: Named = Named {
    name: "ForEach",
    doc: "What a task maps over: an expression over the template context that yields a list (a JSON array in an\nupstream output, a list in `vars`), or a list written in the plan.",
    kind: Kind::AnyOf(&[Shape::Text, Shape::List(&Shape::Json)]),
};

/// The words of `on_failure` and its `action`.
pub(crate) static ACTION: Named = Named {
    name: "Action",
    doc: "What to do on failure: `retry` (with backoff, then `then`), `skip` (dependents still run), `replan` (ask\nthe planner agent) or `fail` (fail the run).",
    kind: Kind::Words(&["retry", "skip", "replan", "fail"]),
};

/// An `on_failure` policy spelled out.
pub(crate) static FAILURE: Section = Section::of(&[
    Field::new("action", Shape::Named(&ACTION), "The first thing to do.").required(),
    Field::new("max_attempts", Shape::Count { min: 1 }, "Total attempts, the first included (3 when not given).")
        .only_for(&["retry"]),
    Field::new(
        "backoff",
        Shape::Named(&DURATION),
        "The delay before the second attempt, doubled for each further one (1s when not given).",
    )
    .only_for(&["retry"]),
    Field::new("max_backoff", Shape::Named(&DURATION), "The longest delay between attempts (60s when not given).")
        .only_for(&["retry"]),
    Field::new("then", Shape::Named(&AFTER_RETRIES), "What to do when the retries run out (`fail` when not given).")
        .only_for(&["retry"]),
    Field::new(
        "retry_on",
        Shape::Named(&RETRY_ON),
        "Which failures are retried (`any` when not given); the others go straight to `then`.",
    )
    .only_for(&["retry"]),
]);

static FAILURE_DEF: Named = Named {
    name: "FailurePolicyMap",
    doc: "A failure policy; everything but `action` applies only to `action: retry`.",
    kind: Kind::Mapping(&FAILURE),
};

static AFTER_RETRIES: Named = Named {
    name: "AfterRetries",
    doc: "What to do when retries run out: `skip`, `replan` or `fail`.",
    kind: Kind::Words(&["skip", "replan", "fail"]),
};

/// The words of `retry_on`.
pub(crate) static RETRY_ON: Named = Named {
    name: "RetryOn",
    doc: "`any`: every failure a retry could fix; `transient`: only timeouts, 408, 429, 5xx, connection errors\nand broken streams.",
    kind: Kind::Words(&["any", "transient"]),
};

/// An attachment.
pub(crate) static ATTACHMENT: Section = Section::one_of(&[
    Field::new("link", Shape::Text, "A URL, listed in the prompt."),
    Field::new("file", Shape::Text, "A file, read (size-capped) and inlined; relative to the plan's folder."),
]);

pub(crate) static ATTACHMENT_DEF: Named = Named {
    name: "Attachment",
    doc: "Something handed to the agent with the task input: give exactly one of `link` or `file`.",
    kind: Kind::Mapping(&ATTACHMENT),
};
