//! The worker's side: claim attempts of the runtimes this worker accepts, carry each out with
//! the agent's runtime built from its run's plan, renew the claim while it runs, and write the
//! reply back, which the queue accepts only while the claim is current.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use manifest::Plan;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::leases::Leases;
use super::queue::{self, Claimed, Renewal};
use super::relay;
use super::requests::RequestWindow;
use super::{ClusterError, REMOTE_RUNTIMES, presence};
use crate::llm::LlmAgents;
use crate::runtime::{AgentRuntime, Agents, Registry, Reply};
use crate::store::postgres::Database;

/// Reads the current plan of a run (its `RunCreated`'s, or its last replan's) by run id; the
/// error says why it cannot.
pub type Plans = Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<Arc<Plan>, String>> + Send>> + Send + Sync>;

/// The plans whose agents a worker keeps built at most.
const KEPT_RUNS: usize = 64;

/// Claims attempts from the queue and carries them out.
pub struct Worker {
    id: String,
    concurrency: usize,
    runtimes: Vec<String>,
    leases: Leases,
    plans: Plans,
    tally: Arc<Tally>,
}

/// What a worker did, counted as it goes.
#[derive(Debug, Default)]
pub struct Tally {
    /// Attempts whose reply the queue accepted.
    pub done: AtomicU64,
    /// Replies refused because the claim was no longer current (expired or taken over).
    pub refused: AtomicU64,
    /// Attempts stopped because their claim could not be renewed.
    pub lost: AtomicU64,
    /// Attempts stopped because their coordinator withdrew them (cancelled, or their run ended).
    pub withdrawn: AtomicU64,
}

impl Worker {
    /// A worker named `id` (unique in the cluster) that reads runs' plans with `plans`: 8
    /// attempts at a time, every remote runtime, the default leases.
    pub fn new(id: impl Into<String>, plans: Plans) -> Self {
        Worker {
            id: id.into(),
            concurrency: 8,
            runtimes: REMOTE_RUNTIMES.iter().map(|&r| r.to_owned()).collect(),
            leases: Leases::default(),
            plans,
            tally: Arc::default(),
        }
    }

    /// Carries out at most `n` attempts at a time (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Claims only attempts of agents with these runtimes.
    pub fn runtimes(mut self, runtimes: Vec<String>) -> Self {
        self.runtimes = runtimes;
        self
    }

    /// Uses these lease timings.
    pub fn leases(mut self, leases: Leases) -> Self {
        self.leases = leases;
        self
    }

    /// What the worker has done so far, counted as it goes.
    pub fn tally(&self) -> Arc<Tally> {
        Arc::clone(&self.tally)
    }

    /// Works the queue in `db` until `stop` fires; attempts still running then are stopped and
    /// given back to the queue. Returns what it did.
    pub async fn run(self, db: &Database, stop: CancellationToken) -> Result<Arc<Tally>, ClusterError> {
        let mut notes = db.listen(queue::QUEUED).await?;
        presence::announce(db, &self.id, &self.runtimes, self.leases.lease).await?;
        // A set, so the renewals stop however this returns (dropping it aborts them).
        let mut announcing = JoinSet::new();
        announcing.spawn(announce(db.clone(), self.id.clone(), self.runtimes.clone(), self.leases));
        let shared = Arc::new(Shared {
            db: db.clone(),
            id: self.id,
            leases: self.leases,
            plans: self.plans,
            agents: Mutex::new(HashMap::new()),
            tally: Arc::clone(&self.tally),
            freed: Notify::new(),
        });
        // A slot is an agent at work: it is free again once the agent replies, while its reply
        // is still being written, so the next claim overlaps that write.
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let mut running = JoinSet::new();
        loop {
            while running.try_join_next().is_some() {}
            let permits: Vec<OwnedSemaphorePermit> =
                std::iter::from_fn(|| Arc::clone(&slots).try_acquire_owned().ok()).collect();
            let mut full = true;
            if !permits.is_empty() {
                let (free, lease) = (permits.len(), shared.leases.lease);
                let claimed = queue::claim(&shared.db, &shared.id, free, &self.runtimes, lease).await?;
                full = claimed.len() == free;
                for (row, permit) in claimed.into_iter().zip(permits) {
                    let slot = Slot { _permit: permit, shared: Arc::clone(&shared) };
                    running.spawn(Arc::clone(&shared).execute(row, slot, stop.child_token()));
                }
            }
            // With every slot taken, only a freed one is news; otherwise a queued attempt is
            // too, announced or found by polling.
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = shared.freed.notified() => {}
                note = notes.recv(), if !full => {
                    if let Err(RecvError::Closed) = note {
                        return Err(ClusterError::Lost);
                    }
                    // One claim answers every announcement that arrived meanwhile.
                    while notes.try_recv().is_ok() {}
                }
                () = tokio::time::sleep(shared.leases.poll), if !full => {}
            }
        }
        while running.join_next().await.is_some() {}
        announcing.shutdown().await;
        if let Err(error) = presence::leave(&shared.db, &shared.id).await {
            tracing::warn!(%error, "cannot remove this worker from the workers that are up; its row runs out");
        }
        Ok(Arc::clone(&shared.tally))
    }
}

/// Renews the worker's row in `runner_workers` every renewal period, for ever.
async fn announce(db: Database, id: String, runtimes: Vec<String>, leases: Leases) {
    loop {
        tokio::time::sleep(leases.renew).await;
        if let Err(error) = presence::announce(&db, &id, &runtimes, leases.lease).await {
            tracing::warn!(%error, "cannot renew this worker's row among the workers that are up; trying again");
        }
    }
}

