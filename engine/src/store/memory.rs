//! An event store in memory, for tests, benchmarks and embedding.

use std::sync::{Arc, Mutex, PoisonError};

use super::{Durable, EventStore};
use crate::event::Record;

/// Keeps records in memory; appends are durable at once. Each append's records are kept as
/// they come, so a long run never moves the records it holds to grow one vector.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    batches: Arc<Mutex<Vec<Vec<Record>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Every record appended so far.
    pub fn records(&self) -> Vec<Record> {
        self.batches.lock().unwrap_or_else(PoisonError::into_inner).iter().flatten().cloned().collect()
    }
}

impl EventStore for MemoryStore {
    fn append(&self, records: Vec<Record>) -> Durable {
        if !records.is_empty() {
            self.batches.lock().unwrap_or_else(PoisonError::into_inner).push(records);
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
