//! The critic: a static review of a valid plan that finds where it will break before it runs,
//! scores it 0-10 in five dimensions and computes the seed's evaluation metrics.
//!
//! [`review`] and [`critique`] are pure and never fail. Each pass lives in its own file and is near-linear
//! in the size of the plan; `ARCHITECTURE.md` lists the complexity of each.

mod caching;
mod conditions;
mod context;
mod coupling;
mod expressions;
mod fallbacks;
mod finding;
mod fixes;
mod found;
mod hygiene;
mod lists;
mod maps;
mod metrics;
mod parallel;
mod review;
mod score;
mod secrets;
mod spof;

pub use context::output_budget;
pub use finding::{Dimension, Finding, Lint};
pub use fixes::fix;
pub use metrics::{Estimate, Metrics, estimates};
pub use review::{Review, review};
pub use score::Scores;

use std::borrow::Cow;
use std::collections::HashSet;

use crate::graph::{TaskGraph, TaskIdx};
use crate::plan::{Plan, Read};
use lists::Lists;

/// The critic's review of a plan, every finding made whole: for small plans and tests. A
/// command that reports on large plans reads a [`Review`], which makes each finding only when it
/// is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Critique {
    /// Everything found, in source order.
    pub findings: Vec<Finding>,
    /// The score of each dimension and overall.
    pub scores: Scores,
    /// The seed's evaluation metrics.
    pub metrics: Metrics,
}

impl Critique {
    /// The review of a plan that cannot run: no findings, every score 0.
    pub fn unrunnable() -> Self {
        Critique { findings: Vec::new(), scores: Scores::zero(), metrics: Metrics::default() }
    }
}

/// Reviews a plan. A plan whose dependencies do not form a DAG is unrunnable and scores 0.
pub fn critique(plan: &Plan) -> Critique {
    match TaskGraph::build(plan) {
        Ok(graph) => critique_graph(plan, &graph),
        Err(_) => Critique::unrunnable(),
    }
}

/// Reviews a plan whose graph is already built.
pub fn critique_graph(plan: &Plan, graph: &TaskGraph) -> Critique {
    review(plan, graph).into_critique()
}

/// What every pass needs, computed once.
pub(crate) struct Facts<'p> {
    pub plan: &'p Plan,
    pub graph: &'p TaskGraph,
    /// For each task, the reads of other tasks' outputs that resolve to a task, in order.
    pub reads: Lists<(TaskIdx, &'p Read)>,
    /// For each task, the distinct tasks whose output it reads, sorted.
    pub reads_from: Lists<TaskIdx>,
    /// Whether each task is on every path from a root to a sink.
    pub dominates_all: Vec<bool>,
    /// The longest chain of tasks.
    pub critical_path: Vec<TaskIdx>,
    /// The agents a task, a review, the planner or the compactor uses.
    pub used_agents: HashSet<&'p str>,
}

impl<'p> Facts<'p> {
    fn new(plan: &'p Plan, graph: &'p TaskGraph) -> Self {
        let reads = Lists::build(plan.tasks.len(), |i, items| {
            let outputs =
                plan.tasks[i].reads.iter().filter(|read| matches!(read.attribute.as_deref(), None | Some("output")));
            items.extend(outputs.filter_map(|read| graph.index_of(&read.task).map(|p| (p, read))));
        });
        let reads_from = Lists::build(plan.tasks.len(), |i, items| {
            let mut from: Vec<TaskIdx> = reads[i].iter().map(|(p, _)| *p).collect();
            from.sort_unstable();
            from.dedup();
            items.extend(from);
        });
        let critical_path = graph.critical_path();
        Facts {
            plan,
            graph,
            reads,
            reads_from,
            dominates_all: spof::dominators_of_every_sink(graph),
            critical_path,
            used_agents: hygiene::used_agents(plan),
        }
    }

    /// The distinct tasks whose output task `i`'s input (or a review's prompt) reads, sorted:
    /// [`Facts::reads_from`] less what only its `when` or `for_each` reads, which its agent is
    /// not given.
    pub fn prompt_reads(&self, i: usize) -> Cow<'_, [TaskIdx]> {
        let task = &self.plan.tasks[i];
        if task.extras().when.is_none() && task.extras().for_each.is_none() {
            return Cow::Borrowed(&self.reads_from[i]);
        }
        let mut from: Vec<TaskIdx> =
            self.reads[i].iter().filter(|(_, read)| !expressions::in_expression(task, read)).map(|(p, _)| *p).collect();
        from.sort_unstable();
        from.dedup();
        Cow::Owned(from)
    }

    /// The ids of a list of tasks, for messages.
    pub fn ids(&self, tasks: &[TaskIdx]) -> Vec<&'p str> {
        tasks.iter().map(|&t| self.plan.tasks[t].id.value.as_str()).collect()
    }
}
