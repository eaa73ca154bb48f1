//! Which tasks' outputs are stored, and which tasks use stored outputs without `--reuse`.

use manifest::plan::{Cache, Plan, Runtime, TaskKind};

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
