//! Missing fallbacks: critical tasks that neither retry nor replan, and non-critical tasks
//! whose plain `fail` aborts a run that could have finished without them. Linear.

use crate::plan::TaskKind;

use super::{Facts, Finding, Lint};

pub(super) fn check(facts: &Facts<'_>, findings: &mut Vec<Finding>) {
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        let id = task.id.value.as_str();
        let policy = &task.on_failure.value;
        let retries_or_replans = policy.action == crate::plan::Action::Retry || policy.can_replan();
        if task.critical && !retries_or_replans {
            findings.push(
                Finding::warning(Lint::CriticalWithoutFallback { task: id.into() }, Some(id), &task.on_failure.loc)
                    .label("a single failed attempt fails the run")
                    .help("use `on_failure: {action: retry, max_attempts: 3, then: replan}` or `on_failure: replan`"),
            );
        } else if !task.critical
            && !policy.has_fallback()
            && !facts.dominates_all[i]
            && task.kind != TaskKind::HumanReview
        {
            findings.push(
                Finding::info(Lint::FailAbortsRun { task: id.into() }, Some(id), &task.on_failure.loc)
                    .label("`fail` is the default policy")
                    .help("other branches could still finish: consider `on_failure: skip` or a retry"),
            );
        }
    }
}
