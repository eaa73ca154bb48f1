//! `engine_run`: the driver's own overhead per task. Plans of four shapes (a chain, a fan-out
//! 1 -> N -> 1, layers of 100 with 2-3 random parents each, and the fan-out written as a map
//! whose middle tasks are the items of one `for_each`, to set beside the fan-out) at 1k, 10k
//! and 100k tasks run on a no-op mock agent through the real driver, once with the in-memory
//! store and once with the JSONL store (a fresh file per iteration). Each configuration prints
//! its time per task and, for JSONL, its fsyncs per task; a child process per 100k run prints
//! its peak memory per task. `skew` compares `eager` and `phased` on a plan whose branches
//! take different times. At 10k tasks each shape also runs on the PostgreSQL store (a schema
//! of its own in `RUNNER_TEST_DATABASE_URL`, default the local server; left out when it does
//! not answer), printed with its events per second and transactions per task, and its time
//! beside JSONL's.
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
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use engine::store::MemoryStore;
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus};
use manifest::plan::Strategy;
use tokio::runtime::Runtime;

mod floor;
mod plans;
mod stores;

use plans::{Configured, Prepared, Shape, answer, load, skew_plan};
use stores::{Pg, Shared, Store, drive, jsonl_store, run_once};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Set to skip the chain on JSONL at 10k and 100k tasks: one fsync a task, which takes minutes
/// on a slow disk (the 1k chain still shows its fsyncs per task).
const NO_SYNCED_CHAIN: &str = "RUNNER_BENCH_NO_SYNCED_CHAIN";
/// Set in a child process that measures the peak memory of one run: `shape/store`.
const MEMORY_PROBE: &str = "RUNNER_BENCH_MEMORY_PROBE";
/// Set to `shape/store/runs` to load one 100k plan and drive it `runs` times, nothing else:
/// a target for `perf record` and `perf stat` that spends its time in the driver.
const PROFILE: &str = "RUNNER_BENCH_PROFILE";

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime")
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
        let output = answer(shape, tasks, &task);
        let result = Command::Succeeded { task, attempt, output, tokens: None, duration_ms: 0 };
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
