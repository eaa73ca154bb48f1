//! `runner retry`: a new run of a run's plan (as replanned, if it was) that reuses the outputs
//! of its succeeded tasks, except those downstream of a task that did not succeed (they were
//! computed without its output) and, with `--from TASK`, TASK and everything downstream of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::bail;
use engine::{Command, Start, TaskStatus};

use crate::drive::{Session, drive};
use crate::home::{Created, fold, new_run_id};
use crate::live::say;
use crate::store::{Run, Runs};

/// Starts and drives the new run; the exit code is the new run's, as for `apply`. The plan was
/// confirmed when the first run was applied, so retry does not ask again.
pub fn run(runs: &Runs, old_id: &str, from: Option<&str>, run_id: Option<&str>) -> anyhow::Result<u8> {
    let old = runs.existing(old_id)?;
    let (records, warning) = old.load()?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    let Some(created) = Created::of(&records) else {
        bail!("run `{old_id}` has no RunCreated event: it never started, so there is no plan to retry");
    };
    let state = fold(&records);
    let plan = &state.plan;
    let graph = &state.graph;
    let mut starts: Vec<usize> =
        (0..plan.tasks.len()).filter(|&i| state.tasks[i].status != TaskStatus::Succeeded).collect();
    if let Some(from) = from {
        let Some(start) = graph.index_of(from) else {
            bail!("the plan of run `{old_id}` has no task `{from}`");
        };
        starts.push(start);
    }
    let mut rerun = vec![false; plan.tasks.len()];
    while let Some(i) = starts.pop() {
        if !std::mem::replace(&mut rerun[i], true) {
            starts.extend(graph.children(i));
        }
    }
    let reuse: BTreeMap<String, String> = state
        .tasks
        .iter()
        .enumerate()
        .filter(|&(i, t)| t.status == TaskStatus::Succeeded && !rerun[i])
        .filter_map(|(i, t)| Some((plan.tasks[i].id.value.to_string(), t.output.as_deref()?.to_owned())))
        .collect();

    crate::drive::check_workdir(&created.workdir(), old_id)?;
    crate::apply::refuse_unset_keys(plan)?;
    end_survivors(&old, &state)?;
    let new_id = run_id.map_or_else(|| new_run_id(&plan.name), str::to_owned);
    let (run, lock, store) = runs.create(&new_id, &plan.name)?;
    let workdir = created.workdir();
    say(&format!(
        "run `{new_id}` retries `{old_id}`: reusing {} of {} task outputs; {}",
        reuse.len(),
        plan.tasks.len(),
        run.place()
    ));
    let (span, trace) = crate::telemetry::run_span(&new_id, &plan.name, None);
    let start = Start {
        // Maps expand again in the new run; the items kept are taken over as they appear.
        plan: Arc::new(state.written_plan()),
        vars: created.vars.clone(),
        strategy: Some(created.strategy),
        source: created.source.clone(),
        retry_of: Some(old_id.to_owned()),
        parent: None,
        reuse,
        recalled: Vec::new(),
        // It looks tasks up in the task cache as the old run did.
        cache_reuse: state.cache_reuse.clone(),
        graph: None,
        trace,
        approved_tools: created.approved_tools.clone(),
        // The plan as far as it was written runs whole: nobody writes more of it.
        growing: None,
        // What it reuses costs nothing, so the whole plan's forecast would not score it.
        forecast: None,
    };
    drive(Session { span, ..Session::new(run, lock, workdir, store, Vec::new()) }, Command::Start(start))
}

/// Ends what a runner that died while driving the old run left running, as `resume` would: the
/// new run works in the same folder and would otherwise run its tasks alongside the old
/// attempts. The old run's lock is held meanwhile, so no `resume` of it starts halfway; a run
/// that a live process still drives keeps its programs.
fn end_survivors(old: &Run, state: &engine::RunState) -> anyhow::Result<()> {
    if state.status.is_final() || old.driver().is_some() {
        return Ok(());
    }
    let lock = old.lock()?;
    let ended = crate::survivors::end(old);
    lock.release();
    ended
}
