//! `lsp`: the language server as an editor meets it, a whole `runner lsp` process spoken to
//! over stdio. `edit_to_diagnostics` times one keystroke in a YAML plan of 1k and 10k tasks,
//! from the `didChange` sent to its diagnostics received (the server's settle time of 50 ms
//! included). After the timings, the 10k plan is edited 1,000 more times and the server's
//! resident memory printed after the first 10 and after all 1,000, to show it stays flat.
//!
//! It runs the release binary: `cargo build --release -p runner` first, or point `RUNNER_BIN`
//! at another build.

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use benches::{Format, layered_plan, runner};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use testkit::lsp::{Client, position};

const URI: &str = "file:///nonexistent/layered.yaml";

/// An open plan, edited one character at a time at the same place.
struct Editing {
    client: Client,
    version: i64,
    at: serde_json::Value,
}

impl Editing {
    fn open(text: &str) -> Self {
        let (mut client, _) = Client::start(&runner(), &[]);
        client.open(URI, text);
        client.diagnostics(URI, 1);
        // The first task's input: typing there keeps the plan valid, so every edit is read whole.
        let at = position(text, "input: \"", 0, 8);
        Editing { client, version: 1, at }
    }

    /// Types a character, or takes it back, and waits for the diagnostics of that version.
    fn keystroke(&mut self) -> usize {
        self.version += 1;
        let end = json!({"line": self.at["line"], "character": self.at["character"].as_u64().unwrap_or(0) + 1});
        let change = if self.version % 2 == 0 {
            json!({"range": {"start": self.at, "end": self.at}, "text": "x"})
        } else {
            json!({"range": {"start": self.at, "end": end}, "text": ""})
        };
        let params = json!({"textDocument": {"uri": URI, "version": self.version}, "contentChanges": [change]});
        self.client.notify("textDocument/didChange", params);
        self.client.diagnostics(URI, self.version).len()
    }

    /// The server's resident memory in KiB, from `/proc`.
    fn resident_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.client.pid())).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

fn edit_to_diagnostics(c: &mut Criterion) {
    let mut group = c.benchmark_group("lsp_edit_to_diagnostics");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(10));
    for tasks in [1_000, 10_000] {
        let mut editing = Editing::open(&layered_plan(tasks, Format::Yaml));
        group.bench_function(BenchmarkId::from_parameter(tasks), |b| {
            b.iter(|| std::hint::black_box(editing.keystroke()))
        });
    }
    group.finish();

    let mut editing = Editing::open(&layered_plan(10_000, Format::Yaml));
    for _ in 0..10 {
        editing.keystroke();
    }
    let early = editing.resident_kib();
    let started = Instant::now();
    for _ in 0..1_000 {
        editing.keystroke();
    }
    let late = editing.resident_kib();
    eprintln!(
        "lsp memory on a 10k-task plan: {early} KiB resident after 10 edits, {late} KiB after 1,010 ({:+.1}%); \
         1,000 edits took {:.1} s",
        (late as f64 - early as f64) / early as f64 * 100.0,
        started.elapsed().as_secs_f64()
    );
}

criterion_group!(benches, edit_to_diagnostics);
criterion_main!(benches);
