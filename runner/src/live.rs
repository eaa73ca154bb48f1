//! The live view of a run: an indicatif display on a terminal (tasks done of total, the tasks
//! running), otherwise one plain line per event, `HH:MM:SS.mmm TYPE task details` (see
//! [`crate::event_line`]), as `runner logs` prints them.
//!
//! The driver's observer only copies the record and three counts into a channel, so watching
//! costs the same for every event whatever the plan's size, and nothing on the driver's path
//! waits for a terminal. A renderer thread draws: plain lines through a buffer flushed whenever
//! the channel is empty, the display at most [`REDRAWS_PER_SECOND`] times a second.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engine::driver::Observer;
use engine::{Event, Record, RunState, TaskStatus};
#[cfg(test)]
use indicatif::ProgressDrawTarget;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::event_line::{PREVIEW, line, preview, write_line};

/// Writes a line to stdout; a closed pipe is not worth a panic.
pub fn say(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// How often the display is redrawn at most.
const REDRAWS_PER_SECOND: u32 = 5;

/// How many running tasks the display names and gives a waiting line.
const NAMED_RUNNING: usize = 8;

/// What the renderer is told.
enum Message {
    /// A durable record, with the run's progress after it.
    Record(Box<Record>, Progress),
    /// Draw everything received, take the display down, then answer.
    Clear(Sender<()>),
}

/// The run's progress after a record, read from the state in constant time.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Tasks in the plan.
    total: usize,
    /// Tasks whose status is final.
    finished: usize,
    /// Whether the record's task (if it has one) is running after it.
    running: bool,
}

