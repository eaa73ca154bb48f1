//! Before a run: which tasks the cache will give and why the others run. It works top-down, as
//! `terraform plan` lists changes: a reused task's output is known, so its dependents' inputs can
//! be rendered and keyed before anything runs; a task below one that runs is decided when it runs.

use std::path::Path;
use std::sync::Arc;

use manifest::plan::Vars;
use manifest::{Plan, TaskGraph};

use super::key::{changed, describe};
use super::{CacheError, Entry, Key, Keyer, Parts, never_reused, setting};
use crate::Handler as _;
use crate::event::Event;
use crate::{Command, Recalled, Reuse, RunState, Start};

/// What becomes of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The cache gives its output.
    Reused(Entry),
    /// It runs, for this reason.
    Runs(String),
}

/// What the cache gives a run, task by task.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    /// One verdict per task of the plan, in plan order.
    pub verdicts: Vec<Verdict>,
    /// Damaged entries met (each ignored: its task runs).
    pub problems: Vec<CacheError>,
}

impl Resolution {
    /// How many tasks the cache gives.
    pub fn reused(&self) -> usize {
        self.verdicts.iter().filter(|v| matches!(v, Verdict::Reused(_))).count()
    }

    /// The outputs a run's start takes, in plan order.
    pub fn recalled(&self, plan: &Plan) -> Vec<Recalled> {
        plan.tasks
            .iter()
            .zip(&self.verdicts)
            .filter_map(|(task, verdict)| match verdict {
                Verdict::Reused(entry) => Some(entry.clone().recalled(&task.id.value)),
                Verdict::Runs(_) => None,
            })
            .collect()
    }
}

/// What a cache holds under one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The entry: the newest, or the one of the run asked for.
    Entry(Box<Entry>),
    /// Entries of other runs than the one asked for.
    OtherRuns,
    /// Nothing.
    Nothing,
}

/// What [`Lookup::find`] says of one key.
pub type Found = Result<Stored, CacheError>;

/// Where [`resolve`] finds stored outputs: the task cache (files or a table), or the outputs a
/// plan test declares. It is asked a phase of the plan at a time.
pub trait Lookup {
    /// For each `(task, key)` of `wanted`, what is stored under the key (only run `run`'s entry
    /// counts, when given); a damaged entry is an error of its own. An error of the whole call
    /// means the cache cannot be read.
    fn find(&self, wanted: &[(&str, Key)], run: Option<&str>) -> Result<Vec<Found>, CacheError>;

    /// The newest entry stored for each of `tasks` of plan `plan`, to say what changed since.
    fn latest(&self, plan: &str, tasks: &[&str]) -> Vec<Option<Entry>>;
}

