//! The run state machine: pure and synchronous. `process` turns a command into events (and
//! applies them); `apply` changes the state for one event; `fold` rebuilds the state from a
//! log. It makes every scheduling decision (the ready queue, strategies, concurrency limits,
//! retries, pauses) but has no clocks, no IO and no randomness: the same events in give the
//! same state out, so the live state always equals the fold of the log.
//!
//! The files of this module: `process.rs` (one function per command), `apply.rs` (one per
//! event), `schedule/` (one scheduler per strategy), `failure.rs` (retries, replans, skips),
//! `dynamic.rs` (a task's `when` and the items of its `for_each`), `growth.rs` (a plan that
//! grows while it runs),
//! `budget.rs`, `input.rs` (rendering a task's input), `rebuild.rs` (installing a plan),
//! `tools.rs` (an llm task's conversation: turns, tool calls and their approval),
//! `transitions.rs` (where the task flags and the tally change), `tally.rs` and
//! `queue.rs` (the derived counters and caches).
//!
//! The token counter is the type parameter `C`: see [`crate::tokens`] for why.

mod apply;
mod budget;
mod dynamic;
mod failure;
mod growth;
mod input;
mod process;
mod queue;
mod rebuild;
mod schedule;
mod tally;
mod tools;
mod transitions;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use manifest::plan::Strategy;
use manifest::{Plan, TaskGraph};

use crate::command::Command;
use crate::conversation::Conversation;
use crate::error::EngineError;
use crate::event::{Event, Tokens};
use crate::handler::Handler;
use crate::run_status::RunStatus;
use crate::summary_mode::SummaryMode;
use crate::task::{TaskState, TaskStatus};
use crate::template::Renderer;
use crate::tokens::TokenCounter;
use queue::Queue;
use tally::Tally;

/// The state of one run, counting tokens with `C`.
#[derive(Debug, Clone)]
pub struct RunState<C> {
    /// The run's status.
    pub status: RunStatus,
    /// The plan it runs.
    pub plan: Arc<Plan>,
    /// The plan's graph.
    pub graph: Arc<TaskGraph>,
    /// Each task's state, in workflow order.
    pub tasks: Vec<TaskState>,
    /// `--var` values.
    pub vars: manifest::plan::Vars,
    /// The strategy in force.
    pub strategy: Strategy,
    /// The rolling summary of what the run has found, for `{{ context_summary }}`.
    pub context_summary: String,
    /// Tokens used so far by agents, checks, compaction and the planner.
    pub tokens: Tokens,
    /// What those tokens cost at the prices of the providers asked, in their currency (tokens
    /// of a provider with no price count nothing).
    pub spent: f64,
    /// Tasks whose output the task cache gave, and the tokens their original attempts used:
    /// what this run saved.
    pub saved: Saved,
    /// Replacements spliced in so far.
    pub replans: u32,
    /// Failed tasks waiting for the planner's replacement.
    pub replanning: BTreeSet<String>,
    /// Why dispatching stopped, once a budget ran out.
    pub exhausted: Option<String>,
    /// Whether the run ended while it was paused: a person's decision (a rejected review)
    /// ended it, not its work.
    pub ended_while_paused: bool,
    /// The `seq` of the last event applied: events are numbered from 1 in the order they
    /// happen, so counting them gives each one's `seq` without the log.
    pub seq: u64,
    /// The conversations in progress of llm tasks, by task id: what an attempt that was cut
    /// short goes on from.
    pub conversations: BTreeMap<String, Conversation>,
    /// Tools whose calls need no approval in this run.
    pub approved_tools: Vec<String>,
    /// Whether a planner is still writing the plan: more tasks may join it, so the run
    /// neither pauses nor ends yet.
    pub growing: bool,
    /// Why the planner of a growing plan stopped before the end of the plan: the run fails
    /// once the tasks it wrote are done.
    pub plan_error: Option<String>,
    /// The lists of the map tasks expanded so far, by map task id.
    pub maps: BTreeMap<String, Arc<[serde_json::Value]>>,
    /// How the run reuses stored outputs beyond the tasks' `cache`.
    pub cache_reuse: crate::Reuse,
    /// Outputs a retried run took over for items of maps not expanded yet, by item id.
    reused_items: BTreeMap<String, Arc<str>>,
    /// How the context summary is kept, if a task reads it.
    summary: SummaryMode,
    /// Outputs recorded that the compactor agent has not merged into the summary yet; tasks
    /// that read the summary wait for them.
    summary_pending: u32,
    /// The counters derived from the task states.
    tally: Tally,
    /// The ready queue and the strategies' caches.
    queue: Queue,
    /// The graph the caller of `Start` already built, taken by the `RunCreated` it causes.
    prebuilt: Option<Arc<TaskGraph>>,
    /// The attempts the latest `process` dispatched: task index and attempt number, in the
    /// order of their `TaskDispatched` events (derived, left out of equality).
    dispatched: Vec<(usize, u32)>,
    /// The index a caller of `process_at` gave for its command's task, tried before the index
    /// by id (and only while that command is processed).
    hint: Option<usize>,
    /// The most tasks one slice starts (see [`RunState::limit_dispatches`]); unlimited unless a
    /// driver sets it.
    slice: usize,
    /// How many more tasks the current slice may start.
    slice_left: usize,
    /// Where the scheduler looks for a stored output before a task's first attempt (see
    /// [`RunState::recall_from`]); none unless a driver sets it.
    recall: Option<crate::recall::Held>,
    /// Whether the scheduler stopped at the end of the slice with tasks it could have started.
    slice_full: bool,
    renderer: Renderer,
    counter: C,
}

