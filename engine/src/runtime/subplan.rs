//! `type: plan` tasks: each attempt starts, resumes or reads a child run of the sub-plan, in
//! the store of the parent run, through [`Children`]. The child keeps its own log; its output
//! becomes the task's.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use machine::child::{Parent, child_run_id};
use manifest::Plan;
use tokio_util::sync::CancellationToken;

use super::{AgentRuntime, Attempt, Pending, Reply};
use crate::event::{ErrorClass, Tokens};
use crate::{Command, Outcome, RunState, RunStatus, Start, TaskStatus};

/// A future that a [`Children`] store returns.
pub type ChildFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Where the child runs of a run are kept and how one is driven: the caller's run store (run
/// folders or a database for `apply`, memory for a plan test), with the parent's settings.
pub trait Children: Send + Sync {
    /// The id of the parent run.
    fn parent(&self) -> &str;

    /// The parent run's variables, which a plan written at run time (`type: expand`) reads.
    fn vars(&self) -> manifest::plan::Vars;

    /// The state of run `id` folded from its log; `None` when there is no such run.
    fn load<'a>(&'a self, id: &'a str) -> ChildFuture<'a, Option<RunState>>;

    /// Drives run `id` from `first` (a `Start` for a new run, `Continue` to resume one) until
    /// it ends or waits for a person, with its commands run in `workdir`. When `stop` fires the
    /// child stops without recording anything, to be resumed; the parent's cancel reaches it
    /// as a cancel.
    fn drive(&self, id: String, first: Command, workdir: PathBuf, stop: CancellationToken)
    -> ChildFuture<'_, RunState>;
}

/// What a child run starts from: its plan, the variables the parent gives it, and where it runs.
#[derive(Clone)]
pub struct ChildPlan {
    /// The plan it runs.
    pub plan: Arc<Plan>,
    /// The plan's file (relative to the parent's folder, as `plan:` gives it), recorded as the
    /// child's source; its commands run in that file's folder. `None` for a plan written at run
    /// time, which runs in the parent's folder.
    pub source: Option<PathBuf>,
}

/// The runtime of a `type: plan` task.
pub struct SubPlanRuntime {
    children: Arc<dyn Children>,
    child: ChildPlan,
}

impl SubPlanRuntime {
    /// The runtime of a task that runs `child`'s plan as a child run kept in `children`.
    pub fn new(children: Arc<dyn Children>, child: ChildPlan) -> Self {
        SubPlanRuntime { children, child }
    }
}

impl AgentRuntime for SubPlanRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (children, child) = (Arc::clone(&self.children), self.child.clone());
        Box::pin(async move {
            let given: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(&attempt.input) {
                Ok(given) => given,
                Err(error) => {
                    return Reply::refused(format!("the sub-plan's variables are not a JSON object: {error}"));
                }
            };
            let vars = match child.plan.run_vars(given) {
                Ok(vars) => vars,
                Err(error) => return Reply::refused(format!("{error}; {}", error.help())),
            };
            run_child(&*children, &attempt, child, vars, cancel).await
        })
    }
}

/// Finds the child of this task's latest attempt that has one and goes on with it: a finished
/// child's output is read, an unfinished one resumed, a failed one retried as a new child that
/// keeps the outputs it had; with no child yet, one is started.
pub(crate) async fn run_child(
    children: &dyn Children,
    attempt: &Attempt,
    child: ChildPlan,
    vars: manifest::plan::Vars,
    stop: CancellationToken,
) -> Reply {
    let parent = children.parent().to_owned();
    let mut latest = None;
    for n in (1..=attempt.attempt).rev() {
        let id = child_run_id(&parent, &attempt.task, n);
        match children.load(&id).await {
            Ok(Some(state)) => {
                latest = Some((id, state));
                break;
            }
            Ok(None) => {}
            Err(error) => return Reply::transient(format!("cannot read the sub-plan run `{id}`: {error}")),
        }
    }
    let source = child.source.as_ref().map(|s| attempt.workdir.join(s));
    let workdir = source.as_deref().and_then(|s| s.parent()).map_or_else(|| attempt.workdir.clone(), PathBuf::from);
    let new_start = |retry_of: Option<(String, &RunState)>| {
        let reuse = retry_of.as_ref().map(|(_, state)| succeeded_outputs(state)).unwrap_or_default();
        Command::Start(Start {
            plan: Arc::clone(&child.plan),
            vars: vars.clone(),
            source: source.as_ref().map(|s| s.display().to_string()),
            retry_of: retry_of.map(|(id, _)| id),
            parent: Some(Parent { run: parent.clone(), task: attempt.task.clone() }),
            reuse,
            ..Start::default()
        })
    };
    let (id, first, before) = match latest {
        Some((id, state)) if state.status == RunStatus::Finished(Outcome::Succeeded) => {
            return outcome(&id, &state, Tokens::default(), &parent, &attempt.task);
        }
        Some((id, state)) if !state.status.is_final() => {
            // A paused child's tokens were reported with its question.
            let before = if state.status == RunStatus::Paused { state.tokens } else { Tokens::default() };
            (id, Command::Continue, before)
        }
        Some((old, state)) => {
            // Only a child that failed at its work is tried again; one that a person's decision
            // ended (a rejected review) or that was cancelled is the task's outcome.
            let retried = state.status == RunStatus::Finished(Outcome::Failed) && !state.ended_while_paused;
            let id = child_run_id(&parent, &attempt.task, attempt.attempt);
            if id == old || !retried {
                return outcome(&old, &state, Tokens::default(), &parent, &attempt.task);
            }
            (id, new_start(Some((old, &state))), Tokens::default())
        }
        None => (child_run_id(&parent, &attempt.task, attempt.attempt), new_start(None), Tokens::default()),
    };
    match children.drive(id.clone(), first, workdir, stop).await {
        Ok(state) => outcome(&id, &state, before, &parent, &attempt.task),
        Err(error) => Reply::failed(format!("the sub-plan run `{id}` could not run: {error}")),
    }
}

