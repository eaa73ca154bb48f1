//! `engine_run`: the driver's own overhead per task. Plans of three shapes (a chain, a fan-out
//! 1 -> N -> 1, and layers of 100 with 2-3 random parents each) at 1k, 10k and 100k tasks run
//! on a no-op mock agent through the real driver, once with the in-memory store and once with
//! the JSONL store (a fresh file per iteration). Each configuration prints its time per task
//! and, for JSONL, its fsyncs per task; a child process per 100k run prints its peak memory per
//! task. `skew` compares `eager` and `phased` on a plan whose branches take different times.
//! At 10k tasks each shape also runs on the PostgreSQL store (a schema of its own in
//! `RUNNER_TEST_DATABASE_URL`, default the local server; left out when it does not answer),
//! printed with its events per second and transactions per task, and its time beside JSONL's.
//!
//! `RUNNER_BENCH_QUICK=1` skips the long single runs of the 100k plans;
//! `RUNNER_BENCH_NO_SYNCED_CHAIN=1` skips only the chain on JSONL at 10k and 100k;
//! `RUNNER_BENCH_PROFILE=shape/store/runs` (say `layered/memory/8`) only drives one 100k plan
//! that many times and prints its time and fsyncs per task, for `perf record` and `perf stat`.
//!
//! The floor: a minimal hand-written tokio scheduler (in-degree counters, one spawned no-op
//! task per plan task, results through a channel) runs the same shapes and sizes in the same
//! run, and the table shows runner's time per task beside it with their ratio. Each JSONL
//! configuration also shows the disk's floor, measured right after each run: its log's bytes
//! written to a new file in as many appends as the run made fsyncs, each synced, with nothing
//! else (a layered run waits for one fsync a layer, so its time per task cannot be below a
//! hundredth of one fsync).
//!
//! Targets: in memory under 1 us a task at 100k on every shape (within 2x of the floor); JSONL
//! fan-out and layered under 3 us a task at 100k, the chain at most one fsync a task; peak
//! memory under 2 KiB a task.

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::XorShift;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use engine::driver::Driver;
use engine::store::postgres::{Database, LeaseTimes, PgStore};
use engine::store::{EventStore, JsonlStore, MemoryStore};
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus, Start};
use manifest::plan::Strategy;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// The shapes of generated plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Each task depends on the one before.
    Chain,
    /// One root, N - 2 tasks depending on it, one sink depending on all of them.
    FanOut,
    /// Layers of [`LAYER`] tasks, each with 2 or 3 parents from the layer before.
    Layered,
}

impl Shape {
    const ALL: [Shape; 3] = [Shape::Chain, Shape::FanOut, Shape::Layered];

    fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::FanOut => "fan_out",
            Shape::Layered => "layered",
        }
    }

    fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }
}

const LAYER: usize = 100;
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Set to skip the chain on JSONL at 10k and 100k tasks: one fsync a task, which takes minutes
/// on a slow disk (the 1k chain still shows its fsyncs per task).
const NO_SYNCED_CHAIN: &str = "RUNNER_BENCH_NO_SYNCED_CHAIN";
/// Set in a child process that measures the peak memory of one run: `shape/store`.
const MEMORY_PROBE: &str = "RUNNER_BENCH_MEMORY_PROBE";
/// Set to `shape/store/runs` to load one 100k plan and drive it `runs` times, nothing else:
/// a target for `perf record` and `perf stat` that spends its time in the driver.
const PROFILE: &str = "RUNNER_BENCH_PROFILE";

/// The dependencies of each task of a shape.
fn parents(shape: Shape, tasks: usize) -> Vec<Vec<usize>> {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    (0..tasks)
        .map(|i| match shape {
            Shape::Chain => i.checked_sub(1).into_iter().collect(),
            Shape::FanOut if i == 0 => Vec::new(),
            Shape::FanOut if i + 1 == tasks => (1..tasks - 1).collect(),
            Shape::FanOut => vec![0],
            Shape::Layered if i < LAYER => Vec::new(),
            Shape::Layered => {
                let previous = (i / LAYER - 1) * LAYER;
                let wanted = 2 + rng.below(2);
                let mut chosen = Vec::with_capacity(wanted);
                while chosen.len() < wanted {
                    let parent = previous + rng.below(LAYER);
                    if !chosen.contains(&parent) {
                        chosen.push(parent);
                    }
                }
                chosen
            }
        })
        .collect()
}

