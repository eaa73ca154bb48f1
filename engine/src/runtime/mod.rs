//! Agent runtimes: how an attempt of a task is carried out. The scheduler only sees the
//! [`AgentRuntime`] trait, and agents get their runtime by name from a [`Registry`], so a new
//! runtime is one file here plus one line in [`Registry::builtin`].

mod command;
mod expand;
mod gate;
mod http;
mod mock;
mod registry;
mod subplan;

pub use command::CommandRuntime;
pub use expand::{DEFAULT_MAX_TASKS, ExpandRuntime, MIN_SCORE};
pub use gate::GateRuntime;
pub use http::HttpRuntime;
pub use mock::MockRuntime;
pub(crate) use mock::reply_after;
pub use registry::{Constructor, Registry, Setup};
pub use subplan::{ChildFuture, ChildPlan, Children, SubPlanRuntime};

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use manifest::Plan;
use manifest::plan::{Attachment, TaskKind};
use tokio_util::sync::CancellationToken;

use crate::event::{ErrorClass, Tokens};
use crate::journal::Journal;

/// One attempt handed to a runtime. It serialises, so a worker elsewhere can carry it out.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Attempt {
    /// The task.
    pub task: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The rendered input.
    pub input: Arc<str>,
    /// The folder commands run in: the plan's folder.
    pub workdir: PathBuf,
    /// A gate's output cap in tokens.
    pub max_output_tokens: Option<u32>,
    /// The task's attachments: links are listed in an llm prompt, files read and inlined.
    pub attachments: Vec<Attachment>,
    /// The JSON Schema a `schema_check` holds the output to; llm agents are asked for JSON
    /// that conforms to it.
    pub schema: Option<serde_json::Value>,
    /// Whether an llm agent is offered the built-in `ask_user` tool.
    pub may_ask: bool,
    /// Where an llm agent records its turns and tool calls, with the task's conversation so
    /// far; `None` runs the attempt unrecorded (tests, runtimes used outside a driver, and an
    /// attempt a worker runs for another process, which does not journal yet).
    /// (Boxed: an attempt is held by value in its job's future, once per attempt in flight.)
    #[serde(skip)]
    pub journal: Option<Box<Journal>>,
}

impl Attempt {
    /// An attempt with only the essentials set: no cap, attachments or schema, no `ask_user`.
    pub fn new(task: impl Into<String>, attempt: u32, input: impl Into<Arc<str>>, workdir: PathBuf) -> Self {
        Attempt {
            task: task.into(),
            attempt,
            input: input.into(),
            workdir,
            max_output_tokens: None,
            attachments: Vec::new(),
            schema: None,
            may_ask: false,
            journal: None,
        }
    }
}

/// What an attempt came to. It serialises, so a worker elsewhere can report it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Reply {
    /// An output.
    Output {
        /// The text.
        text: String,
        /// Tokens used.
        tokens: Option<Tokens>,
    },
    /// A failure.
    Failure {
        /// What went wrong.
        error: String,
        /// What kind of failure it was, which decides whether trying again could help.
        class: ErrorClass,
        /// Tokens used before it failed.
        tokens: Option<Tokens>,
    },
    /// A question for a person instead of an answer, and the tokens used to ask it.
    Question(String, Option<Tokens>),
}

impl Reply {
    /// A failure of the agent that a retry may fix.
    pub fn failed(error: impl Into<String>) -> Self {
        Reply::Failure { error: error.into(), class: ErrorClass::Agent, tokens: None }
    }

    /// A failure of the service rather than the work (429, 5xx, a lost connection): the kind
    /// `retry_on: transient` retries.
    pub fn transient(error: impl Into<String>) -> Self {
        Reply::Failure { error: error.into(), class: ErrorClass::Transient, tokens: None }
    }

    /// A failure that no retry can fix.
    pub fn refused(error: impl Into<String>) -> Self {
        Reply::Failure { error: error.into(), class: ErrorClass::Permanent, tokens: None }
    }

    /// The same reply, reporting `tokens` as used.
    pub fn with_tokens(self, tokens: Option<Tokens>) -> Self {
        match self {
            Reply::Output { text, .. } => Reply::Output { text, tokens },
            Reply::Failure { error, class, .. } => Reply::Failure { error, class, tokens },
            Reply::Question(question, _) => Reply::Question(question, tokens),
        }
    }

    /// The tokens the attempt used, whatever it came to.
    pub fn tokens(&self) -> Option<Tokens> {
        match self {
            Reply::Output { tokens, .. } | Reply::Failure { tokens, .. } | Reply::Question(_, tokens) => *tokens,
        }
    }
}

/// A future reply.
pub type Pending = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// Carries out attempts for one agent.
pub trait AgentRuntime: Send + Sync {
    /// Runs an attempt until it replies or `cancel` fires (then it stops its work and returns
    /// a failure, which the run ignores).
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending;

    /// The reply to attempt `attempt` of `task` on `input`, when the runtime can give it at
    /// once from these alone, starting nothing and waiting for nothing (a mock agent without
    /// latency): the driver then reports it without running the attempt as a task of its own.
    /// `None`, the default, means the attempt goes through [`AgentRuntime::run`].
    fn reply_now(&self, task: &str, attempt: u32, input: &str) -> Option<Reply> {
        let _ = (task, attempt, input);
        None
    }
}

