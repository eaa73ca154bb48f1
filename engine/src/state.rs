//! The run state machine: pure and synchronous. `process` turns a command into events (and
//! applies them); `apply` changes the state for one event; `fold` rebuilds the state from a
//! log. It makes every scheduling decision (the ready queue, strategies, concurrency limits,
//! retries, pauses) but has no clocks, no IO and no randomness: the same events in give the
//! same state out, so the live state always equals the fold of the log.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use manifest::plan::{Action, Strategy, TaskKind};
use manifest::{Plan, TaskGraph};
use sha2::{Digest, Sha256};

use crate::command::{Command, Start};
use crate::context;
use crate::context::tokens::{Tokenizer, count};
use crate::error::EngineError;
use crate::event::{ErrorClass, Event, Outcome, SCHEMA_VERSION, Scope, Tokens};
use crate::handler::Handler;
use crate::summarizer;
use crate::template::Renderer;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started, or waiting for a retry.
    Pending,
    /// An attempt is in flight.
    Running,
    /// Finished with an output.
    Succeeded,
    /// Finished without one.
    Failed,
    /// Will not run; dependents still do.
    Skipped,
    /// Waiting for an answer or a review decision.
    Paused,
}

impl TaskStatus {
    /// Whether the task is done for good.
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Skipped)
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Paused => "paused",
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Before `RunCreated`.
    New,
    /// Tasks are running or ready.
    Running,
    /// Waiting for a person.
    Paused,
    /// Finished; see the outcome.
    Finished(Outcome),
    /// Stopped on request.
    Cancelled,
}

impl RunStatus {
    /// `running`, `paused`, `succeeded`, `failed`, `partial` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::New | RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Finished(outcome) => outcome.as_str(),
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Whether nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, RunStatus::Finished(_) | RunStatus::Cancelled)
    }
}

/// One task's state.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Where it stands.
    pub status: TaskStatus,
    /// Attempts dispatched so far.
    pub attempts: u32,
    /// Attempts that failed; a retry policy counts these, so a question answered or an
    /// attempt a crash cut short does not use up a retry.
    pub failures: u32,
    /// The output of the successful attempt.
    pub output: Option<String>,
    /// The last error.
    pub error: Option<String>,
    /// The input of the latest attempt.
    pub input: Option<String>,
    /// The `seq` of the latest attempt's `TaskDispatched`, which its result refers to.
    pub dispatched_seq: Option<u64>,
    /// The open question, while paused for a clarification.
    pub question: Option<String>,
    /// Answers given so far, appended to the input of later attempts.
    pub answers: Vec<String>,
    /// Why the latest output failed verification, told to the next attempt only.
    pub feedback: Option<String>,
    /// Whether the latest attempt is in flight (counted against concurrency limits).
    in_flight: bool,
    /// Whether a retry's timer is running.
    waiting_timer: bool,
    /// Whether it sits in the ready queue.
    queued: bool,
    /// Dependencies not yet final.
    blocked_by: u32,
}

impl TaskState {
    fn new(blocked_by: u32) -> Self {
        TaskState {
            status: TaskStatus::Pending,
            attempts: 0,
            failures: 0,
            output: None,
            error: None,
            input: None,
            dispatched_seq: None,
            question: None,
            answers: Vec::new(),
            feedback: None,
            in_flight: false,
            waiting_timer: false,
            queued: false,
            blocked_by,
        }
    }
}

/// The state of one run.
#[derive(Debug, Clone)]
pub struct RunState {
    /// The run's status.
    pub status: RunStatus,
    /// The plan it runs.
    pub plan: Arc<Plan>,
    /// The plan's graph.
    pub graph: Arc<TaskGraph>,
    /// Each task's state, in workflow order.
    pub tasks: Vec<TaskState>,
    /// `--var` values.
    pub vars: BTreeMap<String, String>,
    /// The strategy in force.
    pub strategy: Strategy,
    /// The rolling summary of what the run has found, for `{{ context_summary }}`.
    pub context_summary: String,
    /// Tokens used so far by agents, checks, compaction and the planner.
    pub tokens: Tokens,
    /// Replacements spliced in so far.
    pub replans: u32,
    /// Failed tasks waiting for the planner's replacement.
    pub replanning: BTreeSet<String>,
    /// Why dispatching stopped, once a budget ran out.
    pub exhausted: Option<String>,
    /// The `seq` of the last event applied: events are numbered from 1 in the order they
    /// happen, so counting them gives each one's `seq` without the log.
    pub seq: u64,
    /// How the context summary is kept, if a task reads it.
    summary: Summary,
    /// Outputs recorded that the compactor agent has not merged into the summary yet; tasks
    /// that read the summary wait for them.
    summary_pending: u32,
    /// Tasks taken off the ready queue to wait for the summary (a cache, like the queue).
    held: Vec<usize>,
    running: usize,
    group_running: HashMap<String, usize>,
    /// A cache of the queued tasks by priority (see `priority`); entries of tasks no longer
    /// queued are skipped when popped.
    ready: BinaryHeap<(u64, Reverse<usize>)>,
    /// A cache for `phased`: phases before it are all final.
    phase: usize,
    tally: Tally,
    /// The graph the caller of `Start` already built, taken by the `RunCreated` it causes.
    prebuilt: Option<Arc<TaskGraph>>,
    renderer: Renderer,
}

