//! The forecast of a plan before it runs: the makespan the state machine gives, and the
//! expected and worst figures of tokens, money and time.

use std::path::Path;
use std::sync::Arc;

use engine::forecast::{forecast, makespan};

fn load(path: &str) -> (Arc<manifest::Plan>, Arc<manifest::TaskGraph>) {
    let loaded = manifest::load_file(Path::new(path));
    let (plan, graph) = loaded.valid().expect("the plan is valid");
    (Arc::new(plan.clone()), Arc::new(graph.clone()))
}

#[test]
fn a_plan_with_a_review_is_simulated_to_its_end() {
    let (plan, graph) = load("../examples/research.yaml");
    let vars = plan.run_vars(std::iter::empty()).expect("no vars");
    let took = makespan(&plan, &graph, &vars, &|_, _| 1_000);
    assert!(took.is_some(), "{:?}", forecast(&plan, &graph, &vars));
}
