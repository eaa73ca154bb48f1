//! The coordinator's side: [`Remote`] queues the attempts of one run for the workers and hands
//! each reply back to the attempt that waits for it. The driver sees ordinary runtimes
//! ([`Remote::registry`]), so write-ahead, limits and retries stay in the coordinator's state
//! machine: a `max_concurrency` of 4 is 4 in the whole cluster. The journal entries of its
//! `llm` attempts come back through the database too, and go to the driver's journal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use manifest::plan::Runtime;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::leases::Leases;
use super::relay::{self, Intake};
use super::requests::RequestWindow;
use super::{ClusterError, REMOTE_RUNTIMES, presence, queue};
use crate::llm::LlmAgents;
use crate::runtime::{AgentRuntime, Attempt, Pending, Registry, Reply, Setup};
use crate::store::postgres::Database;

/// The attempts queue as one run's coordinator uses it.
#[derive(Clone)]
pub struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    run_id: String,
    /// The attempts queued and not yet answered, by row.
    waiting: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    /// The journals of the queued `llm` attempts, and the entries their workers wrote.
    intake: Arc<Intake>,
    /// Wakes the collector when an attempt starts waiting.
    wake: Notify,
    /// Attempts to queue: the enqueuer inserts all that are waiting with one statement.
    outbox: mpsc::UnboundedSender<Outgoing>,
    /// The `max_concurrency` of each provider, held here for the whole cluster: an `llm`
    /// attempt is queued (or run here) only with a permit of its provider's.
    providers: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The `llm` agents run here (those that may call tools, while no worker takes `llm`
    /// attempts), made from the first plan that has one, with their `requests_per_minute`
    /// counted with the workers'.
    local_llm: OnceLock<LlmAgents>,
}

impl Remote {
    /// The queue in `db` as run `run_id`'s coordinator uses it. Attempts of the run still in
    /// the queue (left by a coordinator before this one) are withdrawn: the run's log
    /// dispatches again whatever it does not record as finished.
    pub async fn start(db: &Database, run_id: &str, leases: Leases) -> Result<Remote, ClusterError> {
        let mut notes = db.listen(queue::DONE).await?;
        db.listen(relay::WRITTEN).await?;
        let withdrawn = queue::withdraw_run(db, run_id).await?;
        let (outbox, queued) = mpsc::unbounded_channel();
        if withdrawn > 0 {
            tracing::info!(run = run_id, withdrawn, "withdrew the attempts an earlier coordinator queued");
        }
        let inner = Arc::new(Inner {
            db: db.clone(),
            run_id: run_id.to_owned(),
            waiting: Mutex::new(HashMap::new()),
            intake: Arc::default(),
            wake: Notify::new(),
            outbox,
            providers: Mutex::new(HashMap::new()),
            local_llm: OnceLock::new(),
        });
        tokio::spawn(enqueue(Arc::downgrade(&inner), queued));
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let (mut replies, mut entries) = (true, true);
                tokio::select! {
                    note = notes.recv() => match note {
                        Ok(note) if note.payload != inner.run_id => continue,
                        Ok(note) if note.channel == queue::DONE => entries = false,
                        Ok(note) if note.channel == relay::WRITTEN => replies = false,
                        Ok(_) => continue,
                        Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => {
                            inner.give_up("the connection to the attempts queue was lost");
                            return;
                        }
                    },
                    // New attempts are queued, and their journals kept: their workers may have
                    // written already.
                    () = inner.wake.notified() => {}
                    () = tokio::time::sleep(leases.poll) => {}
                }
                if entries && inner.intake.expecting() {
                    inner.intake.take(&inner.db, &inner.run_id).await;
                }
                if replies {
                    collect(&inner).await;
                }
            }
        });
        Ok(Remote { inner })
    }

    /// Withdraws the run's attempts still in the queue, once its driver has returned: nobody
    /// waits for their replies any more, and the workers that run them stop them at their
    /// next renewal instead of carrying them out for nothing.
    pub async fn close(&self) {
        match queue::withdraw_run(&self.inner.db, &self.inner.run_id).await {
            Ok(0) => {}
            Ok(withdrawn) => {
                tracing::info!(run = %self.inner.run_id, withdrawn, "withdrew the attempts the run left in the queue")
            }
            Err(error) => {
                tracing::warn!(%error, run = %self.inner.run_id, "cannot withdraw the attempts the run left in the queue")
            }
        }
    }

    /// The built-in runtimes, with `command`, `llm` and `http` agents carried out by workers.
    /// An `llm` attempt's conversation is journaled through this coordinator's driver, which
    /// records each turn and decides each tool call (and its approval) before the tool runs,
    /// wherever it runs. An `llm` agent that may call tools runs here only while no worker
    /// takes `llm` attempts. Either way an `llm` agent's provider limits hold for the run as a
    /// whole.
    pub fn registry(&self) -> Registry {
        REMOTE_RUNTIMES.iter().fold(Registry::builtin(), |registry, &runtime| {
            let remote = self.clone();
            registry.with(runtime, move |setup| {
                let inner = &remote.inner;
                let queued = RemoteRuntime { remote: remote.clone(), agent: setup.name.to_owned(), runtime };
                let agent: Arc<dyn AgentRuntime> = match &setup.agent.runtime {
                    Runtime::Llm { tools, .. } if !tools.is_empty() => {
                        let here = inner
                            .local_llm
                            .get_or_init(|| {
                                let window = RequestWindow::new(inner.db.clone(), &inner.run_id);
                                LlmAgents::sharing(setup.plan, Arc::new(window))
                            })
                            .runtime(setup.name);
                        Arc::new(ToolUsing { db: inner.db.clone(), queued: Arc::new(queued), here })
                    }
                    _ => Arc::new(queued),
                };
                match inner.limit_of(setup) {
                    Some(limit) => Arc::new(Limited { limit, agent }),
                    None => agent,
                }
            })
        })
    }
}

