//! `runner resume`: continue a paused or interrupted run in this process, or (`--detach`) hand
//! it to the workers. Finished tasks never run again; attempts that were dispatched but never
//! finished run again as a new attempt.

use engine::{Command, Event, Handler as _};

use crate::drive::{Session, drive, exit_code};
use crate::exit::{EXIT_PAUSED, EXIT_USAGE};
use crate::home::{Created, fold, records_after, refused};
use crate::live::say;
use crate::store::Runs;

/// Records `RunResumed` and lets go of the run's lease, so the first worker that finds the run
/// without a coordinator takes it over, as after `apply --detach`; prints the run id. A run
/// still waiting for a person records nothing (exit 3), one that has ended is left alone.
pub fn detach(runs: &Runs, run_id: &str) -> anyhow::Result<u8> {
    if matches!(runs, Runs::Home) {
        eprintln!(
            "error: --detach needs the runs in PostgreSQL (--store postgres://... or RUNNER_STORE): only workers \
             reach a run there"
        );
        return Ok(EXIT_USAGE);
    }
    let run = runs.existing(run_id)?;
    let held = run.lock()?;
    let (store, loaded) = run.open(&held)?;
    let mut state = fold(&loaded.records);
    if Created::of(&loaded.records).is_none() {
        anyhow::bail!("run `{run_id}` has no RunCreated event: it never started, so there is nothing to resume");
    }
    if state.status.is_final() {
        say(&format!("run `{run_id}` has already ended: {}; nothing to resume", state.status.as_str()));
        return Ok(exit_code(state.status));
    }
    let mut events = state.process(Command::Continue).map_err(|e| refused(run_id, &e))?;
    // Dispatches are the coordinator's to record, when it starts the attempts.
    events.retain(|event| matches!(event, Event::RunResumed));
    if events.is_empty() {
        eprintln!("run `{run_id}` still waits for a person (`runner status {run_id}` shows what): nothing to resume");
        return Ok(EXIT_PAUSED);
    }
    engine::store::EventStore::summarize(&store, engine::store::Summary::of(&state));
    run.append(&store, records_after(&loaded.records, run_id, events))?;
    held.release();
    eprintln!("run `{run_id}` handed back: a `runner worker --store URL` coordinates it");
    say(run_id);
    Ok(0)
}

/// Resumes a run; the exit code is the run's, as for `apply`. A run that has already ended is
/// left alone and its exit code returned.
pub fn run(runs: &Runs, run_id: &str) -> anyhow::Result<u8> {
    let run = runs.existing(run_id)?;
    let lock = run.lock()?;
    let (store, loaded) = run.open(&lock)?;
    if let Some(warning) = &loaded.warning {
        eprintln!("warning: {warning}");
    }
    let Some(created) = Created::of(&loaded.records) else {
        anyhow::bail!("run `{run_id}` has no RunCreated event: it never started, so there is nothing to resume");
    };
    let state = fold(&loaded.records);
    if state.status.is_final() {
        say(&format!("run `{run_id}` has already ended: {}; nothing to resume", state.status.as_str()));
        return Ok(exit_code(state.status));
    }
    let workdir = created.workdir();
    crate::survivors::end(&run)?;
    crate::drive::check_workdir(&workdir, run_id)?;
    crate::apply::refuse_unset_keys(&state.plan)?;
    say(&format!("resuming run `{run_id}` (plan `{}`, {} events so far)", created.plan.name, loaded.records.len()));
    let planner = if state.growing { crate::growing::resume_feed(&loaded.records)? } else { None };
    let (planner_runtime, feed) = planner.unzip();
    let (span, _) = crate::telemetry::run_span(run_id, &created.plan.name, created.trace.as_deref());
    let code =
        drive(Session { span, feed, ..Session::new(run, lock, workdir, store, loaded.records) }, Command::Continue);
    if let Some(runtime) = planner_runtime {
        runtime.shutdown_background();
    }
    code
}
