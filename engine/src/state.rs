//! The run state machine: pure and synchronous. `process` turns a command into events (and
//! applies them); `apply` changes the state for one event; `fold` rebuilds the state from a
//! log. It makes every scheduling decision (the ready queue, strategies, concurrency limits,
//! retries, pauses) but has no clocks, no IO and no randomness: the same events in give the
//! same state out, so the live state always equals the fold of the log.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

use manifest::plan::{Action, Strategy, TaskKind};
use manifest::{Plan, TaskGraph};
use sha2::{Digest, Sha256};

use crate::command::{Command, Start};
use crate::error::EngineError;
use crate::event::{Event, Outcome, SCHEMA_VERSION};
use crate::handler::Handler;
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
    /// The output of the successful attempt.
    pub output: Option<String>,
    /// The last error.
    pub error: Option<String>,
    /// The input of the latest attempt.
    pub input: Option<String>,
    /// The open question, while paused for a clarification.
    pub question: Option<String>,
    /// Answers given so far, appended to the input of later attempts.
    pub answers: Vec<String>,
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
            output: None,
            error: None,
            input: None,
            question: None,
            answers: Vec::new(),
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
    running: usize,
    group_running: HashMap<String, usize>,
    /// A cache of the queued tasks, by remaining critical path; entries of tasks no longer
    /// queued are skipped when popped.
    ready: BinaryHeap<(usize, Reverse<usize>)>,
    /// A cache for `phased`: phases before it are all final.
    phase: usize,
    renderer: Renderer,
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
            && self.running == other.running
            && self.group_running == other.group_running
            && *self.plan == *other.plan
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
            running: 0,
            group_running: HashMap::new(),
            ready: BinaryHeap::new(),
            phase: 0,
            renderer: Renderer::default(),
        }
    }

    /// The index of a task by id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.graph.index_of(id)
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

    fn start(&mut self, start: Start, out: &mut Vec<Event>) {
        let json = serde_json::to_vec(&*start.plan).unwrap_or_default();
        let plan_sha256 = Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect();
        let strategy = start.strategy.unwrap_or(start.plan.control.strategy);
        let event = Event::RunCreated {
            schema: SCHEMA_VERSION,
            plan: Box::new((*start.plan).clone()),
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
    }

    /// What the failure of attempt `attempt` of task `i` leads to.
    fn fail_attempt(&mut self, i: usize, attempt: u32, error: String, retryable: bool, out: &mut Vec<Event>) {
        let task = self.id(i).to_owned();
        self.emit(Event::TaskFailed { task: task.clone(), attempt, error: error.clone() }, out);
        let policy = self.plan.tasks[i].on_failure.value;
        let next = if policy.action == Action::Retry && retryable && attempt < policy.max_attempts {
            let exponent = attempt.saturating_sub(1).min(30);
            let delay = policy.backoff.as_millis().saturating_mul(u64::from(policy.factor).saturating_pow(exponent));
            let delay_ms = delay.min(policy.max_backoff.as_millis());
            self.emit(Event::RetryScheduled { task, attempt: attempt + 1, delay_ms }, out);
            return;
        } else if policy.action == Action::Retry {
            policy.then
        } else {
            policy.action
        };
        match next {
            Action::Skip if !self.plan.tasks[i].critical => {
                self.emit(Event::TaskSkipped { task, reason: format!("failed: {error}") }, out);
            }
            Action::Replan => {
                let reason =
                    format!("task `{task}` failed and asks to replan, but no planner is available in this version");
                self.finish(Outcome::Failed, reason, out);
            }
            _ => {
                let critical = if self.plan.tasks[i].critical { "critical " } else { "" };
                self.finish(Outcome::Failed, format!("{critical}task `{task}` failed: {error}"), out);
            }
        }
    }

    fn finish(&mut self, outcome: Outcome, summary: String, out: &mut Vec<Event>) {
        self.emit(Event::RunCompleted { status: outcome, summary }, out);
    }

    /// Dispatches what may start, pauses for people, and ends the run when all is done.
    fn schedule(&mut self, out: &mut Vec<Event>) {
        if self.status != RunStatus::Running {
            return;
        }
        match self.strategy {
            Strategy::Eager => self.schedule_eager(out),
            Strategy::Sequential => self.schedule_sequential(out),
            Strategy::Phased => self.schedule_phased(out),
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

    fn schedule_eager(&mut self, out: &mut Vec<Event>) {
        let mut held = Vec::new();
        while self.running < self.limit() && self.status == RunStatus::Running {
            let Some((height, Reverse(i))) = self.ready.pop() else { break };
            if !self.tasks[i].queued {
                continue;
            }
            if self.plan.tasks[i].kind != TaskKind::HumanReview && !self.group_allows(i) {
                held.push((height, Reverse(i)));
                continue;
            }
            self.start_task(i, out);
        }
        self.ready.extend(held);
    }

    fn schedule_sequential(&mut self, out: &mut Vec<Event>) {
        if self.running > 0 || self.tasks.iter().any(|t| t.waiting_timer) {
            return;
        }
        if let Some(i) = (0..self.tasks.len()).find(|&i| self.tasks[i].queued) {
            self.start_task(i, out);
        }
    }

    /// The seed's phases: topological levels one after another; inside a phase, one parallel
    /// group (all its members together) or one ungrouped task at a time, in list order.
    fn schedule_phased(&mut self, out: &mut Vec<Event>) {
        let graph = Arc::clone(&self.graph);
        while let Some(phase) = graph.phases().get(self.phase) {
            if phase.iter().all(|&i| self.tasks[i].status.is_final()) {
                self.phase += 1;
                continue;
            }
            let busy = phase.iter().any(|&i| {
                let t = &self.tasks[i];
                t.in_flight || t.waiting_timer
            });
            if busy {
                return;
            }
            let Some(&first) = phase.iter().find(|&&i| self.tasks[i].queued) else { return };
            let group = self.plan.tasks[first].parallel_group.as_ref().map(|g| g.value.clone());
            let unit: Vec<usize> = match &group {
                Some(group) => phase
                    .iter()
                    .copied()
                    .filter(|&i| self.tasks[i].queued)
                    .filter(|&i| self.plan.tasks[i].parallel_group.as_ref().is_some_and(|g| &g.value == group))
                    .collect(),
                None => vec![first],
            };
            for i in unit {
                if self.running >= self.limit() || self.status != RunStatus::Running {
                    break;
                }
                if self.plan.tasks[i].kind == TaskKind::HumanReview || self.group_allows(i) {
                    self.start_task(i, out);
                }
            }
            return;
        }
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
        let attempt = self.tasks[i].attempts + 1;
        match self.render_input(i) {
            Ok(input) => self.emit(Event::TaskDispatched { task, attempt, input }, out),
            Err(error) => {
                // The attempt never reaches an agent, but it is recorded, so it counts.
                self.emit(Event::TaskDispatched { task, attempt, input: String::new() }, out);
                self.fail_attempt(i, attempt, format!("cannot render the input: {error}"), false, out);
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
        for answer in &self.tasks[i].answers {
            input.push_str("\n\nClarification: ");
            input.push_str(answer);
        }
        Ok(input)
    }

    /// Pauses when only people can move the run, and completes it when everything is final.
    fn settle(&mut self, out: &mut Vec<Event>) {
        if self.running > 0 || self.tasks.iter().any(|t| t.queued || t.waiting_timer) {
            return;
        }
        if let Some(i) = self.tasks.iter().position(|t| t.status == TaskStatus::Paused) {
            let task = self.id(i).to_owned();
            let reason = match &self.tasks[i].question {
                Some(question) => format!("task `{task}` asks: {question}"),
                None => format!("task `{task}` waits for a review decision"),
            };
            self.emit(Event::RunPaused { reason }, out);
            return;
        }
        if !self.tasks.iter().all(|t| t.status.is_final()) {
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

    fn enqueue(&mut self, i: usize) {
        if !self.tasks[i].queued {
            self.tasks[i].queued = true;
            self.ready.push((self.graph.height(i), Reverse(i)));
        }
    }

    fn end_attempt(&mut self, i: usize) {
        if std::mem::take(&mut self.tasks[i].in_flight) {
            self.running -= 1;
            if let Some(group) = &self.plan.tasks[i].parallel_group {
                if let Some(count) = self.group_running.get_mut(&group.value) {
                    *count = count.saturating_sub(1);
                }
            }
        }
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
                self.start(start, &mut out);
            }
            Command::Succeeded { task, attempt, output, tokens, duration_ms } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                self.emit(Event::TaskSucceeded { task, attempt, output, tokens, duration_ms }, &mut out);
            }
            Command::Failed { task, attempt, error, retryable } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                self.fail_attempt(i, attempt, error, retryable, &mut out);
            }
            Command::NeedsClarification { task, attempt, question } => {
                let i = self.task_index(&task)?;
                if self.status.is_final() || !self.is_current(i, attempt) {
                    return Ok(out);
                }
                self.emit(Event::ClarificationRequested { task, question }, &mut out);
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
                    self.fail_attempt(i, 1, reason, false, &mut out);
                }
                if self.status == RunStatus::Paused {
                    return Ok(out);
                }
            }
            Command::Continue => {
                self.require_active()?;
                let movable = self.running > 0 || self.tasks.iter().any(|t| t.queued || t.waiting_timer);
                if self.status == RunStatus::Paused && !movable {
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
        match event {
            Event::RunCreated { plan, vars, strategy, .. } => {
                let graph = TaskGraph::build(plan).unwrap_or_else(|_| {
                    TaskGraph::build(&Plan::default()).unwrap_or_else(|_| unreachable!("an empty plan has no cycle"))
                });
                self.tasks = (0..plan.tasks.len()).map(|i| TaskState::new(graph.parents(i).count() as u32)).collect();
                self.plan = Arc::new((**plan).clone());
                self.graph = Arc::new(graph);
                self.vars = vars.clone();
                self.strategy = *strategy;
                self.status = RunStatus::Running;
                for root in self.graph.roots() {
                    self.enqueue(root);
                }
            }
            Event::TaskReused { task, output } => {
                let Some(i) = self.index_of(task) else { return };
                let state = &mut self.tasks[i];
                state.status = TaskStatus::Succeeded;
                state.output = Some(output.clone());
                state.queued = false;
                self.release_dependents(i);
            }
            Event::TaskDispatched { task, attempt, input } => {
                let Some(i) = self.index_of(task) else { return };
                let state = &mut self.tasks[i];
                state.status = TaskStatus::Running;
                state.attempts = *attempt;
                state.input = Some(input.clone());
                state.queued = false;
                state.in_flight = true;
                self.running += 1;
                if let Some(group) = &self.plan.tasks[i].parallel_group {
                    *self.group_running.entry(group.value.clone()).or_default() += 1;
                }
            }
            Event::TaskSucceeded { task, output, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                let state = &mut self.tasks[i];
                state.status = TaskStatus::Succeeded;
                state.output = Some(output.clone());
                state.error = None;
                self.release_dependents(i);
            }
            Event::TaskFailed { task, error, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                let state = &mut self.tasks[i];
                state.status = TaskStatus::Failed;
                state.error = Some(error.clone());
                state.question = None;
            }
            Event::RetryScheduled { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.tasks[i].status = TaskStatus::Pending;
                self.tasks[i].waiting_timer = true;
            }
            Event::RetryDue { task } => {
                let Some(i) = self.index_of(task) else { return };
                self.tasks[i].waiting_timer = false;
                self.enqueue(i);
            }
            Event::TaskSkipped { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                self.tasks[i].status = TaskStatus::Skipped;
                self.tasks[i].queued = false;
                self.release_dependents(i);
            }
            Event::ClarificationRequested { task, question } => {
                let Some(i) = self.index_of(task) else { return };
                self.end_attempt(i);
                self.tasks[i].status = TaskStatus::Paused;
                self.tasks[i].question = Some(question.clone());
            }
            Event::ClarificationProvided { task, answer } => {
                let Some(i) = self.index_of(task) else { return };
                let state = &mut self.tasks[i];
                state.question = None;
                state.answers.push(answer.clone());
                state.status = TaskStatus::Pending;
                self.enqueue(i);
            }
            Event::ReviewRequested { task, .. } => {
                let Some(i) = self.index_of(task) else { return };
                let state = &mut self.tasks[i];
                state.status = TaskStatus::Paused;
                state.queued = false;
                state.attempts = 1;
            }
            Event::ReviewDecided { task, approved, comment } => {
                let Some(i) = self.index_of(task) else { return };
                if *approved {
                    let state = &mut self.tasks[i];
                    state.status = TaskStatus::Succeeded;
                    state.output = Some(comment.clone().unwrap_or_else(|| "approved".to_owned()));
                    self.release_dependents(i);
                }
            }
            Event::RunPaused { .. } => self.status = RunStatus::Paused,
            Event::RunResumed => {
                self.status = RunStatus::Running;
                for i in 0..self.tasks.len() {
                    // An attempt that never reported back runs again as a new attempt.
                    if self.tasks[i].in_flight {
                        self.end_attempt(i);
                        self.tasks[i].status = TaskStatus::Pending;
                        self.enqueue(i);
                    }
                    if std::mem::take(&mut self.tasks[i].waiting_timer) {
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
