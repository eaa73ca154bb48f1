//! `runner cancel`: stop a run. A run driven by a live process is asked to stop through the
//! `cancel` file in its folder (the process records `RunCancelled`); a paused or interrupted run
//! gets `RunCancelled` appended here. Cancelling a run that has already ended changes nothing
//! and exits 0.

use std::time::{Duration, Instant};

use engine::{Command, Event};
use manifest::plan::TaskKind;

use crate::home::fold;
use crate::live::say;
use crate::store::Runs;

/// How long to wait for the driving process to record the cancellation.
const WAIT: Duration = Duration::from_secs(5);

/// Cancels a run.
pub fn run(runs: &Runs, run_id: &str) -> anyhow::Result<u8> {
    say(&cancel(runs, run_id)?);
    Ok(0)
}

/// Cancels a run and says what happened, in one line.
pub fn cancel(runs: &Runs, run_id: &str) -> anyhow::Result<String> {
    let run = runs.existing(run_id)?;
    let (records, _) = run.load()?;
    let state = fold(&records);
    if state.status.is_final() {
        return Ok(format!("run `{run_id}` has already ended: {}; nothing to cancel", state.status.as_str()));
    }
    if let Some(driver) = run.driver() {
        run.request_cancel()?;
        let started = Instant::now();
        while started.elapsed() < WAIT {
            std::thread::sleep(Duration::from_millis(100));
            let (records, _) = run.load()?;
            if records.iter().any(|r| matches!(r.event, Event::RunCancelled { .. })) {
                return Ok(format!("run `{run_id}` cancelled ({driver} stopped it)"));
            }
            if fold(&records).status.is_final() {
                return Ok(format!(
                    "run `{run_id}` ended before it could be cancelled: {}",
                    fold(&records).status.as_str()
                ));
            }
        }
        anyhow::bail!(
            "asked {driver} to cancel run `{run_id}`, but it has not recorded it within {} s",
            WAIT.as_secs()
        );
    }
    // Nobody drives the run: end what a runner that died left running.
    crate::survivors::end(&run)?;
    let command = Command::Cancel { reason: "cancelled by runner cancel".to_owned() };
    run.record(command)?;
    // Its sub-plans' children that have not ended go with it (a driving process cancels its own).
    let mut said = format!("run `{run_id}` cancelled");
    for task in state.plan.tasks.iter().filter(|t| matches!(t.kind, TaskKind::Plan | TaskKind::Expand)) {
        if let Some((child, child_state)) = crate::children::child_of(runs, run_id, &state, &task.id.value)?
            && !child_state.status.is_final()
        {
            said.push_str(&format!("; {}", cancel(runs, child.id())?));
        }
    }
    Ok(said)
}
