//! The generated plans: shapes, their text, and the plan loaded once per configuration.

use std::cell::OnceCell;
use std::fmt::Write;
use std::sync::Arc;

use benches::XorShift;
use engine::{Command, Start};
use manifest::plan::Strategy;

/// The shapes of generated plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Each task depends on the one before.
    Chain,
    /// One root, N - 2 tasks depending on it, one sink depending on all of them.
    FanOut,
    /// Layers of [`LAYER`] tasks, each with 2 or 3 parents from the layer before.
    Layered,
    /// The fan-out written as a map: the root's output lists N - 2 items, one `for_each` task
    /// runs over them (its items are the middle tasks, made at run time), and the sink reads it.
    Map,
}

impl Shape {
    pub(crate) const ALL: [Shape; 4] = [Shape::Chain, Shape::FanOut, Shape::Layered, Shape::Map];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::FanOut => "fan_out",
            Shape::Layered => "layered",
            Shape::Map => "map",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Tasks in a layer of the layered shape.
pub(crate) const LAYER: usize = 100;

/// The dependencies of each task of a shape.
pub(crate) fn parents(shape: Shape, tasks: usize) -> Vec<Vec<usize>> {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    (0..tasks)
        .map(|i| match shape {
            Shape::Chain => i.checked_sub(1).into_iter().collect(),
            // A map runs the fan-out's tasks once it has expanded.
            Shape::FanOut | Shape::Map if i == 0 => Vec::new(),
            Shape::FanOut | Shape::Map if i + 1 == tasks => (1..tasks - 1).collect(),
            Shape::FanOut | Shape::Map => vec![0],
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

/// What the mock agents answer task `task` with: `ok`, or for the map's root the list the map
/// runs over (the numbers `0..tasks - 2`).
pub(crate) fn answer(shape: Shape, tasks: usize, task: &str) -> String {
    match shape {
        Shape::Map if task == "t0" => {
            let items: Vec<usize> = (0..tasks - 2).collect();
            serde_json::to_string(&items).unwrap_or_default()
        }
        _ => "ok".to_owned(),
    }
}

/// An enveloped plan of `tasks` tasks of `shape` on a mock agent that answers `ok` at once.
pub(crate) fn plan_text(shape: Shape, tasks: usize) -> String {
    if shape == Shape::Map {
        return format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: bench}}\nspec:\n  agent_definitions:\n    \
             noop: {{runtime: mock, default: ok}}\n    root: {{runtime: mock, responses: {{t0: '{}'}}}}\n  workflow:\n    \
             - {{id: t0, agent: root, input: x}}\n    \
             - {{id: middle, agent: noop, input: x, depends_on: [t0], for_each: tasks.t0.output, max_items: {}}}\n    \
             - {{id: sink, agent: noop, input: x, depends_on: [middle]}}\n",
            answer(shape, tasks, "t0"),
            tasks - 2
        );
    }
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
pub(crate) struct Configured {
    pub(crate) shape: Shape,
    pub(crate) tasks: usize,
    pub(crate) prepared: OnceCell<Prepared>,
}

impl Configured {
    /// The plan, loaded on first use.
    pub(crate) fn prepared(&self) -> &Prepared {
        self.prepared.get_or_init(|| load(self.shape, self.tasks))
    }
}

/// A validated plan and the graph the loader built, as `runner apply` hands them to a run.
pub(crate) struct Prepared {
    pub(crate) plan: Arc<manifest::Plan>,
    pub(crate) graph: Arc<manifest::TaskGraph>,
}

impl Prepared {
    pub(crate) fn of(loaded: manifest::Loaded) -> Self {
        assert!(loaded.is_valid(), "{:#?}", loaded.errors().take(3).collect::<Vec<_>>());
        let plan = Arc::new(loaded.plan.expect("a valid plan"));
        let graph = Arc::new(loaded.graph.expect("a valid plan has a graph"));
        Prepared { plan, graph }
    }

    pub(crate) fn start(&self, strategy: Option<Strategy>) -> Command {
        Command::Start(Start { strategy, graph: Some(Arc::clone(&self.graph)), ..Start::plan(Arc::clone(&self.plan)) })
    }
}

pub(crate) fn load(shape: Shape, tasks: usize) -> Prepared {
    Prepared::of(manifest::load_str("bench.yaml", "bench", &plan_text(shape, tasks), &|_| true))
}

/// A skewed plan: `a` takes 100 ms; `b0`..`b9` is a chain of 10 ms tasks; `done` needs both.
pub(crate) fn skew_plan() -> Prepared {
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
