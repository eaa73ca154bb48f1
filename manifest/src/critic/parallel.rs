//! Parallel misses: work serialised without need.
//!
//! - a dependency whose output the task never reads (it only delays the task); a dependency its
//!   `when` or `for_each` reads is read;
//! - a dependency implied by another one (redundant edge): one search upwards from all of a
//!   task's parents finds the implied ones ([`crate::TaskGraph::implied_parents`]); only for
//!   those is the parent that implies it looked for, pair by pair;
//! - `strategy: sequential` chaining a task after one it does not read;
//! - a parallel group, or a phase, wider than the concurrency limit with nothing limiting it.

use std::collections::{BTreeMap, HashSet};

use crate::plan::TaskKind;

use super::expressions::{ExpressionReads, Expressions};
use super::found::{Found, index, push_whole};
use super::{Facts, Finding, Lint};

/// The width above which starting every task at once is risky, when the plan sets no limit.
pub const DEFAULT_PARALLEL_LIMIT: usize = 10;

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    unread_and_redundant(facts, found);
    forced_chains(facts, found);
    unlimited_groups(facts, found);
    explosions(facts, found);
}

fn unread_and_redundant(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let graph = facts.graph;
    let expressions = Expressions::default();
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        // A parent is implied only through a parent in a later phase: parents all in one phase
        // (one parent, a fan-in, a layer) imply none, and their search is skipped.
        let (low, high) = graph
            .parents(i)
            .map(|p| graph.level(p))
            .fold((usize::MAX, 0), |(low, high), level| (low.min(level), high.max(level)));
        let spread = low < high;
        let implied = if spread { graph.implied_parents(i) } else { HashSet::new() };
        // `{{ context_summary }}` carries every output recorded before the task.
        let reads_summary = task.reads_context_summary();
        let extras = task.extras();
        let in_expressions = if extras.when.is_some() || extras.for_each.is_some() {
            expressions.reads(task)
        } else {
            ExpressionReads::Named(Vec::new())
        };
        for (k, dep) in task.depends_on.iter().enumerate() {
            let Some(d) = graph.index_of(&dep.value) else { continue };
            if task.chained_after.as_deref() == Some(dep.value.as_str()) {
                continue;
            }
            let via = || graph.parents(i).find(|&e| e != d && graph.is_ancestor(d, e));
            if let Some(via) = implied.contains(&d).then(via).flatten() {
                found.push(Found::RedundantEdge { task: index(i), dependency: index(k), via: index(via) });
                continue;
            }
            let reads_it =
                reads_summary || facts.reads_from[i].binary_search(&d).is_ok() || in_expressions.includes(&dep.value);
            let upstream = &facts.plan.tasks[d];
            if task.kind == TaskKind::Task && !reads_it && upstream.kind != TaskKind::HumanReview {
                found.push(Found::UnreadDependency { task: index(i), dependency: index(k) });
            }
        }
    }
}

/// The note on dependency `k` of task `i`, which task `via` already implies.
pub(super) fn redundant_edge(facts: &Facts<'_>, i: usize, k: usize, via: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    let dep = &task.depends_on[k];
    let lint = Lint::RedundantEdge {
        task: id.into(),
        dependency: dep.value.to_string(),
        via: facts.plan.tasks[via].id.value.to_string(),
    };
    Finding::info(lint, Some(id), &dep.loc)
        .label("already implied")
        .help("remove it; the order is kept through the other dependency")
}

/// The warning on dependency `k` of task `i`, whose output it never reads.
pub(super) fn unread_dependency(facts: &Facts<'_>, i: usize, k: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    let dep = &task.depends_on[k];
    Finding::warning(Lint::UnreadDependency { task: id.into(), dependency: dep.value.to_string() }, Some(id), &dep.loc)
        .label("its output is never read")
        .help(format!(
            "read it with `{{{{ {} }}}}`, or drop the dependency so both can run at once",
            crate::template::OutputOf(&dep.value)
        ))
}

fn forced_chains(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        let Some(previous) = &task.chained_after else { continue };
        let Some(p) = facts.graph.index_of(previous) else { continue };
        if facts.reads_from[i].binary_search(&p).is_err() {
            found.push(Found::ForcedChain { task: index(i) });
        }
    }
}

/// The warning on task `i`, which `strategy: sequential` chains after one it does not read.
pub(super) fn forced_chain(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    let previous = task.chained_after.as_deref().unwrap_or_default();
    Finding::warning(Lint::ForcedChain { task: id.into(), previous: previous.into() }, Some(id), &task.id.loc)
        .label(format!("waits for `{previous}` only because of the list order"))
        .help(format!(
            "use `strategy: eager` with explicit `depends_on`, or write `depends_on: [{previous}]` if it really must wait"
        ))
}

fn unlimited_groups(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let limit = facts.plan.control.max_concurrency.map_or(DEFAULT_PARALLEL_LIMIT, |m| m as usize);
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        if let Some(group) = &task.extras().parallel_group {
            groups.entry(group.value.as_str()).or_default().push(i);
        }
    }
    for (group, members) in groups {
        let limited = facts.plan.control.parallel_groups.get(group).is_some_and(|g| g.max_concurrency.is_some());
        if members.len() <= limit || limited {
            continue;
        }
        let first = &facts.plan.tasks[members[0]];
        let loc = first.extras().parallel_group.as_ref().map_or(&first.id.loc, |g| &g.loc);
        let finding = Finding::warning(Lint::UnlimitedGroup { group: group.into(), size: members.len() }, None, loc)
            .label(format!("{} tasks in this group", members.len()))
            .help(format!("set `control_logic.parallel_groups: {{{group}: {{max_concurrency: N}}}}`"));
        push_whole(found, finding);
    }
}

fn explosions(facts: &Facts<'_>, found: &mut Vec<Found>) {
    if facts.plan.control.max_concurrency.is_some() {
        return;
    }
    for (p, phase) in facts.graph.phases().iter().enumerate() {
        let unlimited: Vec<usize> = phase
            .iter()
            .copied()
            .filter(|&t| {
                let group = facts.plan.tasks[t].extras().parallel_group.as_ref();
                !group.is_some_and(|g| {
                    facts.plan.control.parallel_groups.get(&g.value).is_some_and(|l| l.max_concurrency.is_some())
                })
            })
            .collect();
        if unlimited.len() > DEFAULT_PARALLEL_LIMIT {
            let first = &facts.plan.tasks[unlimited[0]];
            let lint = Lint::ParallelExplosion { phase: p + 1, size: unlimited.len() };
            let finding = Finding::warning(lint, None, &first.id.loc)
                .label(format!("the first of {} tasks that start together", unlimited.len()))
                .help("set `control_logic.max_concurrency`, or group the tasks with a per-group limit");
            push_whole(found, finding);
        }
    }
}
