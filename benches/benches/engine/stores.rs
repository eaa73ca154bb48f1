//! The stores a configuration runs on, and one run of it timed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::driver::Driver;
use engine::store::postgres::{Database, LeaseTimes, PgStore};
use engine::store::{EventStore, JsonlStore, MemoryStore};
use engine::{Outcome, RunState, RunStatus};
use manifest::plan::Strategy;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::floor::{disk_floor, floor};
use crate::plans::{Configured, Prepared, parents};

/// A store the bench keeps a handle on, to read its fsync or transaction count after the run,
/// counting the records appended.
pub(crate) struct Shared<S>(Arc<S>, Arc<std::sync::atomic::AtomicU64>);

impl<S> Shared<S> {
    pub(crate) fn new(store: Arc<S>) -> Self {
        Shared(store, Arc::default())
    }
}

impl<S: EventStore> EventStore for Shared<S> {
    fn append(&self, records: Vec<engine::Record>) -> engine::store::Durable {
        self.1.fetch_add(records.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.0.append(records)
    }
}

/// The PostgreSQL store's test database: a schema of its own, dropped at the end.
pub(crate) struct Pg {
    pub(crate) db: Database,
    _schema: testkit::pg::TestDatabase,
}

impl Pg {
    /// The database, or `None` (with a message) when the server does not answer.
    pub(crate) fn connect(rt: &Runtime) -> Option<Pg> {
        let schema = testkit::pg::TestDatabase::new("engine bench, postgres store")?;
        let db = rt.block_on(Database::connect(&schema.url)).expect("the test database connects");
        Some(Pg { db, _schema: schema })
    }
}

/// A fresh JSONL store under `folder` (the file `n` is removed first).
pub(crate) fn jsonl_store(folder: &Path, n: u64) -> (Arc<JsonlStore>, PathBuf) {
    let path = folder.join(format!("run-{n}.jsonl"));
    let _ = std::fs::remove_file(&path);
    (Arc::new(JsonlStore::create(&path).expect("a new log")), path)
}

/// Which store a configuration runs with, or the floor (no runner at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    Floor,
    Memory,
    Jsonl,
    Postgres,
}

impl Store {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Store::Floor => "floor",
            Store::Memory => "memory",
            Store::Jsonl => "jsonl",
            Store::Postgres => "postgres",
        }
    }
}

/// One run's figures: the driven time, the fsyncs (or transactions) and the records it took,
/// and (JSONL only) the disk's floor measured right after it (see [`disk_floor`]).
pub(crate) struct Once {
    pub(crate) time: Duration,
    pub(crate) syncs: u64,
    pub(crate) records: u64,
    pub(crate) disk: Duration,
}

/// Runs one configuration once.
pub(crate) fn run_once(rt: &Runtime, plan: &Configured, store: Store, folder: &Path, n: u64, pg: Option<&Pg>) -> Once {
    match store {
        Store::Floor => {
            let parents = parents(plan.shape, plan.tasks);
            let started = Instant::now();
            rt.block_on(rt.spawn(floor(parents))).expect("the floor's scheduler runs to its end");
            Once { time: started.elapsed(), syncs: 0, records: 0, disk: Duration::ZERO }
        }
        Store::Memory => {
            let plan = plan.prepared();
            let store = MemoryStore::new();
            let started = Instant::now();
            let state = rt.block_on(drive(plan, None, store.clone()));
            let spent = started.elapsed();
            let records = store.records().len() as u64;
            drop((state, store));
            Once { time: spent, syncs: 0, records, disk: Duration::ZERO }
        }
        Store::Jsonl => {
            let plan = plan.prepared();
            let (store, path) = jsonl_store(folder, n);
            let shared = Shared::new(Arc::clone(&store));
            let counted = Arc::clone(&shared.1);
            let started = Instant::now();
            let state = rt.block_on(drive(plan, None, shared));
            let spent = started.elapsed();
            let syncs = store.syncs();
            drop((state, store));
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            let _ = std::fs::remove_file(path);
            let disk = disk_floor(folder, bytes, syncs);
            Once { time: spent, syncs, records: counted.load(std::sync::atomic::Ordering::Relaxed), disk }
        }
        Store::Postgres => {
            let id = format!("bench-{}-{}-{n}", plan.shape.name(), plan.tasks);
            let (plan, pg) = (plan.prepared(), pg.expect("postgres runs only with a database"));
            let lease = rt.block_on(pg.db.create_run(&id, "bench", "bench", LeaseTimes::default())).expect("a new run");
            let store: Arc<PgStore> = Arc::new(pg.db.store(&lease));
            let shared = Shared::new(Arc::clone(&store));
            let counted = Arc::clone(&shared.1);
            let started = Instant::now();
            let state = rt.block_on(drive(plan, None, shared));
            let spent = started.elapsed();
            drop(state);
            Once {
                time: spent,
                syncs: store.transactions(),
                records: counted.load(std::sync::atomic::Ordering::Relaxed),
                disk: Duration::ZERO,
            }
        }
    }
}

/// Drives one run to its end and checks that it succeeded.
pub(crate) async fn drive<S: EventStore>(plan: &Prepared, strategy: Option<Strategy>, store: S) -> RunState {
    let driver = Driver::new("bench".into(), store, &[], std::env::temp_dir());
    let start = plan.start(strategy);
    let state = driver.run(start, CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    state
}
