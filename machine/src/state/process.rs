//! `process`: what each command means. One function per command decides, emits the events
//! it causes (applied at once, see `RunState::emit`) and says whether the scheduler runs
//! after it; results for an attempt that is no longer current, and anything for a run that
//! has ended, cause nothing.

use std::sync::Arc;

use manifest::TaskGraph;
use manifest::plan::{Action, TaskKind};

use super::RunState;
use super::failure::Failure;
use crate::command::{Command, Recalled, Start};
use crate::context::summary;
use crate::error::EngineError;
use crate::event::{ContextCompacted, ErrorClass, Event, Replanned, RunCreated, SCHEMA_VERSION, Scope, Tokens};
use crate::plan_hash::PlanHash;
use crate::run_status::RunStatus;
use crate::summary_mode::{DEFAULT_BUDGET, SummaryMode};
use crate::task::TaskStatus;
use crate::tokens::{Meter, TokenCounter, Tokenizer};

/// What follows a command's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Scheduling: what may start now, a pause or the end of the run.
    Schedule,
    /// Nothing more.
    Stop,
}

impl<C: TokenCounter> RunState<C> {
    /// Decides what `command` means: the events it causes, already applied.
    pub(super) fn process_command(&mut self, command: Command) -> Result<Vec<Event>, EngineError> {
        let mut out = Vec::new();
        self.process_into(command, &mut out)?;
        Ok(out)
    }

    /// [`crate::Handler::process`], appending the events to `out` instead of returning a new
    /// vector: a driver that gathers a batch from many commands spares one vector each. A
    /// refused command appends nothing.
    pub fn process_into(&mut self, command: Command, out: &mut Vec<Event>) -> Result<(), EngineError> {
        self.dispatched.clear();
        let before = out.len();
        match self.dispatch(command, out) {
            Ok(Next::Schedule) => self.schedule(out),
            Ok(Next::Stop) => {}
            Err(error) => {
                out.truncate(before);
                return Err(error);
            }
        }
        Ok(())
    }

    /// [`Self::process_into`] for a command about task `i`, as [`Self::last_dispatched`]
    /// reported it: the task is found at `i` when it has the command's id there, and by its id
    /// otherwise (after a replan renumbered the tasks, say), so a wrong `i` changes nothing.
    pub fn process_at(&mut self, i: usize, command: Command, out: &mut Vec<Event>) -> Result<(), EngineError> {
        self.hint = Some(i);
        let result = self.process_into(command, out);
        self.hint = None;
        result
    }

    /// Hands `command` to its function.
    fn dispatch(&mut self, command: Command, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        Ok(match command {
            Command::Start(start) => self.start(start, out)?,
            Command::Succeeded { task, attempt, output, tokens, duration_ms } => {
                self.succeeded(task, attempt, output, tokens, duration_ms, out)?
            }
            Command::VerificationFailed { task, attempt, reason, tokens, jitter } => {
                self.verification_failed(task, attempt, reason, tokens, jitter, out)?
            }
            Command::Compacted(compaction) => self.compacted(compaction, out)?,
            Command::Replanned(replanned) => self.replanned(replanned, out)?,
            Command::ReplanFailed { task, reason, tokens } => self.replan_failed(task, reason, tokens, out)?,
            Command::Failed { task, attempt, error, class, tokens, jitter } => {
                self.failed(&task, attempt, Failure { error, class, tokens, jitter }, out)?
            }
            Command::NeedsClarification { task, attempt, question, tokens } => {
                self.needs_clarification(task, attempt, question, tokens, out)?
            }
            Command::ModelTurn(turn) => {
                let recorded = self.model_turn(turn, out)?;
                // The turn's tokens may exhaust the budget: the scheduler says so.
                if recorded { Next::Schedule } else { Next::Stop }
            }
            Command::CallTool { task, attempt, turn, call, reason } => {
                if self.call_tool(task, attempt, turn, call, reason, out)? { Next::Schedule } else { Next::Stop }
            }
            Command::ToolResult(finished) => {
                self.tool_result(finished, out)?;
                Next::Stop
            }
            Command::PlanTask(planned) => self.plan_task(planned, out)?,
            Command::RejectLine { line, task, code, reason } => self.reject_line(line, task, code, reason, out)?,
            Command::ClosePlan { error, score, findings } => self.close_plan(error, score, findings, out)?,
            Command::TimerFired { task } => self.timer_fired(task, out)?,
            Command::Cancel { reason } => self.cancel(reason, out)?,
            Command::Answer { task, text } => self.answer(task, text, out)?,
            Command::Decide { task, approved, comment } => self.decide(task, approved, comment, out)?,
            Command::Continue => self.resume(out)?,
        })
    }

    /// Whether results for attempt `attempt` of task `i` still count: the run goes on and it
    /// is the attempt in flight.
    pub(super) fn takes_result(&self, i: usize, attempt: u32) -> bool {
        !self.status.is_final() && self.is_current(i, attempt)
    }