/// Counts derived from the task states, kept up to date where the states change, so that no
/// scheduling decision scans every task.
#[derive(Debug, Clone, Default)]
struct Tally {
    queued: usize,
    waiting: usize,
    paused: usize,
    finished: usize,
    /// Per phase: tasks not final yet.
    phase_left: Vec<usize>,
    /// Per phase: attempts in flight and retries waiting.
    phase_busy: Vec<usize>,
    /// Per phase: attempts dispatched (for `max_turns_per_phase`).
    turns: Vec<u32>,
    /// Per phase and parallel group: the members, in list order (for `phased`).
    units: HashMap<(usize, String), Vec<usize>>,
    /// The group unit `phased` is starting, and the next member to start.
    unit: Option<(usize, String, usize)>,
    /// Queued tasks of groups that were full when their turn came, best first.
    parked: HashMap<String, BinaryHeap<(u64, Reverse<usize>)>>,
}

impl Default for RunState {
    fn default() -> Self {
        RunState::new()
    }
}

impl PartialEq for RunState {
    /// Runs are equal when their recorded state is; the scheduling caches are left out.
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status
            && self.tasks == other.tasks
            && self.vars == other.vars
            && self.strategy == other.strategy
            && self.context_summary == other.context_summary
            && self.tokens == other.tokens
            && self.replans == other.replans
            && self.replanning == other.replanning
            && self.exhausted == other.exhausted
            && self.seq == other.seq
            && self.summary_pending == other.summary_pending
            && self.running == other.running
            && self.group_running == other.group_running
            && same_plan(&self.plan, &other.plan)
    }
}

