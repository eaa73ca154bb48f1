//! Missing fallbacks: critical tasks that neither retry nor replan, and non-critical tasks
//! whose plain `fail` aborts a run that could have finished without them. Linear.

use crate::plan::TaskKind;

use super::found::{Found, index};
use super::{Facts, Finding, Lint};

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        let policy = &task.on_failure.value;
        let retries_or_replans = policy.action == crate::plan::Action::Retry || policy.can_replan();
        if task.critical && !retries_or_replans {
            found.push(Found::CriticalWithoutFallback { task: index(i) });
        } else if !task.critical
            && !policy.has_fallback()
            && !facts.dominates_all[i]
            && task.kind != TaskKind::HumanReview
        {
            found.push(Found::FailAbortsRun { task: index(i) });
        }
    }
}

/// The finding on critical task `i` that neither retries nor replans.
pub(super) fn critical_without_fallback(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    Finding::warning(Lint::CriticalWithoutFallback { task: id.into() }, Some(id), &task.on_failure.loc)
        .label("a single failed attempt fails the run")
        .help("use `on_failure: {action: retry, max_attempts: 3, then: replan}` or `on_failure: replan`")
}

/// The note on task `i`, whose plain `fail` aborts the run.
pub(super) fn fail_aborts_run(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    Finding::info(Lint::FailAbortsRun { task: id.into() }, Some(id), &task.on_failure.loc)
        .label("`fail` is the default policy")
        .help("other branches could still finish: consider `on_failure: skip` or a retry")
}
