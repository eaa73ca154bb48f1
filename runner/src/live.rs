//! The live view of a run: an indicatif display on a terminal (tasks done of total, the tasks
//! running), otherwise one plain line per event, `HH:MM:SS.mmm TYPE task details`. `runner
//! logs` prints the same plain lines.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use engine::driver::Observer;
use engine::{Event, Record, RunState, Scope, TaskStatus};
#[cfg(test)]
use indicatif::ProgressDrawTarget;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How much of an input, output or error a line shows.
const PREVIEW: usize = 80;

/// One readable line for a record; inputs and outputs are cut to one short line.
pub fn line(record: &Record) -> String {
    // `2026-11-22T12:45:03.123Z` -> `12:45:03.123`.
    let time = record.at.get(11..23).unwrap_or(&record.at);
    let event = &record.event;
    let task = event.task().map(|t| format!(" {t}")).unwrap_or_default();
    let details = details(event);
    let details = if details.is_empty() { details } else { format!(" {details}") };
    format!("{time} {}{task}{details}", event.name())
}

/// What an event says, besides its type and task.
fn details(event: &Event) -> String {
    match event {
        Event::RunCreated { plan, strategy, retry_of, .. } => {
            let retry = retry_of.as_ref().map(|r| format!(", retrying {r}")).unwrap_or_default();
            format!("plan {} ({} tasks, {}{retry})", plan.name, plan.tasks.len(), strategy.as_str())
        }
        Event::TaskReused { output, .. } => format!("output: {}", preview(output, PREVIEW)),
        Event::TaskDispatched { attempt, input, .. } => format!("attempt {attempt} input: {}", preview(input, PREVIEW)),
        Event::TaskSucceeded { attempt, output, duration_ms, .. } => {
            format!("attempt {attempt} in {duration_ms} ms output: {}", preview(output, PREVIEW))
        }
        Event::TaskFailed { attempt, error, class, .. } => {
            format!("attempt {attempt} {} error: {}", class.as_str(), preview(error, PREVIEW))
        }
        Event::RetryScheduled { attempt, delay_ms, backoff_ms, .. } => match backoff_ms {
            Some(backoff) => format!("attempt {attempt} after {delay_ms} ms (backoff {backoff} ms)"),
            None => format!("attempt {attempt} after {delay_ms} ms"),
        },
        Event::RetryDue { .. } | Event::RunResumed => String::new(),
        Event::TaskSkipped { reason, .. } => preview(reason, PREVIEW),
        Event::ClarificationRequested { question, .. } => format!("asks: {}", preview(question, PREVIEW)),
        Event::ClarificationProvided { answer, .. } => format!("answer: {}", preview(answer, PREVIEW)),
        Event::ReviewRequested { prompt, outputs, .. } => {
            format!("of {} output(s): {}", outputs.len(), preview(prompt, PREVIEW))
        }
        Event::ReviewDecided { approved, comment, .. } => {
            let verdict = if *approved { "approved" } else { "rejected" };
            match comment {
                Some(comment) => format!("{verdict}: {}", preview(comment, PREVIEW)),
                None => verdict.to_owned(),
            }
        }
        Event::VerificationFailed { attempt, reason, .. } => format!("attempt {attempt}: {}", preview(reason, PREVIEW)),
        Event::ContextCompacted { scope, by, tokens_before, tokens_after, .. } => {
            let what = match scope {
                Scope::Summary => "context summary",
                Scope::Gate => "gate output",
            };
            format!("{what} {tokens_before} -> {tokens_after} tokens by {by}")
        }
        Event::ReplanRequested { reason, .. } => format!("after: {}", preview(reason, PREVIEW)),
        Event::Replanned { removed, added, score, .. } => {
            format!("removed [{}] added [{}] score {score:.1}", removed.join(", "), added.join(", "))
        }
        Event::ReplanFailed { reason, .. } => preview(reason, PREVIEW),
        Event::RunPaused { reason } | Event::RunCancelled { reason } | Event::BudgetExhausted { reason } => {
            preview(reason, PREVIEW)
        }
        Event::RunCompleted { status, summary } => format!("{}: {}", status.as_str(), preview(summary, PREVIEW)),
        // An event newer than this view shows only its type and task.
        _ => String::new(),
    }
}

/// `text` on one line (runs of whitespace become one space), at most `max` characters.
pub fn preview(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return format!("{flat:?}");
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{:?}", format!("{cut}…"))
}

