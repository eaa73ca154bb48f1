//! Where a task's scheduling flags (`queued`, `waiting_timer`, `in_flight`, its `blocked` count)
//! and status change during a run, each moving the tally and the queue with it, so that their
//! invariants (see `tally.rs` and `queue.rs`) hold after every event. (`rebuild.rs` derives
//! them all afresh when a plan is installed.)

use std::collections::BinaryHeap;
use std::sync::Arc;

use super::RunState;
use crate::event::Tokens;
use crate::state::queue::entry;
use crate::task::TaskStatus;
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Marks dependents of a finished task ready when nothing else holds them.
    pub(super) fn release_dependents(&mut self, i: usize) {
        let graph = Arc::clone(&self.graph);
        for child in graph.children(i) {
            let blocked = &mut self.queue.blocked[child];
            *blocked = blocked.saturating_sub(1);
            let state = &self.tasks[child];
            if *blocked == 0 && state.status == TaskStatus::Pending && !state.waiting_timer {
                self.enqueue(child);
            }
        }
    }

    /// Puts the tasks that waited for the summary back on the ready queue.
    pub(super) fn release_held(&mut self) {
        for i in std::mem::take(&mut self.queue.held) {
            if self.tasks[i].queued {
                self.queue.ready.push(entry(self.priority(i), i));
            }
        }
    }

    /// Adds an agent's token use to the run's, and what they cost to its spend when the
    /// provider asked has a price.
    pub(super) fn add_tokens(&mut self, tokens: Option<Tokens>, by: Spender<'_>) {
        let Some(tokens) = tokens else { return };
        self.tokens.prompt += tokens.prompt;
        self.tokens.completion += tokens.completion;
        let plan = &self.plan;
        let agent = match by {
            Spender::Task(task, known) => {
                known.or_else(|| self.index_of(task)).and_then(|i| plan.agent_of(&plan.tasks[i]))
            }
            Spender::Planner => plan.control.planner.as_ref().map(|a| a.value.as_str()),
            Spender::Compactor => plan.control.compactor.as_ref().map(|a| a.value.as_str()),
        };
        let cost = agent.and_then(|a| plan.price_of(a)).map_or(0.0, |p| p.cost(tokens.prompt, tokens.completion));
        self.spent += cost;
    }

    /// Puts task `i` in the ready queue, unless it is there.
    pub(super) fn enqueue(&mut self, i: usize) {
        if !self.tasks[i].queued {
            self.tasks[i].queued = true;
            self.queue.ready.push(entry(self.priority(i), i));
        }
    }

    /// Takes task `i` out of the ready queue (its entry there goes stale).
    pub(super) fn dequeue(&mut self, i: usize) {
        self.tasks[i].queued = false;
    }

    /// Starts or stops task `i`'s retry timer.
    pub(super) fn set_waiting(&mut self, i: usize, waiting: bool) {
        if self.tasks[i].waiting_timer != waiting {
            self.tasks[i].waiting_timer = waiting;
            let level = self.graph.level(i);
            if waiting {
                self.tally.waiting += 1;
                self.tally.phase_busy[level] += 1;
            } else {
                self.tally.waiting -= 1;
                self.tally.phase_busy[level] -= 1;
            }
        }
    }

    /// Sets task `i`'s status, moving `paused`, `finished` and `phase_left` with it.
    pub(super) fn set_status(&mut self, i: usize, status: TaskStatus) {
        let old = std::mem::replace(&mut self.tasks[i].status, status);
        if old == status {
            return;
        }
        if old == TaskStatus::Paused {
            self.tally.paused -= 1;
        }
        if status == TaskStatus::Paused {
            self.tally.paused += 1;
        }
        if old == TaskStatus::Succeeded {
            self.tally.succeeded -= 1;
        }
        if status == TaskStatus::Succeeded {
            self.tally.succeeded += 1;
        }
        let level = self.graph.level(i);
        match (old.is_final(), status.is_final()) {
            (false, true) => {
                self.tally.finished += 1;
                self.tally.phase_left[level] -= 1;
            }
            // A failed attempt that will be retried is not final after all.
            (true, false) => {
                self.tally.finished -= 1;
                self.tally.phase_left[level] += 1;
            }
            _ => {}
        }
    }

    /// Puts an attempt of task `i` in flight, counted against every limit and its phase's turns.
    pub(super) fn start_attempt(&mut self, i: usize) {
        self.tasks[i].in_flight = true;
        let level = self.graph.level(i);
        self.tally.running += 1;
        self.tally.phase_busy[level] += 1;
        if let Some(group) = &self.plan.tasks[i].extras().parallel_group {
            *self.tally.group_running.entry(group.value.clone()).or_default() += 1;
        }
        self.tally.turns[level] += 1;
    }

    /// Ends task `i`'s attempt in flight, if any, freeing its slots (and a parked member of
    /// its group).
    pub(super) fn end_attempt(&mut self, i: usize) {
        if std::mem::take(&mut self.tasks[i].in_flight) {
            self.tally.running -= 1;
            self.tally.phase_busy[self.graph.level(i)] -= 1;
            let plan = Arc::clone(&self.plan);
            if let Some(group) = &plan.tasks[i].extras().parallel_group {
                if let Some(count) = self.tally.group_running.get_mut(&group.value) {
                    *count = count.saturating_sub(1);
                }
                // A slot in the group is free: the best parked member may go again.
                self.unpark(&group.value);
            }
        }
    }

    /// Puts the best parked member of `group` back on the ready queue: the group has room.
    pub(super) fn unpark(&mut self, group: &str) {
        if let Some(parked) = self.queue.parked.get_mut(group).and_then(BinaryHeap::pop) {
            self.queue.ready.push(parked);
        }
    }
}

/// Whose model requests used some tokens, which decides their price: a task's agent (its
/// attempts, turns and checks), the planner or the compactor.
#[derive(Clone, Copy)]
pub(super) enum Spender<'a> {
    /// The task with this id (and index, when known).
    Task(&'a str, Option<usize>),
    /// The `control_logic.planner` agent.
    Planner,
    /// The `control_logic.compactor` agent.
    Compactor,
}
