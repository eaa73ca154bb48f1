//! A plan's task graph as the page draws it: each task with its phase, parallel group, kind
//! and dependencies, what a map task runs over and a conditional task's condition, and the
//! critical path. A run's graph is its plan as written: a map is one node whatever its items.
//! A sub-plan task carries its child plan's graph, nested for the child's own sub-plans.

use manifest::plan::{ForEach, Task, TaskKind};
use manifest::subplan::MAX_DEPTH;
use manifest::{Plan, TaskGraph};
use serde::Serialize;

use super::error::ApiError;

/// The graph of a plan, tasks in plan order.
#[derive(Debug, Serialize)]
pub struct GraphView {
    name: String,
    phases: usize,
    tasks: Vec<NodeView>,
    /// The indices of the tasks on the critical path, in order.
    critical: Vec<usize>,
}

/// One task of the graph.
#[derive(Debug, Serialize)]
struct NodeView {
    id: String,
    /// `task`, `gate`, `review`, `plan` (a sub-plan) or `expand` (a plan its agent writes at
    /// run time).
    kind: &'static str,
    agent: Option<String>,
    phase: usize,
    group: Option<String>,
    /// The indices of the tasks it depends on.
    deps: Vec<usize>,
    /// What a map task (`for_each`) runs over; left out for any other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    map: Option<MapSource>,
    /// A conditional task's `when`, as an expression; left out for any other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<String>,
    /// A sub-plan task's file, as its `plan:` gives it; left out for any other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<String>,
    /// The graph of the plan a sub-plan task runs, when it was loaded with its parent (a
    /// pasted plan's are not) and the graph's budget of nested tasks is not spent.
    #[serde(skip_serializing_if = "Option::is_none")]
    subplan: Option<GraphView>,
    /// The most tasks the plan an `expand` task's agent writes may have, when bounded.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tasks: Option<u32>,
}

/// The most tasks of sub-plans one graph nests: past it, a sub-plan task has no `subplan`,
/// so files that run each other many times over cannot make the answer explode.
const NESTED_TASKS: usize = 5_000;

/// What a map task runs over, as the manifest says: a list of `items` written in it, or an
/// `expr` evaluated at run time and capped at `max_items`.
#[derive(Debug, Serialize)]
struct MapSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_items: Option<u32>,
}

impl MapSource {
    /// What `task` runs over, if it is a map.
    fn of(task: &Task) -> Option<Self> {
        let extras = task.extras();
        Some(match &extras.for_each.as_ref()?.value {
            ForEach::List(list) => MapSource { items: Some(list.len()), expr: None, max_items: None },
            ForEach::Expr(expr) => MapSource {
                items: None,
                expr: Some(manifest::template::expression(expr).to_owned()),
                max_items: extras.max_items.as_ref().map(|max| max.value),
            },
        })
    }
}

impl GraphView {
    /// The graph of a valid plan, with its sub-plans' graphs nested at most [`MAX_DEPTH`] deep
    /// and holding at most [`NESTED_TASKS`] tasks in all.
    pub fn new(plan: &Plan, graph: &TaskGraph) -> Self {
        let mut left = NESTED_TASKS;
        GraphView::nested(plan, graph, 0, &mut left)
    }

    fn nested(plan: &Plan, graph: &TaskGraph, depth: usize, left: &mut usize) -> Self {
        let mut phase_of = vec![0; plan.tasks.len()];
        for (p, phase) in graph.phases().iter().enumerate() {
            for &task in phase {
                phase_of[task] = p;
            }
        }
        let tasks = plan
            .tasks
            .iter()
            .enumerate()
            .map(|(i, task)| NodeView {
                id: task.id.value.to_string(),
                kind: kind_name(task.kind),
                agent: plan.agent_of(task).map(str::to_owned),
                phase: phase_of[i],
                group: task.extras().parallel_group.as_ref().map(|g| g.value.clone()),
                deps: graph.parents(i).collect(),
                map: MapSource::of(task),
                when: task.extras().when.as_ref().map(|w| manifest::template::expression(&w.value).to_owned()),
                plan: task.extras().plan.as_ref().filter(|_| task.kind == TaskKind::Plan).map(|p| p.value.clone()),
                subplan: GraphView::of_subplan(plan, task, depth, left),
                max_tasks: task.extras().max_tasks.as_ref().filter(|_| task.kind == TaskKind::Expand).map(|m| m.value),
            })
            .collect();
        GraphView { name: plan.name.clone(), phases: graph.phases().len(), tasks, critical: graph.critical_path() }
    }

    /// The graph of the plan sub-plan task `task` of `plan` runs, if the plan holds it and it
    /// fits in what is left of the budget.
    fn of_subplan(plan: &Plan, task: &Task, depth: usize, left: &mut usize) -> Option<Self> {
        if task.kind != TaskKind::Plan || depth >= MAX_DEPTH {
            return None;
        }
        let child = plan.subplans.get(&task.extras().plan.as_ref()?.value)?;
        if child.tasks.is_empty() || child.tasks.len() > *left {
            return None;
        }
        let graph = TaskGraph::build(child).ok()?;
        *left -= child.tasks.len();
        Some(GraphView::nested(child, &graph, depth + 1, left))
    }

    /// The graph of a run's plan as written: the items its maps expanded into are left out,
    /// each drawn inside its map from the state's `maps`.
    pub fn of_run(state: &engine::RunState) -> Result<Self, ApiError> {
        if state.maps.is_empty() {
            return Ok(GraphView::new(&state.plan, &state.graph));
        }
        let written = state.written_plan();
        let graph = TaskGraph::build(&written)
            .map_err(|_| ApiError::Internal(format!("the plan of run `{}` has a cycle", written.name)))?;
        Ok(GraphView::new(&written, &graph))
    }
}

/// The page's name of a kind of task.
pub fn kind_name(kind: TaskKind) -> &'static str {
    match kind {
        TaskKind::Task => "task",
        TaskKind::SynthesisGate => "gate",
        TaskKind::HumanReview => "review",
        TaskKind::Plan => "plan",
        TaskKind::Expand => "expand",
    }
}
