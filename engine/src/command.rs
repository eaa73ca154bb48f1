//! Commands: what the outside world tells a run.

use std::collections::BTreeMap;
use std::sync::Arc;

use manifest::plan::Strategy;
use manifest::{Plan, TaskGraph};

use crate::event::Tokens;

/// What starting a run needs.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// The normalised plan.
    pub plan: Arc<Plan>,
    /// `--var` values for templates.
    pub vars: BTreeMap<String, String>,
    /// A strategy overriding the plan's.
    pub strategy: Option<Strategy>,
    /// The plan file, recorded so a resumed run finds the folder its commands run in.
    pub source: Option<String>,
    /// The run this one retries.
    pub retry_of: Option<String>,
    /// Outputs taken over from that run, by task id; those tasks do not run again.
    pub reuse: BTreeMap<String, String>,
    /// The plan's graph, when the caller has it (the loader builds one); saves building it again.
    pub graph: Option<Arc<TaskGraph>>,
}

impl PartialEq for Start {
    /// The graph is left out: it is derived from the plan.
    fn eq(&self, other: &Self) -> bool {
        self.plan == other.plan
            && self.vars == other.vars
            && self.strategy == other.strategy
            && self.source == other.source
            && self.retry_of == other.retry_of
            && self.reuse == other.reuse
    }
}

impl Start {
    /// A plain start of a plan.
    pub fn plan(plan: Arc<Plan>) -> Self {
        Start { plan, ..Start::default() }
    }
}

/// An instruction to the run state machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start a run of a validated plan.
    Start(Start),
    /// An agent finished an attempt with an output.
    Succeeded {
        /// The task.
        task: String,
        /// The attempt it finished.
        attempt: u32,
        /// The output.
        output: String,
        /// Tokens used.
        tokens: Option<Tokens>,
        /// How long it took.
        duration_ms: u64,
    },
    /// An agent's attempt failed.
    Failed {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// What went wrong.
        error: String,
        /// Whether trying again could help (a bad template or a refused argv cannot).
        retryable: bool,
    },
    /// An agent asked a question instead of answering.
    NeedsClarification {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// The question.
        question: String,
    },
    /// A retry's backoff has passed.
    TimerFired {
        /// The task to run again.
        task: String,
    },
    /// Stop the run.
    Cancel {
        /// Why.
        reason: String,
    },
    /// Answer a task's clarifying question.
    Answer {
        /// The task.
        task: String,
        /// The answer.
        text: String,
    },
    /// Approve or reject a human review.
    Decide {
        /// The review task.
        task: String,
        /// Approve (true) or reject.
        approved: bool,
        /// The reviewer's comment.
        comment: Option<String>,
    },
    /// Continue after a pause or a crash: attempts that never finished run again.
    Continue,
}
