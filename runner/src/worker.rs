//! `runner worker`: carries out the attempts coordinators queue in PostgreSQL, and coordinates
//! the runs nobody drives: a run submitted with `apply --detach`, or one whose coordinator
//! stopped renewing its lease (it died, or lost its connection). See docs/workers.md.

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use clap::{Args, ValueEnum};
use engine::cluster::{ClusterError, Leases, Plans, Remote, Worker};
use engine::driver::Driver;
use engine::store::postgres::{Database, LeaseTimes, RunLease};
use engine::{Command, RunState};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::home::{Created, fold};
use crate::store::{Run, Runs, leases};

/// The arguments of `runner worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// How many attempts this worker carries out at a time; 0 carries out none, and only
    /// coordinates the runs nobody drives.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Never coordinate a run: only carry out attempts.
    #[arg(long)]
    no_takeover: bool,
    /// The agent runtimes whose attempts this worker accepts, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "command,llm,http")]
    runtimes: Vec<RuntimeArg>,
}

/// The runtimes a worker can accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RuntimeArg {
    /// `command` agents: a program per attempt.
    Command,
    /// `llm` agents: a model's chat completions.
    Llm,
    /// `http` agents: a request per attempt.
    Http,
}

impl RuntimeArg {
    fn name(self) -> &'static str {
        match self {
            RuntimeArg::Command => "command",
            RuntimeArg::Llm => "llm",
            RuntimeArg::Http => "http",
        }
    }
}

/// Runs a worker on the database `runs` names until SIGINT or SIGTERM; exit 0 then.
pub fn run(runs: &Runs, args: &WorkerArgs) -> anyhow::Result<u8> {
    let Runs::Postgres(pg) = runs else {
        anyhow::bail!(
            "a worker needs the database the runs are in: pass --store postgres://USER@HOST:PORT/DATABASE or set \
             RUNNER_STORE"
        );
    };
    if args.concurrency == 0 && args.no_takeover {
        eprintln!("error: a worker with --concurrency 0 and --no-takeover would do nothing");
        return Ok(crate::exit::EXIT_USAGE);
    }
    let db = pg.db().clone();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let stop = CancellationToken::new();
        watch_signals(stop.clone())?;
        let owner = engine::store::postgres::this_process();
        let (leases, times) = leases();
        let worker = Worker::new(owner.clone(), plans(&db))
            .concurrency(args.concurrency)
            .runtimes(args.runtimes.iter().map(|r| r.name().to_owned()).collect())
            .leases(leases);
        let attempts = match args.concurrency {
            0 => "no attempts".to_owned(),
            n => format!(
                "{} attempts, {n} at a time",
                args.runtimes.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ")
            ),
        };
        let runs = if args.no_takeover { "coordinating no runs" } else { "coordinating the runs nobody drives" };
        eprintln!("worker {owner}: carrying out {attempts}, {runs}; SIGINT or SIGTERM stops it");
        let coordinating = (!args.no_takeover)
            .then(|| tokio::spawn(take_over(db.clone(), owner.clone(), leases, times, stop.clone())));
        let tally = match args.concurrency {
            0 => {
                stop.cancelled().await;
                Ok(Arc::default())
            }
            _ => worker.run(&db, stop.clone()).await,
        };
        stop.cancel();
        if let Some(coordinating) = coordinating {
            let _ = coordinating.await;
        }
        let tally = tally?;
        let count = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "worker {owner} stopped: {} attempts done, {} results refused, {} claims lost, {} withdrawn",
            count(&tally.done),
            count(&tally.refused),
            count(&tally.lost),
            count(&tally.withdrawn)
        );
        Ok(0)
    })
}

/// The coordinator's side of the cluster while it drives a run in PostgreSQL: the queue its
/// attempts go to, and the worker inside this process unless `--no-local-work`.
pub struct Coordination {
    remote: Remote,
    local: Option<(CancellationToken, LocalWorker)>,
}

/// The worker inside a coordinating process, as it ends.
type LocalWorker = tokio::task::JoinHandle<Result<Arc<engine::cluster::Tally>, ClusterError>>;

