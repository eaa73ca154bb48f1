//! Installing a plan (at the start and after a replan) and deriving every count, limit and
//! queue from the task states.

use std::collections::HashMap;
use std::sync::Arc;

use manifest::{Plan, TaskGraph};

use super::RunState;
use super::queue::Queue;
use super::tally::Tally;
use crate::summary_mode::SummaryMode;
use crate::task::{TaskState, TaskStatus};
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Swaps in a replanned plan: kept tasks keep their state and new ones start pending. A
    /// plan whose graph cannot be built (only a tampered log has one) is ignored.
    pub(super) fn splice(&mut self, plan: Arc<Plan>) {
        let Ok(graph) = TaskGraph::build(&plan) else { return };
        let mut old: HashMap<manifest::Text, TaskState> =
            self.plan.tasks.iter().map(|t| t.id.value.clone()).zip(std::mem::take(&mut self.tasks)).collect();
        let tasks =
            plan.tasks.iter().map(|t| old.remove(t.id.value.as_bytes()).unwrap_or_else(TaskState::new)).collect();
        self.rebuild(plan, Arc::new(graph), tasks);
    }

    /// Installs a plan with the given task states and derives every count, limit and queue
    /// from them.
    pub(super) fn rebuild(&mut self, plan: Arc<Plan>, graph: Arc<TaskGraph>, mut tasks: Vec<TaskState>) {
        let mut tally = Tally::new(graph.phases().len());
        // Tasks held for the summary stay held: they are released when it is merged.
        let settled: Vec<bool> =
            tasks.iter().map(|t| matches!(t.status, TaskStatus::Succeeded | TaskStatus::Skipped)).collect();
        let blocked = (0..tasks.len()).map(|i| graph.parents(i).filter(|&p| !settled[p]).count() as u32).collect();
        let mut queue = Queue { blocked, held: std::mem::take(&mut self.queue.held), ..Queue::default() };
        for (i, state) in tasks.iter_mut().enumerate() {
            let level = graph.level(i);
            state.queued = false;
            tally.turns[level] += state.attempts;
            if !state.status.is_final() {
                tally.phase_left[level] += 1;
            } else {
                tally.finished += 1;
            }
            if state.status == TaskStatus::Paused {
                tally.paused += 1;
            }
            if state.status == TaskStatus::Succeeded {
                tally.succeeded += 1;
            }
            if state.waiting_timer {
                tally.waiting += 1;
                tally.phase_busy[level] += 1;
            }
            let group = plan.tasks[i].extras().parallel_group.as_ref().map(|g| &g.value);
            if state.in_flight {
                tally.running += 1;
                tally.phase_busy[level] += 1;
                if let Some(group) = group {
                    *tally.group_running.entry(group.clone()).or_default() += 1;
                }
            }
            if let Some(group) = group {
                queue.units.entry((level, group.clone())).or_default().push(i);
            }
        }
        self.tasks = tasks;
        self.tally = tally;
        self.queue = queue;
        self.summary = SummaryMode::of(&plan);
        self.plan = plan;
        self.graph = graph;
        for i in 0..self.tasks.len() {
            let state = &self.tasks[i];
            let free = self.queue.blocked[i] == 0;
            if state.status == TaskStatus::Pending && free && !state.waiting_timer && !state.in_flight {
                self.enqueue(i);
            }
        }
    }
}
