//! Replanning: asking the planner agent for a replacement of a failed task and its unstarted
//! descendants, checking the answer like a manifest (one repair round with the diagnostics),
//! and splicing it into the plan.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use manifest::Plan;
use manifest::splice::splice;
use model::tokens::{Tokenizer, meter};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::Command;
use crate::attempt::add;
use crate::context::extract;
use crate::event::{Replanned, Tokens};
use crate::runtime::{AgentRuntime, Attempt, Reply};
use crate::{RunState, TaskStatus};

/// The most tokens of each finished task's output shown to the planner.
const OUTPUT_TOKENS: usize = 400;

/// Everything a replan needs, owned, so it can run on its own task.
pub struct Replan {
    /// The failed task.
    pub task: String,
    /// The plan in force.
    pub plan: Arc<Plan>,
    /// The failed task and its descendants that have not started: what the replacement replaces.
    pub removed: Vec<String>,
    /// The prompt, built from the run when the replan was asked for.
    pub prompt: String,
    /// The planner agent's runtime.
    pub planner: Arc<dyn AgentRuntime>,
    /// The folder the planner runs in.
    pub workdir: PathBuf,
}

impl Replan {
    /// Collects what the planner is told about the run: the mission, the plan with each
    /// task's status, the failure and the outputs so far.
    pub fn new(run: &RunState, task: &str, error: &str, planner: Arc<dyn AgentRuntime>, workdir: PathBuf) -> Self {
        let removed = run.replaceable(task);
        let prompt = prompt(run, task, error, &removed);
        Replan { task: task.to_owned(), plan: Arc::clone(&run.plan), removed, prompt, planner, workdir }
    }

    /// Asks the planner, checks its answer (with one repair round), and returns the command
    /// that reports the outcome.
    pub async fn perform(self, cancel: CancellationToken) -> Command {
        let span = crate::spans::replan(&self.task);
        let command = self.ask(cancel).instrument(span.clone()).await;
        span.record("outcome", if matches!(command, Command::Replanned(_)) { "replanned" } else { "failed" });
        command
    }

    async fn ask(self, cancel: CancellationToken) -> Command {
        let removed: Vec<&str> = self.removed.iter().map(String::as_str).collect();
        let mut tokens: Option<Tokens> = None;
        let mut prompt = self.prompt.clone();
        let mut problems = String::new();
        for round in 1..=2 {
            let attempt = Attempt {
                schema: Some(serde_json::json!({"type": "object", "required": ["workflow"]})),
                ..Attempt::new(format!("{}.replan", self.task), round, prompt.as_str(), self.workdir.clone())
            };
            let answer = match self.planner.run(attempt, cancel.clone()).await {
                Reply::Output { text, tokens: used } => {
                    tokens = add(tokens, used);
                    text
                }
                Reply::Failure { error, tokens: used, .. } => {
                    return self.failed(format!("the planner failed: {error}"), add(tokens, used));
                }
                Reply::Question(question, used) => {
                    let reason = format!("the planner asked a question instead: {question}");
                    return self.failed(reason, add(tokens, used));
                }
            };
            let spliced = splice(&self.plan, &removed, &self.task, &answer);
            problems = spliced.problems();
            if let (true, Some(plan)) = (spliced.is_valid(), spliced.plan) {
                let score = manifest::critic::critique(&plan).scores.overall;
                return Command::Replanned(Replanned {
                    task: self.task,
                    removed: self.removed,
                    added: spliced.added,
                    plan: Arc::new(plan),
                    score,
                    tokens,
                });
            }
            prompt = format!(
                "{}\n\nYour answer was:\n{answer}\n\nIt has these problems:\n{problems}\n\
                 Answer again with the corrected JSON object only.",
                self.prompt
            );
        }
        self.failed(format!("the replacement is still invalid after one repair: {}", problems.trim()), tokens)
    }

    fn failed(self, reason: String, tokens: Option<Tokens>) -> Command {
        Command::ReplanFailed { task: self.task, reason, tokens }
    }
}

/// The planner's prompt.
fn prompt(run: &RunState, failed: &str, error: &str, removed: &[String]) -> String {
    let plan = &run.plan;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "You are the planner of a running workflow. Task `{failed}` failed. Write a replacement for it and \
         for the tasks after it that have not started: {}.",
        removed.join(", ")
    );
    if let Some(mission) = &plan.mission {
        let _ = writeln!(text, "\nMission: {mission}");
    }
    let _ = writeln!(text, "\nThe failure of `{failed}`:\n{error}");
    let _ = writeln!(text, "\nAgents you can use:");
    for (name, agent) in &plan.agents {
        let kind = agent.runtime.name();
        let about = agent.system_prompt.as_deref().and_then(|p| p.lines().next()).unwrap_or("");
        let _ = writeln!(text, "- {name} ({kind}) {about}");
    }
    let _ = writeln!(text, "\nThe workflow now (status in brackets):");
    for (i, task) in plan.tasks.iter().enumerate() {
        let state = &run.tasks[i];
        let depends: Vec<&str> = run.graph.parents(i).map(|p| plan.tasks[p].id.value.as_str()).collect();
        let input = task.input.as_ref().map_or("", |input| input.value.as_str());
        let _ = writeln!(
            text,
            "- {} [{}] agent={} depends_on=[{}] input: {}",
            task.id.value,
            state.status.as_str(),
            plan.agent_of(task).unwrap_or("-"),
            depends.join(", "),
            input.lines().next().unwrap_or("")
        );
    }
    let finished: Vec<usize> =
        (0..plan.tasks.len()).filter(|&i| run.tasks[i].status == TaskStatus::Succeeded).collect();
    if !finished.is_empty() {
        let _ = writeln!(text, "\nOutputs so far:");
        for i in finished {
            let output = run.tasks[i].output.as_deref().unwrap_or("");
            let output = extract::compact(output, OUTPUT_TOKENS, meter(Tokenizer::O200k)).text;
            let _ = writeln!(text, "## {}\n{output}\n", plan.tasks[i].id.value);
        }
    }
    let _ = write!(
        text,
        "\nAnswer with exactly one JSON object and nothing else: {{\"workflow\": [...]}} holding only the new \
         tasks. Each task is an object with \"id\", \"agent\", \"input\" and \"depends_on\" (a list of task ids), \
         and optionally \"type\" (task, synthesis_gate, human_review), \"inputs\", \"max_output_tokens\", \
         \"on_failure\" (retry, skip, fail) and \"critical\". New ids must differ from the ids of the tasks that \
         stay; new tasks may depend on tasks that stay and on each other. A task's input may use \
         {{{{ tasks.ID.output }}}} for the output of a task it depends on."
    );
    text
}
