//! The child runs of sub-plan and `expand` tasks, kept in the parent's store (run folders or
//! the database) and driven in this process by the parent's attempts; and routing a person's
//! answer or decision given to the parent (`TASK/CHILD_TASK`) to the child that asked.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use engine::driver::Driver;
use engine::runtime::{ChildFuture, Children, Registry};
use engine::{Command, Record, RunState};
use manifest::plan::{TaskKind, Vars};
use tokio_util::sync::CancellationToken;

use crate::home::fold;
use crate::store::{Run, Runs};

/// The child runs of one parent run in its store, driven with the parent's cancel and halt
/// tokens.
pub struct StoreChildren {
    runs: Runs,
    parent: String,
    vars: Vars,
    cancel: CancellationToken,
    halt: CancellationToken,
    reason: Arc<OnceLock<String>>,
}

impl StoreChildren {
    /// The children of run `parent` (whose variables are `vars`) in `runs`; `cancel` and `halt`
    /// are the parent's, so a cancelled parent cancels its children (each records it) and a
    /// halted one (SIGTERM) stops them without recording anything, to be resumed.
    pub fn new(
        runs: Runs,
        parent: &str,
        vars: Vars,
        cancel: CancellationToken,
        halt: CancellationToken,
        reason: Arc<OnceLock<String>>,
    ) -> Self {
        StoreChildren { runs, parent: parent.to_owned(), vars, cancel, halt, reason }
    }

    /// The runtimes a run's driver uses, with its sub-plans' children kept in `runs`.
    pub fn registry(self, base: Registry) -> Registry {
        base.with_children(Arc::new(self))
    }
}

impl Children for StoreChildren {
    fn parent(&self) -> &str {
        &self.parent
    }

    fn vars(&self) -> Vars {
        self.vars.clone()
    }

    fn load<'a>(&'a self, id: &'a str) -> ChildFuture<'a, Option<RunState>> {
        let (runs, id) = (self.runs.clone(), id.to_owned());
        Box::pin(async move {
            // The stores block (file locks, the database's own runtime): off the async threads.
            let loaded = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<RunState>> {
                let Some(run) = runs.find(&id)? else { return Ok(None) };
                let (records, _) = run.load()?;
                Ok(Some(fold(&records)))
            });
            loaded.await.map_err(|e| e.to_string())?.map_err(|e| format!("{e:#}"))
        })
    }

    fn drive(
        &self,
        id: String,
        first: Command,
        workdir: PathBuf,
        stop: CancellationToken,
    ) -> ChildFuture<'_, RunState> {
        let (runs, cancel, reason) = (self.runs.clone(), self.cancel.clone(), Arc::clone(&self.reason));
        // The parent's halt, or the attempt's stop (a timeout): either leaves the child as its
        // log has it. The parent's cancel token is a child of its halt, so a halt fires both,
        // and the driver takes the halt first.
        let halt = self.halt.child_token();
        let stopped = halt.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => stopped.cancel(),
                () = stopped.cancelled() => {}
            }
        });
        Box::pin(async move {
            let (opening_id, opening_runs) = (id.clone(), runs.clone());
            let opened =
                tokio::task::spawn_blocking(move || open(&opening_runs, &opening_id, &first).map(|o| (o, first)));
            let ((run, lock, store, records), first) =
                opened.await.map_err(|e| e.to_string())?.map_err(|e| format!("{e:#}"))?;
            let vars = vars_of(&first, &records);
            let children = StoreChildren::new(runs, &id, vars, cancel.clone(), halt.clone(), Arc::clone(&reason));
            let driver = Driver::new(id.clone(), store, &records, workdir)
                .with_runtimes(children.registry(Registry::builtin()))
                .cancel_reason(reason)
                .mark_processes(run.mark())
                .halt_on(halt);
            let driven = driver.run(first, cancel).await;
            let _ = tokio::task::spawn_blocking(move || lock.release()).await;
            driven.map_err(|e| format!("{e}"))
        })
    }
}

/// A run's variables: those `first` starts it with, or those its `RunCreated` recorded.
pub fn vars_of(first: &Command, records: &[engine::Record]) -> Vars {
    if let Command::Start(start) = first {
        return start.vars.clone();
    }
    let created = records.iter().find_map(|record| match &record.event {
        engine::Event::RunCreated(created) => Some(created.vars.clone()),
        _ => None,
    });
    created.unwrap_or_default()
}

type Opened = (Run, crate::store::Held, crate::store::RunStore, Vec<engine::Record>);

