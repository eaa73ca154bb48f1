//! The task graph: dependencies as adjacency lists, with phases, the critical path, roots and
//! sinks. The critic and the engine both read plans through it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use petgraph::graph::{DiGraph, NodeIndex};

use crate::plan::Plan;
use crate::text::Text;

/// A task's position in `Plan::tasks`; also its node index in the graph.
pub type TaskIdx = usize;

/// The dependency graph of a plan. Node `i` is `plan.tasks[i]`; an edge runs from a
/// dependency to its dependent. Built only for acyclic plans.
#[derive(Debug, Clone)]
pub struct TaskGraph {
    parents: Adjacency,
    children: Adjacency,
    index: IdIndex,
    topo: Vec<TaskIdx>,
    level: Vec<u32>,
    height: Vec<u32>,
    phases: Vec<Vec<TaskIdx>>,
}

/// Hashes task ids for the index by id, which the engine reads on every event (and validation
/// for every dependency): a word at a time with a multiply and a final mix, several times
/// faster than the default SipHash on short ids. Ids come from the plan's author, so there is
/// no hash flooding to guard against.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let mut last = [0; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // splitmix64's finaliser: every input bit reaches the low bits the table indexes by.
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
}

/// For each task, a sorted list of tasks (its parents, or its children), all in one vector:
/// a list per task would cost a vector's header and an allocation for each of 100,000 tasks.
#[derive(Debug, Clone)]
struct Adjacency {
    /// Where each task's list starts in `items`; one more entry than tasks, for the last end.
    starts: Vec<u32>,
    items: Vec<u32>,
}

impl Adjacency {
    /// The lists of `n` tasks from `(task, item)` pairs; each list comes out sorted.
    fn new(n: usize, pairs: impl Iterator<Item = (TaskIdx, TaskIdx)> + Clone) -> Self {
        let mut starts = vec![0u32; n + 1];
        for (task, _) in pairs.clone() {
            starts[task + 1] += 1;
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut next: Vec<u32> = starts[..n].to_vec();
        let mut items = vec![0u32; starts[n] as usize];
        for (task, item) in pairs {
            items[next[task] as usize] = item as u32;
            next[task] += 1;
        }
        for i in 0..n {
            items[starts[i] as usize..starts[i + 1] as usize].sort_unstable();
        }
        Adjacency { starts, items }
    }

    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    fn of(&self, task: TaskIdx) -> &[u32] {
        &self.items[self.starts[task] as usize..self.starts[task + 1] as usize]
    }
}

/// Task positions by id: made once, validation finds repeated ids with it and the graph keeps
/// it for [`TaskGraph::index_of`].
#[derive(Debug, Clone)]
pub(crate) struct IdIndex(HashMap<Text, TaskIdx, BuildHasherDefault<IdHasher>>);

impl IdIndex {
    /// The first position of each id, and the positions of the tasks whose id an earlier task
    /// already has, in workflow order.
    pub(crate) fn of(plan: &Plan) -> (Self, Vec<TaskIdx>) {
        let mut index = HashMap::with_capacity_and_hasher(plan.tasks.len(), BuildHasherDefault::default());
        let mut repeated = Vec::new();
        for (i, task) in plan.tasks.iter().enumerate() {
            match index.entry(Text::from(task.id.value.as_str())) {
                Entry::Vacant(slot) => {
                    slot.insert(i);
                }
                Entry::Occupied(_) => repeated.push(i),
            }
        }
        (IdIndex(index), repeated)
    }

    /// The position of the (first) task with this id.
    pub(crate) fn get(&self, id: &str) -> Option<TaskIdx> {
        self.0.get(id.as_bytes()).copied()
    }
}

/// The strongly connected components with more than one task, each in workflow order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycles(pub Vec<Vec<TaskIdx>>);

impl TaskGraph {
    /// Builds the graph from the plan's known dependencies (unknown ids and self-dependencies
    /// are validation errors and are left out); fails with every cycle when there are any.
    pub fn build(plan: &Plan) -> Result<Self, Cycles> {
        Self::with_index(plan, IdIndex::of(plan).0)
    }

