//! Where a run stands.

use crate::event::Outcome;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Before `RunCreated`.
    New,
    /// Tasks are running or ready.
    Running,
    /// Waiting for a person.
    Paused,
    /// Finished; see the outcome.
    Finished(Outcome),
    /// Stopped on request.
    Cancelled,
}

impl RunStatus {
    /// `running`, `paused`, `succeeded`, `failed`, `partial` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::New | RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Finished(outcome) => outcome.as_str(),
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Whether nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, RunStatus::Finished(_) | RunStatus::Cancelled)
    }
}
