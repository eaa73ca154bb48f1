//! The driver: runs the state machine on tokio. One coordinator owns the state; attempts run
//! in a `JoinSet` and report back through a channel (a reply known at once, without one).
//!
//! Each turn, the coordinator processes every command that has arrived, appends the events
//! they caused in one batch and waits until the batch is durable; only then does it start the
//! attempts dispatched in it (write-ahead: no agent runs on an input the log does not hold).
//! Results that arrive meanwhile form the next batch, which is how group commit arises (replies
//! known at once are taken at most `REPLIES_A_BATCH` a batch, which bounds a batch's memory).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use manifest::Plan;
use manifest::plan::{TaskKind, Verification};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Command;
use crate::Handler;
use crate::attempt::{Gate, Job, report};
use crate::clock;
use crate::context::tokens::Tokenizer;
use crate::event::{Event, Record};
use crate::guarded::Guarded;
use crate::journal::{self, Journal};
use crate::llm::LlmAgents;
use crate::replan::Replan;
use crate::runtime::{Agents, Attempt, Registry, Reply};
use crate::store::{EventStore, StoreError};
use crate::summarizer::{self, Compactor, Summarizer};
use crate::{RunState, RunStatus, TaskStatus};

/// Why a run could not be driven.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum DriverError {
    /// The event store failed; the run stopped at the last durable event.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] StoreError),
    /// The first command was refused.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Refused(#[from] crate::EngineError),
}

/// The most replies known at once that one batch takes; the rest wait for the next turn.
const REPLIES_A_BATCH: usize = 16_384;

/// The most records one append takes. A wider batch is made durable a slice at a time, so that
/// its records never all sit beside its events; what it asks for starts only once its last
/// slice is durable.
const RECORDS_AN_APPEND: usize = 16_384;

/// The most tasks one batch dispatches: a wider layer (a fan-out makes 100,000 tasks ready at
/// once) is dispatched a batch at a time, each durable and started before the next is made, so
/// that neither its events nor its replies are all held at once.
const DISPATCHES_A_BATCH: usize = 16_384;

/// The room for events a batch keeps between commits: enough for the few events of a step, so
/// a chain does not grow a vector every commit, while a whole wide layer's (a fan-out
/// dispatches 100,000 tasks in one batch) becomes its records' (see `Driver::number`).
const BATCH_ROOM_KEPT: usize = 64;

/// Receives each record once it is durable (for a live view).
pub type Observer = Box<dyn FnMut(Record, &RunState) + Send>;

/// Makes the runtime of an `llm` agent, by agent name.
pub type LlmRuntimes = Arc<dyn Fn(&str) -> Arc<dyn crate::runtime::AgentRuntime> + Send + Sync>;

/// Drives one run.
pub struct Driver<S: EventStore> {
    state: RunState,
    store: S,
    agents: Option<Agents>,
    /// How `llm` agents run: set by `with_llm`, else made from the plan on first use (one
    /// set of provider limits for the whole run, replans included).
    llm: Option<LlmRuntimes>,
    /// Builds each agent's runtime by the name in its `runtime` field.
    runtimes: Registry,
    run_id: Arc<str>,
    /// The run's part of the mark every program an attempt starts carries.
    mark: Arc<str>,
    /// Fired to stop without recording anything (the run stays resumable).
    halt: CancellationToken,
    seq: u64,
    /// The time records are stamped with, formatted once a millisecond.
    stamp: clock::Stamp,
    workdir: PathBuf,
    observer: Option<Observer>,
    cancel_reason: Arc<OnceLock<String>>,
    summarizer: Option<Summarizer>,
    /// Whether a compactor agent keeps the context summary, so outputs go to the summarizer.
    summarize: bool,
    /// The seed retry jitter is drawn from; `None` draws it from the clock.
    jitter_seed: Option<u64>,
    /// The attempts the commands processed since the last commit dispatched (task index and
    /// attempt), as the state machine reported them.
    dispatched: Vec<(usize, u32)>,
    /// The span of each task that has started and not ended, by id; empty when nobody
    /// records spans.
    task_spans: HashMap<String, tracing::Span>,
}