/// What the task cache saved a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Saved {
    /// Tasks whose output it gave.
    pub tasks: u32,
    /// The tokens those outputs' attempts used.
    pub tokens: Tokens,
}

impl<C: TokenCounter + Default> Default for RunState<C> {
    fn default() -> Self {
        RunState::new()
    }
}

impl<C> PartialEq for RunState<C> {
    /// Runs are equal when their recorded state is; the scheduling caches are left out.
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status
            && self.tasks == other.tasks
            && self.vars == other.vars
            && self.strategy == other.strategy
            && self.context_summary == other.context_summary
            && self.tokens == other.tokens
            && self.spent == other.spent
            && self.saved == other.saved
            && self.replans == other.replans
            && self.replanning == other.replanning
            && self.exhausted == other.exhausted
            && self.ended_while_paused == other.ended_while_paused
            && self.seq == other.seq
            && self.conversations == other.conversations
            && self.approved_tools == other.approved_tools
            && self.growing == other.growing
            && self.plan_error == other.plan_error
            && self.maps == other.maps
            && self.cache_reuse == other.cache_reuse
            && self.reused_items == other.reused_items
            && self.summary_pending == other.summary_pending
            && self.tally.running == other.tally.running
            && self.tally.group_running == other.tally.group_running
            && same_plan(&self.plan, &other.plan)
    }
}

impl<C: TokenCounter + Default> RunState<C> {
    /// A run that has not started.
    pub fn new() -> Self {
        let plan = Arc::new(Plan::default());
        let graph = Arc::new(TaskGraph::build(&plan).unwrap_or_else(|_| unreachable!("an empty plan has no cycle")));
        RunState {
            status: RunStatus::New,
            plan,
            graph,
            tasks: Vec::new(),
            vars: BTreeMap::new(),
            strategy: Strategy::Eager,
            context_summary: String::new(),
            tokens: Tokens::default(),
            spent: 0.0,
            saved: Saved::default(),
            replans: 0,
            replanning: BTreeSet::new(),
            exhausted: None,
            ended_while_paused: false,
            seq: 0,
            conversations: BTreeMap::new(),
            approved_tools: Vec::new(),
            growing: false,
            plan_error: None,
            maps: BTreeMap::new(),
            cache_reuse: crate::Reuse::default(),
            reused_items: BTreeMap::new(),
            summary: SummaryMode::Unused,
            summary_pending: 0,
            tally: Tally::default(),
            queue: Queue::default(),
            prebuilt: None,
            dispatched: Vec::new(),
            hint: None,
            slice: usize::MAX,
            slice_left: usize::MAX,
            slice_full: false,
            recall: None,
            renderer: Renderer::default(),
            counter: C::default(),
        }
    }
}