/// Decides, for each task of `plan`, whether the cache gives its output, rendering inputs
/// top-down against the outputs it gives (attached files are read under `workdir`).
pub fn resolve(
    plan: &Arc<Plan>,
    graph: &Arc<TaskGraph>,
    vars: &Vars,
    workdir: &Path,
    cache: &dyn Lookup,
    reuse: &Reuse,
) -> Resolution {
    // A scratch run of the plan, whose outputs are the ones the cache gives: it renders inputs
    // the way the run will. It may dispatch one task; nothing it records is kept.
    let mut state = RunState::new();
    state.limit_dispatches(1);
    let start =
        Start { plan: Arc::clone(plan), vars: vars.clone(), graph: Some(Arc::clone(graph)), ..Start::default() };
    if state.process(Command::Start(start)).is_err() {
        return Resolution::default();
    }
    let mut keyer = Keyer::new(Arc::clone(plan), workdir);
    let mut resolution =
        Resolution { verdicts: vec![Verdict::Runs(String::new()); plan.tasks.len()], problems: Vec::new() };
    let now = super::now();
    // A phase at a time: a task's dependencies are all in earlier phases, so every input of a
    // phase can be rendered before the cache is asked about the whole phase at once.
    for phase in graph.phases() {
        let mut asked: Vec<(usize, Parts)> = Vec::new();
        for &i in phase {
            match runs_anyway(plan, graph, &resolution.verdicts, i, reuse) {
                Some(why) => resolution.verdicts[i] = Verdict::Runs(why),
                None => match state.render_input(i) {
                    Err(error) => {
                        resolution.verdicts[i] = Verdict::Runs(format!("its input cannot be rendered yet: {error}"));
                    }
                    Ok(input) => asked.push((i, keyer.parts(i, &input))),
                },
            }
        }
        if asked.is_empty() {
            continue;
        }
        let wanted: Vec<(&str, Key)> =
            asked.iter().map(|(i, parts)| (plan.tasks[*i].id.value.as_str(), parts.key())).collect();
        let found = match cache.find(&wanted, reuse.run.as_deref()) {
            Ok(found) => found,
            Err(error) => {
                resolution.problems.push(error);
                for (i, _) in &asked {
                    resolution.verdicts[*i] = Verdict::Runs("the cache cannot be read".to_owned());
                }
                continue;
            }
        };
        let mut missing = Vec::new();
        for ((i, parts), found) in asked.iter().zip(found) {
            resolution.verdicts[*i] = match found {
                Err(error) => {
                    resolution.problems.push(error);
                    Verdict::Runs("its stored output is damaged".to_owned())
                }
                Ok(Stored::Entry(entry)) => usable(plan, *i, *entry, now),
                Ok(Stored::OtherRuns) => Verdict::Runs(format!(
                    "run `{}` stored no output for its key",
                    reuse.run.as_deref().unwrap_or_default()
                )),
                Ok(Stored::Nothing) => {
                    missing.push((*i, parts));
                    continue;
                }
            };
            if let Verdict::Reused(entry) = &resolution.verdicts[*i] {
                let task = plan.tasks[*i].id.value.to_string();
                state.apply(&Event::TaskReused { task, output: entry.output.clone(), from: None });
            }
        }
        let tasks: Vec<&str> = missing.iter().map(|(i, _)| plan.tasks[*i].id.value.as_str()).collect();
        for ((i, parts), before) in missing.iter().zip(cache.latest(&plan.name, &tasks)) {
            resolution.verdicts[*i] = Verdict::Runs(why_new(before, &parts.short()));
        }
    }
    resolution
}

/// Why task `i` runs whatever the cache holds, if it does: its own reasons, or a dependency that
/// runs (whose output is not known before the run).
fn runs_anyway(plan: &Plan, graph: &TaskGraph, verdicts: &[Verdict], i: usize, reuse: &Reuse) -> Option<String> {
    if let Some(why) = never_reused(plan, i, reuse) {
        return Some(why.to_owned());
    }
    let parent = graph.parents(i).find(|&p| !matches!(verdicts[p], Verdict::Reused(_)))?;
    Some(format!("it depends on `{}`, which runs (looked up again once that is done)", plan.tasks[parent].id.value))
}

/// An entry found under task `i`'s key, unless it is too old for the task's `ttl`.
pub(super) fn usable(plan: &Plan, i: usize, entry: Entry, now: u64) -> Verdict {
    let ttl = setting(plan, i).and_then(|cache| cache.ttl);
    if let Some(ttl) = ttl.filter(|ttl| entry.stored_at.saturating_add(ttl.as_millis() / 1000) < now) {
        return Verdict::Runs(format!("the output run `{}` stored is older than its ttl ({ttl})", entry.run));
    }
    Verdict::Reused(entry)
}

/// Why a task whose key has no entry runs: what changed since `before`, the output stored for it
/// last, if any.
fn why_new(before: Option<Entry>, now: &str) -> String {
    let Some(before) = before else { return "no output is stored for it".to_owned() };
    let parts: Vec<&str> = changed(&before.parts, now).into_iter().map(describe).collect();
    match parts.as_slice() {
        [] => format!("no output is stored for its key (run `{}` stored another)", before.run),
        parts => format!("{} changed since run `{}`", parts.join(", "), before.run),
    }
}