impl RunState {
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
            replans: 0,
            replanning: BTreeSet::new(),
            exhausted: None,
            seq: 0,
            summary: Summary::Unused,
            summary_pending: 0,
            held: Vec::new(),
            running: 0,
            group_running: HashMap::new(),
            ready: BinaryHeap::new(),
            phase: 0,
            tally: Tally::default(),
            prebuilt: None,
            renderer: Renderer::default(),
        }
    }

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

    /// Attempts in flight.
    pub fn running(&self) -> usize {
        self.running
    }

    fn task_index(&self, id: &str) -> Result<usize, EngineError> {
        self.index_of(id).ok_or_else(|| EngineError::UnknownTask { task: id.to_owned() })
    }

    fn id(&self, i: usize) -> &str {
        &self.plan.tasks[i].id.value
    }

    /// Applies an event and records it in `out`.
    fn emit(&mut self, event: Event, out: &mut Vec<Event>) {
        self.apply(&event);
        out.push(event);
    }

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

    fn start(&mut self, start: Start, out: &mut Vec<Event>) -> Result<(), EngineError> {
        let graph = match start.graph.filter(|graph| graph.len() == start.plan.tasks.len()) {
            Some(graph) => graph,
            None => Arc::new(TaskGraph::build(&start.plan).map_err(|cycles| {
                let ids = |cycle: &Vec<usize>| {
                    cycle.iter().map(|&i| format!("`{}`", start.plan.tasks[i].id.value)).collect::<Vec<_>>().join(", ")
                };
                EngineError::Cycle { tasks: cycles.0.iter().map(ids).collect::<Vec<_>>().join("; ") }
            })?),
        };
        // Hashed as it is encoded, so a large plan's JSON is never held in memory.
        let mut hasher = HashWriter(Sha256::new());
        let _ = serde_json::to_writer(&mut hasher, &*start.plan);
        let plan_sha256 = hasher.0.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let strategy = start.strategy.unwrap_or(start.plan.control.strategy);
        self.prebuilt = Some(graph);
        let event = Event::RunCreated {
            schema: SCHEMA_VERSION,
            plan: Arc::clone(&start.plan),
            plan_sha256,
            vars: start.vars,
            strategy,
            source: start.source,
            retry_of: start.retry_of,
        };
        self.emit(event, out);
        for (task, output) in start.reuse {
            if self.index_of(&task).is_some() {
                self.emit(Event::TaskReused { task, output }, out);
            }
        }
        Ok(())
    }

    /// What the failure of attempt `attempt` of task `i` leads to: a retry after a jittered
    /// backoff when its policy covers the failure's class and attempts are left, else the fallback.
    fn fail_attempt(&mut self, i: usize, attempt: u32, failure: Failure, out: &mut Vec<Event>) {
        let Failure { error, class, tokens, jitter } = failure;
        let task = self.id(i).to_owned();
        let policy = self.plan.tasks[i].on_failure.value;
        let retryable = class.retryable(policy.retry_on);
        let dispatched_seq = self.tasks[i].dispatched_seq;
        let failed = Event::TaskFailed {
            task: task.clone(),
            attempt,
            dispatched_seq,
            error: error.clone(),
            class,
            retryable,
            tokens,
        };
        self.emit(failed, out);
        let failures = self.tasks[i].failures;
        let next = if policy.action == Action::Retry && retryable && failures < policy.max_attempts {
            let exponent = failures.saturating_sub(1).min(30);
            let delay = policy.backoff.as_millis().saturating_mul(u64::from(policy.factor).saturating_pow(exponent));
            let backoff_ms = delay.min(policy.max_backoff.as_millis());
            // "Equal jitter": between half and all of the backoff.
            let cut = ((backoff_ms / 2) as f64 * jitter.clamp(0.0, 1.0)) as u64;
            let delay_ms = backoff_ms - cut.min(backoff_ms / 2);
            self.emit(
                Event::RetryScheduled { task, attempt: attempt + 1, delay_ms, backoff_ms: Some(backoff_ms) },
                out,
            );
            return;
        } else if policy.action == Action::Retry {
            policy.then
        } else {
            policy.action
        };
        match next {
            Action::Replan => self.request_replan(i, error, out),
            action => self.give_up(i, action, &error, out),
        }
    }

    /// Skips a failed task when `action` is `skip` and it is not critical; otherwise fails the run.
    fn give_up(&mut self, i: usize, action: Action, error: &str, out: &mut Vec<Event>) {
        let task = self.id(i).to_owned();
        if action == Action::Skip && !self.plan.tasks[i].critical {
            self.emit(Event::TaskSkipped { task, reason: format!("failed: {error}") }, out);
        } else {
            let critical = if self.plan.tasks[i].critical { "critical " } else { "" };
            self.finish(Outcome::Failed, format!("{critical}task `{task}` failed: {error}"), out);
        }
    }

    /// Asks the planner for a replacement of failed task `i`, when there is a planner and
    /// replans are left; otherwise the task fails for good (`then` follows only `retry`).
    fn request_replan(&mut self, i: usize, error: String, out: &mut Vec<Event>) {
        let control = &self.plan.control;
        let refusal = if control.planner.is_none() {
            Some("its policy is to replan, but `control_logic.planner` names no planner agent".to_owned())
        } else if self.replans >= control.max_replans {
            Some(format!("the run has already replanned {} times (max_replans)", self.replans))
        } else {
            None
        };
        match refusal {
            Some(refusal) => self.give_up(i, Action::Fail, &format!("{error}; {refusal}"), out),
            None => {
                let task = self.id(i).to_owned();
                self.emit(Event::ReplanRequested { task, reason: error }, out);
            }
        }
    }

    /// Whether dispatching `input` for task `i` would go past the token budget or its phase's
    /// turns; the input's tokens, counted with its agent's tokenizer, are the estimate.
    fn over_budget(&self, i: usize, input: &str) -> Option<String> {
        let control = &self.plan.control;
        let used = self.tokens.prompt + self.tokens.completion;
        if let Some(budget) = control.token_budget {
            let tokenizer = Tokenizer::of_agent(&self.plan, self.plan.agent_of(&self.plan.tasks[i]));
            let estimate = count(input, tokenizer) as u64;
            if used.saturating_add(estimate) > budget {
                return Some(format!(
                    "the token budget is spent: {used} of {budget} tokens used, and task `{}` would need about {estimate} more",
                    self.id(i)
                ));
            }
        }
        let level = self.graph.level(i);
        match control.max_turns_per_phase {
            Some(max) if self.tally.turns.get(level).copied().unwrap_or(0) >= max => Some(format!(
                "phase {} has used all {max} of its turns (max_turns_per_phase) before task `{}`",
                level + 1,
                self.id(i)
            )),
            _ => None,
        }
    }

    fn finish(&mut self, outcome: Outcome, summary: String, out: &mut Vec<Event>) {
        self.stop_attempts("cancelled: the run failed", out);
        self.emit(Event::RunCompleted { status: outcome, summary }, out);
    }

    /// Records the end of every attempt still in flight, so the log never leaves a task
    /// running in a run that is over.
    fn stop_attempts(&mut self, reason: &str, out: &mut Vec<Event>) {
        if self.running == 0 {
            return;
        }
        let in_flight: Vec<usize> = (0..self.tasks.len()).filter(|&i| self.tasks[i].in_flight).collect();
        for i in in_flight {
            let (task, attempt) = (self.id(i).to_owned(), self.tasks[i].attempts);
            let event = Event::TaskFailed {
                task,
                attempt,
                dispatched_seq: self.tasks[i].dispatched_seq,
                error: reason.to_owned(),
                class: ErrorClass::Cancelled,
                retryable: false,
                tokens: None,
            };
            self.emit(event, out);
        }
    }

    /// Dispatches what may start, pauses for people, and ends the run when all is done.
    fn schedule(&mut self, out: &mut Vec<Event>) {
        // A start that takes no agent (a review, an input that cannot render) leaves its turn
        // free at once, so rounds go on until one starts nothing.
        while self.status == RunStatus::Running && self.exhausted.is_none() {
            let before = out.len();
            match self.strategy {
                Strategy::Eager => self.schedule_eager(out),
                Strategy::Sequential => self.schedule_sequential(out),
                Strategy::Phased => self.schedule_phased(out),
            }
            if out.len() == before {
                break;
            }
        }
        if self.status == RunStatus::Running {
            self.settle(out);
        }
    }

    fn limit(&self) -> usize {
        self.plan.control.max_concurrency.map_or(usize::MAX, |m| m as usize)
    }

    fn group_allows(&self, i: usize) -> bool {
        let Some(group) = &self.plan.tasks[i].parallel_group else { return true };
        let limit = self.plan.control.parallel_groups.get(&group.value).and_then(|g| g.max_concurrency);
        limit.is_none_or(|limit| self.group_running.get(&group.value).copied().unwrap_or(0) < limit as usize)
    }

    /// The next queued task, best first, dropping stale entries.
    fn next_ready(&mut self) -> Option<(u64, usize)> {
        while let Some((priority, Reverse(i))) = self.ready.pop() {
            if self.tasks[i].queued {
                return Some((priority, i));
            }
        }
        None
    }

    fn schedule_eager(&mut self, out: &mut Vec<Event>) {
        while self.running < self.limit() && self.status == RunStatus::Running && self.exhausted.is_none() {
            let Some((priority, i)) = self.next_ready() else { break };
            if self.plan.tasks[i].kind != TaskKind::HumanReview && !self.group_allows(i) {
                // Parked until a member of its group finishes.
                if let Some(group) = &self.plan.tasks[i].parallel_group {
                    self.tally.parked.entry(group.value.clone()).or_default().push((priority, Reverse(i)));
                }
                continue;
            }
            self.start_task(i, out);
        }
    }

    fn schedule_sequential(&mut self, out: &mut Vec<Event>) {
        if self.running > 0 || self.tally.waiting > 0 {
            return;
        }
        if let Some((_, i)) = self.next_ready() {
            self.start_task(i, out);
        }
    }

    /// The seed's phases: topological levels one after another; inside a phase, one parallel
    /// group (all its members together, within limits) or one ungrouped task at a time, in
    /// list order.
    fn schedule_phased(&mut self, out: &mut Vec<Event>) {
        let phases = self.graph.phases().len();
        while self.phase < phases && self.tally.phase_left[self.phase] == 0 {
            self.phase += 1;
            self.tally.unit = None;
        }
        if self.phase >= phases {
            return;
        }
        if self.continue_unit(out) || self.tally.phase_busy[self.phase] > 0 {
            return;
        }
        let Some((priority, i)) = self.next_ready() else { return };
        if self.graph.level(i) != self.phase {
            // Only later phases have queued tasks: this phase waits for a person.
            self.ready.push((priority, Reverse(i)));
            return;
        }
        match self.plan.tasks[i].parallel_group.as_ref().map(|g| g.value.clone()) {
            Some(group) => {
                self.ready.push((priority, Reverse(i)));
                self.tally.unit = Some((self.phase, group, 0));
                self.continue_unit(out);
            }
            None => self.start_task(i, out),
        }
    }

    /// Starts further members of the group unit in progress; true while some remain.
    fn continue_unit(&mut self, out: &mut Vec<Event>) -> bool {
        let Some((phase, group, mut next)) = self.tally.unit.take() else { return false };
        let members = self.tally.units.get(&(phase, group.clone())).cloned().unwrap_or_default();
        while next < members.len() && self.status == RunStatus::Running && self.exhausted.is_none() {
            let i = members[next];
            if !self.tasks[i].queued {
                next += 1;
                continue;
            }
            let review = self.plan.tasks[i].kind == TaskKind::HumanReview;
            if !review && (self.running >= self.limit() || !self.group_allows(i)) {
                break;
            }
            self.start_task(i, out);
            next += 1;
        }
        let remaining = next < members.len();
        if remaining {
            self.tally.unit = Some((phase, group, next));
        }
        remaining
    }

    /// Dispatches task `i`, or asks for its review.
    fn start_task(&mut self, i: usize, out: &mut Vec<Event>) {
        let task = self.id(i).to_owned();
        if self.plan.tasks[i].kind == TaskKind::HumanReview {
            let graph = Arc::clone(&self.graph);
            let outputs = graph
                .parents(i)
                .map(|p| (self.id(p).to_owned(), self.tasks[p].output.clone().unwrap_or_default()))
                .collect();
            let prompt = self.plan.tasks[i].prompt.as_ref().map_or_else(String::new, |p| p.value.clone());
            let prompt = self.renderer.render(&prompt, self).unwrap_or(prompt);
            self.emit(Event::ReviewRequested { task, prompt, outputs }, out);
            return;
        }
        if self.summary_pending > 0 && self.plan.tasks[i].reads_context_summary() {
            // Released when the compactor agent has merged every output recorded so far.
            self.held.push(i);
            return;
        }
        let attempt = self.tasks[i].attempts + 1;
        match self.render_input(i) {
            Ok(input) => match self.over_budget(i, &input) {
                Some(reason) => self.emit(Event::BudgetExhausted { reason }, out),
                None => self.emit(Event::TaskDispatched { task, attempt, input }, out),
            },
            Err(error) => {
                // The attempt never reaches an agent, but it is recorded, so it counts.
                self.emit(Event::TaskDispatched { task, attempt, input: String::new() }, out);
                let error = format!("cannot render the input: {error}");
                self.fail_attempt(i, attempt, Failure::new(error, ErrorClass::Permanent), out);
            }
        }
    }

    /// The task's input template rendered against the run, with any answers appended.
    pub fn render_input(&self, i: usize) -> Result<String, String> {
        let task = &self.plan.tasks[i];
        let template = match (&task.input, task.kind) {
            (Some(input), _) => input.value.clone(),
            (None, TaskKind::SynthesisGate) => gate_input(&self.plan, i),
            (None, _) => String::new(),
        };
        let mut input = self.renderer.render(&template, self)?;
        if let (TaskKind::SynthesisGate, Some(cap), Some(_)) = (task.kind, task.max_output_tokens, &task.agent) {
            input.push_str(&format!("\n\nCondense the above into at most {cap} tokens."));
        }
        if let Some(reason) = &self.tasks[i].feedback {
            input.push_str("\n\nThe previous answer failed verification: ");
            input.push_str(reason);
            input.push_str("\nAnswer again and fix this.");
        }
        for answer in &self.tasks[i].answers {
            input.push_str("\n\nClarification: ");
            input.push_str(answer);
        }
        if input.len() > crate::template::MAX_INPUT_BYTES {
            return Err(crate::template::over_cap());
        }
        Ok(input)
    }

    /// Pauses when only people can move the run, and completes it when everything is final.
    fn settle(&mut self, out: &mut Vec<Event>) {
        // Tasks still queued after scheduling cannot start: they wait behind a paused task of
        // an earlier phase.
        if self.running > 0 || self.tally.waiting > 0 || !self.replanning.is_empty() {
            return;
        }
        if let Some(reason) = self.exhausted.clone() {
            self.end_exhausted(reason, out);
            return;
        }
        if self.tally.paused > 0 {
            let Some(i) = self.tasks.iter().position(|t| t.status == TaskStatus::Paused) else { return };
            let task = self.id(i).to_owned();
            let reason = match &self.tasks[i].question {
                Some(question) => format!("task `{task}` asks: {question}"),
                None => format!("task `{task}` waits for a review decision"),
            };
            self.emit(Event::RunPaused { reason }, out);
            return;
        }
        if self.tally.finished < self.tasks.len() {
            return;
        }
        let skipped: Vec<&str> = (0..self.tasks.len())
            .filter(|&i| self.tasks[i].status != TaskStatus::Succeeded)
            .map(|i| self.id(i))
            .collect();
        let (outcome, summary) = if skipped.is_empty() {
            (Outcome::Succeeded, format!("all {} tasks succeeded", self.tasks.len()))
        } else {
            (
                Outcome::Partial,
                format!("{} of {} tasks did not succeed: {}", skipped.len(), self.tasks.len(), skipped.join(", ")),
            )
        };
        self.finish(outcome, summary, out);
    }

    /// The extractive merge of a task's output into the context summary.
    fn merge_summary(&self, task: &str, output: &str) -> Event {
        let budget = self.plan.control.summary_budget.unwrap_or(summarizer::DEFAULT_BUDGET) as usize;
        let summary = context::summary::merge(&self.context_summary, task, output, budget, Tokenizer::O200k);
        Event::ContextCompacted {
            task: task.to_owned(),
            scope: Scope::Summary,
            by: "extractive".to_owned(),
            tokens_before: (count(&self.context_summary, Tokenizer::O200k) + count(output, Tokenizer::O200k)) as u64,
            tokens_after: count(&summary, Tokenizer::O200k) as u64,
            summary: Some(summary),
            tokens: None,
        }
    }

    /// Puts the tasks that waited for the summary back on the ready queue.
    fn release_held(&mut self) {
        for i in std::mem::take(&mut self.held) {
            if self.tasks[i].queued {
                self.ready.push((self.priority(i), Reverse(i)));
            }
        }
    }

    /// Adds an agent's token use to the run's.
    fn count(&mut self, tokens: Option<Tokens>) {
        if let Some(tokens) = tokens {
            self.tokens.prompt += tokens.prompt;
            self.tokens.completion += tokens.completion;
        }
    }

    /// Swaps in a replanned plan: kept tasks keep their state and new ones start pending. A
    /// plan whose graph cannot be built (only a tampered log has one) is ignored.
    fn splice(&mut self, plan: Arc<Plan>) {
        let Ok(graph) = TaskGraph::build(&plan) else { return };
        let mut old: HashMap<String, TaskState> =
            self.plan.tasks.iter().map(|t| t.id.value.clone()).zip(std::mem::take(&mut self.tasks)).collect();
        let tasks = plan.tasks.iter().map(|t| old.remove(&t.id.value).unwrap_or_else(|| TaskState::new(0))).collect();
        self.rebuild(plan, Arc::new(graph), tasks);
    }

    /// Installs a plan with the given task states and derives every count, limit and queue
    /// from them.
    fn rebuild(&mut self, plan: Arc<Plan>, graph: Arc<TaskGraph>, mut tasks: Vec<TaskState>) {
        let phases = graph.phases().len();
        let mut tally = Tally {
            phase_left: vec![0; phases],
            phase_busy: vec![0; phases],
            turns: vec![0; phases],
            ..Tally::default()
        };
        self.running = 0;
        self.group_running.clear();
        self.ready.clear();
        self.phase = 0;
        let settled: Vec<bool> =
            tasks.iter().map(|t| matches!(t.status, TaskStatus::Succeeded | TaskStatus::Skipped)).collect();
        for (i, state) in tasks.iter_mut().enumerate() {
            let level = graph.level(i);
            state.queued = false;
            state.blocked_by = graph.parents(i).filter(|&p| !settled[p]).count() as u32;
            tally.turns[level] += state.attempts;
            if !state.status.is_final() {
                tally.phase_left[level] += 1;
            } else {
                tally.finished += 1;
            }
            if state.status == TaskStatus::Paused {
                tally.paused += 1;
            }
            if state.waiting_timer {
                tally.waiting += 1;
                tally.phase_busy[level] += 1;
            }
            if state.in_flight {
                self.running += 1;
                tally.phase_busy[level] += 1;
                if let Some(group) = &plan.tasks[i].parallel_group {
                    *self.group_running.entry(group.value.clone()).or_default() += 1;
                }
            }
            if let Some(group) = &plan.tasks[i].parallel_group {
                tally.units.entry((level, group.value.clone())).or_default().push(i);
            }
        }
        self.tasks = tasks;
        self.tally = tally;
        self.summary = match (summarizer::wanted(&plan), plan.control.compactor.is_some()) {
            (false, _) => Summary::Unused,
            (true, false) => Summary::Extractive,
            (true, true) => Summary::ByAgent,
        };
        self.plan = plan;
        self.graph = graph;
        for i in 0..self.tasks.len() {
            let state = &self.tasks[i];
            if state.status == TaskStatus::Pending && state.blocked_by == 0 && !state.waiting_timer && !state.in_flight
            {
                self.enqueue(i);
            }
        }
    }

    /// Ends a run whose budget ran out: what never finished is skipped, and the run fails if
    /// any of it was critical.
    fn end_exhausted(&mut self, reason: String, out: &mut Vec<Event>) {
        let mut critical = false;
        for i in 0..self.tasks.len() {
            if !self.tasks[i].status.is_final() {
                critical |= self.plan.tasks[i].critical;
                let task = self.id(i).to_owned();
                self.emit(Event::TaskSkipped { task, reason: format!("not run: {reason}") }, out);
            }
        }
        let outcome = if critical { Outcome::Failed } else { Outcome::Partial };
        self.finish(outcome, reason, out);
    }

    /// Marks dependents of a finished task ready when nothing else holds them.
    fn release_dependents(&mut self, i: usize) {
        let graph = Arc::clone(&self.graph);
        for child in graph.children(i) {
            let state = &mut self.tasks[child];
            state.blocked_by = state.blocked_by.saturating_sub(1);
            if state.blocked_by == 0 && state.status == TaskStatus::Pending && !state.waiting_timer {
                self.enqueue(child);
            }
        }
    }

    /// The order queued tasks start in: the longest remaining chain first (eager), list order
    /// (sequential), the earliest phase first, then list order (phased).
    fn priority(&self, i: usize) -> u64 {
        match self.strategy {
            Strategy::Eager => self.graph.height(i) as u64,
            Strategy::Sequential => 0,
            Strategy::Phased => u64::MAX - self.graph.level(i) as u64,
        }
    }

    fn enqueue(&mut self, i: usize) {
        if !self.tasks[i].queued {
            self.tasks[i].queued = true;
            self.tally.queued += 1;
            self.ready.push((self.priority(i), Reverse(i)));
        }
    }

    fn dequeue(&mut self, i: usize) {
        if std::mem::take(&mut self.tasks[i].queued) {
            self.tally.queued -= 1;
        }
    }

    fn set_waiting(&mut self, i: usize, waiting: bool) {
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

    fn set_status(&mut self, i: usize, status: TaskStatus) {
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

    fn end_attempt(&mut self, i: usize) {
        if std::mem::take(&mut self.tasks[i].in_flight) {
            self.running -= 1;
            self.tally.phase_busy[self.graph.level(i)] -= 1;
            if let Some(group) = &self.plan.tasks[i].parallel_group {
                if let Some(count) = self.group_running.get_mut(&group.value) {
                    *count = count.saturating_sub(1);
                }
                // A slot in the group is free: the best parked member may go again.
                if let Some(parked) = self.tally.parked.get_mut(&group.value).and_then(BinaryHeap::pop) {
                    self.ready.push(parked);
                }
            }
        }
    }
}

/// A failed attempt, as `fail_attempt` takes it.
struct Failure {
    error: String,
    class: ErrorClass,
    /// Tokens the attempt used before it failed.
    tokens: Option<Tokens>,
    /// The share of the backoff's second half cut from the wait before a retry, in `[0, 1)`,
    /// drawn by the driver so that this module stays free of randomness.
    jitter: f64,
}

impl Failure {
    /// A failure that used no tokens, retried (if it is) without jitter.
    fn new(error: String, class: ErrorClass) -> Self {
        Failure { error, class, tokens: None, jitter: 0.0 }
    }
}

/// How a run keeps its context summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Summary {
    /// No task reads it.
    Unused,
    /// Merged extractively here, as each output is recorded.
    Extractive,
    /// Rewritten by the compactor agent, in the driver.
    ByAgent,
}