/// What every attempt of a worker shares.
struct Shared {
    db: Database,
    id: String,
    leases: Leases,
    plans: Plans,
    /// The agents of the runs seen lately, by run id.
    agents: Mutex<HashMap<String, Agents>>,
    tally: Arc<Tally>,
    /// Told when a slot is freed.
    freed: Notify,
}

/// One of a worker's `concurrency` slots, held while an agent works; freeing it tells the
/// claiming loop.
struct Slot {
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.freed.notify_one();
    }
}

impl Shared {
    /// Carries out one claimed attempt: renews the claim while the agent works, stops the agent
    /// when the claim is lost or the worker stops, and writes the reply back.
    async fn execute(self: Arc<Self>, row: Claimed, slot: Slot, stop: CancellationToken) {
        let (run, task, attempt) = (row.run_id.clone(), row.request.task.clone(), row.request.attempt);
        if row.reclaimed {
            tracing::info!(worker = %self.id, run, task, attempt, "claimed an attempt whose earlier worker's lease expired");
        }
        let reply = match self.runtime(&row.run_id, &row.agent).await {
            Ok(runtime) => {
                let mark: Arc<str> = format!("{run}/{task}/{attempt}").into();
                // Stopping drops the work, which kills its programs; the agent is never told to
                // cancel, which would make a reply of it.
                let work = crate::process::marked(mark, self.carry_out(runtime, &row));
                tokio::select! {
                    // A reply ready together with a failed renewal is still offered: the queue decides.
                    biased;
                    reply = work => reply,
                    renewal = self.keep_claim(row.id, row.claim) => {
                        if renewal == Renewal::Withdrawn {
                            self.tally.withdrawn.fetch_add(1, Ordering::Relaxed);
                            eprintln!(
                                "worker {}: attempt {attempt} of task `{task}` of run `{run}` was withdrawn by its \
                                 coordinator (cancelled, or its run ended): the attempt was stopped",
                                self.id
                            );
                            return;
                        }
                        self.tally.lost.fetch_add(1, Ordering::Relaxed);
                        eprintln!(
                            "worker {}: lost the claim on attempt {attempt} of task `{task}` of run `{run}` \
                             (its lease expired or was taken over): the attempt was stopped and its result refused",
                            self.id
                        );
                        return;
                    }
                    () = stop.cancelled() => {
                        if let Err(error) = queue::release(&self.db, row.id, row.claim).await {
                            tracing::warn!(%error, "cannot give an attempt back to the queue");
                        }
                        return;
                    }
                }
            }
            Err(reply) => reply,
        };
        drop(slot);
        match queue::finish(&self.db, row.id, row.claim, &reply).await {
            Ok(true) => {
                self.tally.done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {
                self.tally.refused.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "worker {}: the result of attempt {attempt} of task `{task}` of run `{run}` was refused: \
                     the claim expired or was taken over, so another worker runs it",
                    self.id
                );
            }
            Err(error) => tracing::warn!(%error, run, task, attempt, "cannot write the result of an attempt"),
        }
    }

    /// Runs the claimed attempt with `runtime`; an `llm` attempt's journal is relayed to its
    /// coordinator, and it goes on from the conversation recorded so far.
    async fn carry_out(&self, runtime: Arc<dyn AgentRuntime>, row: &Claimed) -> Reply {
        let mut request = row.request.clone();
        if !row.journaled {
            return runtime.run(request, CancellationToken::new()).await;
        }
        let claim = relay::Claim::new(self.db.clone(), self.id.clone(), row.id, row.claim, self.leases.poll);
        let (task, attempt) = (request.task.clone(), request.attempt);
        let relayed = claim.journaled(&task, attempt, move |journal| {
            request.journal = Some(Box::new(journal));
            runtime.run(request, CancellationToken::new())
        });
        match relayed.await {
            relay::Relayed::Done(reply) => reply,
            relay::Relayed::Stopped => crate::journal::stopped(None),
            relay::Relayed::Broken(reason) => Reply::transient(reason),
        }
    }

    /// Renews the claim every renewal period; returns why, when a renewal is refused.
    async fn keep_claim(&self, id: i64, claim: i64) -> Renewal {
        loop {
            tokio::time::sleep(self.leases.renew).await;
            match queue::renew(&self.db, id, claim, self.leases.lease).await {
                Ok(Renewal::Renewed) => {}
                Ok(refused) => return refused,
                Err(error) => tracing::warn!(%error, "cannot renew a claim; trying again"),
            }
        }
    }

    /// The runtime of `agent` in run `run`, from the run's plan (read again when the agent is
    /// new to the agents kept: a replan may have added it). Without it, the reply to give: a
    /// plan that cannot be read now may be readable on a retry, a missing agent never is.
    async fn runtime(&self, run: &str, agent: &str) -> Result<Arc<dyn AgentRuntime>, Reply> {
        if let Some(runtime) = self.kept().get(run).and_then(|agents| agents.agent(agent)) {
            return Ok(runtime);
        }
        let plan = (self.plans)(run.to_owned()).await.map_err(Reply::transient)?;
        let llm = OnceLock::new();
        let agents = Agents::for_plan(&plan, &Registry::builtin(), &|name: &str| {
            llm.get_or_init(|| LlmAgents::sharing(&plan, Arc::new(RequestWindow::new(self.db.clone(), run))))
                .runtime(name)
        });
        let runtime =
            agents.agent(agent).ok_or_else(|| Reply::refused(format!("run `{run}` has no agent `{agent}`")))?;
        let mut kept = self.kept();
        if kept.len() >= KEPT_RUNS {
            kept.clear();
        }
        kept.insert(run.to_owned(), agents);
        Ok(runtime)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Agents>> {
        self.agents.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
