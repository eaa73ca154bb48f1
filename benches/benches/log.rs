//! `log_load`: reading a run's JSONL log back, every line's checksum and the log's checks
//! included, as `runner status`, `resume` and `serve` do. The log is recorded once by the real
//! driver from a generated plan of 50,000 mock tasks (about 100,000 records); writing it is
//! what `engine_run/jsonl` measures.

use std::sync::Arc;
use std::time::Duration;

use benches::{Format, layered_plan};
use criterion::{Criterion, Throughput};
use engine::driver::Driver;
use engine::store::JsonlStore;
use engine::{Command, Start};
use tokio_util::sync::CancellationToken;

/// Tasks of the run whose log is read.
const TASKS: usize = 50_000;

fn log_load(c: &mut Criterion) {
    let folder = std::env::temp_dir().join(format!("runner-bench-log-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    let path = folder.join("run.jsonl");
    let loaded = manifest::load_str("bench.yaml", "bench", &layered_plan(TASKS, Format::Yaml), &|_| true);
    let plan = Arc::new(loaded.plan.expect("the generated plan is valid"));
    let store = JsonlStore::create(&path).expect("a new log");
    let driver = Driver::new("bench".into(), store, &[], std::env::temp_dir());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    runtime
        .block_on(driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()))
        .expect("the run is recorded");
    let bytes = std::fs::metadata(&path).expect("the log was written").len();
    let records = JsonlStore::load(&path).expect("the log loads").records.len();
    eprintln!("log_load: {records} records, {bytes} bytes");

    let mut group = c.benchmark_group("log_load");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(format!("jsonl/{TASKS}"), |b| {
        b.iter(|| JsonlStore::load(&path).expect("the log loads").records.len());
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&folder);
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    log_load(&mut criterion);
    criterion.final_summary();
}