/// The live view of one run in this process: a handle on the renderer thread.
pub struct Live {
    sender: Option<Sender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl Live {
    /// A live view: `fancy` draws a progress display (on a terminal), otherwise plain lines.
    pub fn new(fancy: bool) -> Self {
        let (sender, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new().name("live view".into()).spawn(move || View::new(fancy).run(inbox));
        match thread {
            Ok(thread) => Live { sender: Some(sender), thread: Some(thread) },
            // Without a thread there is no view; the run goes on and its log has every event.
            Err(_) => Live { sender: None, thread: None },
        }
    }

    /// An observer for a driver that hands every record to the renderer.
    pub fn observer(&self) -> Observer {
        let sender = self.sender.clone();
        Box::new(move |record, state| {
            if let Some(sender) = &sender {
                let progress = progress(&record, state);
                let _ = sender.send(Message::Record(Box::new(record), progress));
            }
        })
    }

    /// Draws everything received so far and removes the progress display, before a prompt or
    /// the summary; returns once it is done.
    pub fn clear(&self) {
        let Some(sender) = &self.sender else { return };
        let (done, wait) = mpsc::channel();
        if sender.send(Message::Clear(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.clear();
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The progress after `record`, in constant time: counts the state keeps, and one lookup.
fn progress(record: &Record, state: &RunState) -> Progress {
    let running = record
        .event
        .task()
        .and_then(|task| state.index_of(task))
        .is_some_and(|i| state.tasks[i].status == TaskStatus::Running);
    Progress { total: state.tasks.len(), finished: state.finished(), running }
}

/// What the renderer thread draws from.
struct View {
    fancy: bool,
    /// The progress display's bar; made on the first record.
    bar: Option<ProgressBar>,
    /// The display's lines: the progress bar, then one line per named running task.
    multi: MultiProgress,
    /// One line per named running task, showing how long it has been waiting.
    waiting: BTreeMap<String, ProgressBar>,
    /// The running tasks, by the sequence number of the record that started them.
    running: HashMap<String, u64>,
    progress: Progress,
    /// Lines to print above the display at the next redraw.
    notes: Vec<String>,
    /// Plain lines, flushed when the channel is empty.
    out: BufWriter<std::io::Stdout>,
    /// The plain line being written, kept from one record to the next.
    line: String,
    drawn: Option<Instant>,
    /// Whether a record came since the last redraw.
    dirty: bool,
}

impl View {
    fn new(fancy: bool) -> Self {
        View {
            fancy,
            bar: None,
            multi: MultiProgress::new(),
            waiting: BTreeMap::new(),
            running: HashMap::new(),
            progress: Progress::default(),
            notes: Vec::new(),
            out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
            line: String::new(),
            drawn: None,
            dirty: false,
        }
    }

    /// A view that draws nowhere, to test what it would show.
    #[cfg(test)]
    fn hidden() -> Self {
        View { multi: MultiProgress::with_draw_target(ProgressDrawTarget::hidden()), ..View::new(true) }
    }

    /// The tasks shown as running, each with the time it has been waiting.
    #[cfg(test)]
    fn waiting(&self) -> Vec<&str> {
        self.waiting.keys().map(String::as_str).collect()
    }

    /// Draws what arrives until every [`Live`] handle is gone.
    fn run(mut self, inbox: Receiver<Message>) {
        let interval = Duration::from_secs(1) / REDRAWS_PER_SECOND;
        loop {
            let message = match inbox.try_recv() {
                Ok(message) => message,
                Err(_) => {
                    // Nothing waiting: show what came, then sleep until more does.
                    let _ = self.out.flush();
                    self.redraw();
                    match inbox.recv_timeout(interval) {
                        Ok(message) => message,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            };
            match message {
                Message::Record(record, progress) => {
                    self.show(&record, progress);
                    if self.drawn.is_none_or(|at| at.elapsed() >= interval) {
                        self.redraw();
                    }
                }
                Message::Clear(done) => {
                    let _ = self.out.flush();
                    self.clear();
                    let _ = done.send(());
                }
            }
        }
    }

    /// Takes in one durable record; plain lines are written at once, the display waits for
    /// the next redraw.
    fn show(&mut self, record: &Record, progress: Progress) {
        if !self.fancy {
            self.line.clear();
            write_line(&mut self.line, record);
            self.line.push('\n');
            let _ = self.out.write_all(self.line.as_bytes());
            return;
        }
        self.progress = progress;
        self.dirty = true;
        if let Some(task) = record.event.task() {
            if progress.running {
                self.running.entry(task.to_owned()).or_insert(record.seq);
            } else {
                self.running.remove(task);
            }
        }
        if let Some(note) = note(record) {
            self.notes.push(note);
        }
    }

    /// Brings the display up to date: the bar, the named running tasks and the notes.
    fn redraw(&mut self) {
        self.drawn = Some(Instant::now());
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let multi = self.multi.clone();
        let total = self.progress.total as u64;
        let bar = self.bar.get_or_insert_with(|| multi.add(new_bar(total))).clone();
        let mut running: Vec<(&u64, &String)> = self.running.iter().map(|(task, seq)| (seq, task)).collect();
        running.sort_unstable();
        let named: Vec<String> = running.iter().take(NAMED_RUNNING).map(|(_, task)| (*task).clone()).collect();
        let mut message = if named.is_empty() { String::new() } else { format!("running: {}", named.join(", ")) };
        if running.len() > named.len() {
            message.push_str(&format!(" and {} more", running.len() - named.len()));
        }
        bar.set_length(total);
        bar.set_position(self.progress.finished as u64);
        bar.set_message(message);
        self.track(&named);
        if !self.notes.is_empty() {
            bar.println(self.notes.join("\n"));
            self.notes.clear();
        }
    }

    /// One line per named running task: a task that starts gets one, counting the time from
    /// now; a task that stops (or is no longer named) loses its line.
    fn track(&mut self, running: &[String]) {
        self.waiting.retain(|task, line| {
            let keep = running.contains(task);
            if !keep {
                line.finish_and_clear();
            }
            keep
        });
        for task in running {
            if !self.waiting.contains_key(task) {
                let line = self.multi.add(ProgressBar::new_spinner());
                if let Ok(style) = ProgressStyle::with_template("  {spinner} {prefix} waiting {elapsed}") {
                    line.set_style(style);
                }
                line.set_prefix(task.clone());
                line.enable_steady_tick(Duration::from_millis(250));
                self.waiting.insert(task.clone(), line);
            }
        }
    }

    /// Removes the progress display (before a prompt or the summary).
    fn clear(&mut self) {
        if self.fancy {
            self.redraw();
        }
        self.track(&[]);
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// The line the display prints above itself for a record, if it is worth one.
fn note(record: &Record) -> Option<String> {
    match &record.event {
        Event::TaskSucceeded { task, duration_ms, .. } => Some(format!("✓ {task} ({duration_ms} ms)")),
        Event::TaskReused { task, from: None, .. } => Some(format!("✓ {task} (reused)")),
        Event::TaskReused { task, from: Some(from), .. } => {
            Some(format!("✓ {task} (from the cache: run {})", from.run))
        }
        Event::TaskFailed { task, attempt, error, .. } => {
            Some(format!("✗ {task} attempt {attempt}: {}", preview(error, PREVIEW)))
        }
        Event::TaskSkipped { task, reason, .. } => Some(format!("- {task} skipped: {}", preview(reason, PREVIEW))),
        Event::MapExpanded { task, items } => Some(format!("⇉ {task} maps over {} item(s)", items.len())),
        Event::RetryScheduled { task, attempt, delay_ms, .. } => {
            Some(format!("↻ {task} attempt {attempt} after {delay_ms} ms"))
        }
        Event::ClarificationRequested { .. }
        | Event::ToolApprovalRequested(_)
        | Event::ToolApprovalDecided(_)
        | Event::ReviewRequested { .. }
        | Event::ClarificationProvided { .. }
        | Event::ReviewDecided { .. }
        | Event::VerificationFailed { .. }
        | Event::ReplanRequested { .. }
        | Event::Replanned(_)
        | Event::ReplanFailed { .. }
        | Event::BudgetExhausted { .. }
        | Event::TaskPlanned(_)
        | Event::LineRejected { .. }
        | Event::PlanWritten { .. }
        | Event::RunCancelled { .. } => Some(line(record)),
        Event::RunCreated(_)
        | Event::TaskDispatched { .. }
        | Event::RetryDue { .. }
        | Event::ModelTurn(_)
        | Event::ToolCallStarted(_)
        | Event::ToolCallFinished(_)
        | Event::ContextCompacted(_)
        | Event::RunPaused { .. }
        | Event::RunResumed
        | Event::RunCompleted { .. } => None,
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
        let mut view = View::hidden();
        for event in state.process(Command::Start(Start::plan(plan))).expect("it starts") {
            let record = record(event);
            view.show(&record, progress(&record, &state));
        }
        view.redraw();
        assert_eq!(view.waiting(), ["a"]);
        assert_eq!(view.bar.as_ref().map(|bar| (bar.position(), bar.length())), Some((0, Some(1))));
        let done =
            Command::Succeeded { task: "a".into(), attempt: 1, output: "ok".into(), tokens: None, duration_ms: 5 };
        for event in state.process(done).expect("it succeeds") {
            let record = record(event);
            view.show(&record, progress(&record, &state));
        }
        view.redraw();
        assert!(view.waiting().is_empty());
        assert_eq!(view.bar.as_ref().map(ProgressBar::position), Some(1));
    }
}