impl Inner {
    /// The cluster-wide limit of an `llm` agent's provider, if it has one. A worker's own
    /// limiter still holds each worker to it too; this holds the run.
    fn limit_of(&self, setup: &Setup<'_>) -> Option<Arc<Semaphore>> {
        let Runtime::Llm { provider, .. } = &setup.agent.runtime else { return None };
        let name = provider.as_ref().map_or(crate::llm::DEFAULT_PROVIDER, |p| p.value.as_str());
        let limit = setup.plan.providers.get(name)?.max_concurrency.filter(|&n| n > 0)?;
        let mut providers = self.providers.lock().unwrap_or_else(PoisonError::into_inner);
        Some(Arc::clone(providers.entry(name.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(limit as usize)))))
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<i64, oneshot::Sender<Reply>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers every waiting attempt with a transient failure.
    fn give_up(&self, reason: &str) {
        self.intake.clear();
        for (_, sender) in self.waiting().drain() {
            let _ = sender.send(Reply::transient(reason));
        }
    }

    /// Queues `attempt` and waits for its reply; a cancel withdraws it.
    async fn carry_out(
        &self,
        agent: String,
        runtime: &'static str,
        attempt: Attempt,
        cancel: CancellationToken,
    ) -> Reply {
        let (sender, receiver) = oneshot::channel();
        let (row, queued) = oneshot::channel();
        if self.outbox.send(Outgoing { agent, runtime, attempt, reply: sender, row }).is_err() {
            return Reply::transient("the attempts queue stopped");
        }
        let id = match queued.await {
            Ok(Ok(id)) => id,
            Ok(Err(error)) => return Reply::transient(format!("cannot queue the attempt for a worker: {error}")),
            Err(_) => return Reply::transient("the attempts queue stopped"),
        };
        tokio::select! {
            reply = receiver => reply.unwrap_or_else(|_| Reply::transient("the attempts queue stopped")),
            () = cancel.cancelled() => {
                self.waiting().remove(&id);
                self.intake.forget(id);
                if let Err(error) = queue::withdraw(&self.db, id).await {
                    tracing::warn!(%error, "cannot withdraw a cancelled attempt");
                }
                Reply::refused("cancelled")
            }
        }
    }
}

