//! The live view of a run: an indicatif display on a terminal (tasks done of total, the tasks
//! running), otherwise one plain line per event, `HH:MM:SS.mmm TYPE task details`. `runner
//! logs` prints the same plain lines.
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
use engine::event::{
    ContextCompacted, ModelTurn, Replanned, RunCreated, ToolApprovalDecided, ToolApprovalRequested, ToolCallFinished,
};
use engine::{Event, Record, RunState, Scope, TaskStatus};
#[cfg(test)]
use indicatif::ProgressDrawTarget;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How much of an input, output or error a line shows.
const PREVIEW: usize = 80;

/// One readable line for a record; inputs and outputs are cut to one short line.
pub fn line(record: &Record) -> String {
    let mut line = String::new();
    write_line(&mut line, record);
    line
}

/// Appends [`line`]'s text for `record` to `out`.
fn write_line(out: &mut String, record: &Record) {
    // `2026-11-22T12:45:03.123Z` -> `12:45:03.123`.
    out.push_str(record.at.get(11..23).unwrap_or(&record.at));
    out.push(' ');
    let event = &record.event;
    // A conversation's turns and tool calls sit indented under their task's lines.
    if in_conversation(event) {
        out.push_str("  ");
    }
    out.push_str(event.name());
    if let Some(task) = event.task() {
        out.push(' ');
        out.push_str(task);
    }
    let details = details(event);
    if !details.is_empty() {
        out.push(' ');
        out.push_str(&details);
    }
}

/// Whether an event is a step inside an llm attempt's conversation.
fn in_conversation(event: &Event) -> bool {
    matches!(
        event,
        Event::ModelTurn(_)
            | Event::ToolCallStarted(_)
            | Event::ToolCallFinished(_)
            | Event::ToolApprovalRequested(_)
            | Event::ToolApprovalDecided(_)
    )
}

/// What an event says, besides its type and task.
fn details(event: &Event) -> String {
    match event {
        Event::RunCreated(event) => {
            let RunCreated { plan, strategy, retry_of, .. } = &**event;
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
        Event::ModelTurn(event) => {
            let ModelTurn { attempt, turn, content, tool_calls, .. } = &**event;
            let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            let text = content.as_deref().map(|c| preview(c, PREVIEW)).unwrap_or_default();
            match calls.is_empty() {
                true => format!("attempt {attempt} turn {turn}: {text}"),
                false => format!("attempt {attempt} turn {turn} calls {}: {text}", calls.join(", ")),
            }
        }
        Event::ToolCallStarted(call) => format!("{} {}", call.tool, preview(&call.arguments, PREVIEW)),
        Event::ToolCallFinished(event) => {
            let ToolCallFinished { tool, ok, output, .. } = &**event;
            format!("{tool} {}: {}", if *ok { "ok" } else { "failed" }, preview(output, PREVIEW))
        }
        Event::ToolApprovalRequested(event) => {
            let ToolApprovalRequested { tool, arguments, .. } = &**event;
            format!("{tool} waits for approval: {}", preview(arguments, PREVIEW))
        }
        Event::ToolApprovalDecided(event) => {
            let ToolApprovalDecided { tool, approved, comment, .. } = &**event;
            let verdict = if *approved { "approved" } else { "rejected" };
            match comment {
                Some(comment) => format!("{tool} {verdict}: {}", preview(comment, PREVIEW)),
                None => format!("{tool} {verdict}"),
            }
        }
        Event::VerificationFailed { attempt, reason, .. } => format!("attempt {attempt}: {}", preview(reason, PREVIEW)),
        Event::ContextCompacted(event) => {
            let ContextCompacted { scope, by, tokens_before, tokens_after, .. } = &**event;
            let what = match scope {
                Scope::Summary => "context summary",
                Scope::Gate => "gate output",
            };
            format!("{what} {tokens_before} -> {tokens_after} tokens by {by}")
        }
        Event::ReplanRequested { reason, .. } => format!("after: {}", preview(reason, PREVIEW)),
        Event::Replanned(event) => {
            let Replanned { removed, added, score, .. } = &**event;
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
    // Only the start is read: a preview of a large output costs what its first line does.
    let mut flat = String::new();
    let mut chars = 0;
    let mut more = false;
    'words: for word in text.split_whitespace() {
        for c in (!flat.is_empty()).then_some(' ').into_iter().chain(word.chars()) {
            if chars == max {
                more = true;
                break 'words;
            }
            flat.push(c);
            chars += 1;
        }
    }
    if more {
        let cut = flat.char_indices().nth(max.saturating_sub(1)).map_or(flat.len(), |(at, _)| at);
        flat.truncate(cut);
        flat.push('…');
    }
    format!("{flat:?}")
}

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
        Event::TaskReused { task, .. } => Some(format!("✓ {task} (reused)")),
        Event::TaskFailed { task, attempt, error, .. } => {
            Some(format!("✗ {task} attempt {attempt}: {}", preview(error, PREVIEW)))
        }
        Event::TaskSkipped { task, reason } => Some(format!("- {task} skipped: {}", preview(reason, PREVIEW))),
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
        | Event::RunCancelled { .. } => Some(line(record)),
        _ => None,
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

    #[test]
    fn a_preview_is_one_line_cut_at_its_limit() {
        assert_eq!(preview("  two\n\twords  ", 80), "\"two words\"");
        assert_eq!(preview("abc def", 7), "\"abc def\"");
        assert_eq!(preview("abc def", 6), "\"abc d…\"");
        assert_eq!(preview("ééé ééé", 4), "\"ééé…\"");
        assert_eq!(preview("say \"hi\"", 0), "\"…\"");
        assert_eq!(preview("", 0), "\"\"");
        let large = "word ".repeat(1_000_000);
        assert_eq!(preview(&large, 10), "\"word word…\"");
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
