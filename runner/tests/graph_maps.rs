//! `runner graph` on a dynamic plan: a map task is one stacked node whose label gives its item
//! count (`N items` for a list, `up to N items` for an expression with `max_items`), and a
//! conditional task carries its condition and a dashed border, in Mermaid and in DOT.

mod shipped;

use shipped::runner;

const PLAN: &str = "runner/tests/fixtures/graph_map.yaml";

fn graph(format: &str) -> String {
    let output = runner().args(["graph", PLAN, "--format", format]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

#[test]
fn mermaid_draws_a_map_as_one_stacked_node_with_its_item_count() {
    let mermaid = graph("mermaid");
    assert!(mermaid.contains("t2[[\"regions<br/>echo<br/>map: 3 items\"]]"), "{mermaid}");
    assert!(
        mermaid.contains("t1[[\"profile<br/>echo<br/>map: up to 10 items of tasks.search.output.results\"]]"),
        "the expression without its braces: {mermaid}"
    );
    assert_eq!(mermaid.matches("profile").count(), 1, "one node, not one per item: {mermaid}");
    assert!(mermaid.contains("  t0 --> t1\n"), "{mermaid}");
}

#[test]
fn mermaid_shows_a_condition_on_a_dashed_node() {
    let mermaid = graph("mermaid");
    assert!(
        mermaid.contains("t3[\"deep_dive<br/>echo<br/>when: tasks.search.output.kind == #quot;web#quot;\"]"),
        "{mermaid}"
    );
    assert!(mermaid.ends_with("  classDef conditional stroke-dasharray:5 5\n  class t3 conditional\n"), "{mermaid}");
}

#[test]
fn dot_draws_maps_and_conditions_the_same_way() {
    let dot = graph("dot");
    assert!(dot.contains("t2 [label=\"regions\\necho\\nmap: 3 items\", shape=box3d, style=rounded];"), "{dot}");
    assert!(
        dot.contains("t1 [label=\"profile\\necho\\nmap: up to 10 items of tasks.search.output.results\", shape=box3d"),
        "{dot}"
    );
    assert!(
        dot.contains(
            "t3 [label=\"deep_dive\\necho\\nwhen: tasks.search.output.kind == \\\"web\\\"\", shape=box, style=\"rounded,dashed\"];"
        ),
        "{dot}"
    );
}

#[test]
fn a_plan_without_maps_or_conditions_gets_no_conditional_class() {
    let output = runner().args(["graph", "examples/research.yaml"]).output().expect("runner runs");
    let mermaid = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(!mermaid.contains("conditional") && !mermaid.contains("[["), "{mermaid}");
}
