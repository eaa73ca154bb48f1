//! `runner answer`, `runner approve`, `runner reject`: record a person's answer or decision in
//! a paused run's log; `runner resume` then continues it.

use engine::{Command, Record, RunState};

use crate::event_line::line;
use crate::live::say;
use crate::store::Runs;

/// Records an answer to a task's question.
pub fn answer(runs: &Runs, run_id: &str, task: &str, text: &str) -> anyhow::Result<u8> {
    let command = Command::Answer { task: task.to_owned(), text: text.to_owned() };
    recorded(runs, run_id, command)
}

/// Records a review decision.
pub fn decide(runs: &Runs, run_id: &str, task: &str, approved: bool, comment: Option<String>) -> anyhow::Result<u8> {
    let command = Command::Decide { task: task.to_owned(), approved, comment };
    recorded(runs, run_id, command)
}

fn recorded(runs: &Runs, run_id: &str, command: Command) -> anyhow::Result<u8> {
    let (state, records) = record_decision(runs, run_id, command)?;
    say("recorded:");
    for record in &records {
        say(&format!("  {}", line(record)));
    }
    next_step(run_id, &state);
    Ok(0)
}

/// Records an answer or a decision in a run that no process drives, as `runner answer`,
/// `approve` and `reject` do; returns the state after it and the new records. `TASK/CHILD_TASK`
/// reaches the child run of a sub-plan task ([`crate::children::route`]).
pub fn record_decision(runs: &Runs, run_id: &str, command: Command) -> anyhow::Result<(RunState, Vec<Record>)> {
    if let Some(routed) = crate::children::route(runs, run_id, &command)? {
        return Ok(routed);
    }
    let run = runs.existing(run_id)?;
    if let Some(driver) = run.driver() {
        anyhow::bail!("run `{run_id}` is being driven by {driver}: answer at its prompt, or cancel it first");
    }
    let recorded = run.record(command)?;
    crate::children::answer_parent(runs, &run, &recorded.1)?;
    Ok(recorded)
}

fn next_step(run_id: &str, state: &RunState) {
    if state.status.is_final() {
        say(&format!("the run has ended: {} (`runner status {run_id}` shows why)", state.status.as_str()));
    } else {
        say(&format!("run `runner resume {run_id}` to continue"));
    }
}
