//! Storing what succeeded in the task cache: each durable success of a task whose output may be
//! stored becomes an entry under its attempt's key; and looking tasks up there as they become
//! ready. The cache is advisory: a failure to store is logged and the run goes on.

use std::sync::{Arc, Mutex};

use super::Driver;
use crate::Recall;
use crate::cache::{CacheRecall, Entry, Keyer, TaskCache, storable};
use crate::event::{Event, Record};
use crate::store::EventStore;

/// The cache a driver stores outputs in, and the keyer of the plan it last keyed.
pub(super) struct Caching {
    cache: Arc<Mutex<TaskCache>>,
    keyer: Option<Keyer>,
}

impl<S: EventStore> Driver<S> {
    /// Stores the outputs of successful attempts in `cache`, and looks each task up there
    /// before its first attempt is dispatched (when its `cache`, or the run's `--reuse`, says
    /// so).
    pub fn store_outputs_in(mut self, cache: Arc<Mutex<TaskCache>>) -> Self {
        let recall = Arc::new(CacheRecall::new(Arc::clone(&cache), self.workdir.clone()));
        self.caching = Some(Caching { cache, keyer: None });
        self.recall_from(recall)
    }

    /// Looks each task up in `recall` before its first attempt is dispatched (a plan test's
    /// declared cache; a run's task cache goes through [`Driver::store_outputs_in`]).
    pub fn recall_from(mut self, recall: Arc<dyn Recall>) -> Self {
        self.state.recall_from(recall);
        self
    }

    /// The entries the successes among `records` make (empty when nothing is stored).
    pub(super) fn entries_of(&mut self, records: &[Record]) -> Vec<Entry> {
        let Some(caching) = &mut self.caching else { return Vec::new() };
        let mut entries = Vec::new();
        for record in records {
            let Event::TaskSucceeded { task, attempt, output, tokens, duration_ms, .. } = &record.event else {
                continue;
            };
            let Some(i) = self.state.index_of(task) else { continue };
            let (plan, state) = (&self.state.plan, &self.state.tasks[i]);
            // An attempt that heard a person's answer holds a decision, not repeatable work.
            if !storable(plan, i) || !state.answers().is_empty() {
                continue;
            }
            let Some(input) = &state.input else { continue };
            let keyer = match &mut caching.keyer {
                Some(keyer) if Arc::ptr_eq(keyer.plan(), plan) => keyer,
                slot => slot.insert(Keyer::new(Arc::clone(plan), &self.workdir)),
            };
            let parts = keyer.parts(i, input);
            entries.push(Entry {
                key: parts.key().to_string(),
                plan: plan.name.clone(),
                task: task.clone(),
                run: self.run_id.to_string(),
                attempt: *attempt,
                sum: Entry::sum_of(output),
                output: output.to_string(),
                tokens: *tokens,
                duration_ms: *duration_ms,
                stored_at: crate::cache::now(),
                parts: parts.short(),
            });
        }
        entries
    }

    /// Stores entries whose successes are durable.
    pub(super) fn store(&mut self, entries: &[Entry]) {
        let Some(caching) = &self.caching else { return };
        if entries.is_empty() {
            return;
        }
        let stored = match caching.cache.lock() {
            Ok(mut cache) => cache.put(entries),
            Err(poisoned) => poisoned.into_inner().put(entries),
        };
        if let Err(error) = stored {
            tracing::warn!(%error, "cannot store outputs in the task cache");
        }
    }
}