/// Whether two plans are the same as recorded: source locations are not part of a log.
fn same_plan(a: &Plan, b: &Plan) -> bool {
    std::ptr::eq(a, b) || serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

/// Feeds what is written to it into a hasher.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The default input of a gate with no `input`: each input's output under its id.
fn gate_input(plan: &Plan, i: usize) -> String {
    let task = &plan.tasks[i];
    let mut text = String::new();
    for input in &task.inputs {
        text.push_str(&format!("## {}\n{{{{ {} }}}}\n\n", input.value, manifest::template::output_of(&input.value)));
    }
    text
}

impl Handler for RunState {
    type Command = Command;
    type Event = Event;
    type Error = EngineError;

    fn process(&mut self, command: Command) -> Result<Vec<Event>, EngineError> {
        let mut out = Vec::new();
        match command {
            Command::Start(start) => {
                if self.status != RunStatus::New {
                    return Err(EngineError::AlreadyStarted);
                }
                self.start(start, &mut out)?;
            }
            Command::Succeeded { task, attempt, output, tokens, duration_ms } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                let empty = output.trim().is_empty();
                let dispatched_seq = self.tasks[i].dispatched_seq;
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
                    self.emit(event, &mut out);
                    self.request_replan(i, error, &mut out);
                } else {
                    let merge = (self.summary == Summary::Extractive).then(|| self.merge_summary(&task, &output));
                    let event = Event::TaskSucceeded { task, attempt, dispatched_seq, output, tokens, duration_ms };
                    self.emit(event, &mut out);
                    if let Some(event) = merge {
                        self.emit(event, &mut out);
                    }
                }
            }
            Command::VerificationFailed { task, attempt, reason, tokens, jitter } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                let error = format!("verification failed: {reason}");
                let dispatched_seq = self.tasks[i].dispatched_seq;
                self.emit(Event::VerificationFailed { task, attempt, dispatched_seq, reason, tokens }, &mut out);
                let failure = Failure { jitter, ..Failure::new(error, ErrorClass::Verification) };
                self.fail_attempt(i, attempt, failure, &mut out);
            }
            Command::Compacted { task, scope, by, tokens_before, tokens_after, summary, tokens } => {
                self.task_index(&task)?;
                if self.status.is_final() {
                    return Ok(out);
                }
                let event = Event::ContextCompacted { task, scope, by, tokens_before, tokens_after, summary, tokens };
                self.emit(event, &mut out);
            }
            Command::Replanned { task, plan, removed, added, score, tokens } => {
                if self.status.is_final() || !self.replanning.contains(&task) {
                    return Ok(out);
                }
                if TaskGraph::build(&plan).is_err() {
                    let reason = "the replacement's dependencies form a cycle".to_owned();
                    return self.process(Command::ReplanFailed { task, reason, tokens });
                }
                self.emit(Event::Replanned { task, removed, added, plan, score, tokens }, &mut out);
            }
            Command::ReplanFailed { task, reason, tokens } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.replanning.contains(&task) {
                    return Ok(out);
                }
                let error = self.tasks[i].error.clone().unwrap_or_default();
                self.emit(Event::ReplanFailed { task, reason: reason.clone(), tokens }, &mut out);
                self.give_up(i, Action::Fail, &format!("{error}; replanning failed: {reason}"), &mut out);
            }
            Command::Failed { task, attempt, error, class, tokens, jitter } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                self.fail_attempt(i, attempt, Failure { error, class, tokens, jitter }, &mut out);
            }
            Command::NeedsClarification { task, attempt, question, tokens } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                self.emit(Event::ClarificationRequested { task, question, tokens }, &mut out);
            }
            Command::TimerFired { task } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.tasks[i].waiting_timer {
                    return Ok(out);
                }
                self.emit(Event::RetryDue { task }, &mut out);
            }
            Command::Cancel { reason } => {
                self.require_active()?;
                self.stop_attempts("cancelled", &mut out);
                self.emit(Event::RunCancelled { reason }, &mut out);
                return Ok(out);
            }
            Command::Answer { task, text } => {
                self.require_active()?;
                let i = self.task_index(&task)?;
                if self.tasks[i].question.is_none() {
                    return Err(EngineError::NoQuestion { task });
                }
                self.emit(Event::ClarificationProvided { task, answer: text }, &mut out);
                // A paused run only records the answer; `Continue` (runner resume) goes on.
                if self.status == RunStatus::Paused {
                    return Ok(out);
                }
            }
            Command::Decide { task, approved, comment } => {
                self.require_active()?;
                let i = self.task_index(&task)?;
                if self.plan.tasks[i].kind != TaskKind::HumanReview || self.tasks[i].status != TaskStatus::Paused {
                    return Err(EngineError::NoReview { task });
                }
                self.emit(Event::ReviewDecided { task: task.clone(), approved, comment: comment.clone() }, &mut out);
                if !approved {
                    let reason = comment.map_or_else(|| "rejected".to_owned(), |c| format!("rejected: {c}"));
                    self.fail_attempt(i, 1, Failure::new(reason, ErrorClass::Permanent), &mut out);
                }
                if self.status == RunStatus::Paused {
                    return Ok(out);
                }
            }
            Command::Continue => {
                self.require_active()?;
                let movable = self.running > 0
                    || !self.replanning.is_empty()
                    || self.tasks.iter().any(|t| t.queued || t.waiting_timer);
                // A decision while paused can leave every task final: then the run goes on to end.
                let asking = self.tasks.iter().any(|t| t.status == TaskStatus::Paused);
                if self.status == RunStatus::Paused && asking && !movable {
                    // Still waiting for a person: nothing to record.
                    return Ok(out);
                }
                self.emit(Event::RunResumed, &mut out);
            }
        }
        self.schedule(&mut out);
        Ok(out)
    }

    fn apply(&mut self, event: &Event) {
        self.seq += 1;
        match event {
            Event::RunCreated { plan, vars, strategy, .. } => {
                let graph = self.prebuilt.take().unwrap_or_else(|| {
                    Arc::new(TaskGraph::build(plan).unwrap_or_else(|_| {
                        TaskGraph::build(&Plan::default())
                            .unwrap_or_else(|_| unreachable!("an empty plan has no cycle"))
                    }))
                });
                // The strategy first: it sets the priorities the ready queue is built with.
                self.strategy = *strategy;
                self.vars = vars.clone();
                let tasks = vec![TaskState::new(0); plan.tasks.len()];
                self.rebuild(Arc::clone(plan), graph, tasks);
                self.status = RunStatus::Running;
            }
            Event::TaskReused { task, output } => {
                let Some(i) = self.index_of(task) else { return };
                self.dequeue(i);
                self.set_status(i, TaskStatus::Succeeded);
                self.tasks[i].output = Some(output.clone());
                self.release_dependents(i);
            }
            Event::TaskDispatched { task, attempt, input } => {
                let Some(i) = self.index_of(task) else { return };
                self.dequeue(i);
                self.set_status(i, TaskStatus::Running);
                let state = &mut self.tasks[i];
                state.attempts = *attempt;
                state.input = Some(input.clone());
                state.dispatched_seq = Some(self.seq);
                // Told to this attempt in its input; later ones are not.
                state.feedback = None;
                state.in_flight = true;
                self.running += 1;
                self.tally.phase_busy[self.graph.level(i)] += 1;
                if let Some(group) = &self.plan.tasks[i].parallel_group {
                    *self.group_running.entry(group.value.clone()).or_default() += 1;
                }
                let level = self.graph.level(i);
                self.tally.turns[level] += 1;
            }
            Event::TaskSucceeded { task, output, tokens, .. } => {
                self.count(*tokens);
                if self.summary == Summary::ByAgent {
                    self.summary_pending += 1;
                }
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                self.set_status(i, TaskStatus::Succeeded);
                self.tasks[i].output = Some(output.clone());
                self.tasks[i].error = None;
                self.release_dependents(i);
            }
            Event::TaskFailed { task, error, tokens, .. } => {
                self.count(*tokens);
                let Some(i) = self.index_of(task) else { return };
                self.tasks[i].failures += 1;
                self.end_attempt(i);
                self.set_status(i, TaskStatus::Failed);
                self.tasks[i].error = Some(error.clone());
                self.tasks[i].question = None;
            }
            Event::RetryScheduled { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.set_status(i, TaskStatus::Pending);
                self.set_waiting(i, true);
            }
            Event::RetryDue { task } => {
                let Some(i) = self.index_of(task) else { return };
                self.set_waiting(i, false);
                self.enqueue(i);
            }
            Event::TaskSkipped { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                self.dequeue(i);
                self.set_waiting(i, false);
                self.set_status(i, TaskStatus::Skipped);
                self.release_dependents(i);
            }
            Event::ClarificationRequested { task, question, tokens } => {
                self.count(*tokens);
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                self.set_status(i, TaskStatus::Paused);
                self.tasks[i].question = Some(question.clone());
            }
            Event::ClarificationProvided { task, answer } => {
                let Some(i) = self.index_of(task) else { return };
                self.tasks[i].question = None;
                self.tasks[i].answers.push(answer.clone());
                self.set_status(i, TaskStatus::Pending);
                self.enqueue(i);
            }
            Event::ReviewRequested { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.dequeue(i);
                self.set_status(i, TaskStatus::Paused);
                self.tasks[i].attempts = 1;
            }
            Event::ReviewDecided { task, approved, comment } => {
                let Some(i) = self.index_of(task) else { return };
                if *approved {
                    self.set_status(i, TaskStatus::Succeeded);
                    self.tasks[i].output = Some(comment.clone().unwrap_or_else(|| "approved".to_owned()));
                    self.release_dependents(i);
                }
            }
            Event::VerificationFailed { task, reason, tokens, .. } => {
                self.count(*tokens);
                let Some(i) = self.index_of(task) else { return };
                self.tasks[i].feedback = Some(reason.clone());
            }
            Event::ContextCompacted { scope, summary, tokens, .. } => {
                self.count(*tokens);
                if let (Scope::Summary, Some(summary)) = (scope, summary) {
                    self.context_summary.clone_from(summary);
                    if self.summary == Summary::ByAgent {
                        self.summary_pending = self.summary_pending.saturating_sub(1);
                        if self.summary_pending == 0 {
                            self.release_held();
                        }
                    }
                }
            }
            Event::ReplanRequested { task, .. } => {
                self.replanning.insert(task.clone());
            }
            Event::Replanned { task, plan, tokens, .. } => {
                self.count(*tokens);
                self.replanning.remove(task);
                self.replans += 1;
                self.splice(Arc::clone(plan));
            }
            Event::ReplanFailed { task, tokens, .. } => {
                self.count(*tokens);
                self.replanning.remove(task);
            }
            Event::BudgetExhausted { reason } => self.exhausted = Some(reason.clone()),
            Event::RunPaused { .. } => self.status = RunStatus::Paused,
            Event::RunResumed => {
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
            Event::RunCancelled { .. } => self.status = RunStatus::Cancelled,
            Event::RunCompleted { status, .. } => self.status = RunStatus::Finished(*status),
        }
    }

    fn fold(events: &[Event]) -> Self {
        let mut state = RunState::new();
        for event in events {
            state.apply(event);
        }
        state
    }
}
