//! The work a durable batch starts: attempts (a reply known at once taken without a task of
//! its own), replans and retry timers, and the runtimes they run on.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use manifest::Plan;
use manifest::plan::{TaskKind, Verification};
use model::tokens::Tokenizer;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Driver;
use crate::Command;
use crate::TaskStatus;
use crate::attempt::{Gate, Job, report};
use crate::guarded::Guarded;
use crate::journal::{self, Journal};
use crate::llm::LlmAgents;
use crate::replan::Replan;
use crate::runtime::{Agents, Attempt, Reply};
use crate::store::EventStore;

impl<S: EventStore> Driver<S> {
    /// The runtimes of a plan's agents.
    pub(super) fn agents_for(&mut self, plan: &Arc<Plan>) -> Agents {
        let llm = self.llm.get_or_insert_with(|| {
            // Built when the first llm agent needs it: plans without one never start an HTTP client.
            let (plan, agents) = (Arc::clone(plan), OnceLock::new());
            Arc::new(move |name: &str| agents.get_or_init(|| LlmAgents::new(&plan)).runtime(name))
        });
        Agents::for_plan(plan, &self.runtimes, &**llm)
    }

    /// Starts a dispatched attempt of task `i`, unless the state has moved past it (a task
    /// that failed to render is dispatched and failed in the same batch). A reply the agent
    /// knows at once (see [`crate::runtime::AgentRuntime::reply_now`]) is reported straight
    /// away when nothing follows the agent: no task, cancel token or mark is made for it, and
    /// the result is taken with its task's index rather than through the channel.
    pub(super) fn start_attempt(&self, agents: &Agents, i: usize, attempt: u32, work: &mut Work<'_>) {
        let state = &self.state.tasks[i];
        if state.status != TaskStatus::Running || state.attempts != attempt {
            return;
        }
        let spec = &self.state.plan.tasks[i];
        let input = state.input.as_ref();
        let gated = spec.kind == TaskKind::SynthesisGate && spec.extras().max_output_tokens.is_some();
        if spec.extras().verification.is_none()
            && !gated
            && let Some(reply) = agents.runtime_of(i).reply_now(&spec.id.value, attempt, input.map_or("", |i| i))
        {
            work.replies.push_back(Known { i, task: spec.id.value.to_string(), attempt, reply });
            return;
        }
        // No open task span means nobody records spans: the attempt's is not made either.
        let parent = self.task_spans.get(spec.id.value.as_str()).cloned();
        let request = Attempt {
            max_output_tokens: spec.extras().max_output_tokens,
            attachments: spec.extras().attachments.iter().map(|a| a.value.clone()).collect(),
            schema: match spec.extras().verification.as_ref() {
                Some(Verification::SchemaCheck { schema }) => Some(schema.value.clone()),
                _ => None,
            },
            may_ask: self.state.plan.control.allow_clarification,
            journal: self.is_llm(spec).then(|| {
                let recorded = self.state.conversations.get(spec.id.value.as_str()).cloned().unwrap_or_default();
                Box::new(Journal::new(work.journal.clone(), spec.id.value.to_string(), attempt, recorded))
            }),
            ..Attempt::new(
                spec.id.value.clone(),
                attempt,
                input.map_or_else(|| "".into(), Arc::clone),
                self.workdir.clone(),
            )
        };
        let check = spec.extras().verification.as_ref().cloned().map(|check| {
            let reviewer = match &check {
                Verification::LlmReviewer { agent, .. } => agents.agent(&agent.value),
                _ => None,
            };
            (check, reviewer)
        });
        let gate = match (spec.kind, spec.extras().max_output_tokens) {
            (TaskKind::SynthesisGate, Some(cap)) => Some(Gate {
                cap,
                agent: spec.agent.as_ref().map(|a| a.value.to_string()),
                tokenizer: Tokenizer::of_agent(&self.state.plan, spec.agent.as_ref().map(|a| a.value.as_str())),
            }),
            _ => None,
        };
        let mark: Arc<str> = format!("{}/{}/{attempt}", self.mark, request.task).into();
        let job = Job {
            runtime: agents.runtime(i),
            request,
            timeout: agents.timeout(i),
            check,
            gate,
            error_limit: self.state.plan.control.error_char_limit as usize,
            hidden: agents.hidden(),
            jitter_seed: self.jitter_seed,
            span: parent.unwrap_or_else(tracing::Span::none),
        };
        let perform = crate::process::marked(mark, job.perform(work.stop.child_token()));
        work.start_attempt(Guarded::new(spec.id.value.to_string(), attempt, perform));
    }

