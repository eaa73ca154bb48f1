//! Which tasks' outputs are stored, and which tasks may take a stored output.

use manifest::plan::{Cache, Plan, Runtime, TaskKind};

use crate::Reuse;

/// Task `i`'s `cache` setting: its own, else its agent's.
pub fn setting(plan: &Plan, i: usize) -> Option<&Cache> {
    let task = &plan.tasks[i];
    let agent = task.agent.as_ref().and_then(|a| plan.agents.get(a.value.as_str()));
    Cache::of(task.extras().cache.as_ref().map(|c| &c.value), agent.and_then(|a| a.cache.as_ref()))
}

/// Whether a success of task `i` may be stored: work an agent did, not a person's decision (a
/// review), a sub-plan or a plan written at run time, and not the work of an agent that may call
/// a tool that changes something or asks a person first, unless its `cache` says
/// `destructive: true`. Whether the attempt heard a person's answer is the caller's to check.
pub fn storable(plan: &Plan, i: usize) -> bool {
    let task = &plan.tasks[i];
    if !matches!(task.kind, TaskKind::Task | TaskKind::SynthesisGate) || task.extras().for_each.is_some() {
        return false;
    }
    let Some(agent) = task.agent.as_ref().and_then(|a| plan.agents.get(a.value.as_str())) else {
        // A gate with no agent condenses its inputs by itself: nothing to save.
        return false;
    };
    let Runtime::Llm { tools, .. } = &agent.runtime else { return true };
    let risky = tools.iter().any(|name| {
        plan.tools.get(name.value.as_str()).is_some_and(|tool| tool.destructive || tool.approval.asks(tool.destructive))
    });
    !risky || setting(plan, i).is_some_and(|cache| cache.destructive)
}

/// Why task `i` runs whatever the cache holds, if it does (its dependencies aside): a person
/// decides it, it is a sub-plan or decided when it runs, its `cache` is off without `--reuse`,
/// its output is never stored, or it reads the run's context summary.
pub fn never_reused(plan: &Plan, i: usize, reuse: &Reuse) -> Option<&'static str> {
    let task = &plan.tasks[i];
    match task.kind {
        TaskKind::HumanReview => return Some("a person decides it"),
        TaskKind::Plan => return Some("it runs a sub-plan"),
        TaskKind::Expand => return Some("its plan is written when it runs"),
        TaskKind::Task | TaskKind::SynthesisGate => {}
    }
    if task.is_dynamic() {
        return Some("its condition or items are decided when it runs");
    }
    if !reuse.all && !setting(plan, i).is_some_and(|cache| cache.enabled) {
        return Some("its `cache` is off (`--reuse` reuses it anyway)");
    }
    if !storable(plan, i) {
        return Some("its output is never stored (a destructive tool, or no agent)");
    }
    if task.reads_context_summary() {
        return Some("it reads the run's context summary");
    }
    None
}
