//! `control_logic`: scheduling, budgets, replanning, parallel groups and seed-form gates.

use super::{DURATION, Field, Kind, Named, Section, Shape, TEXTS};

/// `spec.control_logic`.
pub(crate) static CONTROL_LOGIC: Named = Named {
    name: "ControlLogic",
    doc: "How the run is scheduled, budgeted and replanned.",
    kind: Kind::Mapping(&CONTROL),
};

/// The fields of `control_logic`.
pub(crate) static CONTROL: Section = Section::of(&[
    Field::new("strategy", Shape::Named(&STRATEGY), "How tasks are scheduled (`eager` when not given)."),
    Field::new("max_concurrency", Shape::Count { min: 1 }, "Tasks running at once across the run."),
    Field::new(
        "parallel_groups",
        Shape::Map(&Shape::Named(&GROUP_DEF)),
        "Limits on tasks running at once, by parallel group name.",
    ),
    Field::new("max_turns_per_phase", Shape::Count { min: 1 }, "Agent turns allowed per phase."),
    Field::new("replan_on_empty_result", Shape::Bool, "Whether an empty output counts as a failure that replans."),
    Field::new("max_replans", Shape::Count { min: 0 }, "Replans allowed in one run (2 when not given)."),
    Field::new("planner", Shape::Text, "The agent asked for a revised workflow on replan."),
    Field::new(
        "compactor",
        Shape::Text,
        "The agent that compacts context and errors; the extractive compactor when not given.",
    ),
    Field::new("token_budget", Shape::Integer { min: 1 }, "Tokens the whole run may spend, prompt and completion."),
    Field::new(
        "context_budget",
        Shape::Integer { min: 1 },
        "Tokens one task's input may hold; the critic estimates against it.",
    ),
    Field::new(
        "budget",
        Shape::Named(&BUDGET_DEF),
        "What the run should cost and take: the critic checks its forecast against it, and a run stops dispatching once its spend passes `cost`.",
    ),
    Field::new("summary_budget", Shape::Integer { min: 1 }, "Tokens the rolling context summary may hold."),
    Field::new(
        "error_char_limit",
        Shape::Integer { min: 1 },
        "Characters an error keeps after compaction (2000 when not given).",
    ),
    Field::new("allow_clarification", Shape::Bool, "Whether llm agents get the `ask_user` tool (true when not given)."),
    Field::new(
        "synthesis_gates",
        Shape::List(&Shape::Named(&GATE_DEF)),
        "Synthesis gates in the seed form; each becomes a `synthesis_gate` task.",
    ),
]);

static BUDGET_DEF: Named =
    Named { name: "Budget", doc: "What a run should cost and take.", kind: Kind::Mapping(&BUDGET) };

/// The fields of `control_logic.budget`.
pub(crate) static BUDGET: Section = Section::of(&[
    Field::new(
        "cost",
        Shape::Number { min: 0.0, max: 1.0e12 },
        "Money the run may spend, in the currency of the providers' prices; dispatching stops once it is spent.",
    ),
    Field::new(
        "duration",
        Shape::Named(&DURATION),
        "Time the run should take; the critic checks it against the forecast (the run is not stopped at it).",
    ),
]);

/// The words of `strategy`.
pub(crate) static STRATEGY: Named = Named {
    name: "Strategy",
    doc: "How tasks are scheduled: `eager` (a task starts once its dependencies are done), `phased` (topological\nlevels, one after another) or `sequential` (one at a time, in list order).",
    kind: Kind::Words(&["eager", "phased", "sequential"]),
};

/// A parallel group's limit.
pub(crate) static GROUP: Section =
    Section::of(&[Field::new("max_concurrency", Shape::Count { min: 1 }, "Tasks of the group running at once.")]);

static GROUP_DEF: Named =
    Named { name: "GroupLimit", doc: "A limit on one parallel group.", kind: Kind::Mapping(&GROUP) };

/// A seed-form synthesis gate.
pub(crate) static GATE: Section = Section::of(&[
    Field::new("id", Shape::Text, "The gate task's id (`synthesis_gate_N` when not given)."),
    Field::new("after_tasks", TEXTS, "Ids of the tasks whose outputs the gate condenses.").required(),
    Field::new("agent", Shape::Text, "The agent that condenses; the extractive compactor when not given."),
    Field::new("max_output_tokens", Shape::Count { min: 1 }, "The gate's output cap, in tokens."),
]);

static GATE_DEF: Named = Named {
    name: "SynthesisGate",
    doc: "A synthesis gate in the seed form: it condenses the outputs of `after_tasks` for the tasks after them.",
    kind: Kind::Mapping(&GATE),
};
