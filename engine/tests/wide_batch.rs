//! A batch wider than one append (a fan-out dispatches every task at once) is made durable a
//! slice at a time, and still no attempt starts before its dispatch is durable.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use engine::driver::Driver;
use engine::runtime::{AgentRuntime, Attempt, Pending, Registry, Reply};
use engine::store::{Durable, EventStore};
use engine::{Command, Event, Outcome, Record, RunStatus, Start};
use tokio_util::sync::CancellationToken;

/// Wider than the most records one append takes.
const TASKS: usize = 40_000;

/// The dispatches made durable so far, and the widest append.
#[derive(Clone, Default)]
struct Watched {
    durable: Arc<Mutex<HashSet<(String, u32)>>>,
    records: Arc<AtomicUsize>,
    widest: Arc<AtomicUsize>,
}

impl EventStore for Watched {
    fn append(&self, records: Vec<Record>) -> Durable {
        self.widest.fetch_max(records.len(), Ordering::SeqCst);
        self.records.fetch_add(records.len(), Ordering::SeqCst);
        let mut durable = self.durable.lock().expect("no test thread panics holding the set");
        for record in records {
            if let Event::TaskDispatched { task, attempt, .. } = record.event {
                durable.insert((task, attempt));
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Fails an attempt whose dispatch is not durable when it starts.
struct Witness(Watched);

impl AgentRuntime for Witness {
    fn run(&self, attempt: Attempt, _cancel: CancellationToken) -> Pending {
        let durable = self.0.durable.lock().expect("no test thread panics holding the set");
        let reply = match durable.contains(&(attempt.task.clone(), attempt.attempt)) {
            true => Reply::Output { text: "ok".into(), tokens: None },
            false => Reply::failed(format!("{} started before its dispatch was durable", attempt.task)),
        };
        Box::pin(std::future::ready(reply))
    }
}

/// `TASKS` independent tasks on agent `w`, defined as `agent`.
fn wide(agent: &str) -> Arc<manifest::Plan> {
    let mut yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: wide}}\nspec:\n  agent_definitions: {{w: {agent}}}\n  workflow:\n"
    );
    for i in 0..TASKS {
        yaml.push_str(&format!("    - {{id: t{i}, agent: w, input: x}}\n"));
    }
    Arc::new(manifest::load_str("wide.yaml", "wide", &yaml, &|_| true).plan.expect("the plan loads"))
}

#[tokio::test]
async fn a_wide_batch_is_appended_in_slices_and_every_attempt_starts_after_its_dispatch_is_durable() {
    let plan = wide("{runtime: mock}");
    let store = Watched::default();
    let witness = store.clone();
    let runtimes =
        Registry::builtin().with("mock", move |_| Arc::new(Witness(witness.clone())) as Arc<dyn AgentRuntime>);
    let driver = Driver::new("wide".into(), store.clone(), &[], std::env::temp_dir()).with_runtimes(runtimes);
    let state =
        driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("the run is driven");
    let failed: Vec<_> = state.tasks.iter().filter_map(|t| t.error()).take(3).collect();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{failed:?}");
    assert_eq!(store.durable.lock().expect("the run is over").len(), TASKS);
    // RunCreated, a dispatch and a success a task, RunCompleted.
    assert_eq!(store.records.load(Ordering::SeqCst), 2 * TASKS + 2);
    let widest = store.widest.load(Ordering::SeqCst);
    assert!(widest <= 16_384, "one append took {widest} records");
}

#[tokio::test(start_paused = true)]
async fn a_layer_wider_than_a_batch_is_dispatched_in_batches_that_all_start_at_once() {
    let plan = wide("{runtime: mock, latency: 2s}");
    let store = Watched::default();
    let driver = Driver::new("wide".into(), store.clone(), &[], std::env::temp_dir());
    let started = tokio::time::Instant::now();
    let state =
        driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    // Every batch of dispatches started before the first reply: one latency in all, not one a batch.
    assert_eq!(started.elapsed(), std::time::Duration::from_secs(2));
    assert_eq!(store.durable.lock().expect("the run is over").len(), TASKS);
    let widest = store.widest.load(Ordering::SeqCst);
    assert!(widest <= 16_384, "one append took {widest} records");
}
