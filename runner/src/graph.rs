//! `runner graph`: the task graph as Mermaid or Graphviz DOT, with phases as subgraphs,
//! parallel groups as subgraphs inside them, and gates and reviews in their own shapes. A map
//! task (`for_each`) is one node in a stacked shape whose label says how many items it runs;
//! a conditional task (`when`) has a dashed border and its condition in its label. A sub-plan
//! task (`type: plan`) is a box holding its child plan's tasks and edges, nested for the
//! child's own sub-plans, and an `expand` task one node that says its plan is written at run
//! time.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

use manifest::plan::{ForEach, Task, TaskKind};
use manifest::subplan::MAX_DEPTH;
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
    let level = Level::new(plan, graph);
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
                mermaid_task(&mut out, &level, task, indent);
            }
            if group.is_some() {
                out.push_str("    end\n");
            }
        }
        out.push_str("  end\n");
    }
    mermaid_edges(&mut out, &level, "  ");
    out.push_str("  classDef gate fill:#fff4d6,stroke:#b8860b\n  classDef review fill:#e3f0ff,stroke:#1f5fa8\n");
    let mut conditional = Vec::new();
    level.conditional(&mut conditional);
    if !conditional.is_empty() {
        let _ =
            writeln!(out, "  classDef conditional stroke-dasharray:5 5\n  class {} conditional", conditional.join(","));
    }
    out
}

/// One task of a level: its node, or the `subgraph` of its sub-plan with the child's tasks
/// and edges inside.
fn mermaid_task(out: &mut String, level: &Level, index: usize, indent: &str) {
    let id = level.id(index);
    let Some(inner) = level.boxes.get(&index) else {
        let _ = writeln!(out, "{indent}{}", mermaid_node(level.plan, index, &id));
        return;
    };
    let _ = writeln!(out, "{indent}subgraph {id}[\"{}\"]", mermaid_text(&node_label(level.plan, index)));
    let deeper = format!("{indent}  ");
    for task in 0..inner.plan.tasks.len() {
        mermaid_task(out, inner, task, &deeper);
    }
    mermaid_edges(out, inner, &deeper);
    let _ = writeln!(out, "{indent}end");
}

/// The edges between a level's tasks; an edge to or from a box is the box's.
fn mermaid_edges(out: &mut String, level: &Level, indent: &str) {
    for &task in level.graph.topo_order() {
        for child in level.graph.children(task) {
            let _ = writeln!(out, "{indent}{} --> {}", level.id(task), level.id(child));
        }
    }
}

fn mermaid_node(plan: &Plan, index: usize, id: &str) -> String {
    let task = &plan.tasks[index];
    let label = node_label(plan, index);
    let label = mermaid_text(&label);
    match task.kind {
        TaskKind::Task | TaskKind::Plan | TaskKind::Expand if task.extras().for_each.is_some() => {
            format!("{id}[[\"{label}\"]]")
        }
        TaskKind::Task | TaskKind::Plan | TaskKind::Expand => format!("{id}[\"{label}\"]"),
        TaskKind::SynthesisGate => format!("{id}{{{{\"{label}\"}}}}:::gate"),
        TaskKind::HumanReview => format!("{id}[/\"{label}\"/]:::review"),
    }
}

