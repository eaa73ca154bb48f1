//! Conditions that never hold: a `when` that is false whatever the run does (`false`, `1 > 2`),
//! or that compares a task's status with a word other than `succeeded` or `skipped`. A task
//! starts only once every dependency has succeeded or been skipped (a failed one fails the run
//! or is replanned first), so its `when` sees no other status. Linear in the conditions' length.

use crate::plan::At;
use crate::template::expression;

use super::expressions::{Expressions, status_comparisons};
use super::found::{Found, push_whole};
use super::{Facts, Finding, Lint};

/// The statuses a task's condition can see of the tasks before it.
pub const SEEN_STATUSES: [&str; 2] = ["succeeded", "skipped"];

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let expressions = Expressions::default();
    for task in &facts.plan.tasks {
        let Some(when) = &task.extras().when else { continue };
        let id = task.id.value.as_str();
        let text = expression(&when.value);
        if expressions.constant(text) == Some(false) {
            push_whole(found, never_holds(id, when, text, None));
            continue;
        }
        for comparison in status_comparisons(text) {
            if !SEEN_STATUSES.contains(&comparison.word) {
                push_whole(found, never_holds(id, when, comparison.text, Some(comparison.word)));
            }
        }
    }
}

/// The warning on task `id`'s `when`, of which `condition` never holds; `status` is the word a
/// status comparison uses.
fn never_holds(id: &str, when: &At<String>, condition: &str, status: Option<&str>) -> Finding {
    let lint =
        Lint::ConditionNeverHolds { task: id.into(), condition: condition.into(), status: status.map(str::to_owned) };
    let finding = Finding::warning(lint, Some(id), &when.loc);
    match status {
        Some(_) => finding.label("a dependency here has succeeded or been skipped").help(
            "compare with `succeeded` or `skipped`: a task starts only once its dependencies have succeeded or been skipped, and a failed one fails the run or is replanned first",
        ),
        None => finding.label("false in every run").help(
            "read the run in the condition (`tasks.ID.output`, `tasks.ID.status`, `vars.NAME`), or remove the task",
        ),
    }
}
