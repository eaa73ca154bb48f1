//! `critic`: the critic on generated layered plans (2-3 parents per task) at 1k, 10k and 100k
//! tasks, loading included (`manifest::load_str`, then `critique_graph`), in JSON (the fast
//! reader) and YAML; and `critique_only`: the critic alone on a plan already loaded.

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::time::Duration;

use benches::{Format, layered_plan};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use manifest::critic::critique_graph;

fn load_and_critique(c: &mut Criterion) {
    let mut group = c.benchmark_group("critic");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for tasks in [1_000, 10_000, 100_000] {
        for format in [Format::Json, Format::Yaml] {
            let text = layered_plan(tasks, format);
            group.throughput(Throughput::Elements(tasks as u64));
            let id = BenchmarkId::new(format!("{format:?}").to_lowercase(), tasks);
            group.bench_with_input(id, &text, |b, text| {
                b.iter(|| {
                    let loaded = manifest::load_str("layered", "layered", text, &|_| true);
                    let (plan, graph) = loaded.valid().expect("the generated plan is valid");
                    std::hint::black_box(critique_graph(plan, graph).scores.overall)
                });
            });
        }
    }
    group.finish();
}

fn critique_only(c: &mut Criterion) {
    let mut group = c.benchmark_group("critique_only");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for tasks in [1_000, 10_000, 100_000] {
        let loaded = manifest::load_str("layered", "layered", &layered_plan(tasks, Format::Json), &|_| true);
        let (plan, graph) = loaded.valid().expect("the generated plan is valid");
        group.throughput(Throughput::Elements(tasks as u64));
        group.bench_function(BenchmarkId::from_parameter(tasks), |b| {
            b.iter(|| std::hint::black_box(critique_graph(plan, graph).findings.len()));
        });
    }
    group.finish();
}

criterion_group!(benches, load_and_critique, critique_only);
criterion_main!(benches);
