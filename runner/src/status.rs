//! `runner status`: where a run stands, for people (one line per task) or tools (JSON).

use std::collections::BTreeMap;

use engine::{RunState, RunStatus, TaskStatus};
use manifest::plan::TaskKind;
use serde::Serialize;

use crate::diagnostics::print;
use crate::format::Format;
use crate::home::{Created, fold};
use crate::store::{Run, Runs};

/// The JSON document `status --format json` prints.
#[derive(Debug, Serialize)]
struct JsonStatus<'a> {
    run_id: &'a str,
    plan: &'a str,
    status: &'static str,
    /// Tokens used so far, prompt and completion.
    tokens: engine::Tokens,
    /// Tasks whose output the task cache gave, and the tokens that saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    reused: Option<Reused>,
    /// What the run was forecast to take beside what it took, when it recorded a forecast.
    #[serde(skip_serializing_if = "Option::is_none")]
    forecast: Option<crate::scored::Scored>,
    /// Replacements the planner spliced in.
    replans: u32,
    /// Why dispatching stopped, when a budget ran out.
    exhausted: Option<&'a str>,
    tasks: BTreeMap<&'a str, JsonTask<'a>>,
    /// The run and task that started this run as a sub-plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<&'a engine::child::Parent>,
    /// How a plan that `runner do` wrote while it ran was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    planning: Option<Planning>,
}

/// What the task cache saved a run.
#[derive(Debug, Serialize)]
struct Reused {
    /// Tasks whose output it gave.
    tasks: u32,
    /// The tokens their original attempts used, which this run did not.
    tokens_saved: engine::Tokens,
}

/// How far the planner of a `runner do` run got.
#[derive(Debug, Serialize)]
struct Planning {
    /// `writing` while the model writes, `written` once it has finished, `stopped` when it
    /// stopped midway.
    state: &'static str,
    /// The tasks it wrote that joined the plan.
    tasks: usize,
    /// The lines it wrote that were not taken.
    rejected_lines: usize,
    /// Why it stopped midway.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl Planning {
    /// The planning of a run whose plan a model wrote as it ran; `None` for any other run.
    fn of(records: &[engine::Record], state: &RunState) -> Option<Self> {
        let mut grew = false;
        let mut rejected_lines = 0;
        for record in records {
            match &record.event {
                engine::Event::RunCreated(created) => grew = created.growing.is_some(),
                engine::Event::LineRejected { .. } => rejected_lines += 1,
                _ => {}
            }
        }
        let stage = match (state.growing, &state.plan_error) {
            (true, _) => "writing",
            (false, Some(_)) => "stopped",
            (false, None) => "written",
        };
        grew.then(|| Planning {
            state: stage,
            tasks: state.tasks.len(),
            rejected_lines,
            error: state.plan_error.clone(),
        })
    }

    /// One line for the human status.
    fn line(&self) -> String {
        let rejected = match self.rejected_lines {
            0 => String::new(),
            n => format!(", {n} line(s) rejected (`runner logs` shows why)"),
        };
        match (self.state, &self.error) {
            ("writing", _) => format!(
                "plan: the model is still writing it ({} tasks so far{rejected})
",
                self.tasks
            ),
            (_, Some(error)) => format!(
                "plan: the model stopped after {} tasks{rejected}: {error}
",
                self.tasks
            ),
            _ => format!(
                "plan: written by the model as the run went ({} tasks{rejected})
",
                self.tasks
            ),
        }
    }
}

/// One task in the JSON status.
#[derive(Debug, Serialize)]
struct JsonTask<'a> {
    status: &'static str,
    attempts: u32,
    output: Option<&'a str>,
    error: Option<&'a str>,
    /// The open question while the task waits for an answer.
    question: Option<&'a str>,
    /// Whether its `when` was false (a skip the plan chose, not a failure's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    skipped_by_condition: bool,
    /// The child run a sub-plan or `expand` task started last.
    #[serde(skip_serializing_if = "Option::is_none")]
    child_run: Option<String>,
}

/// Prints a run's status; exit 0 whatever the run's status (the exit code is `apply`'s job).
pub fn run(runs: &Runs, run_id: &str, format: Format) -> anyhow::Result<u8> {
    let run = runs.existing(run_id)?;
    let (records, warning) = run.load()?;
    let Some(created) = Created::of(&records) else {
        anyhow::bail!("run `{run_id}` has no RunCreated event: it never started");
    };
    let state = fold(&records);
    let status = shown_status(&state, &run);
    let children = child_runs(runs, run_id, &state)?;
    match format {
        Format::Json => {
            let tasks = state
                .tasks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let task = JsonTask {
                        status: t.status.as_str(),
                        attempts: t.attempts,
                        output: t.output.as_deref(),
                        error: t.error(),
                        question: t.question(),
                        skipped_by_condition: t.skipped_by_condition,
                        child_run: children.get(&i).map(|(id, _)| id.clone()),
                    };
                    (state.plan.tasks[i].id.value.as_str(), task)
                })
                .collect();
            let document = JsonStatus {
                run_id,
                plan: &created.plan.name,
                status,
                tokens: state.tokens,
                reused: (state.saved.tasks > 0)
                    .then_some(Reused { tasks: state.saved.tasks, tokens_saved: state.saved.tokens }),
                forecast: crate::scored::Scored::of(&records, &state),
                replans: state.replans,
                exhausted: state.exhausted.as_deref(),
                tasks,
                parent: created.parent.as_ref(),
                planning: Planning::of(&records, &state),
            };
            print(&format!("{}\n", serde_json::to_string_pretty(&document)?))?;
        }
        Format::Human => {
            if let Some(warning) = warning {
                eprintln!("warning: {warning}");
            }
            let mut text = human(run_id, &created, &state, status, &children);
            if let Some(scored) = crate::scored::Scored::of(&records, &state) {
                let at = text.find("\n  task ").map_or(text.len(), |i| i + 1);
                text.insert_str(at, &scored.lines());
            }
            if let Some(planning) = Planning::of(&records, &state) {
                let at = text.find('\n').map_or(text.len(), |i| i + 1);
                text.insert_str(at, &planning.line());
            }
            print(&text)?;
        }
    }
    Ok(0)
}