/// Creates the child run for a `Start`, or opens the existing one to resume it, under its lock.
fn open(runs: &Runs, id: &str, first: &Command) -> anyhow::Result<Opened> {
    if let Command::Start(start) = first {
        let (run, lock, store) = runs.create(id, &start.plan.name)?;
        return Ok((run, lock, store, Vec::new()));
    }
    let run = runs.existing(id)?;
    let lock = run.lock()?;
    let (store, loaded) = run.open(&lock)?;
    crate::survivors::end(&run)?;
    Ok((run, lock, store, loaded.records))
}

/// The child run that task `task` of a run started last, with its state: the one of its
/// latest attempt that exists. `None` when the task is no sub-plan or started none.
pub fn child_of(runs: &Runs, parent: &str, state: &RunState, task: &str) -> anyhow::Result<Option<(Run, RunState)>> {
    let Some(i) = state.index_of(task) else { return Ok(None) };
    if !matches!(state.plan.tasks[i].kind, TaskKind::Plan | TaskKind::Expand) {
        return Ok(None);
    }
    for attempt in (1..=state.tasks[i].attempts.max(1)).rev() {
        let id = engine::child::child_run_id(parent, task, attempt);
        if let Some(run) = runs.find(&id)? {
            let (records, _) = run.load()?;
            return Ok(Some((run, fold(&records))));
        }
    }
    Ok(None)
}

/// Routes a person's answer or decision for `TASK/CHILD_TASK` to the child run that task
/// started (further `/`s reach deeper children): records it there, then answers the parent
/// task's question, which was the child's, so `resume` goes on. Returns the parent's state and
/// its new records; `None` for a task without `/`, the run's own, for the caller to record.
pub fn route(runs: &Runs, run_id: &str, command: &Command) -> anyhow::Result<Option<(RunState, Vec<Record>)>> {
    let (task, forwarded) = match command {
        Command::Answer { task, text } => match task.split_once('/') {
            Some((task, rest)) => (task, Command::Answer { task: rest.to_owned(), text: text.clone() }),
            None => return Ok(None),
        },
        Command::Decide { task, approved, comment } => match task.split_once('/') {
            Some((task, rest)) => {
                (task, Command::Decide { task: rest.to_owned(), approved: *approved, comment: comment.clone() })
            }
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let run = runs.existing(run_id)?;
    if let Some(driver) = run.driver() {
        anyhow::bail!("run `{run_id}` is being driven by {driver}: answer at its prompt, or cancel it first");
    }
    let (records, _) = run.load()?;
    let state = fold(&records);
    let Some((child, _)) = child_of(runs, run_id, &state, task)? else {
        anyhow::bail!(
            "run `{run_id}` has no sub-plan run for task `{task}` (`TASK/CHILD_TASK` names a task of the run that a \
             `type: plan` or `type: expand` task started)"
        );
    };
    if route(runs, child.id(), &forwarded)?.is_none() {
        child.record(forwarded).with_context(|| format!("sub-plan run `{}`", child.id()))?;
    }
    let asked = state.index_of(task).is_some_and(|i| state.tasks[i].question().is_some());
    if !asked {
        return Ok(Some((state, Vec::new())));
    }
    Ok(Some(answered(&run, task, child.id())?))
}

/// After a person answered child run `child` directly (its own id, not through the parent),
/// answers the parent task's question, which was the child's, so that `resume` of the parent
/// goes on. Nothing when `records` (what was just recorded in the child) hold no answer or
/// decision, the run is no child, or its parent task does not wait.
pub fn answer_parent(runs: &Runs, child: &Run, records: &[Record]) -> anyhow::Result<()> {
    let decided = records.iter().any(|r| {
        matches!(
            r.event,
            engine::Event::ClarificationProvided { .. }
                | engine::Event::ReviewDecided { .. }
                | engine::Event::ToolApprovalDecided(_)
        )
    });
    if !decided {
        return Ok(());
    }
    let (records, _) = child.load()?;
    let parent = records.iter().find_map(|record| match &record.event {
        engine::Event::RunCreated(created) => created.parent.clone(),
        _ => None,
    });
    let Some(parent) = parent else { return Ok(()) };
    let Some(run) = runs.find(&parent.run)? else { return Ok(()) };
    if run.driver().is_some() {
        return Ok(());
    }
    let (records, _) = run.load()?;
    let state = fold(&records);
    if state.index_of(&parent.task).is_some_and(|i| state.tasks[i].question().is_some()) {
        let (_, recorded) = answered(&run, &parent.task, child.id())?;
        answer_parent(runs, &run, &recorded)?;
    }
    Ok(())
}

/// Answers task `task` of `run`, whose question was its child run's.
fn answered(run: &Run, task: &str, child: &str) -> anyhow::Result<(RunState, Vec<Record>)> {
    let text = format!("answered in the sub-plan run `{child}`");
    run.record(Command::Answer { task: task.to_owned(), text })
}
