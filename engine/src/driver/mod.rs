//! The driver: runs the state machine on tokio. One coordinator owns the state; attempts run
//! in a `JoinSet` and report back through a channel (a reply known at once, without one).
//!
//! Each turn, the coordinator processes every command that has arrived, appends the events
//! they caused in one batch and waits until the batch is durable; only then does it start the
//! attempts dispatched in it (write-ahead: no agent runs on an input the log does not hold).
//! Results that arrive meanwhile form the next batch, which is how group commit arises (replies
//! known at once are taken at most `REPLIES_A_BATCH` a batch, which bounds a batch's memory).

mod caching;
mod followups;
mod jobs;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::jobs::{Known, Work};
use crate::Command;
use crate::Handler;
use crate::clock;
use crate::event::{Event, Record};
use crate::journal;
use crate::runtime::{Agents, Registry};
use crate::store::{EventStore, StoreError};
use crate::summarizer::{self, Summarizer};
use crate::{RunState, RunStatus};

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
    /// Commands from a planner still writing the run's plan (`runner do`).
    feed: Option<mpsc::UnboundedReceiver<Command>>,
    /// Where successful outputs are stored for later runs to reuse.
    caching: Option<caching::Caching>,
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
            feed: None,
            caching: None,
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

    /// Takes the commands of a planner that is still writing the run's plan (`PlanTask`,
    /// `RejectLine`, `ClosePlan`) as they come. A feed that closes while the plan is still
    /// growing ends the plan with an error, so the run never waits for a planner that is gone.
    pub fn with_feed(mut self, feed: mpsc::UnboundedReceiver<Command>) -> Self {
        self.feed = Some(feed);
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
        let mut feed = self.feed.take();
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
            while let Some(command) = feed.as_mut().and_then(|f| f.try_recv().ok()) {
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
            let waiting = !inbox.is_empty()
                || !journal_inbox.is_empty()
                || !replies.is_empty()
                || feed.as_ref().is_some_and(|f| !f.is_empty())
                || self.state.held_back();
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
                fed = next_fed(&mut feed), if feed.is_some() => match fed {
                    Some(command) => {
                        let _ = self.take(command, &mut batch);
                    }
                    None => {
                        feed = None;
                        if self.state.growing {
                            let error = Some("the planner stopped without finishing the plan".to_owned());
                            let _ = self.take(Command::ClosePlan { error, score: None, findings: Vec::new() }, &mut batch);
                        }
                    }
                },
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
        let command = match entry.ask {
            journal::Ask::Record(command) => *command,
            journal::Ask::Read { task, attempt } => {
                let current = self
                    .state
                    .index_of(&task)
                    .map(|i| &self.state.tasks[i])
                    .is_some_and(|state| state.status == machine::TaskStatus::Running && state.attempts == attempt);
                let verdict = match current {
                    true => journal::Verdict::Conversation(Box::new(
                        self.state.conversations.get(&task).cloned().unwrap_or_default(),
                    )),
                    false => journal::Verdict::Stop,
                };
                verdicts.push((entry.reply, verdict));
                return;
            }
        };
        let call = match &command {
            Command::CallTool { task, call, .. } => Some((task.clone(), call.id.clone())),
            _ => None,
        };
        let before = batch.len();
        let taken = self.take(command, batch).is_ok() && batch.len() > before;
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

    /// Makes a batch durable, tells the observer, then starts what it dispatched: numbering,
    /// reading the follow-up work, the durable append (a slice at a time when the batch is
    /// wide), and starting that work, in that order. A small batch is left empty with its
    /// room, so the next one does not grow a vector again; a wide one is taken whole.
    async fn commit(&mut self, events: &mut Vec<Event>, work: &mut Work<'_>) -> Result<(), DriverError> {
        // A replan or a map's items renumber the tasks: the attempts dispatched before are found by id.
        let by_id = events.iter().any(|e| matches!(e, Event::Replanned(_) | Event::MapExpanded { .. }));
        let mut followups = self.starts(by_id);
        if events.capacity() > BATCH_ROOM_KEPT {
            let mut events = std::mem::take(events).into_iter();
            while !events.as_slice().is_empty() {
                let records = self.number(events.by_ref().take(RECORDS_AN_APPEND));
                self.read_followups(&records, by_id, &mut followups);
                let entries = self.entries_of(&records);
                self.persist(records).await?;
                self.store(&entries);
            }
        } else {
            let records = self.number(events.drain(..));
            self.read_followups(&records, by_id, &mut followups);
            let entries = self.entries_of(&records);
            self.persist(records).await?;
            self.store(&entries);
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

    /// Appends the records and waits until they are durable, then shows them to the observer.
    async fn persist(&mut self, records: Vec<Record>) -> Result<(), DriverError> {
        // Every record of the batch is applied to the state already.
        self.store.summarize(crate::store::Summary::of(&self.state));
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
}

/// The next command of a planner's feed (`None` once it has closed).
async fn next_fed(feed: &mut Option<mpsc::UnboundedReceiver<Command>>) -> Option<Command> {
    match feed {
        Some(feed) => feed.recv().await,
        None => std::future::pending().await,
    }
}
