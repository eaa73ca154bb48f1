//! Commands: what the outside world tells a run.

use std::collections::BTreeMap;
use std::sync::Arc;

use manifest::plan::Strategy;
use manifest::{Plan, TaskGraph};

use crate::conversation::ToolCallRecord;
use crate::event::{
    ContextCompacted, ErrorClass, Growing, ModelTurn, Origin, Replanned, TaskPlanned, Tokens, ToolCallFinished,
};

/// What starting a run needs.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// The normalised plan.
    pub plan: Arc<Plan>,
    /// `--var` values for templates.
    pub vars: manifest::plan::Vars,
    /// A strategy overriding the plan's.
    pub strategy: Option<Strategy>,
    /// The plan file, recorded so a resumed run finds the folder its commands run in.
    pub source: Option<String>,
    /// The run this one retries.
    pub retry_of: Option<String>,
    /// The run and task that started this one as a sub-plan.
    pub parent: Option<crate::child::Parent>,
    /// The W3C `traceparent` of the run's span, recorded in `RunCreated`.
    pub trace: Option<String>,
    /// Tools whose calls need no approval in this run.
    pub approved_tools: Vec<String>,
    /// Outputs taken over from that run, by task id; those tasks do not run again.
    pub reuse: BTreeMap<String, String>,
    /// Outputs the task cache holds for tasks whose key is known before the run, in plan order;
    /// those tasks do not run.
    pub recalled: Vec<Recalled>,
    /// How the run reuses stored outputs beyond the tasks' `cache` (`--reuse`), recorded so a
    /// resumed run looks up the same way.
    pub cache_reuse: crate::Reuse,
    /// The plan's graph, when the caller has it (the loader builds one); saves building it again.
    pub graph: Option<Arc<TaskGraph>>,
    /// Set when a planner is still writing the plan: the run waits for its tasks.
    pub growing: Option<Growing>,
    /// What the run is forecast to take, recorded with it.
    pub forecast: Option<Box<crate::event::Forecasted>>,
}

impl PartialEq for Start {
    /// The graph is left out: it is derived from the plan.
    fn eq(&self, other: &Self) -> bool {
        self.plan == other.plan
            && self.vars == other.vars
            && self.strategy == other.strategy
            && self.source == other.source
            && self.retry_of == other.retry_of
            && self.parent == other.parent
            && self.trace == other.trace
            && self.approved_tools == other.approved_tools
            && self.reuse == other.reuse
            && self.recalled == other.recalled
            && self.cache_reuse == other.cache_reuse
            && self.growing == other.growing
            && self.forecast == other.forecast
    }
}

/// An output the task cache gave for a task, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    /// The task.
    pub task: String,
    /// The stored output.
    pub output: String,
    /// The attempt that stored it.
    pub from: Origin,
}

impl Start {
    /// A plain start of a plan.
    pub fn plan(plan: Arc<Plan>) -> Self {
        Start { plan, ..Start::default() }
    }
}

/// An instruction to the run state machine.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
        /// What kind of failure it was; with the task's `retry_on` it decides whether a retry
        /// could help (a bad template or a refused argv cannot).
        class: ErrorClass,
        /// Tokens the attempt used before it failed.
        tokens: Option<Tokens>,
        /// A number in `[0, 1)` drawn at random by the driver: the share of the backoff's
        /// second half cut from the wait before a retry (0 waits the whole backoff).
        jitter: f64,
    },
    /// An agent asked a question instead of answering.
    NeedsClarification {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// The question.
        question: String,
        /// Tokens used to ask it.
        tokens: Option<Tokens>,
    },
    /// An llm attempt's model answered (one turn of its conversation), as its `ModelTurn`
    /// event records it.
    ModelTurn(ModelTurn),
    /// An llm attempt is about to call a tool: the machine decides whether it runs now, waits
    /// for a person's approval, or has its result already (see `RunState::conversation`).
    CallTool {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// The turn that made the call.
        turn: u32,
        /// The call.
        call: ToolCallRecord,
        /// What the model said in that turn.
        reason: String,
    },
    /// A tool call's result, as its `ToolCallFinished` event records it.
    ToolResult(ToolCallFinished),
    /// An attempt's output failed the task's verification.
    VerificationFailed {
        /// The task.
        task: String,
        /// The attempt.
        attempt: u32,
        /// Why.
        reason: String,
        /// Tokens the attempt and its check used.
        tokens: Option<Tokens>,
        /// As for `Failed`: the random share of the backoff's second half cut before a retry.
        jitter: f64,
    },
    /// Text was compacted: the context summary after a task, or a gate's output, as its
    /// `ContextCompacted` event records it.
    Compacted(ContextCompacted),
    /// The planner's replacement for a failed task, checked and spliced into the plan, as its
    /// `Replanned` event records it.
    Replanned(Replanned),
    /// The planner gave no usable replacement.
    ReplanFailed {
        /// The failed task.
        task: String,
        /// Why.
        reason: String,
        /// Tokens the planner used.
        tokens: Option<Tokens>,
    },
    /// The planner of a growing plan wrote a task, as its `TaskPlanned` event records it; a
    /// task that cannot join the plan (a duplicate id, an unknown agent, a dependency on no
    /// task) is recorded as a `LineRejected` instead.
    PlanTask(TaskPlanned),
    /// The planner of a growing plan wrote a line that cannot be taken.
    RejectLine {
        /// The planner's line, from 1.
        line: u32,
        /// The task it named, if it could be read.
        task: Option<String>,
        /// The diagnostic code.
        code: String,
        /// Why.
        reason: String,
    },
    /// The planner of a growing plan finished, or stopped midway with an `error`.
    ClosePlan {
        /// Why it stopped before the end.
        error: Option<String>,
        /// The critic's score of the whole plan.
        score: Option<f64>,
        /// The critic's findings on the whole plan, one line each.
        findings: Vec<String>,
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
        /// The review task, or the task whose tool call waits for approval.
        task: String,
        /// Approve (true) or reject.
        approved: bool,
        /// The reviewer's comment.
        comment: Option<String>,
    },
    /// Continue after a pause or a crash: attempts that never finished run again.
    Continue,
}
