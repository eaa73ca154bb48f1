//! Driving a run in this process, for `apply`, `resume` and `retry`: the run's lock, Ctrl-C,
//! SIGTERM and `runner cancel` requests, the live view, questions asked at the terminal when the
//! run pauses, the summary and the exit code.

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use engine::driver::Driver;
use engine::runtime::Registry;
use engine::{Command, Outcome, Record, RunState, RunStatus, TaskStatus};
use manifest::plan::TaskKind;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::children::StoreChildren;
use crate::exit::{EXIT_CANCELLED, EXIT_FAILED, EXIT_PARTIAL, EXIT_PAUSED, EXIT_TERMINATED};
use crate::live::{Live, say};
use crate::store::{Held, Run, RunStore, Runs};
use crate::worker::Coordination;

/// The exit code for a run's status (DESIGN.md, section 6).
pub fn exit_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Finished(Outcome::Succeeded) => 0,
        RunStatus::Finished(Outcome::Failed) => EXIT_FAILED,
        RunStatus::Finished(Outcome::Partial) => EXIT_PARTIAL,
        RunStatus::Paused => EXIT_PAUSED,
        RunStatus::Cancelled => EXIT_CANCELLED,
        RunStatus::New | RunStatus::Running => EXIT_FAILED,
    }
}

/// A run ready to be driven: the run, its held lock, and the folder its commands run in.
pub struct Session {
    /// The run.
    pub run: Run,
    /// The lock (or lease) this process holds while it drives the run.
    pub lock: Held,
    /// The folder commands run in.
    pub workdir: std::path::PathBuf,
    /// An open store and the records already in it, for the first turn.
    pub opened: Option<(RunStore, Vec<Record>)>,
    /// The run's span: every span the run opens in this process nests in it.
    pub span: tracing::Span,
    /// With the PostgreSQL store, whether this process also works attempts from the queue
    /// (`apply --no-local-work` leaves them all to workers).
    pub local_work: bool,
    /// The commands of a planner still writing the run's plan (`runner do`).
    pub feed: Option<tokio::sync::mpsc::UnboundedReceiver<Command>>,
    /// The task cache, when the caller opened it already (else it is opened here).
    pub cache: Option<Arc<Mutex<engine::cache::TaskCache>>>,
}

impl Session {
    /// A session of a run this process holds, with its store open and these records in it: it
    /// works attempts here, takes no planner's feed and opens the task cache itself.
    pub fn new(run: Run, lock: Held, workdir: std::path::PathBuf, store: RunStore, records: Vec<Record>) -> Self {
        let span = tracing::Span::none();
        Session { run, lock, workdir, opened: Some((store, records)), span, local_work: true, feed: None, cache: None }
    }
}

