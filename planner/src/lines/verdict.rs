//! What the [`super::Assembler`] made of one line.

use std::sync::Arc;

use super::problem::LineProblem;

/// What one line was taken as.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The header was accepted; no plan loads yet, as it has no task.
    Header,
    /// A task was accepted: the plan of every line accepted so far, the new task last, loaded
    /// and valid.
    Task {
        /// The loaded prefix plan.
        plan: Arc<manifest::Plan>,
        /// The new task's id.
        id: String,
    },
    /// The model asks these questions instead of planning.
    Questions(Vec<String>),
    /// The line was not taken, and why.
    Rejected(LineProblem),
}
