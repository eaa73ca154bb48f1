//! The envelope, the metadata and the spec: the top of a manifest.

use super::agents::{AGENTS, PROVIDERS, TOOLS};
use super::control::CONTROL_LOGIC;
use super::tasks::WORKFLOW;
use super::{Field, Kind, Named, Section, Shape, TEXT_MAP, TEXTS};

/// The only `apiVersion` this loader reads.
pub const API_VERSION: &str = "runner/v1";

/// The keys a workflow is read under: the canonical `workflow`, then the names the bare form
/// also reads for it. The reader, the quick YAML reader, the schema and the planner all take
/// them from here.
pub const WORKFLOW_KEYS: [&str; 4] = ["workflow", "tasks", "steps", "phases"];

/// The names the bare form reads for `workflow`: [`WORKFLOW_KEYS`] after the first.
pub(crate) const WORKFLOW_ALIASES: &[&str] = match WORKFLOW_KEYS.split_first() {
    Some((_, aliases)) => aliases,
    None => &[],
};

/// The whole enveloped document; the schema's root.
pub(crate) static ENVELOPE: Section = Section::of(&[
    Field::new("apiVersion", Shape::Const(API_VERSION), "The manifest format; always `runner/v1`.").required(),
    Field::new("kind", Shape::Const("Plan"), "The kind of document; always `Plan`.").required(),
    Field::new("metadata", Shape::Named(&METADATA_DEF), "The plan's name, description and labels.").required(),
    Field::new("spec", Shape::Named(&SPEC_DEF), "The mission, providers, tools, agents, workflow and control logic.")
        .required(),
]);

/// What the whole document is, for the schema's root.
pub(crate) const MANIFEST_DOC: &str =
    "A runner plan: a mission, the agents that work on it and the workflow they follow.";

/// `metadata`.
pub(crate) static METADATA: Section = Section::of(&[
    Field::new("name", Shape::Text, "The plan's name, used in run directories and reports.").required(),
    Field::new("description", Shape::Text, "What the plan does, for people reading it."),
    Field::new("labels", TEXT_MAP, "Free-form key-value labels, such as `team: research`."),
]);

static METADATA_DEF: Named =
    Named { name: "Metadata", doc: "What the plan is called and how it is labelled.", kind: Kind::Mapping(&METADATA) };

/// `spec`, or the whole document in the bare form.
pub(crate) static SPEC: Section = Section::of(&[
    Field::new("mission", Shape::Text, "What the plan is for; templates read it as `{{ mission }}`."),
    Field::new(
        "mission_analysis",
        Shape::Named(&MISSION_ANALYSIS_DEF),
        "The author's own analysis of the mission, which the critic checks.",
    ),
    Field::new(
        "vars",
        Shape::Map(&Shape::Json),
        "The variables the plan takes, with their defaults (any YAML value); `--var` overrides them.",
    ),
    Field::new("providers", PROVIDERS, "OpenAI-compatible LLM endpoints, by name."),
    Field::new("tools", TOOLS, "Programs llm agents can call, by name."),
    Field::new("agent_definitions", AGENTS, "The agents that do the tasks, by name.").aliases(&["agents", "workers"]),
    Field::new(
        WORKFLOW_KEYS[0],
        WORKFLOW,
        "The tasks, in order; dependencies, not the order, decide when each runs (except under `sequential`).",
    )
    .aliases(WORKFLOW_ALIASES)
    .required(),
    Field::new("control_logic", Shape::Named(&CONTROL_LOGIC), "Scheduling, budgets, replanning and context settings."),
    Field::bare("plan", Shape::Named(&NESTED_PLAN_DEF), "put `workflow` and `agent_definitions` directly in `spec`"),
]);

static SPEC_DEF: Named = Named { name: "Spec", doc: "The plan itself.", kind: Kind::Mapping(&SPEC) };

/// A bare-form `plan:` mapping that nests the agents and the workflow.
pub(crate) static NESTED_PLAN: Section = Section::of(&[
    Field::new("agent_definitions", AGENTS, "The agents that do the tasks, by name.").aliases(&["agents", "workers"]),
    Field::new(WORKFLOW_KEYS[0], WORKFLOW, "The tasks, in order.").aliases(WORKFLOW_ALIASES),
]);

static NESTED_PLAN_DEF: Named = Named {
    name: "NestedPlan",
    doc: "The agents and the workflow, nested under `plan` as some planners write them.",
    kind: Kind::Mapping(&NESTED_PLAN),
};

/// `mission_analysis`.
pub(crate) static MISSION_ANALYSIS: Section = Section::of(&[
    Field::new("estimated_complexity", Shape::Named(&COMPLEXITY), "How hard the author expects the mission to be."),
    Field::new("critical_path", TEXTS, "The chain of task ids the author expects to take longest."),
    Field::new("required_capabilities", TEXTS, "Capabilities the mission needs, such as `search` or `summarize`."),
]);

static MISSION_ANALYSIS_DEF: Named = Named {
    name: "MissionAnalysis",
    doc: "The author's analysis of the mission; informational, checked by the critic.",
    kind: Kind::Mapping(&MISSION_ANALYSIS),
};

/// The words of `estimated_complexity`.
pub(crate) static COMPLEXITY: Named = Named {
    name: "Complexity",
    doc: "A mission's difficulty: `trivial`, `low`, `medium` or `high`.",
    kind: Kind::Words(&["trivial", "low", "medium", "high"]),
};