/// An enveloped plan of `tasks` tasks of `shape` on a mock agent that answers `ok` at once.
fn plan_text(shape: Shape, tasks: usize) -> String {
    let mut out = String::with_capacity(tasks * 40);
    out.push_str("apiVersion: runner/v1\nkind: Plan\nmetadata: {name: bench}\nspec:\n");
    out.push_str("  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n");
    // Writing into a String cannot fail.
    for (i, deps) in parents(shape, tasks).iter().enumerate() {
        let _ = write!(out, "    - {{id: t{i}, agent: noop, input: x");
        if !deps.is_empty() {
            out.push_str(", depends_on: [");
            for (n, d) in deps.iter().enumerate() {
                let _ = write!(out, "{}t{d}", if n == 0 { "" } else { ", " });
            }
            out.push(']');
        }
        out.push_str("}\n");
    }
    out
}

/// One shape and size, its plan loaded on first use (the floor needs none).
struct Configured {
    shape: Shape,
    tasks: usize,
    prepared: OnceCell<Prepared>,
}

impl Configured {
    /// The plan, loaded on first use.
    fn prepared(&self) -> &Prepared {
        self.prepared.get_or_init(|| load(self.shape, self.tasks))
    }
}

/// A validated plan and the graph the loader built, as `runner apply` hands them to a run.
struct Prepared {
    plan: Arc<manifest::Plan>,
    graph: Arc<manifest::TaskGraph>,
}

impl Prepared {
    fn of(loaded: manifest::Loaded) -> Self {
        assert!(loaded.is_valid(), "{:#?}", loaded.errors().take(3).collect::<Vec<_>>());
        let plan = Arc::new(loaded.plan.expect("a valid plan"));
        let graph = Arc::new(loaded.graph.expect("a valid plan has a graph"));
        Prepared { plan, graph }
    }

    fn start(&self, strategy: Option<Strategy>) -> Command {
        Command::Start(Start { strategy, graph: Some(Arc::clone(&self.graph)), ..Start::plan(Arc::clone(&self.plan)) })
    }
}

fn load(shape: Shape, tasks: usize) -> Prepared {
    Prepared::of(manifest::load_str("bench.yaml", "bench", &plan_text(shape, tasks), &|_| true))
}

/// A skewed plan: `a` takes 100 ms; `b0`..`b9` is a chain of 10 ms tasks; `done` needs both.
fn skew_plan() -> Prepared {
    let mut text = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: skew}\nspec:\n  agent_definitions:\n    \
         slow: {runtime: mock, latency: 100ms, default: ok}\n    \
         quick: {runtime: mock, latency: 10ms, default: ok}\n    \
         noop: {runtime: mock, default: ok}\n  workflow:\n    - {id: a, agent: slow, input: x}\n",
    );
    for i in 0..10 {
        let deps = if i == 0 { String::new() } else { format!(", depends_on: [b{}]", i - 1) };
        let _ = writeln!(text, "    - {{id: b{i}, agent: quick, input: x{deps}}}");
    }
    text.push_str("    - {id: done, agent: noop, input: x, depends_on: [a, b9]}\n");
    Prepared::of(manifest::load_str("skew.yaml", "skew", &text, &|_| true))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime")
}

