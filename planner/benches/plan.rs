//! Planning a 1,000-line request of mixed bullets and prose, deterministically. The target
//! is under 50 ms.

// `criterion_group!` defines a public function without a doc comment.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use planner::deterministic::{Bindings, plan};

/// A request of `lines` lines: bullets, numbered items, prose with connectors, questions,
/// links, code and file references.
fn request(lines: usize) -> String {
    const LINES: &[&str] = &[
        "- Fetch the latest release notes from https://example.com/releases.html",
        "2. Run `cargo test --workspace` and collect the failures",
        "Summarise ./notes.md, then compare it with the previous summary; afterwards email the team.",
        "* Which region should we deploy to?",
        "Add login with session cookies. Use basic auth. Then write unit tests.",
        "a) build the docker image and push it to the registry",
        "If the build fails, fix it and rerun the pipeline.",
        "• Draft a short announcement for the blog or the newsletter",
    ];
    (0..lines).map(|i| LINES[i % LINES.len()]).collect::<Vec<_>>().join("\n")
}

fn bench(c: &mut Criterion) {
    let text = request(1_000);
    let exists = |file: &str| file == "./notes.md";
    let bindings = Bindings::default();
    let draft = plan(&text, "bench", &bindings, &exists);
    assert!(draft.steps.len() > 1_000, "{} steps", draft.steps.len());
    c.bench_function("plan 1000 lines", |b| b.iter(|| plan(black_box(&text), "bench", &bindings, &exists)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
