//! Child runs in a plan test: the runs that `type: plan` and `type: expand` tasks start, kept in
//! memory for the whole scenario and driven, like the parent, in virtual time with the
//! scenario's jitter seed. A child's agents answer from the scenario's scripts for
//! `TASK/CHILD_TASK` (TASK the task that started it, its map for every item, or the item
//! itself), with `TASK/` taken off, and from its scripts by agent, tool and planner round; a
//! child's own children go on by the same rule (`a/b/c`). Answers and reviews for
//! `TASK/CHILD_TASK` reach a child that waits as `runner answer|approve|reject` route them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use engine::clock::Clock;
use engine::driver::Driver;
use engine::event::RunCreated;
use engine::runtime::{ChildFuture, Children};
use engine::script::Scripts;
use engine::store::MemoryStore;
use engine::{Command, Event, Handler as _, Record, RunState, RunStatus, TaskStatus};
use manifest::plan::{At, TaskKind, Vars};
use manifest::plan_test::{Overrides, PlanTest};
use tokio_util::sync::CancellationToken;

use crate::children::vars_of;
use crate::home::fold;

/// Every child run of one scenario, by run id, in memory.
#[derive(Clone, Default)]
pub struct Runs {
    stores: Arc<Mutex<BTreeMap<String, MemoryStore>>>,
}

impl Runs {
    /// The records of every child run, by run id.
    pub fn all(&self) -> Vec<(String, Vec<Record>)> {
        self.lock().iter().map(|(id, store)| (id.clone(), store.records())).collect()
    }

    /// The records of child run `id`; `None` when there is no such run.
    pub fn records(&self, id: &str) -> Option<Vec<Record>> {
        self.lock().get(id).map(MemoryStore::records)
    }

    /// The child run that task `task` of run `run` (whose state is `state`) started last: the
    /// one of its latest attempt that exists, with its id, state and records. `None` when the
    /// task started none.
    pub fn child_of(&self, run: &str, state: &RunState, task: &str) -> Option<(String, RunState, Vec<Record>)> {
        let i = state.index_of(task)?;
        if !matches!(state.plan.tasks[i].kind, TaskKind::Plan | TaskKind::Expand) {
            return None;
        }
        (1..=state.tasks[i].attempts.max(1)).rev().find_map(|attempt| {
            let id = engine::child::child_run_id(run, task, attempt);
            let records = self.records(&id)?;
            Some((id, fold(&records), records))
        })
    }

    /// The answers and decisions `given` has for what run `run` (whose state is `state`)
    /// waits for: a task's own; and for a task whose child run waits, the child's, recorded in
    /// the child's log as a person's are, then an answer for the task, as `runner answer`
    /// gives one when it routes `TASK/CHILD_TASK`.
    pub fn replies(&self, run: &str, state: &RunState, given: &Given, clock: Clock) -> Vec<Command> {
        let mut commands = Vec::new();
        for (task, t) in state.plan.tasks.iter().zip(&state.tasks).filter(|(_, t)| t.status == TaskStatus::Paused) {
            let id = task.id.value.as_str();
            if t.question().is_none() {
                if let Some((approved, comment)) = given.review(id) {
                    commands.push(Command::Decide { task: id.to_owned(), approved, comment });
                }
            } else if let Some(text) = given.answer(id) {
                commands.push(Command::Answer { task: id.to_owned(), text: text.to_owned() });
            } else if let Some(child) = self.answer_child(run, state, id, given, clock) {
                let text = format!("answered in the sub-plan run `{child}`");
                commands.push(Command::Answer { task: id.to_owned(), text });
            }
        }
        commands
    }

