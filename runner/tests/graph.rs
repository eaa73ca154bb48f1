//! `runner graph`: the task graph of a valid plan as Mermaid or DOT; an invalid plan gets its
//! diagnostics instead, and exit 2.

use std::path::Path;

use assert_cmd::Command;

fn runner() -> Command {
    let mut command = Command::cargo_bin("runner").expect("the runner binary is built");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("runner/ has a parent");
    command.current_dir(root).env("NO_COLOR", "1");
    command
}

fn graph(args: &[&str]) -> String {
    let output = runner().arg("graph").args(args).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

#[test]
fn mermaid_shows_phases_the_parallel_group_and_the_gate() {
    let mermaid = graph(&["examples/research.yaml"]);
    assert!(mermaid.starts_with("flowchart TD\n"), "{mermaid}");
    assert!(mermaid.contains("subgraph phase0_research[\"parallel: research\"]"), "{mermaid}");
    assert!(mermaid.contains("{{\"synthesize<br/>gate: editor\"}}:::gate"), "{mermaid}");
    insta::assert_snapshot!("graph_research_mermaid", mermaid);
}

#[test]
fn mermaid_is_the_default_format() {
    assert_eq!(graph(&["examples/research.yaml"]), graph(&["examples/research.yaml", "--format", "mermaid"]));
}

#[test]
fn dot_shows_phases_the_parallel_group_and_the_gate() {
    let dot = graph(&["examples/research.yaml", "--format", "dot"]);
    assert!(dot.starts_with("digraph \"company-research\" {\n"), "{dot}");
    assert!(dot.contains("subgraph cluster_phase0_research {"), "{dot}");
    assert!(dot.contains("shape=hexagon"), "{dot}");
    insta::assert_snapshot!("graph_research_dot", dot);
}

#[test]
fn a_human_review_is_drawn_as_a_review() {
    let mermaid = graph(&["examples/review.yaml"]);
    assert!(mermaid.contains("[/\"approve<br/>human review\"/]:::review"), "{mermaid}");
    let dot = graph(&["examples/review.yaml", "--format", "dot"]);
    assert!(dot.contains("label=\"approve\\nhuman review\", shape=house"), "{dot}");
}

#[test]
fn an_invalid_plan_is_not_drawn_and_exits_2() {
    for format in ["mermaid", "dot"] {
        let output =
            runner().args(["graph", "examples/invalid/cycle.yaml", "--format", format]).output().expect("runner runs");
        assert_eq!(output.status.code(), Some(2), "{format}");
        assert!(output.stdout.is_empty(), "{format}: nothing is drawn");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("plan::cycle"), "{stderr}");
        assert!(stderr.contains("examples/invalid/cycle.yaml: invalid plan: 1 error"), "{stderr}");
    }
}
