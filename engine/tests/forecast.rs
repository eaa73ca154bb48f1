//! The forecast of a plan before it runs: the makespan the state machine gives, and the
//! expected and worst figures of tokens, money and time.

use std::path::Path;

use engine::forecast::{forecast, makespan};

fn load(path: &str) -> (manifest::Plan, manifest::TaskGraph) {
    let loaded = manifest::load_file(Path::new(path));
    let (plan, graph) = loaded.valid().expect("the plan is valid");
    (plan.clone(), graph.clone())
}

#[test]
fn a_plan_with_a_review_is_simulated_to_its_end() {
    let (plan, graph) = load("../examples/research.yaml");
    let vars = plan.run_vars(std::iter::empty()).expect("no vars");
    // Three searches in a group of two (two rounds), the synthesis, the review decided at
    // once, the brief: whatever the templates would read, which the simulation cannot know.
    let took = makespan(&plan, &vars, &|_, _| 1_000);
    assert_eq!(took, Some(4_000), "{:?}", forecast(&plan, &graph, &vars));
}

#[test]
fn llm_agents_count_tokens_even_on_a_provider_the_plan_leaves_to_its_default() {
    let text = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions:\n    \
                w: {runtime: llm}\n  workflow:\n    - {id: a, agent: w, input: write a haiku}\n";
    let loaded = manifest::load_str("t.yaml", "t", text, &|_| true);
    let (plan, graph) = loaded.valid().expect("the plan is valid");
    let forecast = forecast(plan, graph, &plan.run_vars(std::iter::empty()).expect("no vars"));
    assert!(forecast.run.tokens.expected > 0, "{forecast:?}");
    assert_eq!(forecast.run.tokens.worst, None, "no window is known");
    assert_eq!(forecast.unpriced, ["default"]);
    assert!(forecast.run.cost.is_none());
}
