//! The events that carry a plan or part of one: a run's start, a replan's splice, and the
//! tasks of a plan that grows while it runs.

use std::sync::Arc;

use manifest::Plan;
use serde::{Deserialize, Serialize};

use super::Tokens;
use crate::plan_hash::PlanHash;

/// The run started: the normalised plan it runs and its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCreated {
    /// The event schema version.
    pub schema: u32,
    /// The normalised plan (shared, not copied, between the event and the run's state).
    pub plan: Arc<Plan>,
    /// The sha256 of the plan's JSON, hex (computed when first read).
    pub plan_sha256: PlanHash,
    /// `--var` values.
    pub vars: manifest::plan::Vars,
    /// The strategy the run uses (the plan's, or `--strategy`).
    pub strategy: manifest::plan::Strategy,
    /// The plan file, absolute; commands run in its folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The run this one retries, reusing its outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
    /// The run and task that started this run as a sub-plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<crate::child::Parent>,
    /// The W3C `traceparent` of the run's span when its spans are exported, so the
    /// processes that resume it add to the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Tools whose calls need no approval in this run (`runner apply --approve-tool`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_tools: Vec<String>,
    /// Set when a planner is still writing the plan (`runner do`): more tasks follow as
    /// `TaskPlanned` events until `PlanWritten`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growing: Option<Growing>,
    /// How the run reuses stored outputs beyond the tasks' `cache` (`runner apply --reuse`).
    #[serde(default, skip_serializing_if = "crate::Reuse::is_default")]
    pub cache_reuse: crate::Reuse,
    /// What the run was forecast to take when it started (`runner apply` records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<Box<super::Forecasted>>,
}

/// What a plan that grows while it runs was asked for, so that a resumed run can ask the
/// planner to go on from the lines recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Growing {
    /// The request in plain words.
    pub request: String,
    /// The lines the planner had written when the run was created (its header and the first
    /// task), as it wrote them; the rest are in `TaskPlanned` events.
    pub lines: Vec<String>,
    /// How the planner was set up (provider, models, template), as the command that started
    /// the run recorded it for itself; the machine does not read it.
    #[serde(default)]
    pub author: serde_json::Value,
}

/// The planner wrote one more task of a growing plan: it joins the plan at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPlanned {
    /// The planner's line it came from, from 1 (the header is line 1).
    pub line: u32,
    /// The line as the planner wrote it.
    pub text: String,
    /// The task, normalised as the loader reads it.
    pub task: manifest::plan::Task,
}

/// The planner's replacement was spliced in: the failed task and its unstarted
/// descendants were removed and new tasks added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replanned {
    /// The failed task.
    pub task: String,
    /// Task ids taken out.
    pub removed: Vec<String>,
    /// Task ids put in.
    pub added: Vec<String>,
    /// The whole plan from now on.
    pub plan: Arc<Plan>,
    /// The critic's score of the new plan (0-10).
    pub score: f64,
    /// Tokens the planner used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
}
