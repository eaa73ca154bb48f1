//! `runner graph` on sub-plans: a `type: plan` task is a box (a Mermaid `subgraph`, a DOT
//! cluster) titled with its id and file, holding the child plan's tasks and edges, nested for
//! the child's own sub-plans, with the parent's edges into and out of it; two tasks that run
//! the same file get a box each; an `expand` task is one node that says who writes its plan.
//! A run's graph draws each item of a map of sub-plans as a box, and the map as one node.

mod shipped;

use shipped::runner;

/// `ours` runs `subplans/company.yaml` once, `theirs` over two items; the child runs
/// `summary.yaml`; `investigate` is an `expand` task with `max_tasks: 8`.
const PLAN: &str = "runner/tests/fixtures/graph_subplans.yaml";

fn graph(plan: &str, format: &str) -> String {
    let output = runner().args(["graph", plan, "--format", format]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

/// The lines of `text` from the one equal to `first` (trimmed) to the next equal to `last`.
fn block<'a>(text: &'a str, first: &str, last: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let start = lines.iter().position(|l| *l == first).unwrap_or_else(|| panic!("no `{first}` in {text}"));
    let end = lines[start..].iter().position(|l| *l == last).unwrap_or_else(|| panic!("no end in {text}"));
    lines[start..=start + end].to_vec()
}

#[test]
fn mermaid_draws_a_sub_plan_as_a_subgraph_of_the_child_tasks_and_edges() {
    let mermaid = graph(PLAN, "mermaid");
    let ours = block(&mermaid, "subgraph t1[\"ours<br/>plan: subplans/company.yaml\"]", "end");
    assert_eq!(
        ours,
        [
            "subgraph t1[\"ours<br/>plan: subplans/company.yaml\"]",
            "t1_0[\"profile<br/>analyst\"]",
            "t1_1[\"news<br/>analyst\"]",
            "subgraph t1_2[\"summary<br/>plan: summary.yaml\"]",
            "t1_2_0[\"write<br/>writer\"]",
            "end",
        ],
        "the child's tasks, its own sub-plan nested: {mermaid}"
    );
    for edge in ["t1_0 --> t1_2", "t1_1 --> t1_2", "t0 --> t1", "t1 --> t3"] {
        assert!(mermaid.contains(&format!("  {edge}\n")), "`{edge}` in {mermaid}");
    }
    assert!(!mermaid.lines().any(|l| l.trim().starts_with("t1[")), "the box is no node as well: {mermaid}");
}

#[test]
fn dot_draws_a_sub_plan_as_a_cluster_with_edges_clipped_at_its_border() {
    let dot = graph(PLAN, "dot");
    assert!(dot.starts_with("digraph \"graph-subplans\" {\n  rankdir=TB;\n  compound=true;\n"), "{dot}");
    let ours = block(&dot, "subgraph cluster_t1 {", "}");
    assert_eq!(
        ours[..5],
        [
            "subgraph cluster_t1 {",
            "label=\"ours\\nplan: subplans/company.yaml\";",
            "style=rounded;",
            "t1_0 [label=\"profile\\nanalyst\", shape=box, style=rounded];",
            "t1_1 [label=\"news\\nanalyst\", shape=box, style=rounded];",
        ],
        "{dot}"
    );
    assert!(dot.contains("subgraph cluster_t1_2 {\n        label=\"summary\\nplan: summary.yaml\";"), "{dot}");
    assert!(dot.contains("      t1_0 -> t1_2_0 [lhead=cluster_t1_2];\n"), "into the nested box: {dot}");
    assert!(dot.contains("  t0 -> t1_0 [lhead=cluster_t1];\n"), "into the box, at the child's first root: {dot}");
    assert!(
        dot.contains("  t1_2_0 -> t3 [ltail=cluster_t1];\n"),
        "out of the box, from the child's last task however deep: {dot}"
    );
}

#[test]
fn two_tasks_running_the_same_file_get_a_box_each() {
    let mermaid = graph(PLAN, "mermaid");
    assert_eq!(mermaid.matches("[\"profile<br/>analyst\"]").count(), 2, "{mermaid}");
    assert!(mermaid.contains("    subgraph t2[\"theirs<br/>plan: subplans/company.yaml<br/>map: 2 items\"]\n"));
    assert!(mermaid.contains("      t2_0[\"profile<br/>analyst\"]\n") && mermaid.contains("      t2_0 --> t2_2\n"));
    assert_eq!(mermaid.matches("t2_2_0[\"write<br/>writer\"]").count(), 1, "a map's box is drawn once: {mermaid}");
    let dot = graph(PLAN, "dot");
    assert!(dot.contains("subgraph cluster_t1 {") && dot.contains("subgraph cluster_t2 {"), "{dot}");
    assert!(dot.contains("  t0 -> t2_0 [lhead=cluster_t2];\n"), "{dot}");
}

#[test]
fn an_expand_task_says_its_plan_is_written_at_run_time_and_its_bound() {
    let label = "investigate<br/>plan written at run time by echo<br/>at most 8 tasks";
    assert!(graph(PLAN, "mermaid").contains(&format!("    t3[\"{label}\"]\n")));
    let dot = graph(PLAN, "dot");
    assert!(
        dot.contains("t3 [label=\"investigate\\nplan written at run time by echo\\nat most 8 tasks\", shape=box"),
        "{dot}"
    );
}

#[test]
fn the_competitors_example_draws_the_company_plan_inside_its_map() {
    let mermaid = graph("examples/competitors.yaml", "mermaid");
    assert!(
        mermaid.contains("subgraph t0[\"brief<br/>plan: plans/company.yaml<br/>map: items of vars.competitors\"]"),
        "{mermaid}"
    );
    assert!(mermaid.contains("      t0_1 --> t0_2\n") && mermaid.contains("  t0 --> t1\n"), "{mermaid}");
    let dot = graph("examples/competitors.yaml", "dot");
    assert!(dot.contains("  t0_2 -> t1 [ltail=cluster_t0];\n"), "{dot}");
}

#[test]
fn a_run_draws_each_item_of_a_sub_plan_map_as_a_box_and_the_map_as_one_node() {
    let home = tempfile::tempdir().expect("a RUNNER_HOME");
    let apply = runner()
        .env("RUNNER_HOME", home.path())
        .args(["apply", "examples/competitors.yaml", "--yes", "--run-id", "c"])
        .output()
        .expect("runner runs");
    assert_eq!(apply.status.code(), Some(0), "{}", String::from_utf8_lossy(&apply.stderr));
    let output = runner().env("RUNNER_HOME", home.path()).args(["graph", "c"]).output().expect("runner runs");
    let mermaid = String::from_utf8(output.stdout).expect("UTF-8");
    for item in 0..3 {
        assert!(mermaid.contains(&format!("    subgraph t{item}[\"brief[{item}]<br/>plan: plans/company.yaml\"]\n")));
        assert!(mermaid.contains(&format!("  t{item} --> t3\n")), "{mermaid}");
    }
    assert!(mermaid.contains("    t3[[\"brief<br/>plan: plans/company.yaml<br/>map: items of vars.competitors\"]]\n"));
    assert_eq!(mermaid.matches("subgraph t").count(), 3, "{mermaid}");
}
