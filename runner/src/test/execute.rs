//! Running a scenario in virtual time: a current-thread tokio runtime with its clock paused,
//! so latencies, backoffs and timeouts pass at once and in the same order every run; the
//! records are stamped from that clock and kept in memory.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use engine::clock::Clock;
use engine::driver::Driver;
use engine::script::Scripts;
use engine::store::MemoryStore;
use engine::{Command, Record, RunState, RunStatus, Start, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::scenario::Scenario;

/// The virtual time a scenario's run starts at: 2026-01-01T00:00:00Z.
pub const EPOCH_MS: i64 = 1_767_225_600_000;

/// The seed of retry jitter in every scenario, so backoffs are the same every run.
const JITTER_SEED: u64 = 0x5eed;

/// The most answers and decisions a scenario gives before its run is left paused: a task that
/// asks again after every answer would otherwise never end.
const MAX_ANSWERS: usize = 100;

/// What a scenario's run came to.
pub struct Ran {
    /// The run's final state.
    pub state: RunState,
    /// Every record, in order.
    pub records: Vec<Record>,
    /// How long the run took in virtual time.
    pub makespan: Duration,
}

/// Runs a scenario to its end (or until it waits for an answer the scenario does not give).
pub fn run(scenario: &Scenario) -> anyhow::Result<Ran> {
    // IO too: a `command` verification starts a real program (see `engine::process::RealTime`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(drive(scenario))
}

async fn drive(scenario: &Scenario) -> anyhow::Result<Ran> {
    let store = MemoryStore::new();
    let scripts = Scripts::new(&scenario.plan, &scenario.test.overrides);
    let clock = Clock::virtual_from(EPOCH_MS);
    let started = tokio::time::Instant::now();
    // `check_against` has refused a var the plan does not declare, with its location.
    let given = scenario.test.vars.iter().map(|(name, value)| (name.value.clone(), value.clone()));
    let vars = scenario.plan.run_vars(given)?;
    let start = Start {
        plan: Arc::clone(&scenario.plan),
        vars,
        strategy: scenario.test.strategy,
        source: Some(scenario.source.display().to_string()),
        graph: Some(Arc::clone(&scenario.graph)),
        ..Start::default()
    };
    let mut commands = VecDeque::from([Command::Start(start)]);
    let mut state = RunState::new();
    let mut answers = 0;
    while let Some(command) = commands.pop_front() {
        let driver = Driver::new(scenario.test.name.clone(), store.clone(), &store.records(), scenario.workdir.clone())
            .with_clock(clock)
            .with_jitter_seed(JITTER_SEED);
        state = scripts.install(driver).run(command, CancellationToken::new()).await?;
        // A decision can end the run (a rejected review whose failure is not skipped); then,
        // as `runner reject` says to a person, there is nothing left to answer or continue.
        if state.status.is_final() {
            break;
        }
        if state.status != RunStatus::Paused || !commands.is_empty() || answers >= MAX_ANSWERS {
            continue;
        }
        let replies = replies(scenario, &state);
        answers += replies.len();
        if !replies.is_empty() {
            commands.extend(replies);
            commands.push_back(Command::Continue);
        }
    }
    Ok(Ran { state, records: store.records(), makespan: started.elapsed() })
}

/// The scenario's answers and decisions for every task the paused run waits for.
fn replies(scenario: &Scenario, state: &RunState) -> Vec<Command> {
    let mut commands = Vec::new();
    for (i, task) in state.tasks.iter().enumerate() {
        if task.status != TaskStatus::Paused {
            continue;
        }
        let id = &state.plan.tasks[i].id.value;
        if task.question().is_some() {
            if let Some((_, text)) = scenario.test.answers.iter().find(|(t, _)| &t.value == id) {
                commands.push(Command::Answer { task: id.to_string(), text: text.clone() });
            }
        } else if let Some((_, approved, comment)) = scenario.test.reviews.iter().find(|(t, ..)| &t.value == id) {
            commands.push(Command::Decide { task: id.to_string(), approved: *approved, comment: comment.clone() });
        }
    }
    commands
}
