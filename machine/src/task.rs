//! One task of a run: where it stands ([`TaskStatus`]) and what the run knows of it
//! ([`TaskState`]).
//!
//! Invariants kept by the state machine: `in_flight` only while `Running`; `queued` only
//! while `Pending`, with no dependency left to wait for (the run's `blocked` count, in
//! `state/queue.rs`) and no retry timer running (`waiting_timer`).

use std::num::NonZeroU64;
use std::sync::Arc;

/// Declares [`TaskStatus`] from one list of variants and their words: the enum, its
/// serialized names, [`TaskStatus::NAMES`] and an exhaustive [`TaskStatus::as_str`].
macro_rules! statuses {
    (
        $(#[$meta:meta])*
        pub enum TaskStatus {
            $($(#[$variant_meta:meta])* $variant:ident = $word:literal,)*
        }
    ) => {
        $(#[$meta])*
        pub enum TaskStatus {
            $($(#[$variant_meta])* #[serde(rename = $word)] $variant,)*
        }

        impl TaskStatus {
            /// Every status's lower-case name, in the order of declaration.
            pub const NAMES: &'static [&'static str] = &[$($word),*];

            /// The lower-case name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(TaskStatus::$variant => $word),*
                }
            }
        }
    };
}

statuses! {
/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TaskStatus {
    /// Not started, or waiting for a retry.
    Pending = "pending",
    /// An attempt is in flight.
    Running = "running",
    /// Finished with an output.
    Succeeded = "succeeded",
    /// Finished without one.
    Failed = "failed",
    /// Will not run; dependents still do.
    Skipped = "skipped",
    /// Waiting for an answer or a review decision.
    Paused = "paused",
}
}

impl TaskStatus {
    /// Whether the task is done for good.
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Skipped)
    }
}

/// One task's state. The input and output share their text with the events that recorded
/// them; what few tasks have (an error, a question, answers, feedback) sits behind one box, so a
/// task without any of it costs a pointer.
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
    pub output: Option<Arc<str>>,
    /// The input of the latest attempt.
    pub input: Option<Arc<str>>,
    /// The `seq` of the latest attempt's `TaskDispatched` (see [`TaskState::dispatched_seq`]):
    /// never 0, as `seq` counts from 1, which keeps the task's state at 64 bytes.
    dispatched_seq: Option<NonZeroU64>,
    /// The error, question, answers and feedback, when any is set (never an empty box).
    notes: Option<Box<Notes>>,
    /// Whether the latest attempt is in flight (counted against concurrency limits).
    pub(crate) in_flight: bool,
    /// Whether a retry's timer is running.
    pub(crate) waiting_timer: bool,
    /// Whether it sits in the ready queue.
    pub(crate) queued: bool,
    /// Whether its `when` was false: skipped by the plan's choice, not by a failure.
    pub skipped_by_condition: bool,
    /// Whether its output was taken from an earlier run (the one a retry retries, or the task
    /// cache) instead of running it.
    pub reused: bool,
}

/// What few tasks have, boxed in [`TaskState`].
#[derive(Debug, Clone, Default, PartialEq)]
struct Notes {
    error: Option<String>,
    question: Option<String>,
    answers: Vec<String>,
    feedback: Option<String>,
}

impl Notes {
    fn is_empty(&self) -> bool {
        self.error.is_none() && self.question.is_none() && self.answers.is_empty() && self.feedback.is_none()
    }
}

impl TaskState {
    /// A task not started yet.
    pub(crate) fn new() -> Self {
        TaskState {
            status: TaskStatus::Pending,
            attempts: 0,
            failures: 0,
            output: None,
            input: None,
            dispatched_seq: None,
            notes: None,
            in_flight: false,
            skipped_by_condition: false,
            reused: false,
            waiting_timer: false,
            queued: false,
        }
    }

    /// The last error.
    pub fn error(&self) -> Option<&str> {
        self.notes.as_ref()?.error.as_deref()
    }

    /// The `seq` of the latest attempt's `TaskDispatched`, which its result refers to.
    pub fn dispatched_seq(&self) -> Option<u64> {
        self.dispatched_seq.map(NonZeroU64::get)
    }

    /// Notes that the latest attempt was dispatched by the event numbered `seq` (a `seq` of
    /// 0, which no event has, notes nothing).
    pub(crate) fn dispatched_at(&mut self, seq: u64) {
        self.dispatched_seq = NonZeroU64::new(seq);
    }

    /// The open question, while paused for a clarification.
    pub fn question(&self) -> Option<&str> {
        self.notes.as_ref()?.question.as_deref()
    }

    /// Answers given so far, appended to the input of later attempts.
    pub fn answers(&self) -> &[String] {
        self.notes.as_ref().map_or(&[], |notes| &notes.answers)
    }

    /// Why the latest output failed verification, told to the next attempt only.
    pub fn feedback(&self) -> Option<&str> {
        self.notes.as_ref()?.feedback.as_deref()
    }

    /// Sets or clears the last error.
    pub(crate) fn set_error(&mut self, error: Option<String>) {
        self.edit(error.is_some(), |notes| notes.error = error);
    }

    /// Sets or clears the open question.
    pub(crate) fn set_question(&mut self, question: Option<String>) {
        self.edit(question.is_some(), |notes| notes.question = question);
    }

    /// Adds an answer.
    pub(crate) fn add_answer(&mut self, answer: String) {
        self.edit(true, |notes| notes.answers.push(answer));
    }

    /// Sets or clears the verification feedback.
    pub(crate) fn set_feedback(&mut self, feedback: Option<String>) {
        self.edit(feedback.is_some(), |notes| notes.feedback = feedback);
    }

    /// Changes the notes, boxing them only when something is set and dropping the box once
    /// nothing is, so that equal states compare equal however they got there.
    /// A change that only clears (`sets` false) leaves a task without notes as it is.
    fn edit(&mut self, sets: bool, change: impl FnOnce(&mut Notes)) {
        if !sets && self.notes.is_none() {
            return;
        }
        let notes = self.notes.get_or_insert_default();
        change(notes);
        if notes.is_empty() {
            self.notes = None;
        }
    }
}

// One per task of a run, held for the whole run.
const _: () = assert!(std::mem::size_of::<TaskState>() == 64);

#[cfg(test)]
mod tests {
    use super::TaskState;

    #[test]
    fn notes_cleared_again_leave_a_task_as_if_it_had_none() {
        let mut task = TaskState::new();
        task.set_error(Some("boom".into()));
        task.set_feedback(Some("not json".into()));
        assert_eq!((task.error(), task.feedback()), (Some("boom"), Some("not json")));
        task.set_error(None);
        task.set_feedback(None);
        assert_eq!(task, TaskState::new());
        task.set_question(None);
        assert_eq!(task, TaskState::new(), "clearing what is not set changes nothing");
        task.add_answer("2024".into());
        assert_eq!(task.answers(), ["2024"]);
        assert_ne!(task, TaskState::new());
    }
}
