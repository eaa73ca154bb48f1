//! What a plan decides while it runs: a task's `when`, taken once its dependencies are done,
//! and its `for_each`, expanded into one item task `ID[INDEX]` per element, whose outputs the
//! map task then collects into a JSON array. Each decision is an event (`TaskSkipped` with
//! its cause, `MapExpanded` with the list), so a resumed run reads it and never decides again.

use std::sync::Arc;

use manifest::plan::{At, ForEach, Task};
use manifest::template::{item_id, map_of_item};
use manifest::{Plan, Text};

use super::RunState;
use super::failure::Failure;
use crate::event::{ErrorClass, Event, SkipCause};
use crate::task::{TaskState, TaskStatus};
use crate::template::{Item, Values};
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Takes a ready task's `when` and `for_each` before it starts: `true` when that settled
    /// it for now (skipped, failed, expanded or collected), so nothing is dispatched.
    pub(super) fn decide_dynamic(&mut self, i: usize, out: &mut Vec<Event>) -> bool {
        let task = &self.plan.tasks[i];
        if self.maps.contains_key(task.id.value.as_str()) {
            self.collect(i, out);
            return true;
        }
        let extras = task.extras();
        let map = extras.for_each.as_ref().map(|f| f.value.clone());
        // A map's `when` that reads `item` is each item's, not the map's.
        let when =
            extras.when.as_ref().map(|w| w.value.clone()).filter(|w| map.is_none() || !self.renderer.reads_item(w));
        if let Some(when) = when {
            match self.renderer.condition(&when, &self.values(i)) {
                Ok(true) => {}
                Ok(false) => {
                    let reason = format!("its condition `{when}` is false");
                    let task = self.id(i).to_owned();
                    self.emit_for(i, Event::TaskSkipped { task, reason, cause: SkipCause::Condition }, out);
                    return true;
                }
                Err(error) => {
                    self.refuse(i, format!("cannot evaluate `when: {when}`: {error}"), out);
                    return true;
                }
            }
        }
        let Some(map) = map else { return false };
        let items = match &map {
            ForEach::List(items) => Ok(items.clone()),
            ForEach::Expr(expr) => self.renderer.list(expr, &self.values(i)).map_err(|e| e.to_string()),
        };
        let limit = self.plan.tasks[i].extras().max_items.as_ref().map(|max| max.value);
        match items {
            Ok(items) if limit.is_some_and(|limit| items.len() > limit as usize) => {
                let limit = limit.unwrap_or_default();
                let error = format!(
                    "`for_each` yielded {} items, more than `max_items: {limit}`; none was run (raise `max_items` or narrow the list)",
                    items.len()
                );
                self.refuse(i, error, out);
            }
            Ok(items) => {
                let (task, items) = (self.id(i).to_owned(), items.into());
                self.emit_for(i, Event::MapExpanded { task, items }, out);
            }
            Err(error) => self.refuse(i, error, out),
        }
        true
    }

    /// Records an attempt of task `i` that never reaches an agent, failed for `error`: it
    /// counts, and the task's policy decides what follows (no retry fixes it).
    pub(super) fn refuse(&mut self, i: usize, error: String, out: &mut Vec<Event>) {
        let (task, attempt) = (self.id(i).to_owned(), self.tasks[i].attempts + 1);
        self.emit_for(i, Event::TaskDispatched { task, attempt, input: "".into() }, out);
        self.dispatched.push((i, attempt));
        self.fail_attempt(i, attempt, Failure::new(error, ErrorClass::Permanent), out);
    }

    /// Succeeds an expanded map whose items are all final: its output is their outputs as a
    /// JSON array in item order (JSON embedded as JSON, text as a string, no output as `null`).
    fn collect(&mut self, i: usize, out: &mut Vec<Event>) {
        let task = self.id(i).to_owned();
        let count = self.maps.get(&task).map_or(0, |items| items.len());
        let outputs: Vec<serde_json::Value> = (0..count)
            .map(|k| {
                let state = self.index_of(&item_id(&task, k)).map(|j| &self.tasks[j]);
                match state.filter(|s| s.status == TaskStatus::Succeeded).and_then(|s| s.output.as_deref()) {
                    Some(text) => serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::from(text)),
                    None => serde_json::Value::Null,
                }
            })
            .collect();
        let output = serde_json::Value::Array(outputs).to_string().into();
        let event =
            Event::TaskSucceeded { task, attempt: 0, dispatched_seq: None, output, tokens: None, duration_ms: 0 };
        self.emit_for(i, event, out);
    }

    /// `MapExpanded`: the map's items join the plan just before it, and it waits for them.
    pub(super) fn expanded(&mut self, task: &str, known: Option<usize>, items: &Arc<[serde_json::Value]>) {
        let Some(i) = known.or_else(|| self.index_of(task)) else { return };
        if self.maps.contains_key(task) {
            return;
        }
        let keep_when = self.plan.tasks[i].extras().when.as_ref().is_some_and(|w| self.renderer.reads_item(&w.value));
        let plan = Arc::new(with_items(&self.plan, i, items.len(), keep_when));
        let Ok(graph) = manifest::TaskGraph::build(&plan) else { return };
        self.maps.insert(task.to_owned(), Arc::clone(items));
        // The items' states go in where their tasks do; every other task keeps its own.
        let mut tasks = std::mem::take(&mut self.tasks);
        tasks.splice(i..i, (0..items.len()).map(|_| TaskState::new()));
        self.rebuild(plan, Arc::new(graph), tasks);
        // Attempts this command dispatched after the map moved by as many places as it has items.
        for (j, _) in &mut self.dispatched {
            if *j >= i {
                *j += items.len();
            }
        }
        // Items a retried run took over succeed as they appear.
        for index in 0..items.len() {
            let id = item_id(task, index);
            if let Some(output) = self.reused_items.remove(&id) {
                self.reused(&id, None, &output);
            }
        }
    }

    /// The plan as written, without the items of its maps: what a new run of it (a retry)
    /// starts from, expanding the maps again.
    pub fn written_plan(&self) -> Plan {
        let is_item = |id: &str| map_of_item(id).is_some_and(|map| self.maps.contains_key(map));
        let mut tasks: Vec<Task> = Vec::with_capacity(self.plan.tasks.len());
        for task in self.plan.tasks.iter().filter(|t| !is_item(&t.id.value)) {
            let mut task = task.clone();
            task.depends_on.retain(|d| !is_item(&d.value));
            tasks.push(task);
        }
        self.plan.with_tasks(tasks)
    }

    /// Whether `id` names an item (`ID[INDEX]`) of a map task of the plan.
    pub(super) fn is_item_of_map(&self, id: &str) -> bool {
        map_of_item(id)
            .and_then(|map| self.index_of(map))
            .is_some_and(|i| self.plan.tasks[i].extras().for_each.is_some())
    }

    /// What task `i`'s templates and conditions read: the run, and its item when it is one.
    pub(super) fn values(&self, i: usize) -> Values<'_> {
        Values {
            plan: &self.plan,
            graph: &self.graph,
            tasks: &self.tasks,
            vars: &self.vars,
            context_summary: &self.context_summary,
            item: self.item_of(i),
        }
    }

    /// The element and position of item task `i` (`ID[INDEX]` of an expanded map), if it is one.
    fn item_of(&self, i: usize) -> Option<Item<'_>> {
        let id = self.id(i);
        let map = map_of_item(id)?;
        let index = id[map.len() + 1..id.len() - 1].parse().ok()?;
        let value = self.maps.get(map)?.get(index)?;
        Some(Item { value, index })
    }
}

/// `plan` with `count` item tasks of map task `i` just before it: each a copy of the map
/// without its `for_each` (and without its `when` unless the condition is each item's), and
/// the map depending on them all.
fn with_items(plan: &Plan, i: usize, count: usize, keep_when: bool) -> Plan {
    let map = &plan.tasks[i];
    let mut extras = map.extras().clone();
    extras.for_each = None;
    extras.max_items = None;
    if !keep_when {
        extras.when = None;
    }
    let mut tasks: Vec<Task> = Vec::with_capacity(plan.tasks.len() + count);
    tasks.extend_from_slice(&plan.tasks[..i]);
    let mut collector = map.clone();
    // Items are copies of the map without its list: a copy of the map itself would copy a
    // literal `for_each` list once per item.
    let mut template = map.clone();
    template.set_extras(extras);
    for index in 0..count {
        let id = Text::from(item_id(&map.id.value, index));
        let mut item = template.clone();
        item.id = At::new(id.clone(), map.id.loc.clone());
        tasks.push(item);
        collector.depends_on.push(At::new(id, map.id.loc.clone()));
    }
    tasks.push(collector);
    tasks.extend_from_slice(&plan.tasks[i + 1..]);
    plan.with_tasks(tasks)
}
