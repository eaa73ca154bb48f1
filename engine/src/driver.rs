//! The driver: runs the state machine on tokio. One coordinator owns the state; attempts run
//! in a `JoinSet` and report back through a channel.
//!
//! Each turn, the coordinator processes every command that has arrived, appends the events
//! they caused in one batch and waits until the batch is durable; only then does it start the
//! attempts dispatched in it (write-ahead: no agent runs on an input the log does not hold).
//! Results that arrive meanwhile form the next batch, which is how group commit arises.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock;
use crate::command::Command;
use crate::event::{Event, Record};
use crate::handler::Handler;
use crate::runtime::{Agents, Attempt, Reply};
use crate::state::{RunState, RunStatus};
use crate::store::{EventStore, StoreError};

/// Why a run could not be driven.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum DriverError {
    /// The event store failed; the run stopped at the last durable event.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] StoreError),
    /// The first command was refused.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Refused(#[from] crate::error::EngineError),
}

/// Receives each record once it is durable (for a live view).
pub type Observer = Box<dyn FnMut(&Record, &RunState) + Send>;

/// Makes the runtime of an `llm` agent, by agent name.
pub type LlmRuntimes = Arc<dyn Fn(&str) -> Arc<dyn crate::runtime::AgentRuntime> + Send + Sync>;

/// Drives one run.
pub struct Driver<S: EventStore> {
    state: RunState,
    store: S,
    agents: Option<Agents>,
    llm: LlmRuntimes,
    run_id: Arc<str>,
    seq: u64,
    workdir: PathBuf,
    observer: Option<Observer>,
    cancel_reason: Arc<OnceLock<String>>,
}

impl<S: EventStore> Driver<S> {
    /// A driver for a new run, or for an existing one whose records are given.
    pub fn new(run_id: String, store: S, records: &[Record], workdir: PathBuf) -> Self {
        let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
        Driver {
            state: RunState::fold(&events),
            store,
            agents: None,
            llm: Arc::new(|_| Arc::new(crate::runtime::NoLlm)),
            run_id: run_id.into(),
            seq: records.last().map_or(0, |r| r.seq),
            workdir,
            observer: None,
            cancel_reason: Arc::new(OnceLock::new()),
        }
    }