/// Drives the run from `first` until it ends or pauses with nobody at the terminal to answer;
/// prints the summary and returns the exit code.
pub fn drive(session: Session, first: Command) -> anyhow::Result<u8> {
    let Session { run, lock, workdir, mut opened, span, local_work, mut feed, cache } = session;
    let cache = cache.or_else(|| crate::cache::open_for(&run.runs()));
    run.clear_cancel();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    // SIGTERM halts (records nothing); it also ends a prompt, as a cancel does.
    let halt = CancellationToken::new();
    let cancel = halt.child_token();
    let reason = Arc::new(OnceLock::new());
    let terminate = {
        let _context = runtime.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot listen for SIGTERM")?
    };
    runtime.spawn(watch_sigterm(terminate, halt.clone()));
    runtime.spawn(watch_ctrl_c(cancel.clone(), Arc::clone(&reason)));
    runtime.spawn(watch_cancel_request(cancel.clone(), Arc::clone(&reason), run.cancel_requested()));

    let interactive = std::io::stdin().is_terminal();
    let live = Live::new(std::io::stderr().is_terminal());
    let vars = crate::children::vars_of(&first, opened.as_ref().map_or(&[][..], |(_, records)| records));
    let mut commands = VecDeque::from([first]);
    let mut state = RunState::new();
    let mark = run.mark();
    // With the PostgreSQL store, attempts go to the workers' queue.
    let cluster = Coordination::start(&run, &runtime, local_work)?;
    let children = || {
        let children =
            StoreChildren::new(run.runs(), run.id(), vars.clone(), cancel.clone(), halt.clone(), Arc::clone(&reason));
        children.registry(cluster.as_ref().map_or_else(Registry::builtin, Coordination::registry))
    };
    while let Some(command) = commands.pop_front() {
        let (store, records) = match opened.take() {
            Some(opened) => opened,
            None => {
                let (store, loaded) = run.open(&lock)?;
                if let Some(warning) = loaded.warning {
                    eprintln!("warning: {warning}");
                }
                (store, loaded.records)
            }
        };
        let driver = Driver::new(run.id().to_owned(), store, &records, workdir.clone())
            .observe(live.observer())
            .cancel_reason(Arc::clone(&reason))
            .mark_processes(mark.as_str())
            .halt_on(halt.clone())
            .with_runtimes(children());
        let driver = match &cache {
            Some(cache) => driver.store_outputs_in(Arc::clone(cache)),
            None => driver,
        };
        // The planner's feed goes to the first driver: the run neither pauses nor ends while it
        // writes, so no later driver is needed before the plan is written.
        let driver = match feed.take() {
            Some(feed) => driver.with_feed(feed),
            None => driver,
        };
        state = match runtime.block_on(driver.run(command, cancel.clone()).instrument(span.clone())) {
            Ok(state) => state,
            Err(engine::driver::DriverError::Refused(error)) => return Err(crate::home::refused(run.id(), &error)),
            Err(engine::driver::DriverError::Store(error)) => {
                return Err(crate::home::store_error(error).context(format!("run `{}`", run.id())));
            }
            Err(error) => return Err(anyhow::Error::new(error).context(format!("run `{}`", run.id()))),
        };
        if state.status.is_final() || halt.is_cancelled() {
            break;
        }
        let cancelled = || {
            // Cancelled while nothing ran (paused, or at a prompt): record it here.
            Command::Cancel { reason: reason.get().cloned().unwrap_or_else(|| "interrupted".to_owned()) }
        };
        if cancel.is_cancelled() {
            commands = VecDeque::from([cancelled()]);
            continue;
        }
        if !commands.is_empty() || state.status != RunStatus::Paused || !interactive {
            continue;
        }
        live.clear();
        match runtime.block_on(ask(&run.runs(), run.id(), &state, &cancel))? {
            Some(answer) => commands.extend([answer, Command::Continue]),
            None if cancel.is_cancelled() && !halt.is_cancelled() => commands.push_back(cancelled()),
            None => {}
        }
    }
    live.clear();
    if let Some(cache) = &cache {
        crate::cache::keep_under_cap(cache);
    }
    if let Some(cluster) = cluster {
        cluster.stop(&runtime);
    }
    run.clear_cancel();
    span.record("status", state.status.as_str());
    let halted = halt.is_cancelled() && !state.status.is_final();
    if halted {
        say(&format!(
            "run `{}` stopped by SIGTERM, its agents ended; continue with: runner resume {}",
            run.id(),
            run.id()
        ));
    } else {
        summary(run.id(), &state);
    }
    lock.release();
    runtime.shutdown_background();
    Ok(if halted { EXIT_TERMINATED } else { exit_code(state.status) })
}

/// Says why a run cannot be driven when the folder its commands run in (the plan's) is gone:
/// every command would fail to start. Nothing is recorded, so the run can be resumed once the
/// folder is back.
pub fn check_workdir(workdir: &std::path::Path, run_id: &str) -> anyhow::Result<()> {
    if workdir.is_dir() {
        return Ok(());
    }
    anyhow::bail!(
        "the folder the commands of run `{run_id}` run in, {}, is missing (it is the folder of the \
         plan file the run was started from): restore it and run this command again; nothing was \
         recorded",
        workdir.display()
    )
}

/// The first Ctrl-C cancels the run gracefully; a second exits at once.
async fn watch_ctrl_c(cancel: CancellationToken, reason: Arc<OnceLock<String>>) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    let _ = reason.set("interrupted".to_owned());
    eprintln!("\ncancelling the run (Ctrl-C again exits at once)");
    cancel.cancel();
    if tokio::signal::ctrl_c().await.is_ok() {
        std::process::exit(i32::from(EXIT_CANCELLED));
    }
}