/// Drives one run to its end and checks that it succeeded.
async fn drive<S: EventStore>(plan: &Prepared, strategy: Option<Strategy>, store: S) -> RunState {
    let driver = Driver::new("bench".into(), store, &[], std::env::temp_dir());
    let start = plan.start(strategy);
    let state = driver.run(start, CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    state
}

/// A fresh folder for this process's logs.
fn log_folder() -> PathBuf {
    let folder = std::env::temp_dir().join(format!("runner-bench-engine-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    folder
}

/// A timing split without the driver: `process(Start)` (plan hash, plan copies, graph) and the
/// whole run driven synchronously through the state machine, each result fed back at once.
fn print_split(shape: Shape, tasks: usize, plan: &Prepared) {
    let started = Instant::now();
    let mut state = RunState::new();
    let mut pending = VecDeque::new();
    let dispatched = |events: Vec<Event>, pending: &mut VecDeque<(String, u32)>| {
        for event in events {
            if let Event::TaskDispatched { task, attempt, .. } = event {
                pending.push_back((task, attempt));
            }
        }
    };
    let events = state.process(plan.start(None)).expect("the run starts");
    let start = started.elapsed();
    dispatched(events, &mut pending);
    let machine = Instant::now();
    while let Some((task, attempt)) = pending.pop_front() {
        let result = Command::Succeeded { task, attempt, output: "ok".into(), tokens: None, duration_ms: 0 };
        dispatched(state.process(result).expect("a result is taken"), &mut pending);
    }
    let machine = machine.elapsed();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let per_task = |d: Duration| d.as_secs_f64() * 1e6 / tasks as f64;
    eprintln!(
        "split/{}/{tasks}: process(Start) {:.1} ms ({:.2} us/task), state machine after it {:.2} us/task",
        shape.name(),
        start.as_secs_f64() * 1e3,
        per_task(start),
        per_task(machine)
    );
}

/// The floor: runs `parents` with a hand-written scheduler on tokio, each task a spawned no-op
/// that reports its index through a channel; a task is spawned once its last parent reported.
/// The scheduler runs on a worker thread of its own, so its spawns go to that worker's queue.
async fn floor(parents: Vec<Vec<usize>>) {
    let mut children = vec![Vec::new(); parents.len()];
    let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
    for (i, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(i);
        }
    }
    let (sender, mut done) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let spawn = |i: usize| {
        let sender = sender.clone();
        tokio::spawn(async move {
            let _ = sender.send(i);
        });
    };
    (0..parents.len()).filter(|&i| waiting[i] == 0).for_each(spawn);
    for _ in 0..parents.len() {
        let i = done.recv().await.expect("the scheduler holds a sender until every task reported");
        for &child in &children[i] {
            waiting[child] -= 1;
            if waiting[child] == 0 {
                spawn(child);
            }
        }
    }
}

/// A store the bench keeps a handle on, to read its fsync or transaction count after the run,
/// counting the records appended.
struct Shared<S>(Arc<S>, Arc<std::sync::atomic::AtomicU64>);

impl<S> Shared<S> {
    fn new(store: Arc<S>) -> Self {
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
struct Pg {
    db: Database,
    _schema: testkit::pg::TestDatabase,
}

impl Pg {
    /// The database, or `None` (with a message) when the server does not answer.
    fn connect(rt: &Runtime) -> Option<Pg> {
        let schema = testkit::pg::TestDatabase::new("engine bench, postgres store")?;
        let db = rt.block_on(Database::connect(&schema.url)).expect("the test database connects");
        Some(Pg { db, _schema: schema })
    }
}

/// A fresh JSONL store under `folder` (the file `n` is removed first).
fn jsonl_store(folder: &Path, n: u64) -> (Arc<JsonlStore>, PathBuf) {
    let path = folder.join(format!("run-{n}.jsonl"));
    let _ = std::fs::remove_file(&path);
    (Arc::new(JsonlStore::create(&path).expect("a new log")), path)
}

/// Which store a configuration runs with, or the floor (no runner at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Floor,
    Memory,
    Jsonl,
    Postgres,
}

impl Store {
    fn name(self) -> &'static str {
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
struct Once {
    time: Duration,
    syncs: u64,
    records: u64,
    disk: Duration,
}

/// Runs one configuration once.
fn run_once(rt: &Runtime, plan: &Configured, store: Store, folder: &Path, n: u64, pg: Option<&Pg>) -> Once {
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

/// The disk's own floor under a JSONL run: the time to write `bytes` to a new file in `syncs`
/// equal appends, each followed by `fdatasync`, with no runner at all.
fn disk_floor(folder: &Path, bytes: u64, syncs: u64) -> Duration {
    use std::io::Write as _;
    let path = folder.join("disk-floor.jsonl");
    let mut file = std::fs::File::create(&path).expect("a new file beside the logs");
    let append = vec![b'x'; (bytes / syncs.max(1)) as usize];
    let started = Instant::now();
    for _ in 0..syncs {
        file.write_all(&append).expect("the disk takes the append");
        file.sync_data().expect("the disk syncs");
    }
    let spent = started.elapsed();
    let _ = std::fs::remove_file(path);
    spent
}

/// Runs below this many seconds go through Criterion; longer ones (the 100k plans, and the
/// chain on JSONL, which waits for one fsync a task) are timed over a few plain runs, so the
/// whole bench stays within minutes.
fn plain_runs(tasks: usize, shape: Shape, store: Store) -> Option<u32> {
    match (tasks, shape, store) {
        (100_000, _, Store::Memory | Store::Floor) => Some(2),
        (100_000, _, Store::Jsonl) | (10_000, Shape::Chain, Store::Jsonl) => Some(1),
        (_, _, Store::Postgres) => Some(2),
        _ => None,
    }
}

fn engine_run(c: &mut Criterion) {
    let rt = runtime();
    let folder = log_folder();
    let quick = std::env::var_os("RUNNER_BENCH_QUICK").is_some();
    let no_synced_chain = std::env::var_os(NO_SYNCED_CHAIN).is_some();
    let pg = Pg::connect(&rt);
    let mut summary = Vec::new();
    let mut group = c.benchmark_group("engine_run");
    group.sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_millis(300));
    group.sample_size(10).measurement_time(Duration::from_secs(2));
    for tasks in SIZES {
        group.throughput(Throughput::Elements(tasks as u64));
        for shape in Shape::ALL {
            // Loaded on first use, so a filtered-out configuration costs nothing.
            let plan = Configured { shape, tasks, prepared: OnceCell::new() };
            let mut split_printed = false;
            let mut floor_per_task = None;
            let mut jsonl_per_task = None;
            for store in [Store::Floor, Store::Memory, Store::Jsonl, Store::Postgres] {
                if store == Store::Postgres && (tasks != 10_000 || pg.is_none()) {
                    continue;
                }
                let name = format!("{}/{}", store.name(), shape.name());
                let (mut runs, mut spent, mut syncs, mut records, mut disk) =
                    (0u64, Duration::ZERO, 0u64, 0u64, Duration::ZERO);
                let mut once = || {
                    if !split_printed && store != Store::Floor {
                        split_printed = true;
                        print_split(shape, tasks, plan.prepared());
                    }
                    let once = run_once(&rt, &plan, store, &folder, runs, pg.as_ref());
                    runs += 1;
                    spent += once.time;
                    syncs += once.syncs;
                    records += once.records;
                    disk += once.disk;
                    once.time
                };
                match plain_runs(tasks, shape, store) {
                    Some(_) if quick && tasks == 100_000 => continue,
                    Some(_) if shape == Shape::Chain && store == Store::Jsonl && no_synced_chain => continue,
                    Some(count) => {
                        for _ in 0..count {
                            once();
                        }
                    }
                    None => {
                        group.bench_function(BenchmarkId::new(&name, tasks), |b| {
                            b.iter_custom(|iters| (0..iters).map(|_| once()).sum());
                        });
                    }
                }
                if runs == 0 {
                    continue;
                }
                let per_task = spent.as_secs_f64() * 1e6 / (runs * tasks as u64) as f64;
                let syncs_per_task = syncs as f64 / (runs * tasks as u64) as f64;
                let fsyncs = if matches!(store, Store::Jsonl | Store::Postgres) {
                    format!("{syncs_per_task:.3}")
                } else {
                    "-".into()
                };
                let (floor, ratio) = match floor_per_task {
                    None if store == Store::Floor => {
                        floor_per_task = Some(per_task);
                        ("-".to_owned(), "-".to_owned())
                    }
                    Some(floor) => (format!("{floor:.2}"), format!("{:.1}x", per_task / floor)),
                    None => ("-".to_owned(), "-".to_owned()),
                };
                let events_per_second = records as f64 / spent.as_secs_f64();
                let disk = if store == Store::Jsonl {
                    format!("{:.2}", disk.as_secs_f64() * 1e6 / (runs * tasks as u64) as f64)
                } else {
                    "-".into()
                };
                let versus_jsonl = match (store, jsonl_per_task) {
                    (Store::Jsonl, _) => {
                        jsonl_per_task = Some(per_task);
                        String::new()
                    }
                    (Store::Postgres, Some(jsonl)) => format!(", {:.1}x JSONL's time per task", per_task / jsonl),
                    _ => String::new(),
                };
                eprintln!(
                    "engine_run/{name}/{tasks}: {per_task:.2} us per task over {runs} runs (floor {floor}, {ratio}), \
                     {fsyncs} fsyncs (postgres: transactions) per task, disk floor {disk} us per task, \
                     {events_per_second:.0} events/s{versus_jsonl}"
                );
                summary.push(format!(
                    "| {name} | {tasks} | {runs} | {per_task:.2} | {floor} | {ratio} | {fsyncs} | {disk} |"
                ));
            }
        }
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&folder);
    eprintln!(
        "\n| store/shape | tasks | runs | us/task | floor us/task | x floor | fsyncs (postgres: transactions)/task | disk floor us/task |\n|---|---|---|---|---|---|---|---|"
    );
    for line in summary {
        eprintln!("{line}");
    }
    if !quick {
        peak_memory();
    }
}

/// Runs each 100k plan once in a child process per store and prints its peak memory per task.
fn peak_memory() {
    let Ok(exe) = std::env::current_exe() else { return };
    eprintln!("\n| shape | store | peak KiB/task (VmHWM - VmRSS before, 100k tasks) |\n|---|---|---|");
    for shape in Shape::ALL {
        for store in ["memory", "jsonl"] {
            if shape == Shape::Chain && store == "jsonl" {
                // One fsync a task: the same memory as in memory, a minute longer.
                continue;
            }
            let output = std::process::Command::new(&exe)
                .env(MEMORY_PROBE, format!("{}/{store}", shape.name()))
                .stderr(std::process::Stdio::inherit())
                .output();
            match output {
                Ok(output) => {
                    let line = String::from_utf8_lossy(&output.stdout);
                    eprintln!("| {} | {store} | {} |", shape.name(), line.trim());
                }
                Err(error) => eprintln!("| {} | {store} | probe failed: {error} |", shape.name()),
            }
        }
    }
}

/// A `/proc/self/status` figure in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// In the child: loads the plan, then runs it once and prints the peak growth per task.
fn probe(spec: &str) {
    const TASKS: usize = 100_000;
    let (shape, store) = spec.split_once('/').unwrap_or((spec, "memory"));
    let Some(shape) = Shape::parse(shape) else { return };
    let rt = runtime();
    let plan = load(shape, TASKS);
    let before = status_kib("VmRSS:").unwrap_or(0);
    // Resets VmHWM to the current RSS, so the plan's loading does not count.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let folder = log_folder();
    match store {
        "jsonl" => {
            let (store, _) = jsonl_store(&folder, 0);
            drop(rt.block_on(drive(&plan, None, Shared::new(store))));
        }
        _ => drop(rt.block_on(drive(&plan, None, MemoryStore::new()))),
    }
    let peak = status_kib("VmHWM:").unwrap_or(0);
    let _ = std::fs::remove_dir_all(&folder);
    println!("{:.2}", peak.saturating_sub(before) as f64 / TASKS as f64);
}

fn skew(c: &mut Criterion) {
    let rt = runtime();
    let plan = skew_plan();
    let mut group = c.benchmark_group("skew");
    group.sampling_mode(SamplingMode::Flat).sample_size(10).warm_up_time(Duration::from_millis(300));
    for strategy in [Strategy::Eager, Strategy::Phased] {
        let mut runs = 0u32;
        let mut spent = Duration::ZERO;
        group.bench_function(strategy.as_str(), |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    drop(rt.block_on(drive(&plan, Some(strategy), MemoryStore::new())));
                }
                let total = started.elapsed();
                runs += iters as u32;
                spent += total;
                total
            });
        });
        if runs == 0 {
            continue;
        }
        eprintln!(
            "skew/{}: {:.1} ms per run (critical path 100 ms)",
            strategy.as_str(),
            (spent / runs).as_secs_f64() * 1e3
        );
    }
    group.finish();
}

