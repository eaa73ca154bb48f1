//! `runner graph`: the task graph as Mermaid or Graphviz DOT, with phases as subgraphs,
//! parallel groups as subgraphs inside them, and gates and reviews in their own shapes. A map
//! task (`for_each`) is one node in a stacked shape whose label says how many items it runs;
//! a conditional task (`when`) has a dashed border and its condition in its label.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use manifest::plan::{ForEach, Task, TaskKind};
use manifest::{Plan, TaskGraph};

use crate::diagnostics::{color_stderr, print, render_human};
use crate::format::GraphFormat;
use crate::home::{RunDir, fold};

/// Draws a valid plan; an invalid one gets its diagnostics and exit 2. A run id instead of a
/// file draws that run's current plan, replacements spliced in.
pub fn run(path: &Path, format: GraphFormat) -> anyhow::Result<u8> {
    if !path.exists()
        && let Some(run) = path.to_str().and_then(|id| RunDir::existing(id).ok())
    {
        let (records, _) = run.load()?;
        let state = fold(&records);
        print(&draw(&state.plan, &state.graph, format))?;
        return Ok(0);
    }
    let loaded = manifest::load_file(path);
    let Some((plan, graph)) = loaded.valid() else {
        eprint!("{}", render_human(&loaded.diagnostics, &loaded.source, color_stderr()));
        eprintln!("{}", crate::validate::summary(&loaded));
        return Ok(crate::validate::exit_code(&loaded, path));
    };
    print(&draw(plan, graph, format))?;
    Ok(0)
}

fn draw(plan: &Plan, graph: &TaskGraph, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(plan, graph),
        GraphFormat::Dot => dot(plan, graph),
    }
}

/// The tasks of one phase, grouped by parallel group (`None`: ungrouped), in workflow order.
fn groups(plan: &Plan, phase: &[usize]) -> BTreeMap<Option<String>, Vec<usize>> {
    let mut groups: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for &task in phase {
        let group = plan.tasks[task].extras().parallel_group.as_ref().map(|g| g.value.clone());
        groups.entry(group).or_default().push(task);
    }
    groups
}

/// Renders a Mermaid flowchart.
pub fn mermaid(plan: &Plan, graph: &TaskGraph) -> String {
    let mut out = String::from("flowchart TD\n");
    for (p, phase) in graph.phases().iter().enumerate() {
        let _ = writeln!(out, "  subgraph phase{p}[\"phase {}\"]", p + 1);
        for (group, tasks) in groups(plan, phase) {
            let indent = if let Some(name) = &group {
                let _ = writeln!(out, "    subgraph phase{p}_{}[\"parallel: {}\"]", safe_id(name), mermaid_text(name));
                "      "
            } else {
                "    "
            };
            for task in tasks {
                let _ = writeln!(out, "{indent}{}", mermaid_node(plan, task));
            }
            if group.is_some() {
                out.push_str("    end\n");
            }
        }
        out.push_str("  end\n");
    }
    for &task in graph.topo_order() {
        for child in graph.children(task) {
            let _ = writeln!(out, "  t{task} --> t{child}");
        }
    }
    out.push_str("  classDef gate fill:#fff4d6,stroke:#b8860b\n  classDef review fill:#e3f0ff,stroke:#1f5fa8\n");
    let conditional: Vec<String> =
        (0..plan.tasks.len()).filter(|&i| plan.tasks[i].extras().when.is_some()).map(|i| format!("t{i}")).collect();
    if !conditional.is_empty() {
        let _ =
            writeln!(out, "  classDef conditional stroke-dasharray:5 5\n  class {} conditional", conditional.join(","));
    }
    out
}

fn mermaid_node(plan: &Plan, index: usize) -> String {
    let task = &plan.tasks[index];
    let label = node_label(plan, index);
    let label = mermaid_text(&label);
    match task.kind {
        TaskKind::Task if task.extras().for_each.is_some() => format!("t{index}[[\"{label}\"]]"),
        TaskKind::Task => format!("t{index}[\"{label}\"]"),
        TaskKind::SynthesisGate => format!("t{index}{{{{\"{label}\"}}}}:::gate"),
        TaskKind::HumanReview => format!("t{index}[/\"{label}\"/]:::review"),
    }
}