impl<S: EventStore> Driver<S> {
    /// A driver for a new run, or for an existing one whose records are given.
    pub fn new(run_id: String, store: S, records: &[Record], workdir: PathBuf) -> Self {
        let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
        let mut state = RunState::fold(&events);
        state.limit_dispatches(DISPATCHES_A_BATCH);
        let run_id: Arc<str> = run_id.into();
        Driver {
            summarize: summarizer::by_agent(&state.plan),
            state,
            store,
            agents: None,
            llm: None,
            runtimes: Registry::builtin(),
            mark: Arc::clone(&run_id),
            halt: CancellationToken::new(),
            run_id,
            task_spans: HashMap::new(),
            seq: records.last().map_or(0, |r| r.seq),
            stamp: clock::Stamp::default(),
            workdir,
            observer: None,
            cancel_reason: Arc::new(OnceLock::new()),
            summarizer: None,
            jitter_seed: None,
            dispatched: Vec::new(),
        }
    }

    /// Calls `observer` with every durable record.
    pub fn observe(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Stamps records with `clock`'s time instead of the wall clock's (plan tests run in virtual
    /// time).
    pub fn with_clock(mut self, clock: clock::Clock) -> Self {
        self.stamp = clock::Stamp::new(clock);
        self
    }

    /// Draws retry jitter from `seed` (with the task and attempt) instead of the clock, so the
    /// same run repeats exactly.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Sets how `llm` agents are run.
    pub fn with_llm(mut self, llm: LlmRuntimes) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Sets the runtimes agents are built from (default: [`Registry::builtin`]).
    pub fn with_runtimes(mut self, runtimes: Registry) -> Self {
        self.runtimes = runtimes;
        self
    }

    /// Where the reason for a cancellation is found: whoever fires the cancel token sets it
    /// first (`interrupted` when it is unset).
    pub fn cancel_reason(mut self, reason: Arc<OnceLock<String>>) -> Self {
        self.cancel_reason = reason;
        self
    }

    /// Marks every program an attempt starts with `RUNNER_ATTEMPT=<run>/<task>/<attempt>`
    /// (`<task>.replan` and `<task>.summary` for the planner and the compactor), so that the
    /// survivors of a crash can be told from other processes (default: the run id).
    pub fn mark_processes(mut self, run: impl Into<Arc<str>>) -> Self {
        self.mark = run.into();
        self
    }

    /// Stops the run without recording anything when `halt` fires: attempts are stopped (their
    /// programs killed) and the run is left as the log has it, for `resume`. Unlike `cancel`,
    /// this records no `RunCancelled`.
    pub fn halt_on(mut self, halt: CancellationToken) -> Self {
        self.halt = halt;
        self
    }

    /// The state so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Processes `first`, then runs until the run ends, pauses, `cancel` fires (which records
    /// `RunCancelled`) or the halt token fires (which records nothing). Returns the state.
    pub async fn run(mut self, first: Command, cancel: CancellationToken) -> Result<RunState, DriverError> {
        let (sender, mut inbox) = mpsc::unbounded_channel::<Command>();
        let (journal, mut journal_inbox) = mpsc::unbounded_channel::<journal::Entry>();
        let mut verdicts = Vec::new();
        let mut attempts: JoinSet<()> = JoinSet::new();
        let stop_attempts = CancellationToken::new();
        let mut batch = Vec::new();
        let mut replies: VecDeque<Known> = VecDeque::new();
        self.take(first, &mut batch)?;
        loop {
            if batch.is_empty() {
                // The last batch is durable and started: what it left queued for lack of room
                // is dispatched first.
                self.state.next_slice(&mut batch);
                self.dispatched.extend_from_slice(self.state.last_dispatched());
            }
            while let Ok(command) = inbox.try_recv() {
                // A refused command (a late result, say) changes nothing.
                let _ = self.take(command, &mut batch);
            }
            while let Ok(entry) = journal_inbox.try_recv() {
                self.take_journal(entry, &mut batch, &mut verdicts);
            }
            // A wide layer's replies are taken a slice a turn, so that a batch (its events, then
            // its records) never holds a whole 100,000-task layer beside the replies.
            for known in replies.drain(..replies.len().min(REPLIES_A_BATCH)) {
                let i = known.i;
                let command = self.report_known(known);
                let _ = self.take_at(i, command, &mut batch);
            }
            if !batch.is_empty() {
                let mut work = Work {
                    sender: &sender,
                    journal: &journal,
                    set: &mut attempts,
                    stop: &stop_attempts,
                    replies: &mut replies,
                };
                self.commit(&mut batch, &mut work).await?;
            }
            // The journal's entries are durable now: their attempts may go on.
            for (reply, verdict) in verdicts.drain(..) {
                let _ = reply.send(verdict);
            }
            // Finished attempts are reaped as the run goes, so they do not pile up until its end.
            while attempts.try_join_next().is_some() {}
            if self.state.status.is_final() || (self.state.status == RunStatus::Paused && self.state.running() == 0) {
                break;
            }
            let waiting =
                !inbox.is_empty() || !journal_inbox.is_empty() || !replies.is_empty() || self.state.held_back();
            if waiting && !self.halt.is_cancelled() && !cancel.is_cancelled() {
                // Commands are waiting already (attempts done at once): take them without a
                // select, which would register with both tokens and deregister again.
                continue;
            }
            tokio::select! {
                // A halt wins over a cancel fired with it, so that nothing is recorded.
                biased;
                () = self.halt.cancelled() => break,
                command = inbox.recv() => {
                    if let Some(command) = command {
                        let _ = self.take(command, &mut batch);
                    }
                }
                entry = journal_inbox.recv() => {
                    if let Some(entry) = entry {
                        self.take_journal(entry, &mut batch, &mut verdicts);
                    }
                }
                () = cancel.cancelled(), if !self.state.status.is_final() => {
                    let reason = self.cancel_reason.get().cloned().unwrap_or_else(|| "interrupted".to_owned());
                    let _ = self.take(Command::Cancel { reason }, &mut batch);
                }
            }
        }
        stop_attempts.cancel();
        attempts.shutdown().await;
        Ok(self.state)
    }

    /// Processes a command: its events join `batch`, the attempts it dispatched the next
    /// commit's starts.
    fn take(&mut self, command: Command, batch: &mut Vec<Event>) -> Result<(), crate::EngineError> {
        self.state.process_into(command, batch)?;
        self.dispatched.extend_from_slice(self.state.last_dispatched());
        Ok(())
    }

    /// Takes a journal entry of an llm attempt; its verdict is sent once the batch is durable.
    /// An entry the machine refuses or ignores (a late one, for an attempt no longer current)
    /// is told to stop.
    fn take_journal(
        &mut self,
        entry: journal::Entry,
        batch: &mut Vec<Event>,
        verdicts: &mut Vec<(oneshot::Sender<journal::Verdict>, journal::Verdict)>,
    ) {
        let call = match &entry.command {
            Command::CallTool { task, call, .. } => Some((task.clone(), call.id.clone())),
            _ => None,
        };
        let before = batch.len();
        let taken = self.take(entry.command, batch).is_ok() && batch.len() > before;
        let verdict = match call {
            _ if !taken => journal::Verdict::Stop,
            Some((task, id)) => journal::call_verdict(self.state.conversations.get(&task).and_then(|c| c.call(&id))),
            None => journal::Verdict::Recorded,
        };
        verdicts.push((entry.reply, verdict));
    }

    /// [`Self::take`] for the result of an attempt of task `i` that the driver started itself.
    fn take_at(&mut self, i: usize, command: Command, batch: &mut Vec<Event>) -> Result<(), crate::EngineError> {
        self.state.process_at(i, command, batch)?;
        self.dispatched.extend_from_slice(self.state.last_dispatched());
        Ok(())
    }

    /// The runtimes of a plan's agents.
    fn agents_for(&mut self, plan: &Arc<Plan>) -> Agents {
        let llm = self.llm.get_or_insert_with(|| {
            // Built when the first llm agent needs it: plans without one never start an HTTP client.
            let (plan, agents) = (Arc::clone(plan), OnceLock::new());
            Arc::new(move |name: &str| agents.get_or_init(|| LlmAgents::new(&plan)).runtime(name))
        });
        Agents::for_plan(plan, &self.runtimes, &**llm)
    }

    /// Makes a batch durable, tells the observer, then starts what it dispatched: numbering,
    /// reading the follow-up work, the durable append (a slice at a time when the batch is
    /// wide), and starting that work, in that order. A small batch is left empty with its
    /// room, so the next one does not grow a vector again; a wide one is taken whole.
    async fn commit(&mut self, events: &mut Vec<Event>, work: &mut Work<'_>) -> Result<(), DriverError> {
        // A replan renumbers the tasks: the attempts dispatched before it are found by id.
        let by_id = events.iter().any(|e| matches!(e, Event::Replanned(_)));
        let mut followups = self.starts(by_id);
        if events.capacity() > BATCH_ROOM_KEPT {
            let mut events = std::mem::take(events).into_iter();
            while !events.as_slice().is_empty() {
                let records = self.number(events.by_ref().take(RECORDS_AN_APPEND));
                self.read_followups(&records, by_id, &mut followups);
                self.persist(records).await?;
            }
        } else {
            let records = self.number(events.drain(..));
            self.read_followups(&records, by_id, &mut followups);
            self.persist(records).await?;
        }
        if followups.ended {
            work.stop.cancel();
            return Ok(());
        }
        if self.agents.is_none() && !followups.starts.is_empty() {
            self.agents = Some(self.agents_for(&Arc::clone(&self.state.plan)));
        }
        self.summarize(followups.succeeded, work);
        let Some(agents) = &self.agents else { return Ok(()) };
        for &(i, attempt) in &followups.starts {
            self.start_attempt(agents, i, attempt, work);
        }
        // The starts' room holds the next batch's, so a chain does not grow a vector a step.
        let mut starts = followups.starts;
        starts.clear();
        self.dispatched = starts;
        for (task, error) in followups.replans {
            self.start_replan(agents, task, &error, work);
        }
        for (task, delay_ms) in followups.timers {
            work.start_timer(task, delay_ms);
        }
        Ok(())
    }

    /// Gives each event its sequence number and the time.
    fn number(&mut self, events: impl Iterator<Item = Event>) -> Vec<Record> {
        let at = self.stamp.now();
        let (seq, run_id) = (&mut self.seq, &self.run_id);
        let record = |event| {
            *seq += 1;
            Record { seq: *seq, at: Arc::clone(&at), run_id: Arc::clone(run_id), event }
        };
        events.map(record).collect()
    }

    /// The attempts a batch dispatched, known by index unless a replan in it renumbered the
    /// tasks (then [`Self::read_followups`] finds them by id).
    fn starts(&mut self, by_id: bool) -> Followups {
        let mut followups = Followups::default();
        let dispatched = std::mem::take(&mut self.dispatched);
        if !by_id {
            followups.starts = dispatched;
        }
        self.open_task_spans(&followups.starts);
        followups
    }

    /// What records of a batch ask the driver to do once the batch is durable; a new plan (the
    /// run's first, or a replan's) also renews the agents' runtimes here.
    fn read_followups(&mut self, records: &[Record], by_id: bool, followups: &mut Followups) {
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
                _ => {}
            }
        }
        self.close_task_spans(records);
    }