    /// `Start`: records the plan (hashed) and the outputs a retried run takes over.
    fn start(&mut self, start: Start, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        if self.status != RunStatus::New {
            return Err(EngineError::AlreadyStarted);
        }
        let graph = match start.graph.filter(|graph| graph.len() == start.plan.tasks.len()) {
            Some(graph) => graph,
            None => Arc::new(TaskGraph::build(&start.plan).map_err(|cycles| {
                let ids = |cycle: &Vec<usize>| {
                    cycle.iter().map(|&i| format!("`{}`", start.plan.tasks[i].id.value)).collect::<Vec<_>>().join(", ")
                };
                EngineError::Cycle { tasks: cycles.0.iter().map(ids).collect::<Vec<_>>().join("; ") }
            })?),
        };
        let strategy = start.strategy.unwrap_or(start.plan.control.strategy);
        self.prebuilt = Some(graph);
        let event = Event::RunCreated(Box::new(RunCreated {
            schema: SCHEMA_VERSION,
            plan: Arc::clone(&start.plan),
            plan_sha256: PlanHash::of(Arc::clone(&start.plan)),
            vars: start.vars,
            strategy,
            source: start.source,
            retry_of: start.retry_of,
            parent: start.parent,
            trace: start.trace,
            approved_tools: start.approved_tools,
            growing: start.growing,
            cache_reuse: start.cache_reuse,
            forecast: start.forecast,
        }));
        self.emit(event, out);
        for (task, output) in start.reuse {
            if self.index_of(&task).is_some() || self.is_item_of_map(&task) {
                self.emit(Event::TaskReused { task, output, from: None }, out);
            }
        }
        for recalled in start.recalled {
            if let Some(i) = self.index_of(&recalled.task) {
                let Recalled { task, output, from } = recalled;
                self.emit_for(i, Event::TaskReused { task, output, from: Some(Box::new(from)) }, out);
            }
        }
        Ok(Next::Schedule)
    }

    /// `Succeeded`: records the output (merged into the summary when it is kept here), or
    /// asks for a replan of an empty one under `replan_on_empty_result`.
    fn succeeded(
        &mut self,
        task: String,
        attempt: u32,
        output: String,
        tokens: Option<Tokens>,
        duration_ms: u64,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        let i = self.task_index(&task)?;
        if !self.takes_result(i, attempt) {
            return Ok(Next::Stop);
        }
        let dispatched_seq = self.tasks[i].dispatched_seq();
        let empty = output.trim().is_empty();
        if empty && self.plan.control.replan_on_empty_result && self.plan.tasks[i].kind == TaskKind::Task {
            let error = "the output was empty (replan_on_empty_result)".to_owned();
            let event = Event::TaskFailed {
                task,
                attempt,
                dispatched_seq,
                error: error.clone(),
                class: ErrorClass::Verification,
                retryable: false,
                tokens,
            };
            self.emit(event, out);
            self.request_replan(i, error, out);
        } else {
            let merge = (self.summary == SummaryMode::Extractive).then(|| self.merge_summary(&task, &output));
            let output = output.into();
            self.emit_for(i, Event::TaskSucceeded { task, attempt, dispatched_seq, output, tokens, duration_ms }, out);
            if let Some(event) = merge {
                self.emit(event, out);
            }
        }
        Ok(Next::Schedule)
    }

    /// The extractive merge of a task's output into the context summary.
    fn merge_summary(&self, task: &str, output: &str) -> Event {
        let budget = self.plan.control.summary_budget.unwrap_or(DEFAULT_BUDGET) as usize;
        let meter = Meter::new(&self.counter, Tokenizer::O200k);
        let summary = summary::merge(&self.context_summary, task, output, budget, meter);
        Event::ContextCompacted(Box::new(ContextCompacted {
            task: task.to_owned(),
            scope: Scope::Summary,
            by: "extractive".to_owned(),
            tokens_before: (meter.count(&self.context_summary) + meter.count(output)) as u64,
            tokens_after: meter.count(&summary) as u64,
            summary: Some(summary),
            tokens: None,
        }))
    }

    /// `VerificationFailed`: records why, then fails the attempt.
    fn verification_failed(
        &mut self,
        task: String,
        attempt: u32,
        reason: String,
        tokens: Option<Tokens>,
        jitter: f64,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        let i = self.task_index(&task)?;
        if !self.takes_result(i, attempt) {
            return Ok(Next::Stop);
        }
        let error = format!("verification failed: {reason}");
        let dispatched_seq = self.tasks[i].dispatched_seq();
        self.emit(Event::VerificationFailed { task, attempt, dispatched_seq, reason, tokens }, out);
        let failure = Failure { jitter, ..Failure::new(error, ErrorClass::Verification) };
        self.fail_attempt(i, attempt, failure, out);
        Ok(Next::Schedule)
    }

    /// `Compacted`: records the compaction (and the new summary).
    fn compacted(&mut self, compaction: ContextCompacted, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        self.task_index(&compaction.task)?;
        if self.status.is_final() {
            return Ok(Next::Stop);
        }
        self.emit(Event::ContextCompacted(Box::new(compaction)), out);
        Ok(Next::Schedule)
    }

