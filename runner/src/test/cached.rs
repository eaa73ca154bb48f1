//! The task cache of a plan test: the outputs its `cache` declares, found by task, so that
//! `runner test` decides what a run reuses with the same code as `runner apply`.

use engine::cache::{CacheError, Entry, Found, Key, Lookup, Stored};
use manifest::plan_test::PlanTest;

/// The outputs a scenario says the cache holds, by task id.
pub struct Declared(Vec<(String, String)>);

/// The run id entries of a scenario's cache name as the run that stored them.
const STORED_BY: &str = "declared by the plan test";

impl Declared {
    /// The outputs `test` declares.
    pub fn of(test: &PlanTest) -> Self {
        Declared(test.cached.iter().map(|(task, output)| (task.value.clone(), output.clone())).collect())
    }
}

impl Lookup for Declared {
    fn find(&self, wanted: &[(&str, Key)], run: Option<&str>) -> Result<Vec<Found>, CacheError> {
        Ok(wanted.iter().map(|(task, key)| Ok(self.stored(task, key, run))).collect())
    }

    fn latest(&self, _plan: &str, tasks: &[&str]) -> Vec<Option<Entry>> {
        vec![None; tasks.len()]
    }
}

impl Declared {
    /// The output declared for `task`, as an entry under `key` (none for another run than the
    /// test's).
    fn stored(&self, task: &str, key: &Key, run: Option<&str>) -> Stored {
        if run.is_some_and(|run| run != STORED_BY) {
            return Stored::Nothing;
        }
        let Some((_, output)) = self.0.iter().find(|(name, _)| name == task) else { return Stored::Nothing };
        Stored::Entry(Box::new(Entry {
            key: key.to_string(),
            plan: String::new(),
            task: task.to_owned(),
            run: STORED_BY.to_owned(),
            attempt: 1,
            output: output.clone(),
            tokens: None,
            duration_ms: 0,
            stored_at: engine::cache::now(),
            parts: String::new(),
            sum: Entry::sum_of(output),
        }))
    }
}