impl<C: TokenCounter> RunState<C> {
    /// The index of a task by id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.graph.index_of(id)
    }

    /// Task `task` and its descendants that have not started: what a replan replaces.
    pub fn replaceable(&self, task: &str) -> Vec<String> {
        let Some(failed) = self.index_of(task) else { return Vec::new() };
        let mut seen = vec![false; self.tasks.len()];
        seen[failed] = true;
        let mut stack = vec![failed];
        let mut found = Vec::new();
        while let Some(i) = stack.pop() {
            found.push(i);
            for child in self.graph.children(i) {
                let state = &self.tasks[child];
                if !seen[child] && state.status == TaskStatus::Pending && state.attempts == 0 {
                    seen[child] = true;
                    stack.push(child);
                }
            }
        }
        found.sort_unstable();
        found.into_iter().map(|i| self.id(i).to_owned()).collect()
    }

    /// The attempts the latest `process` dispatched, as task index and attempt number, in the
    /// order of their `TaskDispatched` events: what a driver starts once they are durable,
    /// without looking each task up by id.
    pub fn last_dispatched(&self) -> &[(usize, u32)] {
        &self.dispatched
    }

    /// Starts at most `most` tasks a slice: once a slice is full, the scheduler leaves the rest
    /// queued until [`RunState::next_slice`]. A driver that makes each batch of events durable
    /// before starting what it dispatched sets this, so that a layer of 100,000 tasks is not
    /// dispatched (and its events held) in one batch.
    pub fn limit_dispatches(&mut self, most: usize) {
        self.slice = most.max(1);
        self.slice_left = self.slice;
    }

    /// Asks `recall` for a stored output before each task's first attempt is dispatched: an
    /// output it gives is recorded as `TaskReused` instead (no attempt, no tokens). Derived, like
    /// the dispatch limit: a driver sets it on the state it folds or starts.
    pub fn recall_from(&mut self, recall: Arc<dyn crate::Recall>) {
        self.recall = Some(crate::recall::Held(recall));
    }

    /// Whether the current slice is full and tasks that could start were left queued.
    pub fn held_back(&self) -> bool {
        self.slice_full
    }

    /// Opens a new slice and starts what the last one held back, as the scheduler would have
    /// (its events appended to `out`, its attempts in [`RunState::last_dispatched`]). A driver
    /// calls it when it begins a new batch, after the last one is durable and started.
    pub fn next_slice(&mut self, out: &mut Vec<Event>) {
        self.slice_left = self.slice;
        self.dispatched.clear();
        if std::mem::take(&mut self.slice_full) && self.status == RunStatus::Running {
            self.schedule(out);
        }
    }

    /// Attempts in flight.
    pub fn running(&self) -> usize {
        self.tally.running
    }

    /// Tasks whose status is final.
    pub fn finished(&self) -> usize {
        self.tally.finished
    }

    /// Tasks that succeeded (reused outputs count).
    pub fn succeeded_tasks(&self) -> usize {
        self.tally.succeeded
    }

    /// The index of task `id`, or why there is none. A hint that holds `id` spares the look-up
    /// by id: the driver has just read that task to start its attempt, while the index's entry
    /// for it is a cache miss on a large plan.
    fn task_index(&self, id: &str) -> Result<usize, EngineError> {
        if let Some(i) = self.hint.filter(|&i| self.plan.tasks.get(i).is_some_and(|t| t.id.value == id)) {
            return Ok(i);
        }
        self.index_of(id).ok_or_else(|| EngineError::UnknownTask { task: id.to_owned() })
    }

    /// The id of task `i`.
    fn id(&self, i: usize) -> &str {
        &self.plan.tasks[i].id.value
    }

    /// Applies an event and records it in `out`.
    fn emit(&mut self, event: Event, out: &mut Vec<Event>) {
        self.apply_event(&event);
        out.push(event);
    }

    /// [`Self::emit`] for an event about task `i`, which spares looking the task up by id.
    fn emit_for(&mut self, i: usize, event: Event, out: &mut Vec<Event>) {
        self.apply_known(&event, Some(i));
        out.push(event);
    }

    /// Refuses a command before the run started or after it ended.
    fn require_active(&self) -> Result<(), EngineError> {
        match self.status {
            RunStatus::New => Err(EngineError::NotStarted),
            status if status.is_final() => Err(EngineError::Finished { status: status.as_str() }),
            _ => Ok(()),
        }
    }

    /// Whether a result is for the attempt in flight (older ones arrive after a resume).
    fn is_current(&self, i: usize, attempt: u32) -> bool {
        let task = &self.tasks[i];
        task.in_flight && task.attempts == attempt
    }
}

/// Whether two plans are the same as recorded: source locations are not part of a log.
fn same_plan(a: &Plan, b: &Plan) -> bool {
    std::ptr::eq(a, b) || serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

impl<C: TokenCounter + Default> Handler for RunState<C> {
    type Command = Command;
    type Event = Event;
    type Error = EngineError;

    fn process(&mut self, command: Command) -> Result<Vec<Event>, EngineError> {
        self.process_command(command)
    }

    fn apply(&mut self, event: &Event) {
        self.apply_event(event);
    }

    fn fold(events: &[Event]) -> Self {
        let mut state = RunState::new();
        for event in events {
            state.apply_event(event);
        }
        state
    }
}
