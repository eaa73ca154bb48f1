//! `runs_list`: the runs list with thousands of runs in PostgreSQL, as a user meets it: a whole
//! `runner runs --store URL` process, and one `GET /api/runs` of a running `runner serve
//! --store URL`. The runs are copies of one real run of `examples/offline.yaml` (its row and
//! its records, each under a new id), 1,000 and 10,000 of them, in a schema of the bench's own.
//! `folded` times the same command with the rows' summaries wiped, so that it reads and folds
//! every run's records, as the list did before the rows kept them.
//!
//! It runs the release binary (`cargo build --release -p runner` first, or point `RUNNER_BIN`
//! at another build) against `RUNNER_TEST_DATABASE_URL` (default: the local `test` database).

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;

use benches::{Server, runner};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use testkit::pg::TestDatabase;

/// A schema holding `n` runs: one real run of the offline example, and `n - 1` copies of it.
fn seeded(n: usize) -> TestDatabase {
    let db = TestDatabase::new("bench_runs_list").expect("the bench needs PostgreSQL (RUNNER_TEST_DATABASE_URL)");
    let home = std::env::temp_dir().join(format!("runner-bench-runs-{}", std::process::id()));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/offline.yaml");
    let applied = Command::new(runner())
        .arg("apply")
        .arg(&example)
        .args(["--yes", "--run-id", "seed", "--store", &db.url])
        .env("RUNNER_HOME", &home)
        .output()
        .expect("runner runs");
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    db.execute(&format!(
        "INSERT INTO runner_runs (run_id, plan, created, status, fence, tasks, succeeded, prompt_tokens, \
           completion_tokens, updated) \
         SELECT 'run-' || g, plan, created + g * interval '1 ms', status, fence, tasks, succeeded, prompt_tokens, \
           completion_tokens, updated FROM runner_runs, generate_series(1, {n} - 1) g WHERE run_id = 'seed'; \
         INSERT INTO runner_events (run_id, seq, record, fence) \
         SELECT 'run-' || g, seq, replace(record, '\"run_id\":\"seed\"', '\"run_id\":\"run-' || g || '\"'), fence \
         FROM runner_events, generate_series(1, {n} - 1) g WHERE run_id = 'seed'; ANALYZE"
    ));
    db
}

/// `runner runs --store URL`, whole; the number of lines it printed.
fn runs(url: &str) -> usize {
    let output = Command::new(runner()).args(["runs", "--store", url]).output().expect("runner runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout.iter().filter(|&&b| b == b'\n').count()
}

fn runs_list(c: &mut Criterion) {
    let mut group = c.benchmark_group("runs_list");
    group.sample_size(10);
    for n in [1_000, 10_000] {
        let db = seeded(n);
        assert_eq!(runs(&db.url), n + 1, "a heading and a line a run");
        group.bench_with_input(BenchmarkId::new("runner_runs", n), &db.url, |b, url| b.iter(|| runs(url)));
        let server = Server::start(&db.url);
        group.bench_function(BenchmarkId::new("serve_api_runs", n), |b| b.iter(|| server.get("/api/runs")));
        drop(server);
        if n == 1_000 {
            db.execute("UPDATE runner_runs SET tasks = NULL, succeeded = NULL");
            group.bench_with_input(BenchmarkId::new("folded", n), &db.url, |b, url| b.iter(|| runs(url)));
        }
    }
    group.finish();
}

criterion_group!(benches, runs_list);
criterion_main!(benches);
