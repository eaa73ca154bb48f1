//! What a durable batch asks the driver to do (attempts to start, retry timers, outputs for
//! the summarizer, replans) and the tasks' spans that open and close with it.

use std::sync::Arc;

use super::Driver;
use super::jobs::Work;
use crate::event::{Event, Record};
use crate::store::EventStore;
use crate::summarizer::{self, Compactor, Summarizer};

impl<S: EventStore> Driver<S> {
    /// The attempts a batch dispatched, known by index unless a replan in it renumbered the
    /// tasks (then [`Self::read_followups`] finds them by id).
    pub(super) fn starts(&mut self, by_id: bool) -> Followups {
        let mut followups = Followups::default();
        let dispatched = std::mem::take(&mut self.dispatched);
        if !by_id {
            followups.starts = dispatched;
        }
        self.open_task_spans(&followups.starts);
        followups
    }

    /// What records of a batch ask the driver to do once the batch is durable; a new plan (the
    /// run's first, a replan's, or one a map's items joined) also renews the agents' runtimes here.
    pub(super) fn read_followups(&mut self, records: &[Record], by_id: bool, followups: &mut Followups) {
        let mut expanded = false;
        for record in records {
            match &record.event {
                Event::RunCreated(_) | Event::Replanned(_) => {
                    let plan = record.event.plan().expect("a RunCreated or Replanned carries a plan");
                    self.agents = Some(self.agents_for(&Arc::clone(plan)));
                    self.summarize = summarizer::by_agent(plan);
                }
                Event::TaskDispatched { task, attempt, .. } if by_id => {
                    followups.starts.extend(self.state.index_of(task).map(|i| (i, *attempt)));
                }
                Event::RetryScheduled { task, delay_ms, .. } => followups.timers.push((task.clone(), *delay_ms)),
                Event::TaskSucceeded { task, output, .. } if self.summarize => {
                    followups.succeeded.push((task.clone(), output.to_string()));
                }
                Event::ReplanRequested { task, reason } => followups.replans.push((task.clone(), reason.clone())),
                // Replans a crash cut short are asked for again.
                Event::RunResumed => followups.replans.extend(self.state.replanning.iter().map(|task| {
                    let i = self.state.index_of(task);
                    (task.clone(), i.and_then(|i| self.state.tasks[i].error()).unwrap_or_default().to_owned())
                })),
                Event::RunCompleted { .. } | Event::RunCancelled { .. } => followups.ended = true,
                Event::MapExpanded { .. } | Event::TaskPlanned(_) => expanded = true,
                _ => {}
            }
        }
        if expanded {
            // The runtimes are by task index: the state's plan has the items of every map and
            // every task a growing plan's planner wrote so far.
            self.agents = Some(self.agents_for(&Arc::clone(&self.state.plan)));
        }
        self.close_task_spans(records);
    }

    /// Opens the span of each task whose first attempt starts, inside the run's span.
    pub(super) fn open_task_spans(&mut self, starts: &[(usize, u32)]) {
        for &(i, _) in starts {
            let spec = &self.state.plan.tasks[i];
            if self.task_spans.contains_key(spec.id.value.as_str()) {
                continue;
            }
            let agent = spec.agent.as_ref().map_or("", |a| a.value.as_str());
            let span = crate::spans::task(&spec.id.value, agent);
            if span.is_disabled() {
                return;
            }
            self.task_spans.insert(spec.id.value.to_string(), span);
        }
    }

    /// Closes the spans of the tasks a batch ended, with their status.
    pub(super) fn close_task_spans(&mut self, records: &[Record]) {
        if self.task_spans.is_empty() {
            return;
        }
        for record in records {
            let Some(task) = record.event.task() else { continue };
            let Some(status) = self.state.index_of(task).map(|i| self.state.tasks[i].status) else { continue };
            if status.is_final()
                && let Some(span) = self.task_spans.remove(task)
            {
                span.record("status", status.as_str());
            }
        }
    }

    /// Hands successful outputs to the compactor's summarizer, started on first use.
    pub(super) fn summarize(&mut self, succeeded: Vec<(String, String)>, work: &mut Work<'_>) {
        if succeeded.is_empty() {
            return;
        }
        let Some(agents) = &self.agents else { return };
        let summarizer = self.summarizer.get_or_insert_with(|| {
            let control = &self.state.plan.control;
            let compactor = control.compactor.as_ref().and_then(|name| {
                let runtime = agents.agent(&name.value)?;
                let (name, workdir, mark) = (name.value.clone(), self.workdir.clone(), Arc::clone(&self.mark));
                Some(Compactor { name, runtime, workdir, mark })
            });
            let budget = control.summary_budget.unwrap_or(summarizer::DEFAULT_BUDGET);
            let summary = self.state.context_summary.clone();
            Summarizer::start(summary, budget, compactor, work.sender.clone(), work.set, work.stop.clone())
        });
        for (task, output) in succeeded {
            summarizer.add(task, output);
        }
    }
}

/// The work a durable batch starts.
#[derive(Default)]
pub(super) struct Followups {
    /// Dispatched attempts: task index and attempt number.
    pub(super) starts: Vec<(usize, u32)>,
    /// Retry timers: task and delay in milliseconds.
    pub(super) timers: Vec<(String, u64)>,
    /// Successful outputs for the compactor: task and output.
    pub(super) succeeded: Vec<(String, String)>,
    /// Replans to ask for: task and the error that caused it.
    pub(super) replans: Vec<(String, String)>,
    /// Whether the batch ended the run.
    pub(super) ended: bool,
}