    /// Builds the graph with the index of the plan's ids already made (validation makes it to
    /// find repeated ids).
    pub(crate) fn with_index(plan: &Plan, index: IdIndex) -> Result<Self, Cycles> {
        let n = plan.tasks.len();
        // The edges, dependency to dependent, only while the adjacency lists are made: a graph
        // kept beside them would hold every edge twice more for as long as the plan lives.
        let mut edges: Vec<(u32, u32)> = Vec::with_capacity(plan.tasks.iter().map(|t| t.depends_on.len()).sum());
        let mut deps: Vec<usize> = Vec::new();
        for (i, task) in plan.tasks.iter().enumerate() {
            // Duplicates are dropped per task: a task's own list is short.
            deps.clear();
            deps.extend(task.depends_on.iter().filter_map(|dep| index.get(&dep.value)).filter(|&d| d != i));
            deps.sort_unstable();
            deps.dedup();
            edges.extend(deps.iter().map(|&d| (d as u32, i as u32)));
        }
        let pairs = || edges.iter().map(|&(from, to)| (from as usize, to as usize));
        let parents = Adjacency::new(n, pairs().map(|(from, to)| (to, from)));
        let children = Adjacency::new(n, pairs());
        let topo = kahn(&parents, &children);
        if topo.len() < n {
            return Err(cycles(n, &edges));
        }
        drop(edges);
        let mut level = vec![0u32; n];
        for &i in &topo {
            level[i] = parents.of(i).iter().map(|&p| level[p as usize] + 1).max().unwrap_or(0);
        }
        let mut height = vec![1u32; n];
        for &i in topo.iter().rev() {
            height[i] = 1 + children.of(i).iter().map(|&c| height[c as usize]).max().unwrap_or(0);
        }
        let depth = level.iter().max().map_or(0, |&m| m as usize + 1);
        let mut phases = vec![Vec::new(); depth];
        for (i, &l) in level.iter().enumerate() {
            phases[l as usize].push(i);
        }
        Ok(TaskGraph { parents, children, index, topo, level, height, phases })
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.level.len()
    }

    /// Whether the plan has no tasks.
    pub fn is_empty(&self) -> bool {
        self.level.is_empty()
    }

    /// The position of the (first) task with this id.
    pub fn index_of(&self, id: &str) -> Option<TaskIdx> {
        self.index.get(id)
    }

    /// The tasks a task depends on directly, in workflow order.
    pub fn parents(&self, task: TaskIdx) -> impl Iterator<Item = TaskIdx> + '_ {
        self.parents.of(task).iter().map(|&p| p as usize)
    }

