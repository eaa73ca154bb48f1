//! `cache`: what the task cache costs before a run. `engine::cache::resolve` (what `runner
//! apply --reuse` does before it starts: render each task's input, key it, look it up) on
//! plans of 1k, 10k and 100k mock tasks, each with an input of its own: independent tasks
//! against an empty cache (`miss`: nothing to reuse, every task is looked up and runs; in a chain
//! only the first would be), and a chain against a cache that holds every task's output (`hit`:
//! the whole plan is reused, each input rendered from the output before it), beside loading and
//! validating the chain (`validate`); and `recall`, what a run with nothing stored adds to each
//! dispatch: the scheduler asking the cache for the task's key once its input is rendered. The table after the measurements gives each per task and as a ratio to
//! `validate`.
//!
//! Targets: a lookup with nothing to reuse under 2 us a task; resolving a fully reused plan well
//! within the time of validating it (the whole command, `runner apply --reuse`, is measured by
//! `benches/commands.py`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use engine::Recall;
use engine::cache::{CacheRecall, Entry, FileCache, Keyer, Reuse, TaskCache, resolve};
use manifest::{Plan, TaskGraph};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// `tasks` mock tasks, task `i` with input `x<i>`, each after the one before when `linked`.
fn plan(tasks: usize, linked: bool) -> String {
    let mut text = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: chain}\nspec:\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n",
    );
    for i in 0..tasks {
        let after = if i == 0 || !linked { String::new() } else { format!(", depends_on: [t{}]", i - 1) };
        text.push_str(&format!("    - {{id: t{i}, agent: noop, input: x{i}{after}}}\n"));
    }
    text
}

fn load(text: &str) -> (Arc<Plan>, Arc<TaskGraph>) {
    let loaded = manifest::load_str("chain.yaml", "chain", text, &|_| true);
    match (loaded.plan, loaded.graph) {
        (Some(plan), Some(graph)) => (Arc::new(plan), Arc::new(graph)),
        _ => panic!("the generated plan is valid"),
    }
}

/// A cache in a new folder under the system's temporary one.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runner-bench-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Stores an output for every task of `plan`, keyed as a run would key it.
fn fill(dir: &Path, plan: &Arc<Plan>) {
    let mut cache = FileCache::open(dir).expect("the cache opens");
    let mut keyer = Keyer::new(Arc::clone(plan), Path::new("."));
    let entries: Vec<Entry> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let input = task.input.as_ref().map_or("", |input| input.value.as_str());
            let parts = keyer.parts(i, input);
            Entry {
                key: parts.key().to_string(),
                plan: plan.name.clone(),
                task: task.id.value.to_string(),
                run: "bench".to_owned(),
                attempt: 1,
                output: "ok".to_owned(),
                tokens: None,
                duration_ms: 1,
                stored_at: engine::cache::now(),
                parts: parts.short(),
                sum: Entry::sum_of("ok"),
            }
        })
        .collect();
    cache.put(&entries).expect("the entries are stored");
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let mut rows = Vec::new();
    for tasks in SIZES {
        let text = plan(tasks, true);
        let (chain, graph) = load(&text);
        let (flat, flat_graph) = load(&plan(tasks, false));
        let vars = chain.run_vars(std::iter::empty()).expect("the plan declares no vars");
        let (miss_dir, hit_dir) = (folder(&format!("miss-{tasks}")), folder(&format!("hit-{tasks}")));
        fill(&hit_dir, &chain);
        let miss = Arc::new(TaskCache::Files(Box::new(FileCache::open(&miss_dir).expect("an empty cache opens"))));
        let hit = TaskCache::Files(Box::new(FileCache::open(&hit_dir).expect("the filled cache opens")));
        let reuse = Reuse { all: true, run: None };
        let check = resolve(&chain, &graph, &vars, Path::new("."), &hit, &reuse);
        assert_eq!(check.reused(), tasks, "every task is reused from the filled cache");
        let check = resolve(&flat, &flat_graph, &vars, Path::new("."), &*miss, &reuse);
        assert_eq!(check.verdicts.len(), tasks, "every independent task is looked up");
        let recall = CacheRecall::new(Arc::clone(&miss), PathBuf::from("."));
        let inputs: Vec<String> = (0..tasks).map(|i| format!("x{i}")).collect();
        let recall_all = || (0..tasks).filter(|&i| recall.recall(&flat, i, &inputs[i], &reuse).is_some()).count();
        assert_eq!(recall_all(), 0, "nothing is stored");
        let mut group = criterion.benchmark_group("cache");
        group.throughput(Throughput::Elements(tasks as u64));
        group.sample_size(10).measurement_time(Duration::from_secs(if tasks >= 100_000 { 20 } else { 5 }));
        let once = |run: &dyn Fn()| {
            let started = std::time::Instant::now();
            run();
            started.elapsed()
        };
        let times = [
            once(&|| drop(load(&text))),
            once(&|| drop(resolve(&flat, &flat_graph, &vars, Path::new("."), &*miss, &reuse))),
            once(&|| drop(resolve(&chain, &graph, &vars, Path::new("."), &hit, &reuse))),
            once(&|| {
                recall_all();
            }),
        ];
        group.bench_function(BenchmarkId::new("validate", tasks), |b| b.iter(|| load(&text)));
        group.bench_function(BenchmarkId::new("miss", tasks), |b| {
            b.iter(|| resolve(&flat, &flat_graph, &vars, Path::new("."), &*miss, &reuse))
        });
        group.bench_function(BenchmarkId::new("recall", tasks), |b| b.iter(recall_all));
        group.bench_function(BenchmarkId::new("hit", tasks), |b| {
            b.iter(|| resolve(&chain, &graph, &vars, Path::new("."), &hit, &reuse))
        });
        group.finish();
        rows.push((tasks, times));
        let _ = std::fs::remove_dir_all(&miss_dir);
        let _ = std::fs::remove_dir_all(&hit_dir);
    }
    println!("\none run each, us a task:");
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "tasks", "validate", "miss", "hit", "recall", "miss/valid", "hit/valid"
    );
    for (tasks, [validate, miss, hit, recall]) in rows {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / tasks as f64;
        println!(
            "{tasks:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>12.2} {:>12.2}",
            per(validate),
            per(miss),
            per(hit),
            per(recall),
            miss.as_secs_f64() / validate.as_secs_f64(),
            hit.as_secs_f64() / validate.as_secs_f64()
        );
    }
    criterion.final_summary();
}