/// The status a run shows: its recorded status, or `interrupted` when it is still running by
/// its log but no live process drives it (the process crashed or was killed).
pub fn shown_status(state: &RunState, run: &Run) -> &'static str {
    shown(state, || run.driver().is_some())
}

/// The status a run shows, asking `driven` only when its log says it is still running.
pub fn shown(state: &RunState, driven: impl FnOnce() -> bool) -> &'static str {
    let unfinished = !state.status.is_final() && state.status != RunStatus::Paused;
    if unfinished && !driven() { INTERRUPTED } else { state.status.as_str() }
}

/// The status of a run that no process drives although it has not ended.
pub const INTERRUPTED: &str = "interrupted";

/// The child runs of a run's sub-plan and `expand` tasks, by task index: the id of each
/// task's latest child and its status.
fn child_runs(runs: &Runs, run_id: &str, state: &RunState) -> anyhow::Result<BTreeMap<usize, (String, String)>> {
    let mut children = BTreeMap::new();
    for (i, task) in state.plan.tasks.iter().enumerate() {
        if matches!(task.kind, TaskKind::Plan | TaskKind::Expand)
            && let Some((child, child_state)) = crate::children::child_of(runs, run_id, state, &task.id.value)?
        {
            children.insert(i, (child.id().to_owned(), shown_status(&child_state, &child).to_owned()));
        }
    }
    Ok(children)
}

fn human(
    run_id: &str,
    created: &Created,
    state: &RunState,
    status: &str,
    children: &BTreeMap<usize, (String, String)>,
) -> String {
    let parent = created
        .parent
        .as_ref()
        .map(|p| format!(", sub-plan of task `{}` of run `{}`", p.task, p.run))
        .unwrap_or_default();
    let mut out = format!(
        "run `{run_id}`: {status} (plan `{}`, strategy {}, started {}{parent})\n",
        created.plan.name,
        created.strategy.as_str(),
        created.at
    );
    let used = state.tokens.prompt + state.tokens.completion;
    let budget = state.plan.control.token_budget.map(|b| format!(" of a budget of {b}")).unwrap_or_default();
    out.push_str(&format!(
        "tokens: {used}{budget} ({} prompt, {} completion)\n",
        state.tokens.prompt, state.tokens.completion
    ));
    if state.saved.tasks > 0 {
        out.push_str(&format!("reused: {}\n", crate::drive::saved_line(state.saved)));
    }
    if state.replans > 0 {
        out.push_str(&format!("replanned {} time(s); the tasks below are the current plan\n", state.replans));
    }
    if let Some(reason) = &state.exhausted {
        out.push_str(&format!("budget: {reason}\n"));
    }
    let width = state.plan.tasks.iter().map(|t| t.id.value.len()).max().unwrap_or(4).max(4);
    let mut cut = false;
    out.push_str(&format!("  {:<width$}  {:<9}  {:>8}  {}\n", "task", "status", "attempts", "output / error"));
    for (i, task) in state.tasks.iter().enumerate() {
        let id = &state.plan.tasks[i].id.value;
        let detail = match (task.status, task.question()) {
            (TaskStatus::Paused, Some(question)) => format!("asks: {}", first_line(question)),
            (TaskStatus::Paused, None) => "waits for a review decision".to_owned(),
            (TaskStatus::Skipped, _) if task.skipped_by_condition => "its condition was false".to_owned(),
            _ => match (task.output.as_deref(), task.error()) {
                (Some(output), _) if task.status == TaskStatus::Succeeded => first_line(output),
                (_, Some(error)) => format!("error: {}", first_line(error)),
                (Some(output), None) => first_line(output),
                (None, None) => String::new(),
            },
        };
        cut |= task.status == TaskStatus::Succeeded && detail.ends_with('…');
        out.push_str(&format!("  {id:<width$}  {:<9}  {:>8}  {detail}\n", task.status.as_str(), task.attempts));
    }
    if cut {
        out.push_str(&format!("outputs are cut to a line: `runner output {run_id} TASK` prints one whole\n"));
    }
    if !children.is_empty() {
        out.push_str("sub-plan runs (`runner status RUN` shows one):\n");
        for (i, (child, child_status)) in children {
            out.push_str(&format!("  {:<width$}  {child_status:<9}  {child}\n", state.plan.tasks[*i].id.value));
        }
    }
    if status == INTERRUPTED {
        out.push_str(&format!(
            "note: no process is driving this run: it was interrupted; `runner resume {run_id}` continues it\n"
        ));
    }
    if state.status == RunStatus::Paused {
        for (i, task) in state.tasks.iter().enumerate() {
            if task.status == TaskStatus::Paused && task.question().is_none() {
                out.push('\n');
                out.push_str(&crate::drive::review_text(state, i));
            }
        }
        out.push('\n');
        for line in crate::drive::waiting(run_id, state) {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str(&format!("  then:     runner resume {run_id}\n"));
    }
    out
}

/// The first line of a text, cut to 100 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let mut cut: String = line.chars().take(100).collect();
    if cut.len() < line.len() || text.trim().lines().count() > 1 {
        cut.push('…');
    }
    cut
}
