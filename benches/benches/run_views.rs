//! `run_views`: what one large run in PostgreSQL costs to look at, as a user meets it: a whole
//! `runner status RUN --store URL` process, and one `GET /api/runs/{id}/tasks/{task}` of a
//! running `runner serve --store URL`, for runs of 1,000, 10,000 and 100,000 tasks. Both read
//! that run's records (by its key) and fold them, so they grow with the run, not with the
//! database.
//!
//! It runs the release binary (`cargo build --release -p runner` first, or point `RUNNER_BIN`
//! at another build) against `RUNNER_TEST_DATABASE_URL` (default: the local `test` database).

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::fmt::Write as _;
use std::process::Command;

use benches::{Server, runner};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use testkit::pg::TestDatabase;

/// A plan of `tasks` mock tasks in ten chains, each task after the one ten before it.
fn chains(tasks: usize) -> String {
    let mut plan = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: chains}\nspec:\n  agent_definitions:\n    \
         worker: {runtime: mock}\n  workflow:\n",
    );
    for i in 0..tasks {
        let after = if i >= 10 { format!(", depends_on: [t{}]", i - 10) } else { String::new() };
        // Writing into a String cannot fail.
        let _ = writeln!(plan, "    - {{id: t{i}, agent: worker, input: step {i}{after}}}");
    }
    plan
}

/// A schema holding one finished run `r` of `tasks` tasks.
fn seeded(tasks: usize) -> TestDatabase {
    let db = TestDatabase::new("bench_run_views").expect("the bench needs PostgreSQL (RUNNER_TEST_DATABASE_URL)");
    let dir = std::env::temp_dir().join(format!("runner-bench-views-{}-{tasks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("chains.yaml");
    std::fs::write(&path, chains(tasks)).expect("the plan is written");
    let applied = Command::new(runner())
        .arg("apply")
        .arg(&path)
        .args(["--yes", "--run-id", "r", "--store", &db.url])
        .env("RUNNER_HOME", dir.join("home"))
        .output()
        .expect("runner runs");
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    db
}

/// `runner status r --store URL`, whole; the number of lines it printed.
fn status(url: &str) -> usize {
    let output = Command::new(runner()).args(["status", "r", "--store", url]).output().expect("runner runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout.iter().filter(|&&b| b == b'\n').count()
}

fn run_views(c: &mut Criterion) {
    let mut group = c.benchmark_group("run_views");
    group.sample_size(10);
    for tasks in [1_000, 10_000, 100_000] {
        let db = seeded(tasks);
        assert!(status(&db.url) > tasks, "a line a task, and the run's lines above them");
        group.bench_with_input(BenchmarkId::new("runner_status", tasks), &db.url, |b, url| b.iter(|| status(url)));
        let server = Server::start(&db.url);
        let page = format!("/api/runs/r/tasks/t{}", tasks / 2);
        group
            .bench_with_input(BenchmarkId::new("serve_task_page", tasks), &page, |b, page| b.iter(|| server.get(page)));
    }
    group.finish();
}

criterion_group!(benches, run_views);
criterion_main!(benches);
