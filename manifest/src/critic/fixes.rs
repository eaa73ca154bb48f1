//! The findings whose help is a mechanical edit, and the edit: a redundant dependency removed,
//! a retry added to a critical task with no fallback.

use crate::fix::Fix;
use crate::plan::Plan;

use super::{Finding, Lint};

/// The retry a critical task with no fallback is given: three attempts, then the run fails as
/// before. Flow style, which reads the same in YAML and JSON.
const RETRY: &str = r#"{"action": "retry", "max_attempts": 3}"#;

/// The fix for a finding whose help is mechanical, made against the text the plan was read
/// from; `None` for the others, and when the text does not hold what the finding points at.
pub fn fix(finding: &Finding, plan: &Plan, text: &str) -> Option<Fix> {
    match &finding.lint {
        Lint::RedundantEdge { task, dependency, via } => {
            let span = finding.loc.span;
            let written = text.get(span.offset()..span.offset() + span.len())?;
            if written.trim_matches(['"', '\'']) != dependency {
                return None;
            }
            let title = format!("remove `{dependency}` from the dependencies of `{task}` (`{via}` implies it)");
            Fix::remove_entry(text, span, title)
        }
        Lint::CriticalWithoutFallback { task } => {
            let task = plan.tasks.iter().find(|t| t.id.value == *task)?;
            let title = format!("retry `{}` up to 3 attempts", task.id.value);
            // An unwritten policy is located at the task's id.
            if task.on_failure.loc == task.id.loc {
                let yaml = "{action: retry, max_attempts: 3}";
                Fix::add_field(text, task.id.loc.span, "on_failure", yaml, RETRY, title)
            } else {
                Some(Fix::replace_value(task.on_failure.loc.span, RETRY, title))
            }
        }
        _ => None,
    }
}