/// The id, then the agent or the kind of step, on a second line; then what a map task runs
/// over and a conditional task's condition, a line each.
fn node_label(plan: &Plan, index: usize) -> String {
    let task = &plan.tasks[index];
    let detail = match (task.kind, plan.agent_of(task)) {
        (TaskKind::HumanReview, _) => "human review".to_owned(),
        (TaskKind::SynthesisGate, Some(agent)) => format!("gate: {agent}"),
        (TaskKind::SynthesisGate, None) => "gate".to_owned(),
        (TaskKind::Task, agent) => agent.unwrap_or_default().to_owned(),
    };
    let mut label = format!("{}\n{detail}", task.id.value);
    if let Some(items) = map_line(task) {
        label.push('\n');
        label.push_str(&items);
    }
    if let Some(when) = &task.extras().when {
        label.push_str("\nwhen: ");
        label.push_str(&shortened(manifest::template::expression(&when.value)));
    }
    label
}

/// What a map task runs over: `map: 3 items` for a list written in the plan, `map: up to 10
/// items of EXPR` for an expression with `max_items`, `map: items of EXPR` without.
fn map_line(task: &Task) -> Option<String> {
    let extras = task.extras();
    let items = |n: usize| if n == 1 { "1 item".to_owned() } else { format!("{n} items") };
    Some(match &extras.for_each.as_ref()?.value {
        ForEach::List(list) => format!("map: {}", items(list.len())),
        ForEach::Expr(expr) => {
            let expr = shortened(manifest::template::expression(expr));
            match &extras.max_items {
                Some(max) => format!("map: up to {} of {expr}", items(max.value as usize)),
                None => format!("map: items of {expr}"),
            }
        }
    })
}

/// The most characters of an expression a label shows; a longer one ends in `…`.
const EXPRESSION_CHARS: usize = 60;

/// An expression on one line, cut to [`EXPRESSION_CHARS`].
fn shortened(expr: &str) -> String {
    let line = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(EXPRESSION_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Mermaid labels are quoted; quotes and markup characters become entity codes.
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' => out.push_str("<br/>"),
            c => out.push(c),
        }
    }
    out
}

/// A name reduced to characters every Mermaid and DOT identifier accepts.
fn safe_id(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Renders Graphviz DOT.
pub fn dot(plan: &Plan, graph: &TaskGraph) -> String {
    let mut out =
        format!("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=rounded];\n", dot_text(&plan.name));
    for (p, phase) in graph.phases().iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_phase{p} {{\n    label=\"phase {}\";\n    style=dashed;", p + 1);
        for (group, tasks) in groups(plan, phase) {
            let indent = if let Some(name) = &group {
                let _ = writeln!(
                    out,
                    "    subgraph cluster_phase{p}_{} {{\n      label=\"parallel: {}\";\n      style=solid;",
                    safe_id(name),
                    dot_text(name)
                );
                "      "
            } else {
                "    "
            };
            for task in tasks {
                let _ = writeln!(
                    out,
                    "{indent}t{task} [label=\"{}\", {}];",
                    dot_text(&node_label(plan, task)),
                    dot_shape(&plan.tasks[task])
                );
            }
            if group.is_some() {
                out.push_str("    }\n");
            }
        }
        out.push_str("  }\n");
    }
    for &task in graph.topo_order() {
        for child in graph.children(task) {
            let _ = writeln!(out, "  t{task} -> t{child};");
        }
    }
    out.push_str("}\n");
    out
}

/// A node's shape and style: a box, a gate's hexagon or a review's house; a map task's box is
/// stacked (`box3d`), and a conditional task's border dashed.
fn dot_shape(task: &Task) -> String {
    let dashed = if task.extras().when.is_some() { ",dashed" } else { "" };
    let style = |base: &str| if dashed.is_empty() { base.to_owned() } else { format!("\"{base}{dashed}\"") };
    match task.kind {
        TaskKind::Task if task.extras().for_each.is_some() => format!("shape=box3d, style={}", style("rounded")),
        TaskKind::Task => format!("shape=box, style={}", style("rounded")),
        TaskKind::SynthesisGate => format!("shape=hexagon, style={}, fillcolor=\"#fff4d6\"", style("filled")),
        TaskKind::HumanReview => format!("shape=house, style={}, fillcolor=\"#e3f0ff\"", style("filled")),
    }
}

/// DOT strings escape backslashes and quotes; newlines become `\n`.
fn dot_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
