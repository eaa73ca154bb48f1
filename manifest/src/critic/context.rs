//! Context budget: estimated input tokens against the budget, and wide fan-in without a gate.
//!
//! A task's input estimate is its template text and its agent's system prompt (4 bytes per
//! token, the usual rule of thumb for English) plus, for each upstream task it reads, that
//! task's output budget: a gate's `max_output_tokens`, else [`DEFAULT_OUTPUT_TOKENS`]; a map
//! read whole counts its output budget once per item. A map's own input is each item's: its
//! items run as tasks of their own. The budget is the smaller of `control_logic.context_budget`
//! and the agent's provider's `context_window`. Linear in tasks plus reads.

use crate::plan::{Plan, Runtime, Task, TaskKind};

use super::found::{Found, index, push_whole};
use super::maps::outputs_taken;
use super::{Facts, Finding, Lint};

/// The output budget assumed for a task with no `max_output_tokens`.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 1000;

/// Reading this many upstream outputs directly calls for a synthesis gate.
pub const WIDE_FAN_IN: usize = 3;

/// Tokens in a text, estimated at four bytes a token.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The tokens a task may output.
pub fn output_budget(task: &Task) -> u64 {
    task.extras().max_output_tokens.map_or(DEFAULT_OUTPUT_TOKENS, u64::from)
}

/// The estimated input tokens of task `i`.
pub(crate) fn estimate_input(facts: &Facts<'_>, i: usize) -> u64 {
    let task = &facts.plan.tasks[i];
    let own = [task.input.as_ref(), task.extras().prompt.as_ref()]
        .into_iter()
        .flatten()
        .map(|t| estimate_tokens(&t.value))
        .sum::<u64>();
    let system = facts
        .plan
        .agent_of(task)
        .and_then(|name| facts.plan.agents.get(name))
        .and_then(|agent| agent.system_prompt.as_deref())
        .map_or(0, estimate_tokens);
    let upstream: u64 = facts
        .prompt_reads(i)
        .iter()
        .map(|&j| output_budget(&facts.plan.tasks[j]).saturating_mul(outputs_taken(facts, i, j)))
        .fold(0, u64::saturating_add);
    own + system + upstream
}

/// The input budget of a task: the plan's context budget and its provider's window.
fn budget(plan: &Plan, task: &Task) -> Option<u64> {
    let window = plan.agent_of(task).and_then(|name| plan.agents.get(name)).and_then(|agent| match &agent.runtime {
        Runtime::Llm { provider, .. } => {
            let name = provider.as_ref().map_or(crate::plan::DEFAULT_AGENT, |p| p.value.as_str());
            plan.providers.get(name).and_then(|p| p.context_window)
        }
        _ => None,
    });
    match (plan.control.context_budget, window) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        let id = task.id.value.as_str();
        if let Some(budget) = budget(facts.plan, task) {
            let estimate = estimate_input(facts, i);
            if estimate > budget {
                let loc = task.input.as_ref().map_or(&task.id.loc, |input| &input.loc);
                let finding = Finding::warning(Lint::ContextBudget { task: id.into(), estimate, budget }, Some(id), loc)
                    .label(estimate_label(facts, i, estimate))
                    .help("read a synthesis gate's condensed output instead of raw outputs, or cap upstream outputs with `max_output_tokens`");
                push_whole(found, finding);
            }
        }
        if task.kind != TaskKind::SynthesisGate && raw_count(facts, i) >= WIDE_FAN_IN {
            found.push(Found::WideFanIn { task: index(i) });
        }
    }
}

/// The label of a context-budget warning: the estimate, and the maps whose every item it counts.
fn estimate_label(facts: &Facts<'_>, i: usize, estimate: u64) -> String {
    let label = format!("about {estimate} tokens with the outputs it reads");
    let maps: Vec<String> = facts
        .prompt_reads(i)
        .iter()
        .filter(|&&j| facts.plan.tasks[j].extras().for_each.is_some() && outputs_taken(facts, i, j) > 1)
        .map(|&j| format!("{} items of `{}`", outputs_taken(facts, i, j), facts.plan.tasks[j].id.value))
        .collect();
    if maps.is_empty() { label } else { format!("{label} ({})", maps.join(", ")) }
}

/// How many of [`raw_reads`] there are, without gathering them.
fn raw_count(facts: &Facts<'_>, i: usize) -> usize {
    facts.prompt_reads(i).iter().filter(|&&j| facts.plan.tasks[j].kind != TaskKind::SynthesisGate).count()
}

/// The tasks whose output task `i`'s input reads that are not synthesis gates.
fn raw_reads(facts: &Facts<'_>, i: usize) -> Vec<usize> {
    let from = facts.prompt_reads(i);
    from.iter().copied().filter(|&j| facts.plan.tasks[j].kind != TaskKind::SynthesisGate).collect()
}

/// The wide fan-in finding on task `i`.
pub(super) fn wide_fan_in(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    let raw = raw_reads(facts, i);
    let inputs = facts.ids(&raw).join(", ");
    Finding::warning(Lint::WideFanIn { task: id.into(), count: raw.len() }, Some(id), &task.id.loc)
        .label(format!("reads {inputs}"))
        .help(format!(
            "add a task with `type: synthesis_gate`, `inputs: [{inputs}]` and `max_output_tokens`, and read its output here"
        ))
}
