//! One task of a run: where it stands ([`TaskStatus`]) and what the run knows of it
//! ([`TaskState`]).
//!
//! Invariants kept by the state machine: `in_flight` only while `Running`; `queued` only
//! while `Pending`, with no dependency left to wait for (the run's `blocked` count, in
//! `state/queue.rs`) and no retry timer running (`waiting_timer`).

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started, or waiting for a retry.
    Pending,
    /// An attempt is in flight.
    Running,
    /// Finished with an output.
    Succeeded,
    /// Finished without one.
    Failed,
    /// Will not run; dependents still do.
    Skipped,
    /// Waiting for an answer or a review decision.
    Paused,
}

impl TaskStatus {
    /// Whether the task is done for good.
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Skipped)
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Paused => "paused",
        }
    }
}

/// One task's state.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Where it stands.
    pub status: TaskStatus,
    /// Attempts dispatched so far.
    pub attempts: u32,
    /// Attempts that failed; a retry policy counts these, so a question answered or an
    /// attempt a crash cut short does not use up a retry.
    pub failures: u32,
    /// The output of the successful attempt.
    pub output: Option<String>,
    /// The last error.
    pub error: Option<String>,
    /// The input of the latest attempt.
    pub input: Option<String>,
    /// The `seq` of the latest attempt's `TaskDispatched`, which its result refers to.
    pub dispatched_seq: Option<u64>,
    /// The open question, while paused for a clarification.
    pub question: Option<String>,
    /// Answers given so far, appended to the input of later attempts.
    pub answers: Vec<String>,
    /// Why the latest output failed verification, told to the next attempt only.
    pub feedback: Option<String>,
    /// Whether the latest attempt is in flight (counted against concurrency limits).
    pub(crate) in_flight: bool,
    /// Whether a retry's timer is running.
    pub(crate) waiting_timer: bool,
    /// Whether it sits in the ready queue.
    pub(crate) queued: bool,
}

impl TaskState {
    /// A task not started yet.
    pub(crate) fn new() -> Self {
        TaskState {
            status: TaskStatus::Pending,
            attempts: 0,
            failures: 0,
            output: None,
            error: None,
            input: None,
            dispatched_seq: None,
            question: None,
            answers: Vec::new(),
            feedback: None,
            in_flight: false,
            waiting_timer: false,
            queued: false,
        }
    }
}
