//! Running a scenario in virtual time: a current-thread tokio runtime with its clock paused,
//! so latencies, backoffs and timeouts pass at once and in the same order every run; the
//! records are stamped from that clock and kept in memory, the child runs of sub-plan and
//! `expand` tasks beside them (see `children.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use engine::clock::Clock;
use engine::driver::Driver;
use engine::script::Scripts;
use engine::store::MemoryStore;
use engine::{Command, Record, RunState, RunStatus, Start};
use tokio_util::sync::CancellationToken;

use super::children::{Given, Runs, TestChildren, World};
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
    /// The child runs its sub-plan and `expand` tasks started.
    pub children: Runs,
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
    let world = World { runs: Runs::default(), clock: Clock::virtual_from(EPOCH_MS), seed: JITTER_SEED };
    let started = tokio::time::Instant::now();
    // `check_against` has refused a var the plan does not declare, with its location.
    let given = scenario.test.vars.iter().map(|(name, value)| (name.value.clone(), value.clone()));
    let vars = scenario.plan.run_vars(given)?;
    let run_id = &scenario.test.name;
    let children = Arc::new(TestChildren::new(world.clone(), run_id, vars.clone(), scenario.test.overrides.clone()));
    let reuse = engine::cache::Reuse { all: scenario.test.reuse, run: None };
    // The declared cache is asked before the run and as tasks become ready, as `apply` asks
    // the task cache.
    let declared = Arc::new(super::cached::Declared::of(&scenario.test));
    let recall = Arc::new(engine::cache::CacheRecall::new(Arc::clone(&declared), scenario.workdir.clone()));
    let recalled =
        engine::cache::resolve(&scenario.plan, &scenario.graph, &vars, &scenario.workdir, &*declared, &reuse)
            .recalled(&scenario.plan);
    let start = Start {
        plan: Arc::clone(&scenario.plan),
        vars,
        strategy: scenario.test.strategy,
        source: Some(scenario.source.display().to_string()),
        graph: Some(Arc::clone(&scenario.graph)),
        recalled,
        cache_reuse: reuse,
        ..Start::default()
    };
    let given = Given::of(&scenario.test);
    let mut commands = VecDeque::from([Command::Start(start)]);
    let mut state = RunState::new();
    let mut answers = 0;
    while let Some(command) = commands.pop_front() {
        let driver = Driver::new(run_id.clone(), store.clone(), &store.records(), scenario.workdir.clone())
            .with_clock(world.clock)
            .with_jitter_seed(world.seed)
            .recall_from(recall.clone());
        let children: Arc<dyn engine::runtime::Children> = children.clone();
        state = scripts.install(driver, Some(children)).run(command, CancellationToken::new()).await?;
        // A decision can end the run (a rejected review whose failure is not skipped); then,
        // as `runner reject` says to a person, there is nothing left to answer or continue.
        if state.status.is_final() {
            break;
        }
        if state.status != RunStatus::Paused || !commands.is_empty() || answers >= MAX_ANSWERS {
            continue;
        }
        // The scenario's answers and decisions for every task the paused run waits for, those
        // for its child runs given to them first.
        let replies = world.runs.replies(run_id, &state, &given, world.clock);
        answers += replies.len();
        if !replies.is_empty() {
            commands.extend(replies);
            commands.push_back(Command::Continue);
        }
    }
    Ok(Ran { state, records: store.records(), makespan: started.elapsed(), children: world.runs })
}
