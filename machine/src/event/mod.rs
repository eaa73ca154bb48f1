//! Events: every state change of a run, as recorded in its log. The schema is versioned and
//! documented in `docs/events.md`; fields are only ever added.

mod compaction;
mod conversation;
mod forecast;
mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use compaction::{ContextCompacted, Scope};
pub use conversation::{ModelTurn, ToolApprovalDecided, ToolApprovalRequested, ToolCallFinished, ToolCallStarted};
pub use forecast::{Cost, Forecasted, Span};
pub use plan::{Growing, Replanned, RunCreated, TaskPlanned};

/// The version of the event schema written in `RunCreated`. Version 2 links results to their
/// `TaskDispatched`, classes failures and records the jittered retry delay; version 3 leaves
/// a task's fields at their defaults out of the recorded plan; version 4 records an llm
/// attempt's model turns and tool calls, and the approvals of tool calls; version 5 records
/// what a `when` skipped and the items of a map; version 6 records the tasks of a plan that
/// grows while it runs (`TaskPlanned`, `LineRejected`, `PlanWritten`); version 7 records where
/// an output the task cache gave came from (`TaskReused`'s `from`).
pub const SCHEMA_VERSION: u32 = 7;

/// One line of a run's log: an event with its sequence number, time and run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// 1 for the first event of a run, then one more for each.
    pub seq: u64,
    /// When it was recorded, RFC 3339 in UTC with milliseconds (shared by a batch's records).
    pub at: Arc<str>,
    /// The run it belongs to (shared by every record of the run).
    pub run_id: Arc<str>,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// Token usage of one agent attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Tokens sent.
    pub prompt: u64,
    /// Tokens received.
    pub completion: u64,
}

/// Where a reused output came from: the attempt of an earlier run that stored it under the
/// task's cache key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The run whose attempt produced it.
    pub run: String,
    /// That attempt.
    pub attempt: u32,
    /// The cache key, hex: the hash of everything that decides the task's result.
    pub key: String,
    /// The tokens that attempt used, which this run saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
}

/// What kind of failure ended an attempt, which decides whether `retry_on` retries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The attempt ran out of time: the task's `timeout`, or the provider's.
    Timeout,
    /// The service failed, not the work: 408, 429, 5xx, a connection error, a broken stream.
    Transient,
    /// The agent failed in a way another try may not repeat: a command's non-zero exit, a
    /// malformed answer (the class of version-1 failures, which recorded none).
    #[default]
    Agent,
    /// The output failed the task's verification (or was empty under `replan_on_empty_result`).
    Verification,
    /// No retry can fix it: an input that cannot render, a refused argv, a missing key, a
    /// rejected review.
    Permanent,
    /// The run ended while the attempt ran.
    Cancelled,
}

impl ErrorClass {
    /// The lower-case name, as in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Timeout => "timeout",
            ErrorClass::Transient => "transient",
            ErrorClass::Agent => "agent",
            ErrorClass::Verification => "verification",
            ErrorClass::Permanent => "permanent",
            ErrorClass::Cancelled => "cancelled",
        }
    }

    /// Whether a retry could fix such a failure under `retry_on`.
    pub fn retryable(self, retry_on: manifest::plan::RetryOn) -> bool {
        match self {
            ErrorClass::Timeout | ErrorClass::Transient => true,
            ErrorClass::Agent | ErrorClass::Verification => retry_on == manifest::plan::RetryOn::Any,
            ErrorClass::Permanent | ErrorClass::Cancelled => false,
        }
    }
}

/// What skipped a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipCause {
    /// It failed and its policy is `skip`: the run ends `partial`.
    #[default]
    Failure,
    /// Its `when` was false: the plan chose not to run it, and the run can still succeed.
    Condition,
}

impl SkipCause {
    /// Whether a failure caused it (the default, left out of the log).
    pub fn is_failure(&self) -> bool {
        *self == SkipCause::Failure
    }
}

/// How a finished run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every task succeeded.
    Succeeded,
    /// A critical task, or a task whose policy is `fail`, did not succeed.
    Failed,
    /// Finished, but a non-critical task failed or was skipped.
    Partial,
}

impl Outcome {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Partial => "partial",
        }
    }
}

