//! `runner resume`: continue a paused or interrupted run in this process. Finished tasks never
//! run again; attempts that were dispatched but never finished run again as a new attempt.

use engine::Command;

use crate::drive::{Session, drive, exit_code};
use crate::home::{Created, fold};
use crate::live::say;
use crate::store::Runs;

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
