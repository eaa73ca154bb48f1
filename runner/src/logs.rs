//! `runner logs` (one readable line per event, optionally following a live run) and `runner
//! events` (the raw records, one JSON object per line).

use std::time::Duration;

use engine::{Handler, RunState, RunStatus};

use crate::diagnostics::print;
use crate::event_line::line;
use crate::store::{Runs, Tail};

/// How often `--follow` looks for new events.
const POLL: Duration = Duration::from_millis(200);

/// Prints a run's events as readable lines; with `follow`, keeps printing new ones until the
/// run ends, pauses, or is left without a process driving it.
pub fn logs(runs: &Runs, run_id: &str, follow: bool) -> anyhow::Result<u8> {
    let run = runs.existing(run_id)?;
    if !follow {
        let (records, warning) = run.load()?;
        if let Some(warning) = warning {
            eprintln!("warning: {warning}");
        }
        let mut out = String::new();
        for record in &records {
            out.push_str(&line(record));
            out.push('\n');
        }
        print(&out)?;
        return Ok(0);
    }
    // A damaged log is refused before following it, as every other command does.
    run.load()?;
    let mut tail = Tail::default();
    let mut state = RunState::new();
    let mut last_chance = false;
    let mut seq = 0;
    loop {
        for record in run.records_after(&mut tail, seq)? {
            seq = record.seq;
            state.apply(&record.event);
            print(&format!("{}\n", line(&record)))?;
        }
        if state.status.is_final() || state.status == RunStatus::Paused {
            return Ok(0);
        }
        if run.driver().is_none() {
            // Read once more: the process may have written its last events and left.
            if last_chance {
                eprintln!("run `{run_id}` is not being driven (interrupted); `runner resume {run_id}` continues it");
                return Ok(0);
            }
            last_chance = true;
        } else {
            last_chance = false;
        }
        std::thread::sleep(POLL);
    }
}

/// Prints a run's records as JSON lines (re-serialised, so a torn last line is left out).
pub fn events(runs: &Runs, run_id: &str) -> anyhow::Result<u8> {
    let run = runs.existing(run_id)?;
    let (records, warning) = run.load()?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    let mut out = String::new();
    for record in &records {
        out.push_str(&serde_json::to_string(record)?);
        out.push('\n');
    }
    print(&out)?;
    Ok(0)
}
