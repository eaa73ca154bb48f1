//! `load_validate_graph`: load, normalise and validate a generated layered plan, then walk its
//! graph's critical path, at 1k, 10k and 100k tasks in YAML and JSON.

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::time::Duration;

use benches::{Format, layered_plan};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn load_validate_graph(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_validate_graph");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for tasks in [1_000, 10_000, 100_000] {
        for format in [Format::Yaml, Format::Json] {
            let text = layered_plan(tasks, format);
            group.throughput(Throughput::Bytes(text.len() as u64));
            let id = BenchmarkId::new(format!("{format:?}").to_lowercase(), tasks);
            group.bench_with_input(id, &text, |b, text| {
                b.iter(|| {
                    let loaded = manifest::load_str("layered", "layered", text, &|_| true);
                    let (_, graph) = loaded.valid().expect("the generated plan is valid");
                    std::hint::black_box(graph.critical_path())
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, load_validate_graph);
criterion_main!(benches);
