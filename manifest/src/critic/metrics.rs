//! The seed's evaluation metrics, computed from the graph and the findings' facts.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::graph::TaskGraph;
use crate::plan::{Plan, Runtime, Task, TaskKind};

use super::Facts;
use super::context::{estimate_input, output_budget};
use super::maps::{outputs_taken, runs};

/// The seed's evaluation metrics of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Share of critical tasks with a fallback (retry, replan or skip). Critical tasks are those
    /// marked `critical: true`, or the critical path when none is marked; 1.0 when there are none.
    pub resilience_score: f64,
    /// The widest phase divided by the number of tasks.
    pub parallelism_ratio: f64,
    /// Mean over the llm agents in use of a system-prompt score: a third each for stating a
    /// role, an output format and constraints; 1.0 when no llm agent is in use.
    pub prompt_precision: f64,
    /// Tasks that are single points of failure (on every path and without a fallback; human
    /// reviews are exempt, as in the finding).
    pub spof_count: usize,
    /// Share of tasks reading three or more upstream outputs that are synthesis gates (a map read
    /// whole counts once per item); 1.0 when no task reads that many.
    pub synthesis_coverage: f64,
    /// The number of topological phases.
    pub phases: usize,
    /// The longest chain of tasks, by count.
    pub critical_path: Vec<String>,
    /// Estimated tokens of the whole run: every task's input estimate and output budget, once
    /// per item for a map; a `type: plan` task's sub-plan's whole estimate, once per item.
    pub estimated_tokens: u64,
}

pub(super) fn compute(facts: &Facts<'_>) -> Metrics {
    let plan = facts.plan;
    let n = plan.tasks.len().max(1);
    let marked: Vec<usize> = (0..plan.tasks.len()).filter(|&i| plan.tasks[i].critical).collect();
    let critical = if marked.is_empty() { facts.critical_path.clone() } else { marked };
    let resilient = critical.iter().filter(|&&i| plan.tasks[i].on_failure.value.has_fallback()).count();
    let fan_in =
        |i: usize| facts.prompt_reads(i).iter().map(|&j| outputs_taken(facts, i, j)).fold(0, u64::saturating_add);
    let wide: Vec<usize> = (0..plan.tasks.len()).filter(|&i| fan_in(i) >= super::context::WIDE_FAN_IN as u64).collect();
    let gated = wide.iter().filter(|&&i| plan.tasks[i].kind == TaskKind::SynthesisGate).count();
    let used = &facts.used_agents;
    let prompts: Vec<f64> = plan
        .agents
        .iter()
        .filter(|(name, agent)| used.contains(name.as_str()) && matches!(agent.runtime, Runtime::Llm { .. }))
        .map(|(_, agent)| prompt_score(agent.system_prompt.as_deref().unwrap_or("")))
        .collect();
    Metrics {
        resilience_score: ratio(resilient, critical.len()),
        parallelism_ratio: round3(facts.graph.phases().iter().map(Vec::len).max().unwrap_or(0) as f64 / n as f64),
        prompt_precision: if prompts.is_empty() {
            1.0
        } else {
            round3(prompts.iter().sum::<f64>() / prompts.len() as f64)
        },
        spof_count: (0..plan.tasks.len())
            .filter(|&i| {
                let task = &plan.tasks[i];
                facts.dominates_all[i] && !task.on_failure.value.has_fallback() && task.kind != TaskKind::HumanReview
            })
            .count(),
        synthesis_coverage: ratio(gated, wide.len()),
        phases: facts.graph.phases().len(),
        critical_path: facts.ids(&facts.critical_path).into_iter().map(str::to_owned).collect(),
        estimated_tokens: estimated_tokens(facts, &mut HashMap::new()),
    }
}

/// What the critic estimates for one task before the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// The tokens of its input: its own text, its agent's system prompt and the upstream
    /// outputs it reads (each at its output budget).
    pub input: u64,
    /// Its output budget: `max_output_tokens`, else the default.
    pub output: u64,
    /// How many times it runs: a map's `max_items`, else once.
    pub runs: u64,
}