/// Writes a line to stdout; a closed pipe is not worth a panic.
pub fn say(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// The live view of one run in this process.
pub struct Live {
    /// A progress display when on a terminal; plain lines when `None` and not `fancy`.
    bar: Option<ProgressBar>,
    fancy: bool,
    /// The display's lines: the progress bar, then one line per running task.
    multi: MultiProgress,
    /// One line per running task, showing how long it has been waiting.
    waiting: BTreeMap<String, ProgressBar>,
}

impl Live {
    /// A live view: `fancy` draws a progress display (on a terminal), otherwise plain lines.
    pub fn new(fancy: bool) -> Self {
        Live { bar: None, fancy, multi: MultiProgress::new(), waiting: BTreeMap::new() }
    }

    /// A live view that draws nowhere, to test what it would show.
    #[cfg(test)]
    fn hidden() -> Self {
        Live { multi: MultiProgress::with_draw_target(ProgressDrawTarget::hidden()), ..Live::new(true) }
    }

    /// The tasks shown as running, each with the time it has been waiting.
    #[cfg(test)]
    fn waiting(&self) -> Vec<&str> {
        self.waiting.keys().map(String::as_str).collect()
    }

    /// One line per running task: a task that starts gets one, counting the time from now; a
    /// task that stops loses its line.
    fn track(&mut self, running: &[&str]) {
        self.waiting.retain(|task, line| {
            let keep = running.contains(&task.as_str());
            if !keep {
                line.finish_and_clear();
            }
            keep
        });
        for task in running {
            if !self.waiting.contains_key(*task) {
                let line = self.multi.add(ProgressBar::new_spinner());
                if let Ok(style) = ProgressStyle::with_template("  {spinner} {prefix} waiting {elapsed}") {
                    line.set_style(style);
                }
                line.set_prefix((*task).to_owned());
                line.enable_steady_tick(Duration::from_millis(250));
                self.waiting.insert((*task).to_owned(), line);
            }
        }
    }

    /// Shows one durable record.
    pub fn show(&mut self, record: &Record, state: &RunState) {
        if !self.fancy {
            say(&line(record));
            return;
        }
        let total = state.tasks.len() as u64;
        let multi = self.multi.clone();
        let bar = self.bar.get_or_insert_with(|| multi.add(new_bar(total)));
        let done = state.tasks.iter().filter(|t| t.status.is_final()).count() as u64;
        let running: Vec<&str> = state
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status == TaskStatus::Running)
            .map(|(i, _)| state.plan.tasks[i].id.value.as_str())
            .collect();
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(if running.is_empty() { String::new() } else { format!("running: {}", running.join(", ")) });
        let bar = bar.clone();
        self.track(&running);
        let event = &record.event;
        let note = match event {
            Event::TaskSucceeded { task, duration_ms, .. } => Some(format!("✓ {task} ({duration_ms} ms)")),
            Event::TaskReused { task, .. } => Some(format!("✓ {task} (reused)")),
            Event::TaskFailed { task, attempt, error, .. } => {
                Some(format!("✗ {task} attempt {attempt}: {}", preview(error, PREVIEW)))
            }
            Event::TaskSkipped { task, reason } => Some(format!("- {task} skipped: {}", preview(reason, PREVIEW))),
            Event::RetryScheduled { task, attempt, delay_ms, .. } => {
                Some(format!("↻ {task} attempt {attempt} after {delay_ms} ms"))
            }
            Event::ClarificationRequested { .. }
            | Event::ReviewRequested { .. }
            | Event::ClarificationProvided { .. }
            | Event::ReviewDecided { .. }
            | Event::VerificationFailed { .. }
            | Event::ReplanRequested { .. }
            | Event::Replanned { .. }
            | Event::ReplanFailed { .. }
            | Event::BudgetExhausted { .. }
            | Event::RunCancelled { .. } => Some(line(record)),
            _ => None,
        };
        if let Some(note) = note {
            bar.println(note);
        }
    }

    /// Removes the progress display (before a prompt or the summary).
    pub fn clear(&mut self) {
        self.track(&[]);
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn new_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} tasks {wide_msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// An observer for a driver that shows every record in `live`.
pub fn observer(live: &Arc<Mutex<Live>>) -> Observer {
    let live = Arc::clone(live);
    Box::new(move |record, state| live.lock().unwrap_or_else(PoisonError::into_inner).show(record, state))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use engine::{Command, Handler, Start};

    use super::*;

    fn record(event: Event) -> Record {
        Record { seq: 1, at: "2026-11-23T12:00:00.000Z".into(), run_id: "r".into(), event }
    }

    #[test]
    fn a_running_task_has_a_waiting_line_until_it_ends() {
        let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  mission: test\n  \
                    agent_definitions:\n    m: {runtime: mock}\n  workflow:\n    - {id: a, agent: m, input: go}\n";
        let loaded = manifest::load_str("t.yaml", "t", yaml, &|_| true);
        let plan = Arc::new(loaded.plan.expect("the plan loads"));
        let mut state = RunState::new();
        let mut live = Live::hidden();
        for event in state.process(Command::Start(Start::plan(plan))).expect("it starts") {
            live.show(&record(event), &state);
        }
        assert_eq!(live.waiting(), ["a"]);
        let done =
            Command::Succeeded { task: "a".into(), attempt: 1, output: "ok".into(), tokens: None, duration_ms: 5 };
        for event in state.process(done).expect("it succeeds") {
            live.show(&record(event), &state);
        }
        assert!(live.waiting().is_empty());
    }

    #[test]
    fn a_failure_shows_its_class_and_a_retry_its_wait_and_backoff() {
        let failed = Event::TaskFailed {
            task: "a".into(),
            attempt: 1,
            dispatched_seq: Some(2),
            error: "HTTP 503".into(),
            class: engine::event::ErrorClass::Transient,
            retryable: true,
            tokens: None,
        };
        assert_eq!(line(&record(failed)), "12:00:00.000 TaskFailed a attempt 1 transient error: \"HTTP 503\"");
        let retry = Event::RetryScheduled { task: "a".into(), attempt: 2, delay_ms: 700, backoff_ms: Some(1000) };
        assert_eq!(line(&record(retry)), "12:00:00.000 RetryScheduled a attempt 2 after 700 ms (backoff 1000 ms)");
    }
}