/// An attempt on its way into the queue.
struct Outgoing {
    agent: String,
    runtime: &'static str,
    attempt: Attempt,
    /// Where its reply goes, once a worker wrote it.
    reply: oneshot::Sender<Reply>,
    /// Where its row goes once it is queued, or why it could not be.
    row: oneshot::Sender<Result<i64, String>>,
}

/// The most attempts one statement queues.
const BATCH: usize = 1000;

/// Queues what the outbox holds, every attempt waiting there with one statement (an attempt
/// a round trip would hold a coordinator of thousands of tasks back, and its lease's renewal
/// behind them), until the coordinator is gone.
async fn enqueue(inner: std::sync::Weak<Inner>, mut outbox: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(first) = outbox.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH
            && let Ok(next) = outbox.try_recv()
        {
            batch.push(next);
        }
        let Some(inner) = inner.upgrade() else { return };
        let rows: Vec<queue::Queued<'_>> = batch
            .iter()
            .map(|out| queue::Queued {
                agent: &out.agent,
                runtime: out.runtime,
                attempt: &out.attempt,
                journaled: out.attempt.journal.is_some(),
            })
            .collect();
        let queued = queue::enqueue(&inner.db, &inner.run_id, &rows).await;
        drop(rows);
        match queued {
            Ok(ids) => {
                let mut waiting = inner.waiting();
                for (mut out, id) in batch.into_iter().zip(ids) {
                    if let Some(journal) = out.attempt.journal.take() {
                        inner.intake.keep(id, *journal);
                    }
                    waiting.insert(id, out.reply);
                    let _ = out.row.send(Ok(id));
                }
                drop(waiting);
                inner.wake.notify_one();
            }
            Err(error) => {
                for out in batch {
                    let _ = out.row.send(Err(error.to_string()));
                }
            }
        }
    }
}

/// Takes the replies that are ready and hands them over.
async fn collect(inner: &Inner) {
    let ids: Vec<i64> = inner.waiting().keys().copied().collect();
    if ids.is_empty() {
        return;
    }
    match queue::collect(&inner.db, &inner.run_id, &ids).await {
        Ok(replies) => {
            let mut waiting = inner.waiting();
            for (id, reply) in replies {
                inner.intake.forget(id);
                if let Some(sender) = waiting.remove(&id) {
                    let _ = sender.send(reply);
                }
            }
        }
        Err(error) => tracing::warn!(%error, "cannot collect the replies of workers; trying again"),
    }
}

/// An agent whose attempts workers carry out.
struct RemoteRuntime {
    remote: Remote,
    agent: String,
    runtime: &'static str,
}

impl AgentRuntime for RemoteRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (inner, agent, runtime) = (Arc::clone(&self.remote.inner), self.agent.clone(), self.runtime);
        Box::pin(async move { inner.carry_out(agent, runtime, attempt, cancel).await })
    }
}

/// An `llm` agent that may call tools: its attempts go to the workers when one of them takes
/// `llm` attempts, and run here otherwise.
struct ToolUsing {
    db: Database,
    queued: Arc<dyn AgentRuntime>,
    here: Arc<dyn AgentRuntime>,
}

impl AgentRuntime for ToolUsing {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (db, queued, here) = (self.db.clone(), Arc::clone(&self.queued), Arc::clone(&self.here));
        Box::pin(async move {
            let offered = presence::offered(&db, "llm").await.unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot tell whether a worker takes llm attempts: this one runs here");
                false
            });
            match offered {
                true => queued.run(attempt, cancel).await,
                false => here.run(attempt, cancel).await,
            }
        })
    }
}

/// An `llm` agent whose attempts each wait for a permit of its provider's cluster-wide
/// `max_concurrency`.
struct Limited {
    limit: Arc<Semaphore>,
    agent: Arc<dyn AgentRuntime>,
}

impl AgentRuntime for Limited {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (limit, agent) = (Arc::clone(&self.limit), Arc::clone(&self.agent));
        Box::pin(async move {
            // The semaphore is never closed, so acquiring fails only if it were.
            let _permit = tokio::select! {
                permit = limit.acquire_owned() => permit.ok(),
                () = cancel.cancelled() => return Reply::refused("cancelled"),
            };
            agent.run(attempt, cancel).await
        })
    }
}
