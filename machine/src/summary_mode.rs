//! How a run keeps its rolling context summary (`{{ context_summary }}`): not at all, merged
//! extractively by the state machine as outputs are recorded, or rewritten by a compactor
//! agent that the engine runs.

use manifest::Plan;

/// The summary budget in tokens when `control_logic.summary_budget` is not set.
pub const DEFAULT_BUDGET: u64 = 1000;

/// Whether any task of the plan reads `{{ context_summary }}`; only then is one kept.
pub fn wanted(plan: &Plan) -> bool {
    plan.tasks.iter().any(manifest::plan::Task::reads_context_summary)
}

/// Whether the plan has a compactor agent keep its context summary. The compactor is asked
/// first: without one (most plans) no task's input is read.
pub fn by_agent(plan: &Plan) -> bool {
    plan.control.compactor.is_some() && wanted(plan)
}

/// How a run keeps its context summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SummaryMode {
    /// No task reads it.
    Unused,
    /// Merged extractively by the state machine, as each output is recorded.
    Extractive,
    /// Rewritten by the compactor agent, in the engine's driver.
    ByAgent,
}

impl SummaryMode {
    /// How `plan` keeps its summary.
    pub(crate) fn of(plan: &Plan) -> Self {
        match (wanted(plan), plan.control.compactor.is_some()) {
            (false, _) => SummaryMode::Unused,
            (true, false) => SummaryMode::Extractive,
            (true, true) => SummaryMode::ByAgent,
        }
    }
}
