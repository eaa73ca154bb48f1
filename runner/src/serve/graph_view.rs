//! A plan's task graph as the page draws it: each task with its phase, parallel group, kind
//! and dependencies, and the critical path.

use manifest::plan::TaskKind;
use manifest::{Plan, TaskGraph};
use serde::Serialize;

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
            })
            .collect();
        GraphView { name: plan.name.clone(), phases: graph.phases().len(), tasks, critical: graph.critical_path() }
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