/// The runtime of a task that runs a child run: its sub-plan's, or its agent's writing one.
fn child_runtime(
    plan: &Plan,
    task: &manifest::plan::Task,
    registry: &Registry,
    agent: &Arc<dyn AgentRuntime>,
) -> Arc<dyn AgentRuntime> {
    let Some(children) = registry.children() else {
        let reason = format!("task `{}` runs a child run, which this driver cannot start", task.id.value);
        return Arc::new(Refusing(reason));
    };
    let extras = task.extras();
    if task.kind == TaskKind::Expand {
        let max_tasks = extras.max_tasks.as_ref().map(|m| m.value);
        return Arc::new(ExpandRuntime::new(Arc::clone(agent), Arc::clone(children), plan, &task.id.value, max_tasks));
    }
    let Some(path) = extras.plan.as_ref() else {
        return Arc::new(Refusing(format!("task `{}` names no plan file", task.id.value)));
    };
    match plan.subplans.get(&path.value) {
        Some(child) => {
            let child = ChildPlan { plan: Arc::clone(child), source: Some(PathBuf::from(&path.value)) };
            Arc::new(SubPlanRuntime::new(Arc::clone(children), child))
        }
        None => Arc::new(Refusing(format!(
            "the sub-plan `{}` of task `{}` was not loaded with the plan (plans read from text do not load sub-plans)",
            path.value, task.id.value
        ))),
    }
}

/// A runtime that refuses every attempt with one reason: what a misconfigured agent gets.
#[derive(Debug, Clone)]
pub struct Refusing(pub String);

impl AgentRuntime for Refusing {
    fn run(&self, _attempt: Attempt, _cancel: CancellationToken) -> Pending {
        let reason = self.0.clone();
        Box::pin(async move { Reply::refused(reason) })
    }
}

/// The runtimes of a plan's agents, and the timeout of each task.
#[derive(Clone)]
pub struct Agents {
    by_agent: HashMap<String, Arc<dyn AgentRuntime>>,
    by_task: Vec<Arc<dyn AgentRuntime>>,
    timeouts: Vec<Option<Duration>>,
    hidden: Arc<[String]>,
}

impl Agents {
    /// Runtimes for every agent of a plan, built by the `registry` (`llm` makes those of llm
    /// agents), and for every task: its agent's, or the built-in gate for agent-less gates.
    pub fn for_plan(plan: &Plan, registry: &Registry, llm: &dyn Fn(&str) -> Arc<dyn AgentRuntime>) -> Self {
        let hidden: Arc<[String]> = plan.secret_variables().into();
        let by_agent: HashMap<String, Arc<dyn AgentRuntime>> = plan
            .agents
            .iter()
            .map(|(name, agent)| (name.clone(), registry.build(&Setup { name, agent, hidden: &hidden, llm, plan })))
            .collect();
        let gate: Arc<dyn AgentRuntime> = Arc::new(GateRuntime);
        let mut by_task = Vec::with_capacity(plan.tasks.len());
        let mut timeouts = Vec::with_capacity(plan.tasks.len());
        // Neighbouring tasks mostly share an agent: the last one found is tried first.
        let mut last: Option<(&str, Option<&manifest::plan::Agent>, &Arc<dyn AgentRuntime>)> = None;
        for task in &plan.tasks {
            let agent_name = plan.agent_of(task);
            let (agent, runtime) = match (last, agent_name) {
                (Some((name, agent, runtime)), Some(wanted)) if name == wanted => (agent, runtime),
                _ => {
                    let agent = agent_name.and_then(|name| plan.agents.get(name));
                    // Agent-less gates; reviews have no agent either but never reach a runtime.
                    let runtime = agent_name.and_then(|name| by_agent.get(name)).unwrap_or(&gate);
                    last = agent_name.map(|name| (name, agent, runtime));
                    (agent, runtime)
                }
            };
            by_task.push(match task.kind {
                TaskKind::Plan | TaskKind::Expand => child_runtime(plan, task, registry, runtime),
                _ => Arc::clone(runtime),
            });
            timeouts.push(task.extras().timeout.or_else(|| agent.and_then(|a| a.timeout)).map(|t| t.to_std()));
        }
        Agents { by_agent, by_task, timeouts, hidden }
    }

    /// The runtime of task `i`.
    pub fn runtime(&self, i: usize) -> Arc<dyn AgentRuntime> {
        Arc::clone(&self.by_task[i])
    }

    /// The runtime of task `i`, borrowed.
    pub fn runtime_of(&self, i: usize) -> &dyn AgentRuntime {
        &*self.by_task[i]
    }

    /// The runtime of an agent by name (a reviewer, the planner, the compactor).
    pub fn agent(&self, name: &str) -> Option<Arc<dyn AgentRuntime>> {
        self.by_agent.get(name).map(Arc::clone)
    }

    /// The environment variables holding API keys, hidden from every program the run starts.
    pub fn hidden(&self) -> Arc<[String]> {
        Arc::clone(&self.hidden)
    }

    /// The timeout of one attempt of task `i`.
    pub fn timeout(&self, i: usize) -> Option<Duration> {
        self.timeouts[i]
    }
}