/// Loads one 100k plan, then drives it `runs` times (see [`PROFILE`]).
fn profile(spec: &str) {
    let mut parts = spec.split('/');
    let (Some(shape), store, runs) = (parts.next().and_then(Shape::parse), parts.next(), parts.next()) else { return };
    let runs: u64 = runs.and_then(|r| r.parse().ok()).unwrap_or(5);
    let store = if store == Some("jsonl") { Store::Jsonl } else { Store::Memory };
    let (rt, folder) = (runtime(), log_folder());
    let plan = Configured { shape, tasks: 100_000, prepared: OnceCell::new() };
    plan.prepared();
    let (mut spent, mut syncs, mut disk) = (Duration::ZERO, 0, Duration::ZERO);
    for n in 0..runs {
        let once = run_once(&rt, &plan, store, &folder, n, None);
        spent += once.time;
        syncs += once.syncs;
        disk += once.disk;
    }
    let tasks = (runs * 100_000) as f64;
    let disk = match store {
        Store::Jsonl => format!(", disk floor {:.2} us per task", disk.as_secs_f64() * 1e6 / tasks),
        _ => String::new(),
    };
    let _ = std::fs::remove_dir_all(&folder);
    eprintln!(
        "{spec}: {:.2} us per task, {:.4} fsyncs per task{disk}",
        spent.as_secs_f64() * 1e6 / tasks,
        syncs as f64 / tasks
    );
}

fn main() {
    if let Ok(spec) = std::env::var(PROFILE) {
        profile(&spec);
        return;
    }
    if let Ok(spec) = std::env::var(MEMORY_PROBE) {
        probe(&spec);
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    engine_run(&mut criterion);
    skew(&mut criterion);
    criterion.final_summary();
}
