//! Looking a task up in the cache as it is about to be dispatched, so that a task below one that
//! ran again is still reused when that task's output came out the same (its input, and so its
//! key, did not change): what `resolve.rs` cannot know before the run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use manifest::Plan;

use super::resolve::usable;
use super::{Keyer, Lookup, Stored, Verdict, never_reused};
use crate::{Recall, Recalled, Reuse};

/// A [`Recall`] over a [`Lookup`]: the task cache, or the outputs a plan test declares.
pub struct CacheRecall<L: ?Sized> {
    lookup: Arc<L>,
    /// Where attached files are read.
    workdir: PathBuf,
    /// The keyer of the plan last asked about.
    keyer: Mutex<Option<Keyer>>,
}

impl<L: Lookup + ?Sized> CacheRecall<L> {
    /// Looks tasks up in `lookup`, reading attached files under `workdir`.
    pub fn new(lookup: Arc<L>, workdir: PathBuf) -> Self {
        CacheRecall { lookup, workdir, keyer: Mutex::new(None) }
    }
}

impl<L: Lookup + Send + Sync + ?Sized> Recall for CacheRecall<L> {
    fn recall(&self, plan: &Arc<Plan>, i: usize, input: &str, reuse: &Reuse) -> Option<Recalled> {
        if never_reused(plan, i, reuse).is_some() {
            return None;
        }
        let key = {
            let mut keyer = self.keyer.lock().unwrap_or_else(PoisonError::into_inner);
            let keyer = match &mut *keyer {
                Some(keyer) if Arc::ptr_eq(keyer.plan(), plan) => keyer,
                slot => slot.insert(Keyer::new(Arc::clone(plan), &self.workdir)),
            };
            keyer.parts(i, input).key()
        };
        let task = plan.tasks[i].id.value.as_str();
        let found = match self.lookup.find(&[(task, key)], reuse.run.as_deref()) {
            Ok(mut found) => found.pop()?,
            Err(error) => {
                tracing::warn!(%error, task, "the task cache cannot be read; the task runs");
                return None;
            }
        };
        match found {
            Ok(Stored::Entry(entry)) => match usable(plan, i, *entry, super::now()) {
                Verdict::Reused(entry) => Some(entry.recalled(task)),
                Verdict::Runs(_) => None,
            },
            Ok(Stored::OtherRuns | Stored::Nothing) => None,
            Err(error) => {
                tracing::warn!(%error, task, "a damaged cache entry is ignored; the task runs");
                None
            }
        }
    }
}
