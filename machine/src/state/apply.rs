//! `apply`: how each event changes the state. It never fails and never decides: an event
//! for a task the plan does not have (only a tampered log has one) changes nothing but `seq`.
//! One function per event or family of events; the task flags and the tally move only
//! through `transitions.rs` (and `rebuild.rs`, which derives them afresh).

use std::sync::Arc;

use manifest::{Plan, TaskGraph};

use super::RunState;
use super::transitions::Spender;
use crate::event::{Event, Scope, SkipCause, Tokens};
use crate::run_status::RunStatus;
use crate::summary_mode::SummaryMode;
use crate::task::{TaskState, TaskStatus};
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Applies one event to the state.
    pub(super) fn apply_event(&mut self, event: &Event) {
        self.apply_known(event, None);
    }

    /// Applies one event whose task, if it has one, is `known` to be at that index (the state
    /// machine knows it for the events it emits; a log's events are looked up by id).
    pub(super) fn apply_known(&mut self, event: &Event, known: Option<usize>) {
        self.seq += 1;
        match event {
            Event::RunCreated(created) => {
                self.approved_tools.clone_from(&created.approved_tools);
                self.growing = created.growing.is_some();
                self.cache_reuse.clone_from(&created.cache_reuse);
                self.created(&created.plan, &created.vars, created.strategy);
            }
            Event::TaskReused { task, output, from } => {
                if let Some(from) = from {
                    self.saved.tasks += 1;
                    let tokens = from.tokens.unwrap_or_default();
                    self.saved.tokens.prompt += tokens.prompt;
                    self.saved.tokens.completion += tokens.completion;
                }
                self.reused(task, known, output);
            }
            Event::TaskDispatched { task, attempt, input } => self.dispatched(task, known, *attempt, input),
            Event::TaskSucceeded { task, output, tokens, .. } => self.task_succeeded(task, known, output, *tokens),
            Event::TaskFailed { task, error, tokens, .. } => self.task_failed(task, known, error, *tokens),
            Event::RetryScheduled { task, .. } => self.retry_scheduled(task, known),
            Event::RetryDue { task } => self.retry_due(task, known),
            Event::TaskSkipped { task, cause, .. } => self.skipped(task, known, *cause),
            Event::MapExpanded { task, items } => self.expanded(task, known, items),
            Event::ClarificationRequested { task, question, tokens } => self.asked(task, known, question, *tokens),
            Event::ClarificationProvided { task, answer } => self.answered(task, known, answer),
            Event::ReviewRequested { task, .. } => self.review_requested(task, known),
            Event::ReviewDecided { task, approved, comment } => self.review_decided(task, known, *approved, comment),
            Event::ModelTurn(_)
            | Event::ToolCallStarted(_)
            | Event::ToolCallFinished(_)
            | Event::ToolApprovalRequested(_)
            | Event::ToolApprovalDecided(_) => self.apply_conversation(event, known),
            Event::VerificationFailed { task, reason, tokens, .. } => {
                let tokens = self.settle_tokens(task, known, *tokens);
                self.add_tokens(tokens, Spender::Task(task, known));
                if let Some(i) = known.or_else(|| self.index_of(task)) {
                    self.tasks[i].set_feedback(Some(reason.clone()));
                }
            }
            Event::ContextCompacted(c) => self.compaction(c.scope, &c.summary, c.tokens),
            Event::ReplanRequested { task, .. } => {
                self.replanning.insert(task.clone());
            }
            Event::Replanned(replanned) => {
                self.add_tokens(replanned.tokens, Spender::Planner);
                self.replanning.remove(&replanned.task);
                self.replans += 1;
                self.splice(Arc::clone(&replanned.plan));
            }
            Event::ReplanFailed { task, tokens, .. } => {
                self.add_tokens(*tokens, Spender::Planner);
                self.replanning.remove(task);
            }
            Event::TaskPlanned(planned) => self.planned(&planned.task),
            Event::LineRejected { .. } => {}
            Event::PlanWritten { error, .. } => {
                self.growing = false;
                self.plan_error.clone_from(error);
            }
            Event::BudgetExhausted { reason } => self.exhausted = Some(reason.clone()),
            Event::RunPaused { .. } => self.status = RunStatus::Paused,
            Event::RunResumed => self.resumed(),
            Event::RunCancelled { .. } => self.status = RunStatus::Cancelled,
            Event::RunCompleted { status, .. } => {
                self.ended_while_paused = self.status == RunStatus::Paused;
                self.status = RunStatus::Finished(*status);
            }
        }
    }

    /// `RunCreated`: installs the plan, every task pending.
    fn created(&mut self, plan: &Arc<Plan>, vars: &manifest::plan::Vars, strategy: manifest::plan::Strategy) {
        let graph = self.prebuilt.take().unwrap_or_else(|| {
            Arc::new(TaskGraph::build(plan).unwrap_or_else(|_| {
                TaskGraph::build(&Plan::default()).unwrap_or_else(|_| unreachable!("an empty plan has no cycle"))
            }))
        });
        // The strategy first: it sets the priorities the ready queue is built with.
        self.strategy = strategy;
        self.vars = vars.clone();
        let tasks = vec![TaskState::new(); plan.tasks.len()];
        self.rebuild(Arc::clone(plan), graph, tasks);
        self.status = RunStatus::Running;
    }

    /// `TaskReused`: the task succeeded in an earlier run (the one this run retries, or the one
    /// that stored its output in the task cache).
    pub(super) fn reused(&mut self, task: &str, known: Option<usize>, output: &str) {
        let Some(i) = known.or_else(|| self.index_of(task)) else {
            // An item of a map: it succeeds when the map expands.
            if self.is_item_of_map(task) {
                self.reused_items.insert(task.to_owned(), output.into());
            }
            return;
        };
        self.dequeue(i);
        self.set_status(i, TaskStatus::Succeeded);
        self.tasks[i].output = Some(output.into());
        self.tasks[i].reused = true;
        self.release_dependents(i);
    }

    /// `TaskDispatched`: an attempt is in flight, counted against every limit.
    fn dispatched(&mut self, task: &str, known: Option<usize>, attempt: u32, input: &Arc<str>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.dequeue(i);
        self.set_status(i, TaskStatus::Running);
        let state = &mut self.tasks[i];
        state.attempts = attempt;
        state.input = Some(Arc::clone(input));
        state.dispatched_at(self.seq);
        // Told to this attempt in its input; later ones are not.
        state.set_feedback(None);
        self.start_attempt(i);
    }

    /// `TaskSucceeded`: the output is recorded and dependents may go.
    fn task_succeeded(&mut self, task: &str, known: Option<usize>, output: &Arc<str>, tokens: Option<Tokens>) {
        let tokens = self.settle_tokens(task, known, tokens);
        self.add_tokens(tokens, Spender::Task(task, known));
        if self.summary == SummaryMode::ByAgent {
            self.summary_pending += 1;
        }
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.end_attempt(i);
        // A map's collected output succeeds it straight from the ready queue.
        self.dequeue(i);
        self.set_status(i, TaskStatus::Succeeded);
        self.tasks[i].output = Some(Arc::clone(output));
        self.tasks[i].set_error(None);
        self.release_dependents(i);
    }

    /// `TaskFailed`: the attempt failed (a retry, replan or skip may follow).
    fn task_failed(&mut self, task: &str, known: Option<usize>, error: &str, tokens: Option<Tokens>) {
        let tokens = self.settle_tokens(task, known, tokens);
        self.add_tokens(tokens, Spender::Task(task, known));
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.tasks[i].failures += 1;
        self.end_attempt(i);
        self.set_status(i, TaskStatus::Failed);
        self.tasks[i].set_error(Some(error.to_owned()));
        self.tasks[i].set_question(None);
    }

    /// `RetryScheduled`: pending again, behind a timer.
    fn retry_scheduled(&mut self, task: &str, known: Option<usize>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.set_status(i, TaskStatus::Pending);
        self.set_waiting(i, true);
    }

    /// `RetryDue`: the timer is done; the task is ready.
    fn retry_due(&mut self, task: &str, known: Option<usize>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.set_waiting(i, false);
        self.enqueue(i);
    }

    /// `TaskSkipped`: final without an output; dependents still go.
    fn skipped(&mut self, task: &str, known: Option<usize>, cause: SkipCause) {
        self.settle_tokens(task, known, None);
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.tasks[i].skipped_by_condition = cause == SkipCause::Condition;
        self.end_attempt(i);
        self.dequeue(i);
        self.set_waiting(i, false);
        self.set_status(i, TaskStatus::Skipped);
        self.release_dependents(i);
    }

    /// `ClarificationRequested`: the task waits for an answer.
    fn asked(&mut self, task: &str, known: Option<usize>, question: &str, tokens: Option<Tokens>) {
        let tokens = self.settle_tokens(task, known, tokens);
        self.add_tokens(tokens, Spender::Task(task, known));
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.end_attempt(i);
        self.set_status(i, TaskStatus::Paused);
        self.tasks[i].set_question(Some(question.to_owned()));
    }

    /// `ClarificationProvided`: the task is ready again, with the answer.
    fn answered(&mut self, task: &str, known: Option<usize>, answer: &str) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.tasks[i].set_question(None);
        self.tasks[i].add_answer(answer.to_owned());
        self.set_status(i, TaskStatus::Pending);
        self.enqueue(i);
    }

    /// `ReviewRequested`: the review task waits for a decision (its one attempt).
    fn review_requested(&mut self, task: &str, known: Option<usize>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        self.dequeue(i);
        self.set_status(i, TaskStatus::Paused);
        self.tasks[i].attempts = 1;
    }

    /// `ReviewDecided`: an approval succeeds the review (a rejection's `TaskFailed` follows).
    fn review_decided(&mut self, task: &str, known: Option<usize>, approved: bool, comment: &Option<String>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        if approved {
            self.set_status(i, TaskStatus::Succeeded);
            self.tasks[i].output = Some(comment.as_deref().unwrap_or("approved").into());
            self.release_dependents(i);
        }
    }

    /// `ContextCompacted`: a new context summary; tasks held for it go once it has caught up.
    fn compaction(&mut self, scope: Scope, summary: &Option<String>, tokens: Option<Tokens>) {
        self.add_tokens(tokens, Spender::Compactor);
        if let (Scope::Summary, Some(summary)) = (scope, summary) {
            self.context_summary.clone_from(summary);
            if self.summary == SummaryMode::ByAgent {
                self.summary_pending = self.summary_pending.saturating_sub(1);
                if self.summary_pending == 0 {
                    self.release_held();
                }
            }
        }
    }

    /// `RunResumed`: attempts that never reported back and retries whose timer was cut short
    /// become ready again.
    fn resumed(&mut self) {
        self.status = RunStatus::Running;
        // The compactor's work in flight was lost with the process: go on without it.
        self.summary_pending = 0;
        self.release_held();
        for i in 0..self.tasks.len() {
            // An attempt that never reported back runs again as a new attempt.
            if self.tasks[i].in_flight {
                self.end_attempt(i);
                self.set_status(i, TaskStatus::Pending);
                self.enqueue(i);
            }
            if self.tasks[i].waiting_timer {
                self.set_waiting(i, false);
                self.enqueue(i);
            }
        }
    }
}