/// The id, then the agent or the kind of step (a sub-plan's file) on a second line; then what a map task runs
/// over and a conditional task's condition, a line each.
fn node_label(plan: &Plan, index: usize) -> String {
    let task = &plan.tasks[index];
    let detail = match (task.kind, plan.agent_of(task)) {
        (TaskKind::HumanReview, _) => "human review".to_owned(),
        (TaskKind::SynthesisGate, Some(agent)) => format!("gate: {agent}"),
        (TaskKind::SynthesisGate, None) => "gate".to_owned(),
        (TaskKind::Task, agent) => agent.unwrap_or_default().to_owned(),
        (TaskKind::Plan, _) => format!("plan: {}", task.extras().plan.as_ref().map_or("", |p| p.value.as_str())),
        (TaskKind::Expand, agent) => expand_line(task, agent),
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

/// What an `expand` task's label says instead of an agent: that its agent writes its plan at
/// run time, and the bound on that plan's size when it has one.
fn expand_line(task: &Task, agent: Option<&str>) -> String {
    let mut line = match agent {
        Some(agent) => format!("plan written at run time by {agent}"),
        None => "plan written at run time".to_owned(),
    };
    if let Some(max) = &task.extras().max_tasks {
        let _ = write!(line, "\nat most {} tasks", max.value);
    }
    line
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

/// Renders Graphviz DOT. Edges to and from a sub-plan's cluster end at its border
/// (`compound`, `lhead`, `ltail`), drawn from the child's first root and to its last sink.
pub fn dot(plan: &Plan, graph: &TaskGraph) -> String {
    let level = Level::new(plan, graph);
    let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", dot_text(&plan.name));
    if !level.boxes.is_empty() {
        out.push_str("  compound=true;\n");
    }
    out.push_str("  node [shape=box, style=rounded];\n");
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
                dot_task(&mut out, &level, task, indent);
            }
            if group.is_some() {
                out.push_str("    }\n");
            }
        }
        out.push_str("  }\n");
    }
    dot_edges(&mut out, &level, "  ");
    out.push_str("}\n");
    out
}

/// One task of a level: its node, or the cluster of its sub-plan with the child's tasks and
/// edges inside.
fn dot_task(out: &mut String, level: &Level, index: usize, indent: &str) {
    let id = level.id(index);
    let task = &level.plan.tasks[index];
    let label = dot_text(&node_label(level.plan, index));
    let Some(inner) = level.boxes.get(&index) else {
        let _ = writeln!(out, "{indent}{id} [label=\"{label}\", {}];", dot_shape(task));
        return;
    };
    let style = if task.extras().when.is_some() { "\"rounded,dashed\"" } else { "rounded" };
    let _ = writeln!(out, "{indent}subgraph cluster_{id} {{\n{indent}  label=\"{label}\";\n{indent}  style={style};");
    let deeper = format!("{indent}  ");
    for task in 0..inner.plan.tasks.len() {
        dot_task(out, inner, task, &deeper);
    }
    dot_edges(out, inner, &deeper);
    let _ = writeln!(out, "{indent}}}");
}

/// The edges between a level's tasks; one to or from a box is clipped at its cluster.
fn dot_edges(out: &mut String, level: &Level, indent: &str) {
    for &task in level.graph.topo_order() {
        for child in level.graph.children(task) {
            let mut clip = Vec::new();
            if level.boxes.contains_key(&task) {
                clip.push(format!("ltail=cluster_{}", level.id(task)));
            }
            if level.boxes.contains_key(&child) {
                clip.push(format!("lhead=cluster_{}", level.id(child)));
            }
            let (from, to) = (level.exit(task), level.entry(child));
            let _ = match clip.is_empty() {
                true => writeln!(out, "{indent}{from} -> {to};"),
                false => writeln!(out, "{indent}{from} -> {to} [{}];", clip.join(", ")),
            };
        }
    }
}

/// A node's shape and style: a box, a gate's hexagon or a review's house; a map task's box is
/// stacked (`box3d`), and a conditional task's border dashed.
fn dot_shape(task: &Task) -> String {
    let dashed = if task.extras().when.is_some() { ",dashed" } else { "" };
    let style = |base: &str| if dashed.is_empty() { base.to_owned() } else { format!("\"{base}{dashed}\"") };
    match task.kind {
        TaskKind::Task | TaskKind::Plan | TaskKind::Expand if task.extras().for_each.is_some() => {
            format!("shape=box3d, style={}", style("rounded"))
        }
        TaskKind::Task | TaskKind::Plan | TaskKind::Expand => format!("shape=box, style={}", style("rounded")),
        TaskKind::SynthesisGate => format!("shape=hexagon, style={}, fillcolor=\"#fff4d6\"", style("filled")),
        TaskKind::HumanReview => format!("shape=house, style={}, fillcolor=\"#e3f0ff\"", style("filled")),
    }
}

