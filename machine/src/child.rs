//! Child runs: the run a sub-plan task starts, named after its parent run and task so that a
//! resumed parent finds it again, and the link its `RunCreated` keeps to them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest run id a store takes.
const MAX_RUN_ID: usize = 128;

/// The run and task a child run was started for, recorded in its `RunCreated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parent {
    /// The parent run's id.
    pub run: String,
    /// The parent's task (`ID`, or `ID[INDEX]` for an item of a map).
    pub task: String,
}

/// The id of the child run that task `task` of run `parent` starts on its `attempt`: the
/// parent's id, a dot and the task id (an item's `[INDEX]` written `.INDEX`), then `.N` from
/// the second attempt on. A task id with characters a run id cannot hold, or an id over the
/// stores' 128 characters, is shortened and ends with a hash of the task id, so two tasks
/// never share a child.
pub fn child_run_id(parent: &str, task: &str, attempt: u32) -> String {
    let spelled: String = task
        .chars()
        .filter(|c| *c != ']')
        .map(|c| match c {
            '[' => '.',
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            _ => '-',
        })
        .collect();
    let lossless = spelled.len() == task.len() - task.matches(']').count()
        && task.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '[' | ']'));
    let suffix = if attempt > 1 { format!(".{attempt}") } else { String::new() };
    let id = format!("{parent}.{spelled}{suffix}");
    if lossless && id.len() <= MAX_RUN_ID {
        return id;
    }
    let hash: String = Sha256::digest(task.as_bytes()).iter().take(4).map(|b| format!("{b:02x}")).collect();
    let room = MAX_RUN_ID.saturating_sub(parent.len() + suffix.len() + hash.len() + 3);
    let short: String = spelled.chars().take(room).collect();
    format!("{parent}.{short}-{hash}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_task_and_an_item_are_spelled_out() {
        assert_eq!(child_run_id("brief-1", "company", 1), "brief-1.company");
        assert_eq!(child_run_id("brief-1", "company[2]", 1), "brief-1.company.2");
        assert_eq!(child_run_id("brief-1", "company[2]", 3), "brief-1.company.2.3");
    }

    #[test]
    fn tasks_whose_spelling_would_collide_get_different_children() {
        let (space, dash) = (child_run_id("p", "a b", 1), child_run_id("p", "a-b", 1));
        assert_ne!(space, dash);
        assert!(space.starts_with("p.a-b-"), "{space}");
        assert_eq!(dash, "p.a-b");
        // A task id with a dot could pass for an item or an attempt.
        assert_ne!(child_run_id("p", "a.2", 1), child_run_id("p", "a[2]", 1));
    }

    #[test]
    fn ids_stay_within_what_a_store_takes() {
        let parent = "p".repeat(100);
        let id = child_run_id(&parent, &"t".repeat(200), 12);
        assert!(id.len() <= MAX_RUN_ID, "{} characters", id.len());
        assert!(id.ends_with(".12"));
        assert_ne!(id, child_run_id(&parent, &format!("{}x", "t".repeat(199)), 12));
    }
}