    /// Calls `observer` with every durable record.
    pub fn observe(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets how `llm` agents are run.
    pub fn with_llm(mut self, llm: LlmRuntimes) -> Self {
        self.llm = llm;
        self
    }

    /// Where the reason for a cancellation is found: whoever fires the cancel token sets it
    /// first (`interrupted` when it is unset).
    pub fn cancel_reason(mut self, reason: Arc<OnceLock<String>>) -> Self {
        self.cancel_reason = reason;
        self
    }

    /// The state so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Processes `first`, then runs until the run ends, pauses, or `cancel` fires (which
    /// records `RunCancelled`). Returns the final state.
    pub async fn run(mut self, first: Command, cancel: CancellationToken) -> Result<RunState, DriverError> {
        let (sender, mut inbox) = mpsc::unbounded_channel::<Command>();
        let mut attempts: JoinSet<()> = JoinSet::new();
        let stop_attempts = CancellationToken::new();
        let events = self.state.process(first)?;
        let mut batch = events;
        loop {
            while let Ok(command) = inbox.try_recv() {
                // A refused command (a late result, say) changes nothing.
                if let Ok(events) = self.state.process(command) {
                    batch.extend(events);
                }
            }
            if !batch.is_empty() {
                let events = std::mem::take(&mut batch);
                self.commit(events, &sender, &mut attempts, &stop_attempts).await?;
            }
            // Finished attempts are reaped as the run goes, so they do not pile up until its end.
            while attempts.try_join_next().is_some() {}
            if self.state.status.is_final() || (self.state.status == RunStatus::Paused && self.state.running() == 0) {
                break;
            }
            tokio::select! {
                command = inbox.recv() => {
                    if let Some(command) = command {
                        if let Ok(events) = self.state.process(command) {
                            batch.extend(events);
                        }
                    }
                }
                () = cancel.cancelled(), if !self.state.status.is_final() => {
                    let reason = self.cancel_reason.get().cloned().unwrap_or_else(|| "interrupted".to_owned());
                    if let Ok(events) = self.state.process(Command::Cancel { reason }) {
                        batch.extend(events);
                    }
                }
            }
        }
        stop_attempts.cancel();
        attempts.shutdown().await;
        Ok(self.state)
    }

    /// Makes a batch durable, tells the observer, then starts what it dispatched.
    async fn commit(
        &mut self,
        events: Vec<Event>,
        sender: &mpsc::UnboundedSender<Command>,
        attempts: &mut JoinSet<()>,
        stop: &CancellationToken,
    ) -> Result<(), DriverError> {
        let at: Arc<str> = clock::now().into();
        let records: Vec<Record> = events
            .into_iter()
            .map(|event| {
                self.seq += 1;
                Record { seq: self.seq, at: Arc::clone(&at), run_id: Arc::clone(&self.run_id), event }
            })
            .collect();
        let mut starts = Vec::new();
        let mut timers = Vec::new();
        let mut ended = false;
        for record in &records {
            match &record.event {
                Event::RunCreated { plan, .. } => {
                    self.agents = Some(Agents::for_plan(plan, &*self.llm));
                }
                Event::TaskDispatched { task, attempt, input } => {
                    starts.push((task.clone(), *attempt, Arc::<str>::from(input.as_str())));
                }
                Event::RetryScheduled { task, delay_ms, .. } => timers.push((task.clone(), *delay_ms)),
                Event::RunCompleted { .. } | Event::RunCancelled { .. } => ended = true,
                _ => {}
            }
        }
        // Records are only copied when somebody watches: a RunCreated holds the whole plan.
        match &mut self.observer {
            Some(observer) => {
                self.store.append(records.clone()).await?;
                for record in &records {
                    observer(record, &self.state);
                }
            }
            None => self.store.append(records).await?,
        }
        if ended {
            stop.cancel();
            return Ok(());
        }
        if self.agents.is_none() && !starts.is_empty() {
            self.agents = Some(Agents::for_plan(&self.state.plan, &*self.llm));
        }
        let Some(agents) = &self.agents else { return Ok(()) };
        for (task, attempt, input) in starts {
            // A task that failed to render is dispatched and failed in the same batch.
            let Some(i) = self.state.index_of(&task) else { continue };
            if !self.state.tasks[i].status.eq(&crate::state::TaskStatus::Running)
                || self.state.tasks[i].attempts != attempt
            {
                continue;
            }
            let runtime = agents.runtime(i);
            let timeout = agents.timeout(i);
            let spec = &self.state.plan.tasks[i];
            let request = Attempt {
                max_output_tokens: spec.max_output_tokens,
                attachments: spec.attachments.iter().map(|a| a.value.clone()).collect(),
                schema: match &spec.verification {
                    Some(manifest::plan::Verification::SchemaCheck { schema }) => Some(schema.value.clone()),
                    _ => None,
                },
                may_ask: self.state.plan.control.allow_clarification,
                ..Attempt::new(task.clone(), attempt, input, self.workdir.clone())
            };
            let cancel = stop.child_token();
            let started = Instant::now();
            let mut work = runtime.run(request, cancel.clone());
            // A reply that is ready at once (a mock agent, a gate with no agent) is taken here,
            // without a task of its own; anything else gets a task.
            if let Poll::Ready(reply) = work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                let _ = sender.send(command_of(task, attempt, reply, started));
                continue;
            }
            let sender = sender.clone();
            attempts.spawn(async move {
                let reply = match timeout {
                    Some(limit) => match tokio::time::timeout(limit, work).await {
                        Ok(reply) => reply,
                        Err(_) => {
                            cancel.cancel();
                            Reply::failed(format!("timed out after {}", describe(limit)))
                        }
                    },
                    None => work.await,
                };
                let _ = sender.send(command_of(task, attempt, reply, started));
            });
        }
        for (task, delay_ms) in timers {
            let sender = sender.clone();
            let stop = stop.clone();
            attempts.spawn(async move {
                let delay = Duration::from_millis(jitter(delay_ms, &task));
                tokio::select! {
                    () = tokio::time::sleep(delay) => { let _ = sender.send(Command::TimerFired { task }); }
                    () = stop.cancelled() => {}
                }
            });
        }
        Ok(())
    }
}

/// The command that reports an attempt's reply.
fn command_of(task: String, attempt: u32, reply: Reply, started: Instant) -> Command {
    let duration_ms = started.elapsed().as_millis() as u64;
    match reply {
        Reply::Output { text, tokens } => Command::Succeeded { task, attempt, output: text, tokens, duration_ms },
        Reply::Failure { error, retryable } => Command::Failed { task, attempt, error, retryable },
        Reply::Question(question) => Command::NeedsClarification { task, attempt, question },
    }
}

fn describe(limit: Duration) -> String {
    manifest::Duration::from_millis(limit.as_millis() as u64).to_string()
}

/// A delay between half and all of `delay_ms` ("equal jitter"), so retries of many tasks that
/// failed together do not hit a service together again.
fn jitter(delay_ms: u64, salt: &str) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let mut x = u64::from(nanos)
        ^ salt.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let half = delay_ms / 2;
    half + if half == 0 { 0 } else { x % (delay_ms - half + 1) }
}
