//! The store the engine's tests drive runs into: the store is a parameter of the tests.
//!
//! A [`TestStore`] keeps every record in memory, as the tests always did, and, when the test
//! database answers (testkit's `TestDatabase`: a schema per test), writes each batch to
//! PostgreSQL too, through a `PgStore` under the run's lease. Reading the records back
//! ([`TestStore::records`]) then checks that the database holds exactly the records the
//! memory store holds, so every test that drives a plan also holds on PostgreSQL.

#![allow(dead_code)]

use std::sync::Arc;

use engine::Record;
use engine::store::postgres::{Database, LeaseTimes, PgStore, RunLease};
use engine::store::{Durable, EventStore, MemoryStore};
use testkit::pg::TestDatabase;

/// Memory, and PostgreSQL when it answers.
#[derive(Clone)]
pub struct TestStore {
    memory: MemoryStore,
    postgres: Option<Arc<Postgres>>,
}

/// A run in a test's own schema. Fields drop in order: the schema last.
pub struct Postgres {
    pub store: PgStore,
    pub lease: RunLease,
    pub db: Database,
    pub run_id: String,
    pub schema: TestDatabase,
}

impl Postgres {
    /// A run `run_id` in a fresh schema, or `None` when the database does not answer.
    pub fn new(run_id: &str) -> Option<Postgres> {
        let schema = TestDatabase::new(run_id)?;
        let (url, id) = (schema.url.clone(), run_id.to_owned());
        let (db, lease) = blocking(async move {
            let db = Database::connect(&url).await.expect("the test database connects");
            let lease = db.create_run(&id, "test", "engine tests", LeaseTimes::default()).await.expect("a new run");
            (db, lease)
        });
        let store = db.store(&lease);
        Some(Postgres { store, lease, db, run_id: run_id.to_owned(), schema })
    }

    /// The run's records as the database gives them back, checked.
    pub fn load(&self) -> Vec<Record> {
        let (db, id) = (self.db.clone(), self.run_id.clone());
        blocking(async move { db.load(&id).await }).expect("the records read back from PostgreSQL").records
    }
}

impl TestStore {
    /// A store for the run `run_id`.
    pub fn new(run_id: &str) -> Self {
        TestStore { memory: MemoryStore::new(), postgres: Postgres::new(run_id).map(Arc::new) }
    }

    /// Every record appended so far; when PostgreSQL takes part, checked to be exactly the
    /// records it gives back.
    pub fn records(&self) -> Vec<Record> {
        let records = self.memory.records();
        if let Some(postgres) = &self.postgres {
            // Compared as written: a plan's source locations are not part of a record.
            let written = |records: &[Record]| -> Vec<serde_json::Value> {
                records.iter().map(|r| serde_json::to_value(r).expect("a record encodes")).collect()
            };
            let (back, sent) = (written(&postgres.load()), written(&records));
            assert_eq!(back.len(), sent.len(), "PostgreSQL gives back as many records as the run appended");
            for (back, sent) in back.iter().zip(&sent) {
                assert_eq!(back, sent, "PostgreSQL gives back the records the run appended");
            }
        }
        records
    }

    /// The records as the store gives them back: read from PostgreSQL when it takes part (so
    /// a fold of them checks what the database holds), else from memory.
    pub fn read_back(&self) -> Vec<Record> {
        match &self.postgres {
            Some(postgres) => postgres.load(),
            None => self.memory.records(),
        }
    }
}

impl EventStore for TestStore {
    fn append(&self, records: Vec<Record>) -> Durable {
        let Some(postgres) = &self.postgres else { return self.memory.append(records) };
        let in_memory = self.memory.append(records.clone());
        let in_postgres = postgres.store.append(records);
        Box::pin(async move {
            in_memory.await?;
            // Waited for on a blocking thread: a paused clock does not jump ahead while a
            // real write is in flight (tokio does not advance it while one runs).
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || handle.block_on(in_postgres))
                .await
                .expect("the wait for PostgreSQL does not panic")
        })
    }
}

/// Runs `future` to its end on a thread and runtime of its own, from sync or async code.
pub fn blocking<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the database")
            .block_on(future)
    })
    .join()
    .expect("the database thread does not panic")
}