/// Declares [`Event`] from one list of variants: the enum itself, [`Event::NAMES`] and an
/// exhaustive [`Event::name`], so a new variant is named everywhere by being declared. A
/// variant's name is its `type` in the log: no variant is renamed for serde.
macro_rules! events {
    (
        $(#[$meta:meta])*
        pub enum Event {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident $(( $($tuple:tt)* ))? $({ $($fields:tt)* })?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum Event {
            $(
                $(#[$variant_meta])*
                $variant $(( $($tuple)* ))? $({ $($fields)* })?
            ),*
        }

        impl Event {
            /// Every event's type name, as in the log, in the order of declaration.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($variant)),*];

            /// The event's type name, as in the log.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Event::$variant { .. } => stringify!($variant)),*
                }
            }
        }
    };
}

events! {
/// Everything that can happen in a run. The few large events that are rare in a run keep their
/// fields behind a box, so that every event, and a batch of them, stays small; the log's JSON
/// does not show the box.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The run started: the normalised plan it runs and its hash.
    RunCreated(Box<RunCreated>),
    /// A task's output was taken from an earlier run instead of running it: from the run a
    /// retried run retries, or (with `from`) an output stored under the same cache key.
    TaskReused {
        /// The task.
        task: String,
        /// The output taken over.
        output: String,
        /// The stored output's origin, when it came from the task cache.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Box<Origin>>,
    },
    /// An attempt of a task started; its input is durable before the agent runs.
    TaskDispatched {
        /// The task.
        task: String,
        /// 1 for the first attempt.
        attempt: u32,
        /// The rendered input (shared with the task's state).
        input: Arc<str>,
    },
    /// An attempt succeeded.
    TaskSucceeded {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// The `seq` of the attempt's `TaskDispatched` (absent in version-1 logs, and for a
        /// review, which is never dispatched).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatched_seq: Option<u64>,

        /// The output (shared with the task's state).
        output: Arc<str>,
        /// Tokens used, for llm agents.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
        /// How long the attempt took.
        duration_ms: u64,
    },
    /// An attempt failed.
    TaskFailed {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// What went wrong, compacted.
        error: String,
        /// The `seq` of the attempt's `TaskDispatched` (absent in version-1 logs, and for a
        /// review, which is never dispatched).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatched_seq: Option<u64>,
        /// What kind of failure it was (`agent` in version-1 logs).
        #[serde(default)]
        class: ErrorClass,
        /// Whether the task's policy could retry this class of failure (`retry_on`); a retry
        /// follows when the policy is `retry` and attempts are left.
        #[serde(default)]
        retryable: bool,

        /// Tokens the attempt used before it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
    },
    /// The task will run again after a delay.
    RetryScheduled {
        /// The task.
        task: String,
        /// The attempt that will run.
        attempt: u32,
        /// The wait before it, jitter included (version 1 recorded the backoff before jitter).
        delay_ms: u64,
        /// The backoff before jitter (absent in version-1 logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backoff_ms: Option<u64>,
    },
    /// A retry's backoff has passed; the task is ready to run again.
    RetryDue {
        /// The task.
        task: String,
    },
    /// The task will not run (again); dependents still run.
    TaskSkipped {
        /// The task.
        task: String,
        /// Why.
        reason: String,
        /// What skipped it: its failure policy (left out of the log), or its `when`.
        #[serde(default, skip_serializing_if = "SkipCause::is_failure")]
        cause: SkipCause,
    },
    /// A map task's `for_each` was evaluated: one item task, `ID[INDEX]`, per element. The
    /// list is recorded, so a resumed run never evaluates it again.
    MapExpanded {
        /// The map task.
        task: String,
        /// The elements, in order.
        items: Arc<[serde_json::Value]>,
    },
    /// An agent asked a question; the task waits for an answer.
    ClarificationRequested {
        /// The task.
        task: String,
        /// The question.
        question: String,
        /// Tokens the attempt used to ask it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
    },
    /// Somebody answered; the task runs again with the answer.
    ClarificationProvided {
        /// The task.
        task: String,
        /// The answer.
        answer: String,
    },
    /// A human review task waits for a decision on the upstream outputs.
    ReviewRequested {
        /// The review task.
        task: String,
        /// The question.
        prompt: String,
        /// The outputs under review, by task id.
        outputs: BTreeMap<String, String>,
    },
    /// Somebody approved or rejected.
    ReviewDecided {
        /// The review task.
        task: String,
        /// Whether it was approved.
        approved: bool,
        /// The reviewer's comment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment: Option<String>,
    },
    /// An llm attempt's model answered: one turn of its conversation, recorded before any tool
    /// it calls runs.
    ModelTurn(Box<ModelTurn>),
    /// A tool call is about to run; durable before its process starts.
    ToolCallStarted(Box<ToolCallStarted>),
    /// A tool call's result, as handed to the model (capped like outputs).
    ToolCallFinished(Box<ToolCallFinished>),
    /// A tool call waits for a person's approval; the task pauses until a decision.
    ToolApprovalRequested(Box<ToolApprovalRequested>),
    /// Somebody approved or rejected a tool call; the task goes on with its conversation.
    ToolApprovalDecided(Box<ToolApprovalDecided>),
    /// An output failed its task's verification; the attempt counts as failed (a `TaskFailed`
    /// follows) and the reason goes into the next attempt's input.
    VerificationFailed {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// The `seq` of the attempt's `TaskDispatched` (absent in version-1 logs, and for a
        /// review, which is never dispatched).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatched_seq: Option<u64>,

        /// Why the check failed.
        reason: String,
        /// Tokens the attempt and its check used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
    },
    /// Text was compacted to fit a budget: the rolling context summary after a task, or a
    /// synthesis gate's output held to its cap.
    ContextCompacted(Box<ContextCompacted>),
    /// A failed task's policy asks the planner for a replacement; the run waits for it.
    ReplanRequested {
        /// The failed task.
        task: String,
        /// Its error.
        reason: String,
    },
    /// The planner's replacement was spliced in: the failed task and its unstarted
    /// descendants were removed and new tasks added.
    Replanned(Box<Replanned>),
    /// The planner gave no usable replacement; the failed task's fallback applies.
    ReplanFailed {
        /// The failed task.
        task: String,
        /// Why.
        reason: String,
        /// Tokens the planner used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
    },
    /// The planner of a growing plan wrote one more task; it joins the plan at the end.
    TaskPlanned(Box<TaskPlanned>),
    /// A line the planner of a growing plan wrote was not taken: it cannot be read, or its task
    /// could not run whatever came later (an unknown agent, a dependency on no earlier task, a
    /// destructive tool with no review before it).
    LineRejected {
        /// The planner's line, from 1.
        line: u32,
        /// The task the line named, if it could be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The diagnostic code.
        code: String,
        /// Why.
        reason: String,
    },
    /// The planner of a growing plan finished: no more tasks join it. With an `error`, it
    /// stopped midway; the run ends, `failed`, once the tasks it wrote are done.
    PlanWritten {
        /// Why the planner stopped before the end of the plan.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The critic's score of the whole plan (0-10).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        score: Option<f64>,
        /// The critic's findings on the whole plan, one line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        findings: Vec<String>,
    },
    /// The token budget or a phase's turns ran out: nothing more is dispatched.
    BudgetExhausted {
        /// Which budget, and how much was used.
        reason: String,
    },
    /// Nothing can run until somebody answers or decides.
    RunPaused {
        /// What the run waits for.
        reason: String,
    },
    /// The run continues (after a pause or a crash): attempts that never reported back and
    /// retries whose backoff was cut short become ready again.
    RunResumed,
    /// The run was cancelled; nothing more runs.
    RunCancelled {
        /// Why.
        reason: String,
    },
    /// The run finished.
    RunCompleted {
        /// How it ended.
        status: Outcome,
        /// One line about it.
        summary: String,
    },
}
}

