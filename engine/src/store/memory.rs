//! An event store in memory, for tests, benchmarks and embedding.

use std::sync::{Arc, Mutex, PoisonError};

use super::{Durable, EventStore};
use crate::event::Record;

/// Keeps records in a vector; appends are durable at once.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    records: Arc<Mutex<Vec<Record>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Every record appended so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl EventStore for MemoryStore {
    fn append(&self, records: Vec<Record>) -> Durable {
        self.records.lock().unwrap_or_else(PoisonError::into_inner).extend(records);
        Box::pin(std::future::ready(Ok(())))
    }
}
