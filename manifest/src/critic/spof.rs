//! Single points of failure: tasks on every path from the start to every result.
//!
//! A virtual root is joined to every root and every sink to a virtual sink; a task that
//! dominates the virtual sink lies on every root-to-sink path, so its failure leaves no result.
//! Dominators come from petgraph's Cooper-Harvey-Kennedy algorithm: near-linear on DAGs.

use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::graph::TaskGraph;
use crate::plan::TaskKind;

use super::found::{Found, index};
use super::{Facts, Finding, Lint};

/// For each task, whether it dominates the virtual sink.
pub(crate) fn dominators_of_every_sink(graph: &TaskGraph) -> Vec<bool> {
    let n = graph.len();
    let mut dominates = vec![false; n];
    if n == 0 {
        return dominates;
    }
    let (root, sink) = (NodeIndex::new(n), NodeIndex::new(n + 1));
    let mut g = DiGraph::<(), (), u32>::with_capacity(n + 2, graph.graph().edge_count() + 2 * n);
    for _ in 0..n + 2 {
        g.add_node(());
    }
    for edge in graph.graph().raw_edges() {
        g.add_edge(edge.source(), edge.target(), ());
    }
    for task in graph.roots() {
        g.add_edge(root, NodeIndex::new(task), ());
    }
    for task in graph.sinks() {
        g.add_edge(NodeIndex::new(task), sink, ());
    }
    let dominators = simple_fast(&g, root);
    let mut at = dominators.immediate_dominator(sink);
    while let Some(node) = at.filter(|&node| node != root) {
        dominates[node.index()] = true;
        at = dominators.immediate_dominator(node);
    }
    dominates
}

/// A task every result depends on, whose policy is a plain `fail`.
pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        if !facts.dominates_all[i] || task.kind == TaskKind::HumanReview || task.on_failure.value.has_fallback() {
            continue;
        }
        found.push(Found::SinglePointOfFailure { task: index(i) });
    }
}

/// The finding on task `i`.
pub(super) fn finding(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    Finding::warning(Lint::SinglePointOfFailure { task: id.into() }, Some(id), &task.id.loc)
        .label("every result depends on this task")
        .help("give it `on_failure: {action: retry, max_attempts: 3}` (or `replan`), or add a second path")
}