    /// Opens the span of each task whose first attempt starts, inside the run's span.
    fn open_task_spans(&mut self, starts: &[(usize, u32)]) {
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
    fn close_task_spans(&mut self, records: &[Record]) {
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

    /// Appends the records and waits until they are durable, then shows them to the observer.
    async fn persist(&mut self, records: Vec<Record>) -> Result<(), DriverError> {
        // The store gives the records back when somebody watches, so they are not copied.
        match &mut self.observer {
            Some(observer) => {
                for record in self.store.append_returning(records).await? {
                    observer(record, &self.state);
                }
            }
            None => self.store.append(records).await?,
        }
        Ok(())
    }

    /// Hands successful outputs to the compactor's summarizer, started on first use.
    fn summarize(&mut self, succeeded: Vec<(String, String)>, work: &mut Work<'_>) {
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

    /// Starts a dispatched attempt of task `i`, unless the state has moved past it (a task
    /// that failed to render is dispatched and failed in the same batch). A reply the agent
    /// knows at once (see [`crate::runtime::AgentRuntime::reply_now`]) is reported straight
    /// away when nothing follows the agent: no task, cancel token or mark is made for it, and
    /// the result is taken with its task's index rather than through the channel.
    fn start_attempt(&self, agents: &Agents, i: usize, attempt: u32, work: &mut Work<'_>) {
        let state = &self.state.tasks[i];
        if state.status != TaskStatus::Running || state.attempts != attempt {
            return;
        }
        let spec = &self.state.plan.tasks[i];
        let input = state.input.as_ref();
        let gated = spec.kind == TaskKind::SynthesisGate && spec.extras().max_output_tokens.is_some();
        if spec.extras().verification.is_none()
            && !gated
            && let Some(reply) = agents.runtime_of(i).reply_now(&spec.id.value, attempt, input.map_or("", |i| i))
        {
            work.replies.push_back(Known { i, task: spec.id.value.to_string(), attempt, reply });
            return;
        }
        // No open task span means nobody records spans: the attempt's is not made either.
        let parent = self.task_spans.get(spec.id.value.as_str()).cloned();
        let request = Attempt {
            max_output_tokens: spec.extras().max_output_tokens,
            attachments: spec.extras().attachments.iter().map(|a| a.value.clone()).collect(),
            schema: match spec.extras().verification.as_ref() {
                Some(Verification::SchemaCheck { schema }) => Some(schema.value.clone()),
                _ => None,
            },
            may_ask: self.state.plan.control.allow_clarification,
            journal: self.is_llm(spec).then(|| {
                let recorded = self.state.conversations.get(spec.id.value.as_str()).cloned().unwrap_or_default();
                Box::new(Journal::new(work.journal.clone(), spec.id.value.to_string(), attempt, recorded))
            }),
            ..Attempt::new(
                spec.id.value.clone(),
                attempt,
                input.map_or_else(|| "".into(), Arc::clone),
                self.workdir.clone(),
            )
        };
        let check = spec.extras().verification.as_ref().cloned().map(|check| {
            let reviewer = match &check {
                Verification::LlmReviewer { agent, .. } => agents.agent(&agent.value),
                _ => None,
            };
            (check, reviewer)
        });
        let gate = match (spec.kind, spec.extras().max_output_tokens) {
            (TaskKind::SynthesisGate, Some(cap)) => Some(Gate {
                cap,
                agent: spec.agent.as_ref().map(|a| a.value.to_string()),
                tokenizer: Tokenizer::of_agent(&self.state.plan, spec.agent.as_ref().map(|a| a.value.as_str())),
            }),
            _ => None,
        };
        let mark: Arc<str> = format!("{}/{}/{attempt}", self.mark, request.task).into();
        let job = Job {
            runtime: agents.runtime(i),
            request,
            timeout: agents.timeout(i),
            check,
            gate,
            error_limit: self.state.plan.control.error_char_limit as usize,
            hidden: agents.hidden(),
            jitter_seed: self.jitter_seed,
            span: parent.unwrap_or_else(tracing::Span::none),
        };
        let perform = crate::process::marked(mark, job.perform(work.stop.child_token()));
        work.start_attempt(Guarded::new(spec.id.value.to_string(), attempt, perform));
    }

    /// The command that reports a reply known at once, with its attempt's span when spans are
    /// recorded (an open task span says so).
    fn report_known(&self, known: Known) -> Command {
        let Known { task, attempt, reply, .. } = known;
        let span = self.task_spans.get(&task).map(|parent| crate::spans::attempt(parent, &task, attempt));
        let limit = self.state.plan.control.error_char_limit as usize;
        // A reply known at once took no time worth a clock read (two a task, at 100k).
        let command = report(task, attempt, reply, limit, self.jitter_seed, 0);
        if let Some(span) = span {
            crate::spans::attempt_ended(&span, &command);
        }
        command
    }

    /// Whether a task's agent is an llm agent, whose attempts keep a journal.
    fn is_llm(&self, spec: &manifest::plan::Task) -> bool {
        let plan = &self.state.plan;
        let agent = plan.agent_of(spec).and_then(|name| plan.agents.get(name));
        matches!(agent.map(|a| &a.runtime), Some(manifest::plan::Runtime::Llm { .. }))
    }

    /// Asks the planner for the tasks that replace a failed one; without a planner the replan
    /// fails at once.
    fn start_replan(&self, agents: &Agents, task: String, error: &str, work: &mut Work<'_>) {
        let planner = self.state.plan.control.planner.as_ref().and_then(|name| agents.agent(&name.value));
        let Some(planner) = planner else {
            let reason = "the planner agent has no runtime".to_owned();
            let _ = work.sender.send(Command::ReplanFailed { task, reason, tokens: None });
            return;
        };
        let mark: Arc<str> = format!("{}/{task}.replan", self.mark).into();
        let replan = Replan::new(&self.state, &task, error, planner, self.workdir.clone());
        let (sender, cancel) = (work.sender.clone(), work.stop.child_token());
        work.set.spawn(async move {
            let _ = sender.send(crate::process::marked(mark, replan.perform(cancel)).await);
        });
    }
}

/// A reply an agent knew at once, waiting for its turn to be taken; it becomes a command only
/// then, so a wide layer waits as replies rather than as commands nearly twice their size.
struct Known {
    /// The task's index when its attempt started.
    i: usize,
    /// The task.
    task: String,
    /// The attempt.
    attempt: u32,
    /// What the agent replied.
    reply: Reply,
}

/// The work a durable batch starts.
#[derive(Default)]
struct Followups {
    /// Dispatched attempts: task index and attempt number.
    starts: Vec<(usize, u32)>,
    /// Retry timers: task and delay in milliseconds.
    timers: Vec<(String, u64)>,
    /// Successful outputs for the compactor: task and output.
    succeeded: Vec<(String, String)>,
    /// Replans to ask for: task and the error that caused it.
    replans: Vec<(String, String)>,
    /// Whether the batch ended the run.
    ended: bool,
}

/// Where the coordinator's background work runs and reports: every attempt, replan, timer and
/// the summarizer send their commands to `sender`, run in `set` and stop with `stop`; a reply
/// known at once goes to `replies` with its task's index, taken after the commands waiting.
struct Work<'a> {
    sender: &'a mpsc::UnboundedSender<Command>,
    journal: &'a mpsc::UnboundedSender<journal::Entry>,
    set: &'a mut JoinSet<()>,
    stop: &'a CancellationToken,
    replies: &'a mut VecDeque<Known>,
}

impl Work<'_> {
    /// Runs an attempt. One that is done at once (a mock agent, a gate with no agent) is taken
    /// here, without a task of its own; anything else gets a task.
    fn start_attempt(&mut self, work: impl Future<Output = Vec<Command>> + Send + 'static) {
        let mut work = Box::pin(work);
        if let Poll::Ready(commands) = work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            for command in commands {
                let _ = self.sender.send(command);
            }
            return;
        }
        let sender = self.sender.clone();
        self.set.spawn(async move {
            for command in work.await {
                let _ = sender.send(command);
            }
        });
    }

    /// Sends `TimerFired` for `task` after the delay, unless the run stops first. The delay is
    /// jittered already: the attempt drew the jitter and the state machine applied it.
    fn start_timer(&mut self, task: String, delay_ms: u64) {
        let (sender, stop) = (self.sender.clone(), self.stop.clone());
        self.set.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(delay_ms)) => { let _ = sender.send(Command::TimerFired { task }); }
                () = stop.cancelled() => {}
            }
        });
    }
}
