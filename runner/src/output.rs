//! `runner output`: a task's full output, raw on stdout, for reading or piping; by default the
//! outputs of the run's sinks (the tasks nothing depends on), which are its results.

use engine::{RunState, TaskStatus};

use crate::diagnostics::print;
use crate::home::fold;
use crate::store::Runs;

/// How long a sink output `apply` prints at its end may be; longer ones get a command instead.
const BRIEF_LINES: usize = 5;
const BRIEF_CHARS: usize = 400;

/// Prints the output of `task`, or of every sink with an output (each headed by its id when
/// there are several); an unknown task, or nothing to print, is an error.
pub fn run(runs: &Runs, run_id: &str, task: Option<&str>) -> anyhow::Result<u8> {
    let run = runs.existing(run_id)?;
    let (records, warning) = run.load()?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    let state = fold(&records);
    let Some(task) = task else {
        for i in state.graph.sinks() {
            if output_of(&state, i).is_none() {
                let id = &state.plan.tasks[i].id.value;
                eprintln!("note: final task `{id}` has no output: it is {}", state.tasks[i].status.as_str());
            }
        }
        let sinks = sink_outputs(&state);
        if sinks.is_empty() {
            anyhow::bail!(
                "run `{run_id}` has no output yet: no final task succeeded (`runner status {run_id}` shows where it stands)"
            );
        }
        let headed = sinks.len() > 1;
        let mut text = String::new();
        for (id, output) in sinks {
            if headed {
                text.push_str(&format!("--- {id} ---\n"));
            }
            text.push_str(&with_newline(output));
        }
        print(&text)?;
        return Ok(0);
    };
    let Some(i) = state.index_of(task) else {
        anyhow::bail!("run `{run_id}` has no task `{task}` (`runner status {run_id}` lists its tasks)");
    };
    match output_of(&state, i) {
        Some(output) => print(&with_newline(output))?,
        None => anyhow::bail!(
            "task `{task}` of run `{run_id}` has no output: it is {} (`runner status {run_id}` shows why)",
            state.tasks[i].status.as_str()
        ),
    }
    Ok(0)
}

/// What `apply` prints at the end of a run: a short result in full, else the command that
/// prints it; nothing when no sink has an output.
pub fn brief(run_id: &str, state: &RunState) -> Vec<String> {
    let sinks = sink_outputs(state);
    let short = |text: &str| text.lines().count() <= BRIEF_LINES && text.chars().count() <= BRIEF_CHARS;
    match sinks.as_slice() {
        [] => Vec::new(),
        [(id, output)] if short(output) => {
            let mut lines = vec![format!("  output of `{id}`:")];
            lines.extend(output.lines().map(|line| format!("    {line}")));
            lines.push(format!("  output:   runner output {run_id}"));
            lines
        }
        _ => vec![format!("  output:   runner output {run_id}   (the final tasks' full output)")],
    }
}

/// The sinks that have an output, in plan order.
fn sink_outputs(state: &RunState) -> Vec<(&str, &str)> {
    let mut sinks = state.graph.sinks();
    sinks.sort_unstable();
    sinks.into_iter().filter_map(|i| Some((state.plan.tasks[i].id.value.as_str(), output_of(state, i)?))).collect()
}

/// A task's output, when it succeeded (or was reused from an earlier run).
fn output_of(state: &RunState, i: usize) -> Option<&str> {
    let task = &state.tasks[i];
    (task.status == TaskStatus::Succeeded).then_some(task.output.as_deref()).flatten()
}

fn with_newline(text: &str) -> String {
    if text.ends_with('\n') { text.to_owned() } else { format!("{text}\n") }
}