/// SIGTERM, like a first Ctrl-C, stops the agents (their whole process groups) but records
/// nothing, so the run can be resumed; a second SIGTERM exits at once.
async fn watch_sigterm(mut terminate: tokio::signal::unix::Signal, halt: CancellationToken) {
    if terminate.recv().await.is_none() {
        return;
    }
    eprintln!("\nstopping the run: SIGTERM (it can be resumed; SIGTERM again exits at once)");
    halt.cancel();
    if terminate.recv().await.is_some() {
        std::process::exit(i32::from(EXIT_TERMINATED));
    }
}

/// Cancels when `runner cancel` asks for it (the run's `cancel` file, or its row in the database).
async fn watch_cancel_request(
    cancel: CancellationToken,
    reason: Arc<OnceLock<String>>,
    requested: impl Future<Output = ()>,
) {
    tokio::select! {
        () = requested => {
            eprintln!("cancelling the run: `runner cancel` asked for it");
            let _ = reason.set("cancelled by runner cancel".to_owned());
            cancel.cancel();
        }
        () = cancel.cancelled() => {}
    }
}

/// Asks the person at the terminal about the first task run `run_id` waits for; `None` when
/// stdin closed or the run was cancelled meanwhile. A sub-plan task that waits asks what its
/// child run waits for, records the reply in the child, and answers the parent's task.
async fn ask(
    runs: &Runs,
    run_id: &str,
    state: &RunState,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Command>> {
    let Some(i) = state.tasks.iter().position(|t| t.status == TaskStatus::Paused) else { return Ok(None) };
    let task = state.plan.tasks[i].id.value.to_string();
    if matches!(state.plan.tasks[i].kind, TaskKind::Plan | TaskKind::Expand) {
        let (found_runs, found_id, found_state, found_task) =
            (runs.clone(), run_id.to_owned(), state.clone(), task.clone());
        let found = tokio::task::spawn_blocking(move || {
            crate::children::child_of(&found_runs, &found_id, &found_state, &found_task)
        })
        .await??;
        if let Some((child, child_state)) = found {
            eprintln!(
                "
task `{task}` runs the sub-plan run `{}`, which waits:",
                child.id()
            );
            let Some(reply) = Box::pin(ask(runs, child.id(), &child_state, cancel)).await? else { return Ok(None) };
            let child_id = child.id().to_owned();
            tokio::task::spawn_blocking(move || child.record(reply)).await??;
            let text = format!("answered in the sub-plan run `{child_id}`");
            return Ok(Some(Command::Answer { task, text }));
        }
    }
    if let Some(question) = state.tasks[i].question() {
        eprintln!("\ntask `{task}` asks: {question}");
        loop {
            let Some(text) = read_line("answer> ", cancel).await? else { return Ok(None) };
            if !text.trim().is_empty() {
                return Ok(Some(Command::Answer { task: task.to_string(), text: text.trim().to_owned() }));
            }
        }
    }
    let approval = state.conversations.get(&task).and_then(|c| c.waiting.as_ref());
    if let Some(approval) = approval {
        eprintln!("\ntask `{task}` wants to call `{}` with {}", approval.tool, approval.arguments);
        if !approval.reason.trim().is_empty() {
            eprintln!("its reason: {}", approval.reason.trim());
        }
    } else if state.plan.tasks[i].kind == TaskKind::HumanReview {
        eprintln!("\n{}", review_text(state, i));
    } else {
        return Ok(None);
    }
    let approved = loop {
        let Some(choice) = read_line("[a]pprove / [r]eject> ", cancel).await? else { return Ok(None) };
        match choice.trim().to_ascii_lowercase().as_str() {
            "a" | "approve" | "y" | "yes" => break true,
            "r" | "reject" | "n" | "no" => break false,
            _ => {}
        }
    };
    let Some(comment) = read_line("comment (optional)> ", cancel).await? else { return Ok(None) };
    let comment = Some(comment.trim().to_owned()).filter(|c| !c.is_empty());
    Ok(Some(Command::Decide { task: task.to_string(), approved, comment }))
}

/// What a review shows: its prompt and the outputs under review.
pub fn review_text(state: &RunState, i: usize) -> String {
    let task = &state.plan.tasks[i];
    let raw = task.extras().prompt.as_ref().map_or_else(String::new, |p| p.value.clone());
    let prompt = state.render(&raw).unwrap_or(raw);
    let mut text = format!("review `{}`: {}\n", task.id.value, prompt.trim_end());
    for parent in state.graph.parents(i) {
        let output = state.tasks[parent].output.as_deref().unwrap_or("(no output)");
        let shown: String = output.chars().take(4000).collect();
        let more =
            if shown.len() < output.len() { "\n[... cut; `runner status RUN --format json` has it all]" } else { "" };
        text.push_str(&format!(
            "--- output of `{}` ---\n{}{more}\n",
            state.plan.tasks[parent].id.value,
            shown.trim_end()
        ));
    }
    text
}

/// Reads a line from stdin in a thread, so a Ctrl-C (which cancels) is not stuck behind it.
async fn read_line(prompt: &str, cancel: &CancellationToken) -> anyhow::Result<Option<String>> {
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::stdin().lock().read_line(&mut line);
        let _ = sender.send(read.map(|n| (n > 0).then_some(line)));
    });
    tokio::select! {
        read = receiver => match read {
            Ok(read) => Ok(read.context("cannot read the answer from stdin")?),
            Err(_) => Ok(None),
        },
        () = cancel.cancelled() => Ok(None),
    }
}