    /// Gives the child run that task `task` of run `run` waits on the answers and decisions
    /// `given` has for it; the child's id when it took any.
    fn answer_child(&self, run: &str, state: &RunState, task: &str, given: &Given, clock: Clock) -> Option<String> {
        let (id, mut child, mut records) = self.child_of(run, state, task)?;
        if child.status != RunStatus::Paused {
            return None;
        }
        let store = self.lock().get(&id).cloned()?;
        let mut taken = false;
        for command in self.replies(&id, &child, &given.under(task), clock) {
            // A refused command records nothing, as `runner answer` records nothing then.
            let Ok(events) = child.process(command) else { continue };
            let (at, run_id): (Arc<str>, Arc<str>) =
                (engine::clock::format_millis(clock.millis()).into(), id.as_str().into());
            let last = records.last().map_or(0, |r| r.seq);
            let recorded: Vec<Record> = events
                .into_iter()
                .zip(last + 1..)
                .map(|(event, seq)| Record { seq, at: Arc::clone(&at), run_id: Arc::clone(&run_id), event })
                .collect();
            records.extend(recorded.iter().cloned());
            // A memory store's append is durable at once.
            drop(engine::store::EventStore::append(&store, recorded));
            taken = true;
        }
        taken.then_some(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, MemoryStore>> {
        self.stores.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What every run of a scenario shares: where the child runs are, the virtual clock and the
/// seed of retry jitter.
#[derive(Clone)]
pub struct World {
    /// The child runs.
    pub runs: Runs,
    /// The scenario's virtual clock.
    pub clock: Clock,
    /// The seed of retry jitter.
    pub seed: u64,
}

/// The child runs of one run of a scenario, with the scripts that reach them.
pub struct TestChildren {
    world: World,
    parent: String,
    vars: Vars,
    /// The scenario's overrides as the run's own tasks are named in them.
    overrides: Overrides,
}

impl TestChildren {
    /// The children of run `parent`, whose variables are `vars` and whose tasks `overrides`
    /// names as its own.
    pub fn new(world: World, parent: &str, vars: Vars, overrides: Overrides) -> Self {
        TestChildren { world, parent: parent.to_owned(), vars, overrides }
    }
}

impl Children for TestChildren {
    fn parent(&self) -> &str {
        &self.parent
    }

    fn vars(&self) -> Vars {
        self.vars.clone()
    }

    fn load<'a>(&'a self, id: &'a str) -> ChildFuture<'a, Option<RunState>> {
        Box::pin(async move { Ok(self.world.runs.records(id).map(|records| fold(&records))) })
    }

    fn drive(
        &self,
        id: String,
        first: Command,
        workdir: PathBuf,
        stop: CancellationToken,
    ) -> ChildFuture<'_, RunState> {
        Box::pin(async move {
            let store = {
                let mut stores = self.world.runs.lock();
                match &first {
                    Command::Start(_) => {
                        let store = MemoryStore::new();
                        stores.insert(id.clone(), store.clone());
                        store
                    }
                    _ => stores.get(&id).cloned().ok_or_else(|| format!("there is no child run `{id}` to resume"))?,
                }
            };
            let records = store.records();
            let (plan, task) = match &first {
                Command::Start(start) => (Arc::clone(&start.plan), start.parent.as_ref().map(|p| p.task.clone())),
                _ => {
                    (Arc::clone(&fold(&records).plan), created(&records).and_then(|c| c.parent.clone()).map(|p| p.task))
                }
            };
            let overrides = task.map_or_else(Overrides::default, |task| scoped(&self.overrides, &task));
            let scripts = Scripts::new(&plan, &overrides);
            let children = TestChildren::new(self.world.clone(), &id, vars_of(&first, &records), overrides);
            let driver = Driver::new(id, store, &records, workdir)
                .with_clock(self.world.clock)
                .with_jitter_seed(self.world.seed)
                .halt_on(stop);
            let driven = scripts.install(driver, Some(Arc::new(children))).run(first, CancellationToken::new()).await;
            driven.map_err(|e| e.to_string())
        })
    }
}

/// The `RunCreated` of a run's records.
fn created(records: &[Record]) -> Option<&RunCreated> {
    records.iter().find_map(|record| match &record.event {
        Event::RunCreated(created) => Some(&**created),
        _ => None,
    })
}

/// The overrides that reach the child run of task `task`: the scripts for `TASK/...` with
/// `TASK/` taken off (its map's, then the item's own, which win), and every script by agent,
/// tool and planner round.
pub fn scoped(overrides: &Overrides, task: &str) -> Overrides {
    let tasks = under(overrides.tasks.iter().map(|(name, _)| name.value.as_str()), task);
    Overrides {
        tasks: tasks
            .into_iter()
            .map(|(i, rest)| {
                let (name, script) = &overrides.tasks[i];
                (At::new(rest, name.loc.clone()), script.clone())
            })
            .collect(),
        ..overrides.clone()
    }
}

/// The places of the names among `names` that reach the child run of task `task`, each with
/// `TASK/` taken off: those for its map first, then those for the task itself, so that a
/// later one wins.
fn under<'a>(names: impl Iterator<Item = &'a str> + Clone, task: &str) -> Vec<(usize, String)> {
    let prefixes = manifest::template::map_of_item(task).into_iter().chain([task]);
    prefixes
        .flat_map(|prefix| {
            names
                .clone()
                .enumerate()
                .filter_map(move |(i, name)| Some((i, name.strip_prefix(prefix)?.strip_prefix('/')?.to_owned())))
        })
        .collect()
}

/// A scenario's answers and decisions, by task as one run's tasks are named in them.
#[derive(Debug, Clone, Default)]
pub struct Given {
    answers: Vec<(String, String)>,
    reviews: Vec<(String, bool, Option<String>)>,
}

impl Given {
    /// The answers and reviews of `test`, for its own run.
    pub fn of(test: &PlanTest) -> Self {
        Given {
            answers: test.answers.iter().map(|(task, text)| (task.value.clone(), text.clone())).collect(),
            reviews: test
                .reviews
                .iter()
                .map(|(task, yes, comment)| (task.value.clone(), *yes, comment.clone()))
                .collect(),
        }
    }

    /// Those that reach the child run of task `task`, named as its tasks are.
    fn under(&self, task: &str) -> Given {
        let answers = under(self.answers.iter().map(|(name, _)| name.as_str()), task);
        let reviews = under(self.reviews.iter().map(|(name, ..)| name.as_str()), task);
        Given {
            answers: answers.into_iter().map(|(i, rest)| (rest, self.answers[i].1.clone())).collect(),
            reviews: reviews
                .into_iter()
                .map(|(i, rest)| {
                    let (_, yes, comment) = &self.reviews[i];
                    (rest, *yes, comment.clone())
                })
                .collect(),
        }
    }

    /// The answer for task `task`.
    fn answer(&self, task: &str) -> Option<&str> {
        self.answers.iter().rev().find(|(name, _)| name == task).map(|(_, text)| text.as_str())
    }

    /// The decision for task `task`: approved, and the comment.
    fn review(&self, task: &str) -> Option<(bool, Option<String>)> {
        self.reviews.iter().rev().find(|(name, ..)| name == task).map(|(_, yes, comment)| (*yes, comment.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(answers: &[(&str, &str)]) -> Given {
        let answers = answers.iter().map(|(task, text)| ((*task).to_owned(), (*text).to_owned())).collect();
        Given { answers, reviews: Vec::new() }
    }

    #[test]
    fn an_items_child_takes_its_maps_names_and_its_own_which_win() {
        let all = given(&[
            ("brief[1]/check", "one"),
            ("brief/check", "all"),
            ("brief/x/deep", "deep"),
            ("other/check", "no"),
        ]);
        let first = all.under("brief[0]");
        assert_eq!(first.answer("check"), Some("all"));
        assert_eq!(first.answer("x/deep"), Some("deep"));
        assert_eq!(all.under("brief[1]").answer("check"), Some("one"));
        assert_eq!(all.under("brief").answer("check"), Some("all"));
        // `brief2/...` is not `brief/...`.
        assert_eq!(given(&[("brief2/check", "no")]).under("brief").answer("check"), None);
    }
}
