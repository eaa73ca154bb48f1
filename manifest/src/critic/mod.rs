//! The critic: a static review of a valid plan that finds where it will break before it runs,
//! scores it 0-10 in five dimensions and computes the seed's evaluation metrics.
//!
//! [`critique`] is pure and never fails. Each pass lives in its own file and is near-linear
//! in the size of the plan; `ARCHITECTURE.md` lists the complexity of each.

mod context;
mod coupling;
mod fallbacks;
mod finding;
mod hygiene;
mod metrics;
mod parallel;
mod score;
mod secrets;
mod spof;

pub use finding::{Dimension, Finding, Lint};
pub use metrics::Metrics;
pub use score::Scores;

use crate::graph::{TaskGraph, TaskIdx};
use crate::plan::{Plan, Read};

/// The critic's review of a plan.
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
    let facts = Facts::new(plan, graph);
    let mut findings = Vec::new();
    spof::check(&facts, &mut findings);
    coupling::check(&facts, &mut findings);
    context::check(&facts, &mut findings);
    fallbacks::check(&facts, &mut findings);
    parallel::check(&facts, &mut findings);
    hygiene::check(&facts, &mut findings);
    secrets::check(plan, &mut findings);
    sort_by_position(&mut findings);
    let scores = Scores::of(&findings);
    let metrics = metrics::compute(&facts);
    Critique { findings, scores, metrics }
}

/// Sorts findings by position, stably: findings at the same place keep the order of the passes,
/// which is deterministic. The (position, index) pairs are sorted and the findings moved into
/// place along the permutation's cycles, so no second buffer of findings is needed (a stable
/// sort of the findings themselves takes one as large as half of them, at 100k findings tens of
/// MB).
fn sort_by_position(findings: &mut [Finding]) {
    let mut order: Vec<(usize, usize)> = findings.iter().enumerate().map(|(i, f)| (f.loc.span.offset, i)).collect();
    order.sort_unstable();
    // `from[k]` is where the finding that belongs at `k` is now; a place already done points at
    // itself.
    let mut from: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    for start in 0..from.len() {
        let mut at = start;
        while from[at] != start {
            let source = from[at];
            findings.swap(at, source);
            from[at] = at;
            at = source;
        }
        from[at] = at;
    }
}

/// What every pass needs, computed once.
pub(crate) struct Facts<'p> {
    pub plan: &'p Plan,
    pub graph: &'p TaskGraph,
    /// For each task, the reads of other tasks' outputs that resolve to a task, in order.
    pub reads: Vec<Vec<(TaskIdx, &'p Read)>>,
    /// For each task, the distinct tasks whose output it reads.
    pub reads_from: Vec<Vec<TaskIdx>>,
    /// Whether each task is on every path from a root to a sink.
    pub dominates_all: Vec<bool>,
    /// The longest chain of tasks.
    pub critical_path: Vec<TaskIdx>,
}

impl<'p> Facts<'p> {
    fn new(plan: &'p Plan, graph: &'p TaskGraph) -> Self {
        let reads: Vec<Vec<(TaskIdx, &Read)>> = plan
            .tasks
            .iter()
            .map(|task| {
                task.reads
                    .iter()
                    .filter(|read| matches!(read.attribute.as_deref(), None | Some("output")))
                    .filter_map(|read| graph.index_of(&read.task).map(|i| (i, read)))
                    .collect()
            })
            .collect();
        let reads_from = reads
            .iter()
            .map(|task_reads| {
                let mut from: Vec<TaskIdx> = task_reads.iter().map(|(i, _)| *i).collect();
                from.sort_unstable();
                from.dedup();
                from
            })
            .collect();
        let critical_path = graph.critical_path();
        Facts { plan, graph, reads, reads_from, dominates_all: spof::dominators_of_every_sink(graph), critical_path }
    }

    /// The ids of a list of tasks, for messages.
    pub fn ids(&self, tasks: &[TaskIdx]) -> Vec<&'p str> {
        tasks.iter().map(|&t| self.plan.tasks[t].id.value.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Loc, Span};

    #[test]
    fn findings_sort_by_position_and_keep_pass_order_at_one_place() {
        let at = |offset: usize, name: &str| {
            let loc = Loc::new(Span::new(offset, 1), "");
            Finding::info(Lint::UnusedAgent { name: name.into() }, None, &loc)
        };
        let mut findings =
            vec![at(9, "a"), at(3, "b"), at(9, "c"), at(0, "d"), at(3, "e"), at(7, "f"), at(3, "g"), at(0, "h")];
        sort_by_position(&mut findings);
        let order: Vec<(usize, String)> = findings
            .iter()
            .map(|f| match &f.lint {
                Lint::UnusedAgent { name } => (f.loc.span.offset, name.clone()),
                _ => unreachable!("only UnusedAgent findings were made"),
            })
            .collect();
        let expected = [(0, "d"), (0, "h"), (3, "b"), (3, "e"), (3, "g"), (7, "f"), (9, "a"), (9, "c")];
        assert_eq!(order, expected.map(|(o, n)| (o, n.to_owned())));
    }
}