    /// `Replanned`: splices the replacement in, unless its dependencies form a cycle (then the
    /// replan failed).
    fn replanned(&mut self, replanned: Replanned, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        if self.status.is_final() || !self.replanning.contains(&replanned.task) {
            return Ok(Next::Stop);
        }
        if TaskGraph::build(&replanned.plan).is_err() {
            let reason = "the replacement's dependencies form a cycle".to_owned();
            return self.replan_failed(replanned.task, reason, replanned.tokens, out);
        }
        self.emit(Event::Replanned(Box::new(replanned)), out);
        Ok(Next::Schedule)
    }

    /// `ReplanFailed`: the failed task fails for good.
    fn replan_failed(
        &mut self,
        task: String,
        reason: String,
        tokens: Option<Tokens>,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        let i = self.task_index(&task)?;
        if self.status.is_final() || !self.replanning.contains(&task) {
            return Ok(Next::Stop);
        }
        let error = self.tasks[i].error().unwrap_or_default().to_owned();
        self.emit(Event::ReplanFailed { task, reason: reason.clone(), tokens }, out);
        self.give_up(i, Action::Fail, &format!("{error}; replanning failed: {reason}"), out);
        Ok(Next::Schedule)
    }

    /// `Failed`: the attempt failed; its policy decides what follows.
    fn failed(
        &mut self,
        task: &str,
        attempt: u32,
        failure: Failure,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        let i = self.task_index(task)?;
        if !self.takes_result(i, attempt) {
            return Ok(Next::Stop);
        }
        self.fail_attempt(i, attempt, failure, out);
        Ok(Next::Schedule)
    }

    /// `NeedsClarification`: the task waits for an answer.
    fn needs_clarification(
        &mut self,
        task: String,
        attempt: u32,
        question: String,
        tokens: Option<Tokens>,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        let i = self.task_index(&task)?;
        if !self.takes_result(i, attempt) {
            return Ok(Next::Stop);
        }
        self.emit(Event::ClarificationRequested { task, question, tokens }, out);
        Ok(Next::Schedule)
    }

    /// `TimerFired`: a retry's backoff has passed.
    fn timer_fired(&mut self, task: String, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        let i = self.task_index(&task)?;
        if self.status.is_final() || !self.tasks[i].waiting_timer {
            return Ok(Next::Stop);
        }
        self.emit(Event::RetryDue { task }, out);
        Ok(Next::Schedule)
    }

    /// `Cancel`: ends what runs and the run.
    fn cancel(&mut self, reason: String, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        self.require_active()?;
        self.stop_attempts("cancelled", out);
        self.emit(Event::RunCancelled { reason }, out);
        Ok(Next::Stop)
    }

    /// `Answer`: records the answer to a task's question.
    fn answer(&mut self, task: String, text: String, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        self.require_active()?;
        let i = self.task_index(&task)?;
        if self.tasks[i].question().is_none() {
            return Err(EngineError::NoQuestion { task });
        }
        self.emit(Event::ClarificationProvided { task, answer: text }, out);
        // A paused run only records the answer; `Continue` (runner resume) goes on.
        Ok(if self.status == RunStatus::Paused { Next::Stop } else { Next::Schedule })
    }

    /// `Decide`: records a review decision; a rejection fails the review task.
    fn decide(
        &mut self,
        task: String,
        approved: bool,
        comment: Option<String>,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        self.require_active()?;
        let i = self.task_index(&task)?;
        if self.decide_tool(&task, approved, &comment, out).is_some() {
            // A paused run only records the decision; `Continue` (runner resume) goes on.
            return Ok(if self.status == RunStatus::Paused { Next::Stop } else { Next::Schedule });
        }
        if self.plan.tasks[i].kind != TaskKind::HumanReview || self.tasks[i].status != TaskStatus::Paused {
            return Err(EngineError::NoReview { task });
        }
        self.emit(Event::ReviewDecided { task, approved, comment: comment.clone() }, out);
        if !approved {
            let reason = comment.map_or_else(|| "rejected".to_owned(), |c| format!("rejected: {c}"));
            self.fail_attempt(i, 1, Failure::new(reason, ErrorClass::Permanent), out);
        }
        Ok(if self.status == RunStatus::Paused { Next::Stop } else { Next::Schedule })
    }

    /// `Continue`: resumes a paused or crashed run, unless it still waits for a person.
    fn resume(&mut self, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        self.require_active()?;
        let movable = self.tally.running > 0
            || !self.replanning.is_empty()
            || self.tasks.iter().any(|t| t.queued || t.waiting_timer);
        // A decision while paused can leave every task final: then the run goes on to end.
        let asking = self.tasks.iter().any(|t| t.status == TaskStatus::Paused);
        if self.status == RunStatus::Paused && asking && !movable {
            // Still waiting for a person: nothing to record.
            return Ok(Next::Stop);
        }
        self.emit(Event::RunResumed, out);
        Ok(Next::Schedule)
    }
}
