//! The `command` runtime: a process per attempt. The argv is run directly, never through a
//! shell; the rendered input goes to stdin, the output comes from stdout. Values from plans or
//! outputs never become part of a command line.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::registry::Setup;
use super::{AgentRuntime, Attempt, Pending, Refusing, Reply};

/// How much of stderr is kept for the error message.
const STDERR_CAP: usize = 16 * 1024;

/// Runs a program per attempt: input on stdin, output from stdout (capped), exit 0 succeeds.
/// Stdout that is exactly `{"needs_clarification": "..."}` asks a person a question.
#[derive(Debug, Clone)]
pub struct CommandRuntime {
    argv: Vec<String>,
    max_output_bytes: u64,
    hidden: Arc<[String]>,
}

impl CommandRuntime {
    /// A command agent; the `hidden` environment variables (API keys) are removed from its
    /// environment.
    pub fn new(argv: Vec<String>, max_output_bytes: u64, hidden: Arc<[String]>) -> Self {
        CommandRuntime { argv, max_output_bytes, hidden }
    }

    /// The runtime of a `command` agent.
    pub fn from_agent(setup: &Setup<'_>) -> Arc<dyn AgentRuntime> {
        match &setup.agent.runtime {
            manifest::plan::Runtime::Command { command, max_output_bytes } => {
                Arc::new(CommandRuntime::new(command.clone(), *max_output_bytes, Arc::clone(setup.hidden)))
            }
            _ => Arc::new(Refusing(format!("agent `{}` is not a `command` agent", setup.name))),
        }
    }
}

impl AgentRuntime for CommandRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let argv = self.argv.clone();
        let cap = self.max_output_bytes;
        let hidden = Arc::clone(&self.hidden);
        Box::pin(async move {
            tokio::select! {
                reply = run_process(&argv, &attempt, cap, &hidden) => reply,
                () = cancel.cancelled() => Reply::refused("cancelled"),
            }
        })
    }
}

/// Reads at most `cap` bytes; `Err(())` when there was more.
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap: u64) -> std::io::Result<Result<Vec<u8>, ()>> {
    let mut buffer = Vec::new();
    (&mut stream).take(cap + 1).read_to_end(&mut buffer).await?;
    Ok(if buffer.len() as u64 > cap { Err(()) } else { Ok(buffer) })
}

async fn run_process(argv: &[String], attempt: &Attempt, cap: u64, hidden: &[String]) -> Reply {
    let Some((program, args)) = argv.split_first() else { return Reply::refused("the command is empty") };
    // Dropping `child` (a timeout, a cancel) kills the program and everything it started.
    let mut child = match crate::process::spawn(program, args, &attempt.workdir, hidden) {
        Ok(child) => child,
        Err(_) if !attempt.workdir.is_dir() => {
            let folder = attempt.workdir.display();
            return Reply::refused(format!("cannot start `{program}`: the folder it runs in, {folder}, is missing"));
        }
        Err(error) => return Reply::refused(format!("cannot start `{program}`: {error}")),
    };
    let Some((mut stdin, stdout, stderr)) = child.pipes() else {
        return Reply::refused("the process has no stdin, stdout or stderr");
    };
    let input = attempt.input.clone();
    // A program that exits without reading its input closes the pipe; that is not an error.
    let feed = async move {
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
    };
    let (_, stdout, stderr) = tokio::join!(feed, read_capped(stdout, cap), read_capped(stderr, STDERR_CAP as u64));
    let stderr_text = match stderr {
        Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(Err(())) => "(more than 16 KiB on stderr)".to_owned(),
        Err(error) => format!("(stderr unreadable: {error})"),
    };
    let stdout = match stdout {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(())) => {
            child.kill();
            return Reply::refused(format!("`{program}` wrote more than max_output_bytes ({cap} bytes) to stdout"));
        }
        Err(error) => return Reply::failed(format!("cannot read the output of `{program}`: {error}")),
    };
    let status = match child.wait().await {
        Ok(status) => status,
        Err(error) => return Reply::failed(format!("`{program}` could not be waited for: {error}")),
    };
    if !status.success() {
        let code = status.code().map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
        let detail = stderr_text.trim();
        let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
        return Reply::failed(format!("`{program}` failed with {code}{detail}"));
    }
    let text = String::from_utf8_lossy(&stdout).trim_end().to_owned();
    if let Some(question) = clarification(&text) {
        return Reply::Question(question, None);
    }
    Reply::Output { text, tokens: None }
}

/// The question in an output that is exactly `{"needs_clarification": "..."}`.
pub(super) fn clarification(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.get("needs_clarification")?.as_str().map(str::to_owned)
}
