//! Scheduling: what may start now. One scheduler per strategy (`eager`, `phased`,
//! `sequential`), each a module with the same two functions: `priority`, the order its queued
//! tasks start in, and `round`, which starts what the strategy allows now. [`RunState`] picks
//! them by its strategy (a plain match: no dynamic dispatch on the per-event path).
//!
//! Invariants for every strategy: nothing starts while the run is not `Running` or once a
//! budget is exhausted; a review starts whatever the concurrency limits (it takes no agent);
//! a round that starts nothing ends the scheduling, after which `settle` pauses or ends the run.

mod eager;
mod phased;
mod sequential;

use std::cmp::Reverse;
use std::sync::Arc;

use manifest::plan::{Strategy, TaskKind};

use super::RunState;
use crate::event::{Event, Outcome};
use crate::run_status::RunStatus;
use crate::task::TaskStatus;
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Dispatches what may start, pauses for people, and ends the run when all is done.
    pub(super) fn schedule(&mut self, out: &mut Vec<Event>) {
        // A start that takes no agent (a review, an input that cannot render) leaves its turn
        // free at once, so rounds go on until one starts nothing.
        while self.status == RunStatus::Running && self.exhausted.is_none() {
            let before = out.len();
            match self.strategy {
                Strategy::Eager => eager::round(self, out),
                Strategy::Sequential => sequential::round(self, out),
                Strategy::Phased => phased::round(self, out),
            }
            if out.len() == before {
                break;
            }
        }
        if self.status == RunStatus::Running {
            self.settle(out);
        }
    }

    /// Pauses when only people can move the run, and completes it when everything is final.
    fn settle(&mut self, out: &mut Vec<Event>) {
        // Tasks still queued after scheduling cannot start: they wait behind a paused task of
        // an earlier phase.
        if self.tally.running > 0 || self.tally.waiting > 0 || !self.replanning.is_empty() || self.slice_full {
            return;
        }
        if let Some(reason) = self.exhausted.clone() {
            self.end_exhausted(reason, out);
            return;
        }
        // More tasks may join: a person is asked, and the run ends, once the plan is written.
        if self.growing {
            return;
        }
        if self.tally.paused > 0 {
            let Some(i) = self.tasks.iter().position(|t| t.status == TaskStatus::Paused) else { return };
            let task = self.id(i).to_owned();
            let approval = self.conversations.get(&task).and_then(|c| c.waiting.as_ref());
            let reason = match (self.tasks[i].question(), approval) {
                (Some(question), _) => format!("task `{task}` asks: {question}"),
                (None, Some(approval)) => format!("task `{task}` waits for approval to call `{}`", approval.tool),
                (None, None) => format!("task `{task}` waits for a review decision"),
            };
            self.emit(Event::RunPaused { reason }, out);
            return;
        }
        if self.tally.finished < self.tasks.len() {
            return;
        }
        // A task its condition skipped did what the plan asked: the run can still succeed.
        let skipped: Vec<&str> = (0..self.tasks.len())
            .filter(|&i| self.tasks[i].status != TaskStatus::Succeeded && !self.tasks[i].skipped_by_condition)
            .map(|i| self.id(i))
            .collect();
        let by_condition = self.tasks.iter().filter(|t| t.skipped_by_condition).count();
        let (outcome, summary) = if let Some(error) = &self.plan_error {
            let ran = self.tasks.len() - skipped.len();
            (
                Outcome::Failed,
                format!("the planner stopped after {} tasks ({ran} succeeded): {error}", self.tasks.len()),
            )
        } else if skipped.is_empty() && by_condition > 0 {
            let ran = self.tasks.len() - by_condition;
            (Outcome::Succeeded, format!("{ran} tasks succeeded and {by_condition} were skipped by their condition"))
        } else if skipped.is_empty() {
            (Outcome::Succeeded, format!("all {} tasks succeeded", self.tasks.len()))
        } else {
            (
                Outcome::Partial,
                format!("{} of {} tasks did not succeed: {}", skipped.len(), self.tasks.len(), skipped.join(", ")),
            )
        };
        self.finish(outcome, summary, out);
    }

    /// The order queued tasks start in: the strategy's `priority`.
    pub(super) fn priority(&self, i: usize) -> u32 {
        match self.strategy {
            Strategy::Eager => eager::priority(&self.graph, i),
            Strategy::Sequential => sequential::priority(&self.graph, i),
            Strategy::Phased => phased::priority(&self.graph, i),
        }
    }

    /// The run's `max_concurrency`, unbounded when it has none.
    fn limit(&self) -> usize {
        self.plan.control.max_concurrency.map_or(usize::MAX, |m| m as usize)
    }

    /// Whether task `i`'s parallel group has room for one more attempt.
    fn group_allows(&self, i: usize) -> bool {
        let Some(group) = &self.plan.tasks[i].extras().parallel_group else { return true };
        let limit = self.plan.control.parallel_groups.get(&group.value).and_then(|g| g.max_concurrency);
        limit.is_none_or(|limit| self.tally.group_running.get(&group.value).copied().unwrap_or(0) < limit as usize)
    }

    /// The next queued task, best first, dropping stale entries; none once the slice is full.
    fn next_ready(&mut self) -> Option<(u32, usize)> {
        if self.slice_left == 0 {
            self.slice_full = true;
            return None;
        }
        while let Some((priority, Reverse(i))) = self.queue.ready.pop() {
            let i = i as usize;
            if self.tasks[i].queued {
                self.slice_left -= 1;
                return Some((priority, i));
            }
        }
        None
    }

    /// Dispatches task `i`, or asks for its review.
    fn start_task(&mut self, i: usize, out: &mut Vec<Event>) {
        if self.plan.tasks[i].is_dynamic() && self.decide_dynamic(i, out) {
            return;
        }
        let task = self.id(i).to_owned();
        if self.plan.tasks[i].kind == TaskKind::HumanReview {
            let graph = Arc::clone(&self.graph);
            let outputs = graph
                .parents(i)
                .map(|p| (self.id(p).to_owned(), self.tasks[p].output.as_deref().unwrap_or_default().to_owned()))
                .collect();
            let prompt = self.plan.tasks[i].extras().prompt.as_ref().map_or_else(String::new, |p| p.value.clone());
            let prompt = self.render(&prompt).unwrap_or(prompt);
            self.emit(Event::ReviewRequested { task, prompt, outputs }, out);
            return;
        }
        if self.summary_pending > 0 && self.plan.tasks[i].reads_context_summary() {
            // Released when the compactor agent has merged every output recorded so far.
            self.queue.held.push(i);
            return;
        }
        let attempt = self.tasks[i].attempts + 1;
        let input = match self.render_input(i) {
            Ok(input) => input,
            Err(error) => return self.refuse(i, format!("cannot render the input: {error}"), out),
        };
        // A first attempt is looked up in the task cache: a stored output stands for it.
        if attempt == 1 && self.recalled(i, &input, out) {
            return;
        }
        match self.over_budget(i, &input) {
            Some(reason) => self.emit(Event::BudgetExhausted { reason }, out),
            None => {
                self.emit_for(i, Event::TaskDispatched { task, attempt, input }, out);
                self.dispatched.push((i, attempt));
            }
        }
    }

    /// Records task `i` as reused when the run's recall gives a stored output for `input`.
    fn recalled(&mut self, i: usize, input: &str, out: &mut Vec<Event>) -> bool {
        let Some(recall) = self.recall.clone() else { return false };
        let Some(found) = recall.0.recall(&self.plan, i, input, &self.cache_reuse) else { return false };
        let crate::Recalled { task, output, from } = found;
        self.emit_for(i, Event::TaskReused { task, output, from: Some(Box::new(from)) }, out);
        true
    }
}