impl Coordination {
    /// Starts coordinating `run` on `runtime`; `None` for a run in a folder, which runs its
    /// attempts itself as always.
    pub fn start(run: &Run, runtime: &tokio::runtime::Runtime, local_work: bool) -> anyhow::Result<Option<Self>> {
        let Run::Pg { id, pg } = run else { return Ok(None) };
        let db = pg.db().clone();
        let (leases, _) = leases();
        let remote = runtime.block_on(Remote::start(&db, id, leases))?;
        let local = local_work.then(|| {
            let stop = CancellationToken::new();
            let worker = Worker::new(engine::store::postgres::this_process(), plans(&db)).leases(leases);
            let handle = runtime.spawn({
                let stop = stop.clone();
                async move { worker.run(&db, stop).await }
            });
            (stop, handle)
        });
        Ok(Some(Coordination { remote, local }))
    }

    /// The runtimes the run's agents get: `command`, `llm` and `http` through the queue.
    pub fn registry(&self) -> engine::runtime::Registry {
        self.remote.registry()
    }

    /// Withdraws what the run left in the queue (its driver has returned and the lease is
    /// still held), then stops the worker inside this process.
    pub fn stop(self, runtime: &tokio::runtime::Runtime) {
        runtime.block_on(self.remote.close());
        if let Some((stop, handle)) = self.local {
            stop.cancel();
            if let Ok(Err(error)) = runtime.block_on(handle) {
                eprintln!("warning: the worker in this process stopped: {error}");
            }
        }
    }
}

/// Reads a run's current plan from the store, for the worker's agents.
pub fn plans(db: &Database) -> Plans {
    let db = db.clone();
    Arc::new(move |run: String| {
        let db = db.clone();
        Box::pin(async move {
            let loaded = db.load(&run).await.map_err(|error| error.to_string())?;
            let state: RunState = fold(&loaded.records);
            Ok(Arc::clone(&state.plan))
        })
    })
}

/// Fires `stop` on SIGINT or SIGTERM.
fn watch_signals(stop: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("stopping the worker: its attempts go back to the queue");
        stop.cancel();
    });
    Ok(())
}

/// Looks for runs that are under way with nobody holding their lease, takes each one's lease
/// and coordinates it, until `stop` fires.
async fn take_over(db: Database, owner: String, leases: Leases, times: LeaseTimes, stop: CancellationToken) {
    let mut runs = JoinSet::new();
    loop {
        while runs.try_join_next().is_some() {}
        match db.undriven().await {
            Ok(undriven) => {
                for run_id in undriven {
                    // Another worker may be quicker: then the lease is refused and the run left to it.
                    if let Ok(lease) = db.take_lease(&run_id, &owner, times).await {
                        let (db, owner, stop) = (db.clone(), owner.clone(), stop.clone());
                        runs.spawn(async move {
                            if let Err(error) = coordinate(&db, &owner, lease, leases, stop).await {
                                eprintln!("worker {owner}: {error:#}");
                            }
                        });
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cannot list the runs"),
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(leases.lease / 2) => {}
        }
    }
    while runs.join_next().await.is_some() {}
}

/// Coordinates a run whose lease this worker took: folds its records and drives it on as
/// `runner resume` does, its attempts carried out by the workers.
async fn coordinate(
    db: &Database,
    owner: &str,
    lease: RunLease,
    leases: Leases,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let run_id = lease.run_id().to_owned();
    let loaded = db.load(&run_id).await.map_err(crate::home::store_error)?;
    let Some(created) = Created::of(&loaded.records) else {
        anyhow::bail!("run `{run_id}` has no RunCreated event: nothing to coordinate");
    };
    eprintln!("worker {owner}: coordinating run `{run_id}` ({} events so far)", loaded.records.len());
    let remote = Remote::start(db, &run_id, leases).await?;
    let (cancel, reason) = (CancellationToken::new(), Arc::new(OnceLock::new()));
    let watch = {
        let (db, run_id, cancel, reason) = (db.clone(), run_id.clone(), cancel.clone(), Arc::clone(&reason));
        tokio::spawn(async move {
            if let Ok(why) = db.cancel_requested(&run_id, leases.poll).await {
                let _ = reason.set(why);
                cancel.cancel();
            }
        })
    };
    let driver = Driver::new(run_id.clone(), db.store(&lease), &loaded.records, created.workdir())
        .with_runtimes(remote.registry())
        .cancel_reason(reason)
        .mark_processes(run_id.as_str())
        .halt_on(stop);
    let state = driver.run(Command::Continue, cancel).await;
    watch.abort();
    if state.is_ok() {
        // Still under the run's lease, so a coordinator after this one has queued nothing yet.
        remote.close().await;
    }
    lease.release().await.map_err(crate::home::store_error)?;
    let state = state.with_context(|| format!("run `{run_id}`"))?;
    eprintln!("worker {owner}: run `{run_id}` {}", state.status.as_str());
    Ok(())
}
