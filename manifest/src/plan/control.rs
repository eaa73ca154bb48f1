//! Control logic: scheduling, budgets, replanning and context settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::At;

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
    /// What the run should cost and take; the critic checks the forecast against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<At<Budget>>,
}

/// What a run should cost and take. The critic warns when the expected figure passes it and
/// errors when the worst case can with nothing to stop it; a run stops dispatching once its
/// spend passes `cost`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Money, in the currency of the providers' prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Time from the run's start to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<crate::Duration>,
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
            budget: None,
        }
    }
}

/// A limit on one parallel group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLimit {
    /// Tasks of the group running at once.
    pub max_concurrency: Option<u32>,
}
