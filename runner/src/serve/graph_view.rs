//! A plan's task graph as the page draws it: each task with its phase, parallel group, kind
//! and dependencies, what a map task runs over and a conditional task's condition, and the
//! critical path. A run's graph is its plan as written: a map is one node whatever its items.

use manifest::plan::{ForEach, Task, TaskKind};
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
    /// `task`, `gate` or `review`.
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
}

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
    /// The graph of a valid plan.
    pub fn new(plan: &Plan, graph: &TaskGraph) -> Self {
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
            })
            .collect();
        GraphView { name: plan.name.clone(), phases: graph.phases().len(), tasks, critical: graph.critical_path() }
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
    }
}
