//! The rolling context summary kept by a compactor agent: a worker that merges each successful
//! task's output into it, one at a time and in the order the outputs were recorded, and reports
//! each new summary. (Without a compactor the run state merges extractively as outputs arrive;
//! how a plan keeps its summary is `machine::summary_mode`.)

use std::path::PathBuf;
use std::sync::Arc;

use model::tokens::{Tokenizer, count, meter};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Command;
use crate::context::{extract, summary};
use crate::event::{ContextCompacted, Scope};
use crate::runtime::{AgentRuntime, Attempt, Reply};

pub use machine::summary_mode::{DEFAULT_BUDGET, by_agent};

/// Hands outputs to the worker.
pub struct Summarizer {
    outputs: mpsc::UnboundedSender<(String, String)>,
}

/// How the worker compacts: the compactor agent, when the plan names one.
pub struct Compactor {
    /// The agent's name, recorded as who compacted.
    pub name: String,
    /// Its runtime.
    pub runtime: Arc<dyn AgentRuntime>,
    /// The folder it runs in.
    pub workdir: PathBuf,
    /// The run's part of the mark its programs carry (`crate::process::MARK`).
    pub mark: Arc<str>,
}

impl Summarizer {
    /// Starts the worker on `tasks`, from the summary so far; it reports through `commands`
    /// and stops with `stop`.
    pub fn start(
        summary: String,
        budget: u64,
        compactor: Option<Compactor>,
        commands: mpsc::UnboundedSender<Command>,
        tasks: &mut JoinSet<()>,
        stop: CancellationToken,
    ) -> Self {
        let (outputs, mut inbox) = mpsc::unbounded_channel::<(String, String)>();
        tasks.spawn(async move {
            let mut current = summary;
            let budget = budget as usize;
            loop {
                let (task, output) = tokio::select! {
                    next = inbox.recv() => match next { Some(next) => next, None => return },
                    () = stop.cancelled() => return,
                };
                let before = count(&current, Tokenizer::O200k) + count(&output, Tokenizer::O200k);
                let (merged, by, tokens) = match &compactor {
                    Some(compactor) => {
                        let prompt = prompt(&current, &task, &output, budget);
                        let attempt = Attempt::new(format!("{task}.summary"), 1, prompt, compactor.workdir.clone());
                        let mark = format!("{}/{task}.summary", compactor.mark).into();
                        let work = compactor.runtime.run(attempt, stop.child_token());
                        match crate::process::marked(mark, work).await {
                            Reply::Output { text, tokens } => {
                                let text = extract::compact(text.trim(), budget, meter(Tokenizer::O200k)).text;
                                (text, compactor.name.clone(), tokens)
                            }
                            // A compactor that fails leaves the job to the extractive merge; the
                            // tokens it used still count.
                            failed => {
                                let merged = summary::merge(&current, &task, &output, budget, meter(Tokenizer::O200k));
                                (merged, extractive(), failed.tokens())
                            }
                        }
                    }
                    None => {
                        (summary::merge(&current, &task, &output, budget, meter(Tokenizer::O200k)), extractive(), None)
                    }
                };
                let after = count(&merged, Tokenizer::O200k);
                current.clone_from(&merged);
                let command = Command::Compacted(ContextCompacted {
                    task,
                    scope: Scope::Summary,
                    by,
                    tokens_before: before as u64,
                    tokens_after: after as u64,
                    summary: Some(merged),
                    tokens,
                });
                if commands.send(command).is_err() {
                    return;
                }
            }
        });
        Summarizer { outputs }
    }

    /// Queues a task's output to be merged in.
    pub fn add(&self, task: String, output: String) {
        let _ = self.outputs.send((task, output));
    }
}

fn extractive() -> String {
    "extractive".to_owned()
}

/// What the compactor agent is asked.
fn prompt(current: &str, task: &str, output: &str, budget: usize) -> String {
    format!(
        "You keep the running summary of a multi-step job, in at most {budget} tokens.\n\n\
         Summary so far:\n{current}\n\nNew result of task `{task}`:\n{output}\n\n\
         Write the updated summary only, in at most {budget} tokens. Keep figures, names, sources, \
         file paths and decisions; drop repetition."
    )
}