/// The critic's estimate of each task of `plan` (with `graph`, its graph), in plan order.
pub fn estimates(plan: &Plan, graph: &TaskGraph) -> Vec<Estimate> {
    let facts = Facts::new(plan, graph);
    (0..plan.tasks.len())
        .map(|i| Estimate {
            input: estimate_input(&facts, i),
            output: output_budget(&plan.tasks[i]),
            runs: runs(&plan.tasks[i]),
        })
        .collect()
}

/// The estimated tokens of a whole run: each task's input estimate and output budget, or for a
/// `type: plan` task the estimate of the sub-plan it runs, once per item for a map. `known`
/// holds the estimates of the sub-plans already made, so a sub-plan that many tasks (or many
/// levels) run is estimated once.
fn estimated_tokens(facts: &Facts<'_>, known: &mut HashMap<*const Plan, u64>) -> u64 {
    let plan = facts.plan;
    (0..plan.tasks.len())
        .map(|i| {
            let task = &plan.tasks[i];
            let once = match subplan_of(plan, task) {
                Some(child) => subplan_tokens(child, known),
                None => estimate_input(facts, i).saturating_add(output_budget(task)),
            };
            once.saturating_mul(runs(task))
        })
        .fold(0, u64::saturating_add)
}

/// The sub-plan a `type: plan` task runs, when it was loaded with the plan (a plan read from
/// text has none).
fn subplan_of<'p>(plan: &'p Plan, task: &Task) -> Option<&'p Arc<Plan>> {
    if task.kind != TaskKind::Plan {
        return None;
    }
    plan.subplans.get(task.extras().plan.as_ref()?.value.as_str())
}

/// A sub-plan's estimated tokens for one run of it; 0 when its dependencies form no DAG (it
/// cannot run, and loading it reported so).
fn subplan_tokens(child: &Arc<Plan>, known: &mut HashMap<*const Plan, u64>) -> u64 {
    let key = Arc::as_ptr(child);
    if let Some(&tokens) = known.get(&key) {
        return tokens;
    }
    let tokens = match TaskGraph::build(child) {
        Ok(graph) => estimated_tokens(&Facts::new(child, &graph), known),
        Err(_) => 0,
    };
    known.insert(key, tokens);
    tokens
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 1.0 } else { round3(part as f64 / whole as f64) }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Cues that a prompt gives the model a role.
const ROLE: &[&str] = &["you are", "act as", "your role", "your job", "as a ", "as an "];
/// Cues that a prompt says what shape the answer takes.
const FORMAT: &[&str] = &[
    "json",
    "markdown",
    "bullet",
    "table",
    "list",
    "format",
    "return ",
    "respond with",
    "output",
    "answer with",
    "cite",
];
/// Cues that a prompt sets limits.
const CONSTRAINTS: &[&str] = &[
    "must",
    "never",
    "do not",
    "don't",
    "only",
    "at most",
    "no more than",
    "always",
    "avoid",
    "limit",
    "without",
    "exactly",
];

/// A system prompt's precision: a third each for a role, an output format and constraints.
pub fn prompt_score(prompt: &str) -> f64 {
    let text = prompt.to_ascii_lowercase();
    let has = |cues: &[&str]| cues.iter().any(|cue| text.contains(cue));
    let parts = [has(ROLE), has(FORMAT), has(CONSTRAINTS)];
    round3(parts.iter().filter(|&&p| p).count() as f64 / 3.0)
}

#[cfg(test)]
mod tests {
    use super::prompt_score;

    #[test]
    fn prompt_precision_needs_role_format_and_constraints_not_length() {
        assert_eq!(prompt_score("You are a careful researcher. Return JSON. Never invent sources."), 1.0);
        assert_eq!(prompt_score("You are a researcher."), 0.333);
        let long_but_vague =
            "Please help with the research task and think about it carefully and thoroughly. ".repeat(20);
        assert_eq!(prompt_score(&long_but_vague), 0.0);
    }
}