/// DOT strings escape backslashes and quotes; newlines become `\n`.
fn dot_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The most tasks of sub-plans one drawing puts in boxes: a sub-plan task met past it is one
/// node, so files that run each other's tasks many times over cannot make a graph explode.
const NESTED_TASKS: usize = 5_000;

/// One plan as drawn: its tasks and graph, the prefix of its node ids (`t`, or its box's id
/// and `_`, so two boxes of the same file never share a node), and, by task index, the box
/// each sub-plan task is drawn as.
struct Level<'a> {
    plan: &'a Plan,
    graph: Cow<'a, TaskGraph>,
    prefix: String,
    boxes: BTreeMap<usize, Level<'a>>,
}

impl<'a> Level<'a> {
    /// A plan with the boxes of its sub-plans, nested at most [`MAX_DEPTH`] deep and holding at
    /// most [`NESTED_TASKS`] tasks in all, opened in plan order. In a run's plan, a map whose
    /// items are there is a node: each item has the box.
    fn new(plan: &'a Plan, graph: &'a TaskGraph) -> Self {
        let mut left = NESTED_TASKS;
        Level::nested(plan, Cow::Borrowed(graph), "t".to_owned(), 0, &mut left)
    }

    fn nested(plan: &'a Plan, graph: Cow<'a, TaskGraph>, prefix: String, depth: usize, left: &mut usize) -> Self {
        // A run's plan holds the items its maps expanded into: each item is a box, its map not.
        let expanded: BTreeSet<&str> =
            plan.tasks.iter().filter_map(|t| manifest::template::map_of_item(&t.id.value)).collect();
        let mut boxes = BTreeMap::new();
        for (index, task) in plan.tasks.iter().enumerate() {
            let Some(child) = subplan(plan, task) else { continue };
            if depth >= MAX_DEPTH
                || child.tasks.is_empty()
                || child.tasks.len() > *left
                || expanded.contains(&*task.id.value)
            {
                continue;
            }
            let Ok(child_graph) = TaskGraph::build(child) else { continue };
            *left -= child.tasks.len();
            let inner = Level::nested(child, Cow::Owned(child_graph), format!("{prefix}{index}_"), depth + 1, left);
            boxes.insert(index, inner);
        }
        Level { plan, graph, prefix, boxes }
    }

    /// The node id of task `index`, or of its box.
    fn id(&self, index: usize) -> String {
        format!("{}{index}", self.prefix)
    }

    /// The node an edge into task `index` ends at: the task, or in its box the child's first
    /// root (inside that root's own box if it has one).
    fn entry(&self, index: usize) -> String {
        match self.boxes.get(&index) {
            Some(inner) => inner.graph.roots().first().map_or_else(|| self.id(index), |&root| inner.entry(root)),
            None => self.id(index),
        }
    }

    /// The node an edge out of task `index` starts from: the task, or in its box the child's
    /// last sink.
    fn exit(&self, index: usize) -> String {
        match self.boxes.get(&index) {
            Some(inner) => inner.graph.sinks().last().map_or_else(|| self.id(index), |&sink| inner.exit(sink)),
            None => self.id(index),
        }
    }

    /// The ids of the conditional tasks and boxes: this level's in plan order, then each box's.
    fn conditional(&self, out: &mut Vec<String>) {
        out.extend(
            (0..self.plan.tasks.len()).filter(|&i| self.plan.tasks[i].extras().when.is_some()).map(|i| self.id(i)),
        );
        for inner in self.boxes.values() {
            inner.conditional(out);
        }
    }
}

/// The plan a sub-plan task runs, when the plan holds it (a plan read from text has none).
fn subplan<'a>(plan: &'a Plan, task: &Task) -> Option<&'a Plan> {
    if task.kind != TaskKind::Plan {
        return None;
    }
    plan.subplans.get(&task.extras().plan.as_ref()?.value).map(|child| &**child)
}