/// The end of a run: its status, task counts, and what to do next.
fn summary(run_id: &str, state: &RunState) {
    let count = |status| state.tasks.iter().filter(|t| t.status == status).count();
    let counts = format!(
        "{} succeeded, {} failed, {} skipped of {} tasks",
        count(TaskStatus::Succeeded),
        count(TaskStatus::Failed),
        count(TaskStatus::Skipped),
        state.tasks.len()
    );
    say(&format!("run `{run_id}` {}: {counts}", state.status.as_str()));
    if state.status == RunStatus::Paused {
        for line in waiting(run_id, state) {
            say(&line);
        }
        say(&format!("  then:     runner resume {run_id}"));
        return;
    }
    if state.saved.tasks > 0 {
        say(&format!("  reused:   {}", saved_line(state.saved)));
    }
    for line in crate::output::brief(run_id, state) {
        say(&line);
    }
    say(&format!("  inspect:  runner status {run_id}   runner logs {run_id}"));
    if matches!(state.status, RunStatus::Finished(Outcome::Failed | Outcome::Partial) | RunStatus::Cancelled) {
        say(&format!("  retry:    runner retry {run_id} [--from TASK]"));
    }
}

/// What the task cache saved a run, in one line.
pub fn saved_line(saved: engine::Saved) -> String {
    let tokens = saved.tokens.prompt + saved.tokens.completion;
    let noun = if saved.tasks == 1 { "output" } else { "outputs" };
    format!("{} task {noun} from the cache, saving {tokens} tokens", saved.tasks)
}

/// What a paused run waits for, with the exact commands that answer.
pub fn waiting(run_id: &str, state: &RunState) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, task) in state.tasks.iter().enumerate() {
        if task.status != TaskStatus::Paused {
            continue;
        }
        let id = &state.plan.tasks[i].id.value;
        let approval = state.conversations.get(id.as_str()).and_then(|c| c.waiting.as_ref());
        let kind = state.plan.tasks[i].kind;
        match task.question() {
            Some(question) if matches!(kind, TaskKind::Plan | TaskKind::Expand) => {
                let (first, rest) = question.split_once('\n').unwrap_or((question, ""));
                lines.push(format!("  task `{id}` runs a sub-plan; {first}"));
                lines.extend(rest.lines().map(|line| format!("    {line}")));
            }
            None if let Some(approval) = approval => {
                lines.push(format!("  task `{id}` wants to call `{}` with {}", approval.tool, approval.arguments));
                if !approval.reason.trim().is_empty() {
                    lines.push(format!("  its reason: {}", approval.reason.trim()));
                }
                lines.push(format!("  approve:  runner approve {run_id} {id} [--comment C]"));
                lines.push(format!(
                    "  reject:   runner reject {run_id} {id} [--comment C]  (the model is told, and tries another way)"
                ));
            }
            Some(question) => {
                lines.push(format!("  task `{id}` asks: {question}"));
                lines.push(format!("  answer:   runner answer {run_id} {id} \"TEXT\""));
            }
            None => {
                lines.push(format!(
                    "  review `{id}` waits for a decision (`runner status {run_id}` shows what to review)"
                ));
                lines.push(format!("  approve:  runner approve {run_id} {id} [--comment C]"));
                lines.push(format!("  reject:   runner reject {run_id} {id} [--comment C]"));
            }
        }
    }
    lines
}