/// The outputs of a child's succeeded tasks (items of maps included, taken over as the new
/// child's maps expand again), for the child that retries it.
fn succeeded_outputs(state: &RunState) -> std::collections::BTreeMap<String, String> {
    state
        .plan
        .tasks
        .iter()
        .zip(&state.tasks)
        .filter(|(_, t)| t.status == TaskStatus::Succeeded)
        .filter_map(|(task, t)| Some((task.id.value.to_string(), t.output.as_deref()?.to_owned())))
        .collect()
}

/// What a child run's state means for task `task` of run `parent`, with the tokens it used
/// since `before`.
fn outcome(id: &str, state: &RunState, before: Tokens, parent: &str, task: &str) -> Reply {
    let used = Tokens {
        prompt: state.tokens.prompt.saturating_sub(before.prompt),
        completion: state.tokens.completion.saturating_sub(before.completion),
    };
    let tokens = (used != Tokens::default()).then_some(used);
    let reply = match state.status {
        RunStatus::Finished(Outcome::Succeeded | Outcome::Partial) => {
            Reply::Output { text: final_output(state), tokens: None }
        }
        RunStatus::Finished(Outcome::Failed) => Reply::Failure {
            error: format!("the sub-plan run `{id}` failed: {}", why_failed(state)),
            // A person's decision is not undone by trying again.
            class: if state.ended_while_paused { ErrorClass::Permanent } else { ErrorClass::Agent },
            tokens: None,
        },
        RunStatus::Cancelled => Reply::refused(format!("the sub-plan run `{id}` was cancelled")),
        RunStatus::Paused => Reply::Question(waiting_for(id, state, parent, task), None),
        RunStatus::New | RunStatus::Running => {
            Reply::failed(format!("the sub-plan run `{id}` stopped before it ended; the next attempt resumes it"))
        }
    };
    reply.with_tokens(tokens)
}

/// The child's result: its one final task's output, or a JSON object of every final task's
/// output by id (a JSON output embedded as JSON, a task without output as `null`).
pub(crate) fn final_output(state: &RunState) -> String {
    let sinks = state.graph.sinks();
    if let [only] = sinks[..] {
        return state.tasks[only].output.as_deref().unwrap_or_default().to_owned();
    }
    let outputs: serde_json::Map<String, serde_json::Value> = sinks
        .into_iter()
        .map(|i| {
            let value = state.tasks[i].output.as_deref().map_or(serde_json::Value::Null, |text| {
                serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
            });
            (state.plan.tasks[i].id.value.to_string(), value)
        })
        .collect();
    serde_json::Value::Object(outputs).to_string()
}

/// Why a child failed: its failed tasks and their errors, or why the run stopped.
fn why_failed(state: &RunState) -> String {
    let failed: Vec<String> = state
        .plan
        .tasks
        .iter()
        .zip(&state.tasks)
        .filter(|(_, t)| t.status == TaskStatus::Failed)
        .map(|(task, t)| format!("task `{}`: {}", task.id.value, t.error().unwrap_or("failed")))
        .collect();
    match (failed.is_empty(), &state.exhausted) {
        (_, Some(reason)) => reason.clone(),
        (true, None) => "it ended failed".to_owned(),
        (false, None) => failed.join("; "),
    }
}

/// The question a paused child puts to task `task` of run `parent`: what the child waits for,
/// and the commands that answer it from the parent run (`TASK/CHILD_TASK`).
fn waiting_for(id: &str, state: &RunState, parent: &str, task: &str) -> String {
    let mut lines = vec![format!("the sub-plan run `{id}` waits for a person:")];
    for (child, t) in state.plan.tasks.iter().zip(&state.tasks).filter(|(_, t)| t.status == TaskStatus::Paused) {
        let route = format!("{task}/{}", child.id.value);
        match t.question() {
            Some(question) => {
                lines.push(format!("- task `{}` asks: {question}", child.id.value));
                lines.push(format!("  answer: runner answer {parent} {route} \"TEXT\""));
            }
            None => {
                lines.push(format!("- task `{}` waits for a decision", child.id.value));
                lines.push(format!("  decide: runner approve {parent} {route}   or: runner reject {parent} {route}"));
            }
        }
    }
    lines.join("\n")
}