    /// The command that reports a reply known at once, with its attempt's span when spans are
    /// recorded (an open task span says so).
    pub(super) fn report_known(&self, known: Known) -> Command {
        let Known { task, attempt, reply, .. } = known;
        let span = self.task_spans.get(&task).map(|parent| crate::spans::attempt(parent, &task, attempt));
        let limit = self.state.plan.control.error_char_limit as usize;
        // A reply known at once took no time worth a clock read (two a task, at 100k).
        let command = report(task, attempt, reply, limit, self.jitter_seed, 0);
        if let Some(span) = span {
            crate::spans::attempt_ended(&span, &command);
        }
        command
    }

    /// Whether a task's agent is an llm agent, whose attempts keep a journal.
    pub(super) fn is_llm(&self, spec: &manifest::plan::Task) -> bool {
        let plan = &self.state.plan;
        let agent = plan.agent_of(spec).and_then(|name| plan.agents.get(name));
        matches!(agent.map(|a| &a.runtime), Some(manifest::plan::Runtime::Llm { .. }))
    }

    /// Asks the planner for the tasks that replace a failed one; without a planner the replan
    /// fails at once.
    pub(super) fn start_replan(&self, agents: &Agents, task: String, error: &str, work: &mut Work<'_>) {
        let planner = self.state.plan.control.planner.as_ref().and_then(|name| agents.agent(&name.value));
        let Some(planner) = planner else {
            let reason = "the planner agent has no runtime".to_owned();
            let _ = work.sender.send(Command::ReplanFailed { task, reason, tokens: None });
            return;
        };
        let mark: Arc<str> = format!("{}/{task}.replan", self.mark).into();
        let replan = Replan::new(&self.state, &task, error, planner, self.workdir.clone());
        let (sender, cancel) = (work.sender.clone(), work.stop.child_token());
        work.set.spawn(async move {
            let _ = sender.send(crate::process::marked(mark, replan.perform(cancel)).await);
        });
    }
}

/// A reply an agent knew at once, waiting for its turn to be taken; it becomes a command only
/// then, so a wide layer waits as replies rather than as commands nearly twice their size.
pub(super) struct Known {
    /// The task's index when its attempt started.
    pub(super) i: usize,
    /// The task.
    pub(super) task: String,
    /// The attempt.
    pub(super) attempt: u32,
    /// What the agent replied.
    pub(super) reply: Reply,
}

/// Where the coordinator's background work runs and reports: every attempt, replan, timer and
/// the summarizer send their commands to `sender`, run in `set` and stop with `stop`; a reply
/// known at once goes to `replies` with its task's index, taken after the commands waiting.
pub(super) struct Work<'a> {
    pub(super) sender: &'a mpsc::UnboundedSender<Command>,
    pub(super) journal: &'a mpsc::UnboundedSender<journal::Entry>,
    pub(super) set: &'a mut JoinSet<()>,
    pub(super) stop: &'a CancellationToken,
    pub(super) replies: &'a mut VecDeque<Known>,
}

impl Work<'_> {
    /// Runs an attempt. One that is done at once (a mock agent, a gate with no agent) is taken
    /// here, without a task of its own; anything else gets a task.
    pub(super) fn start_attempt(&mut self, work: impl Future<Output = Vec<Command>> + Send + 'static) {
        let mut work = Box::pin(work);
        if let Poll::Ready(commands) = work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            for command in commands {
                let _ = self.sender.send(command);
            }
            return;
        }
        let sender = self.sender.clone();
        self.set.spawn(async move {
            for command in work.await {
                let _ = sender.send(command);
            }
        });
    }

    /// Sends `TimerFired` for `task` after the delay, unless the run stops first. The delay is
    /// jittered already: the attempt drew the jitter and the state machine applied it.
    pub(super) fn start_timer(&mut self, task: String, delay_ms: u64) {
        let (sender, stop) = (self.sender.clone(), self.stop.clone());
        self.set.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(delay_ms)) => { let _ = sender.send(Command::TimerFired { task }); }
                () = stop.cancelled() => {}
            }
        });
    }
}