// A run of 100,000 tasks records some 300,000 events, in batches that each hold their events.
const _: () = assert!(std::mem::size_of::<Event>() == 96);

impl Event {
    /// The plan a `RunCreated` or a `Replanned` carries.
    pub fn plan(&self) -> Option<&Arc<manifest::Plan>> {
        match self {
            Event::RunCreated(created) => Some(&created.plan),
            Event::Replanned(replanned) => Some(&replanned.plan),
            _ => None,
        }
    }

    /// The task the event is about, if any.
    pub fn task(&self) -> Option<&str> {
        match self {
            Event::TaskDispatched { task, .. }
            | Event::TaskReused { task, .. }
            | Event::TaskSucceeded { task, .. }
            | Event::TaskFailed { task, .. }
            | Event::RetryScheduled { task, .. }
            | Event::RetryDue { task }
            | Event::TaskSkipped { task, .. }
            | Event::MapExpanded { task, .. }
            | Event::ClarificationRequested { task, .. }
            | Event::ClarificationProvided { task, .. }
            | Event::ReviewRequested { task, .. }
            | Event::ReviewDecided { task, .. }
            | Event::VerificationFailed { task, .. }
            | Event::ReplanRequested { task, .. }
            | Event::ReplanFailed { task, .. } => Some(task),
            Event::ModelTurn(e) => Some(&e.task),
            Event::ToolCallStarted(e) => Some(&e.task),
            Event::ToolCallFinished(e) => Some(&e.task),
            Event::ToolApprovalRequested(e) => Some(&e.task),
            Event::ToolApprovalDecided(e) => Some(&e.task),
            Event::ContextCompacted(e) => Some(&e.task),
            Event::Replanned(e) => Some(&e.task),
            Event::TaskPlanned(e) => Some(e.task.id.value.as_str()),
            Event::LineRejected { task, .. } => task.as_deref(),
            Event::RunCreated(_)
            | Event::PlanWritten { .. }
            | Event::BudgetExhausted { .. }
            | Event::RunPaused { .. }
            | Event::RunResumed
            | Event::RunCancelled { .. }
            | Event::RunCompleted { .. } => None,
        }
    }
}
