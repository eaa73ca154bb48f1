//! Single points of failure: tasks on every path from the start to every result.
//!
//! A virtual root is joined to every root and every sink to a virtual sink; a task that
//! dominates the virtual sink lies on every root-to-sink path, so its failure leaves no result.
//! Dominators are Cooper-Harvey-Kennedy's intersection of the parents' dominators, which on a
//! DAG taken in topological order is exact in one pass: linear but for the walks up the
//! dominator tree, which are short.

use crate::graph::TaskGraph;
use crate::plan::TaskKind;

use super::found::{Found, index};
use super::{Facts, Finding, Lint};

/// For each task, whether it dominates the virtual sink.
pub(crate) fn dominators_of_every_sink(graph: &TaskGraph) -> Vec<bool> {
    let n = graph.len();
    let mut dominates = vec![false; n];
    // Node `n` is the virtual root, first in the order; `order[v]` is v's place in it.
    let root = n;
    let mut order = vec![0usize; n + 1];
    for (place, &task) in graph.topo_order().iter().enumerate() {
        order[task] = place + 1;
    }
    let mut idom = vec![root; n + 1];
    let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while order[a] > order[b] {
                a = idom[a];
            }
            while order[b] > order[a] {
                b = idom[b];
            }
        }
        a
    };
    for &task in graph.topo_order() {
        let mut parents = graph.parents(task);
        if let Some(first) = parents.next() {
            idom[task] = parents.fold(first, |dominator, parent| intersect(&idom, dominator, parent));
        }
    }
    let mut sinks = (0..n).filter(|&task| graph.children(task).next().is_none());
    let Some(first) = sinks.next() else { return dominates };
    let mut at = sinks.fold(first, |dominator, sink| intersect(&idom, dominator, sink));
    while at != root {
        dominates[at] = true;
        at = idom[at];
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