    /// The tasks that depend on a task directly, in workflow order.
    pub fn children(&self, task: TaskIdx) -> impl Iterator<Item = TaskIdx> + '_ {
        self.children.of(task).iter().map(|&c| c as usize)
    }

    /// Tasks with no dependencies, in workflow order.
    pub fn roots(&self) -> Vec<TaskIdx> {
        self.phases.first().cloned().unwrap_or_default()
    }

    /// Tasks nothing depends on, in workflow order.
    pub fn sinks(&self) -> Vec<TaskIdx> {
        (0..self.len()).filter(|&i| self.children(i).next().is_none()).collect()
    }

    /// A topological order that keeps workflow order among tasks ready at the same time.
    pub fn topo_order(&self) -> &[TaskIdx] {
        &self.topo
    }

    /// The topological levels: phase 0 holds the roots, phase k the tasks whose longest chain
    /// of dependencies has k links. Each phase is in workflow order.
    pub fn phases(&self) -> &[Vec<TaskIdx>] {
        &self.phases
    }

    /// The phase a task is in.
    pub fn level(&self, task: TaskIdx) -> usize {
        self.level[task] as usize
    }

    /// The number of tasks on the longest chain from this task to a sink, itself included:
    /// the remaining critical path the eager scheduler favours.
    pub fn height(&self, task: TaskIdx) -> usize {
        self.height[task] as usize
    }

    /// The longest chain of tasks (by count); among equally long ones, the earliest in the
    /// workflow.
    pub fn critical_path(&self) -> Vec<TaskIdx> {
        let start = (0..self.len())
            .filter(|&i| self.level[i] == 0)
            .max_by(|&a, &b| self.height[a].cmp(&self.height[b]).then(b.cmp(&a)));
        let mut path = Vec::new();
        let mut at = start;
        while let Some(task) = at {
            path.push(task);
            at = self.children(task).filter(|&c| self.height[c] + 1 == self.height[task]).min();
        }
        path
    }

    /// Whether `ancestor` must finish before `task` can start.
    pub fn is_ancestor(&self, ancestor: TaskIdx, task: TaskIdx) -> bool {
        if ancestor == task || self.level[ancestor] >= self.level[task] {
            return false;
        }
        let floor = self.level[ancestor];
        // A set, not a vector of the graph's size: the search usually stops within a few
        // steps, and validation asks this once per template reference.
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([task]);
        while let Some(at) = queue.pop_front() {
            for parent in self.parents(at) {
                if parent == ancestor {
                    return true;
                }
                if self.level[parent] > floor && seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        false
    }

    /// The parents of `task` that are also ancestors of another of its parents: the
    /// dependencies another one already implies. One search upwards from all the parents at
    /// once that never goes below the lowest parent's phase, so a task with thousands of
    /// parents in one phase costs as many steps as it has parents.
    pub fn implied_parents(&self, task: TaskIdx) -> HashSet<TaskIdx> {
        let parents: HashSet<TaskIdx> = self.parents(task).collect();
        let mut implied = HashSet::new();
        let Some(floor) = parents.iter().map(|&p| self.level[p]).min() else { return implied };
        if parents.len() < 2 {
            return implied;
        }
        let mut seen = HashSet::new();
        let mut queue: VecDeque<TaskIdx> =
            parents.iter().flat_map(|&p| self.parents(p)).filter(|&g| self.level[g] >= floor).collect();
        while let Some(at) = queue.pop_front() {
            if !seen.insert(at) {
                continue;
            }
            if parents.contains(&at) {
                implied.insert(at);
            }
            if self.level[at] > floor {
                queue.extend(self.parents(at).filter(|&g| self.level[g] >= floor && !seen.contains(&g)));
            }
        }
        implied
    }
}

/// The strongly connected components of more than one task among `n` tasks joined by `edges`,
/// each sorted, in order; built only for a plan that has a cycle.
fn cycles(n: usize, edges: &[(u32, u32)]) -> Cycles {
    let mut graph = DiGraph::<(), (), u32>::with_capacity(n, edges.len());
    for _ in 0..n {
        graph.add_node(());
    }
    graph.extend_with_edges(edges.iter().copied());
    let mut cycles: Vec<Vec<TaskIdx>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut members: Vec<TaskIdx> = component.into_iter().map(NodeIndex::index).collect();
            members.sort_unstable();
            members
        })
        .collect();
    cycles.sort();
    Cycles(cycles)
}

/// Kahn's algorithm with a min-heap, so ties go to the earlier task in the workflow; a result
/// shorter than the graph means a cycle.
fn kahn(parents: &Adjacency, children: &Adjacency) -> Vec<TaskIdx> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = parents.len();
    let mut indegree: Vec<usize> = (0..n).map(|i| parents.of(i).len()).collect();
    let mut ready: BinaryHeap<Reverse<TaskIdx>> = (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &child in children.of(i) {
            let child = child as usize;
            indegree[child] -= 1;
            if indegree[child] == 0 {
                ready.push(Reverse(child));
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    #[test]
    fn parents_and_children_come_in_workflow_order_without_repeats() {
        let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  \
                    agent_definitions: {m: {runtime: mock}}\n  workflow:\n    \
                    - {id: a, agent: m, input: go}\n    - {id: b, agent: m, input: go}\n    \
                    - {id: c, agent: m, input: go, depends_on: [b, a, b]}\n    \
                    - {id: d, agent: m, input: go, depends_on: [c, a]}\n";
        let loaded = crate::load_str("t.yaml", "t", yaml, &|_| true);
        let (_, graph) = loaded.valid().expect("the plan is valid");
        let parents: Vec<Vec<usize>> = (0..4).map(|i| graph.parents(i).collect()).collect();
        let children: Vec<Vec<usize>> = (0..4).map(|i| graph.children(i).collect()).collect();
        assert_eq!(parents, [vec![], vec![], vec![0, 1], vec![0, 2]]);
        assert_eq!(children, [vec![2, 3], vec![2], vec![3], vec![]]);
        assert_eq!(graph.topo_order(), [0, 1, 2, 3]);
        assert_eq!(graph.phases(), [vec![0, 1], vec![2], vec![3]]);
    }
}
