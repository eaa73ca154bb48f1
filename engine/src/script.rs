//! Scripted agents and tools for plan tests: a [`Scripts`] answers every attempt of a run from
//! a scenario's overrides, so a test never calls a model, starts a program or makes a request.
//! Latencies are tokio sleeps, which a paused clock turns into virtual time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use manifest::Plan;
use manifest::plan::Runtime;
use manifest::plan_test::{Overrides, Reply as Scripted, Script};
use tokio_util::sync::CancellationToken;

use crate::driver::{Driver, LlmRuntimes};
use crate::journal::{Journal, TurnRecord, Verdict, stopped, waiting};
use crate::runtime::{AgentRuntime, Attempt, MockRuntime, Pending, Registry, Reply};
use crate::store::EventStore;
use machine::conversation::{CallState, ToolCallRecord};

/// The scripts of one scenario, by agent, task and tool, with the plan they stand in for.
#[derive(Debug)]
pub struct Scripts {
    agents: HashMap<String, Script>,
    tasks: HashMap<String, Script>,
    tools: HashMap<String, serde_json::Value>,
    planner: Vec<Scripted>,
    /// The stand-ins for agents without a script: a `mock` agent keeps its own responses, any
    /// other echoes its input.
    fallbacks: HashMap<String, MockRuntime>,
}

impl Scripts {
    /// The scripts of `overrides` for `plan`.
    pub fn new(plan: &Plan, overrides: &Overrides) -> Arc<Self> {
        let named = |scripts: &[(manifest::plan::At<String>, Script)]| {
            scripts.iter().map(|(name, script)| (name.value.clone(), script.clone())).collect()
        };
        let fallbacks = plan
            .agents
            .iter()
            .map(|(name, agent)| {
                let mock = match &agent.runtime {
                    Runtime::Mock { latency, default, responses } => {
                        MockRuntime::new(latency.map(|l| l.to_std()), default.clone(), responses.clone())
                    }
                    _ => MockRuntime::new(None, "echo".to_owned(), Default::default()),
                };
                (name.clone(), mock)
            })
            .collect();
        Arc::new(Scripts {
            agents: named(&overrides.agents),
            tasks: named(&overrides.tasks),
            tools: overrides.tools.iter().map(|(name, result)| (name.value.clone(), result.clone())).collect(),
            planner: overrides.planner.clone(),
            fallbacks,
        })
    }

    /// `driver`, with every agent of the run answered from these scripts.
    pub fn install<S: EventStore>(self: &Arc<Self>, driver: Driver<S>) -> Driver<S> {
        let scripts = Arc::clone(self);
        let llm: LlmRuntimes = Arc::new(move |name: &str| {
            Arc::new(ScriptedAgent { scripts: Arc::clone(&scripts), agent: name.to_owned() }) as Arc<dyn AgentRuntime>
        });
        let by_name = |setup: &crate::runtime::Setup<'_>| (setup.llm)(setup.name);
        let registry =
            ["llm", "command", "mock", "http"].into_iter().fold(Registry::builtin(), |r, n| r.with(n, by_name));
        driver.with_runtimes(registry).with_llm(llm)
    }

    /// The scripted reply to one attempt of `agent`, when a script has one, and how long it takes.
    fn script(&self, agent: &str, attempt: &Attempt) -> (Option<&Scripted>, Option<Duration>) {
        let by_task = self.tasks.get(attempt.task.as_str());
        let by_agent = self.agents.get(agent);
        let latency = by_task.and_then(|s| s.latency).or_else(|| by_agent.and_then(|s| s.latency)).map(|l| l.to_std());
        let script = by_task.filter(|s| !s.replies.is_empty()).or(by_agent.filter(|s| !s.replies.is_empty()));
        (script.map(|script| pick(&script.replies, attempt.attempt)), latency)
    }

    /// The reply to one attempt of `agent`, and how long it takes.
    fn reply(&self, agent: &str, attempt: &Attempt) -> (Reply, Option<Duration>) {
        if attempt.task.ends_with(".replan") && !self.planner.is_empty() {
            return (self.convert(pick(&self.planner, attempt.attempt)), None);
        }
        let (script, latency) = self.script(agent, attempt);
        match (script, self.fallbacks.get(agent)) {
            (Some(script), _) => (self.convert(script), latency),
            (None, Some(mock)) => (mock.reply(attempt), latency.or_else(|| mock.latency())),
            (None, None) => (Reply::Output { text: attempt.input.to_string(), tokens: None }, latency),
        }
    }

    /// A scripted reply as a runtime's reply; a tool call returns the tool's scripted result.
    fn convert(&self, reply: &Scripted) -> Reply {
        match reply {
            Scripted::Output(text) => Reply::Output { text: text.clone(), tokens: None },
            Scripted::Json(value) => Reply::Output { text: value.to_string(), tokens: None },
            Scripted::Fail(error) => Reply::failed(error.clone()),
            Scripted::Transient(error) => Reply::transient(error.clone()),
            Scripted::Clarify(question) => Reply::Question(question.clone(), None),
            Scripted::Tool { tool, .. } => match self.tools.get(&tool.value) {
                Some(serde_json::Value::String(text)) => Reply::Output { text: text.clone(), tokens: None },
                Some(result) => Reply::Output { text: result.to_string(), tokens: None },
                None => Reply::refused(format!("tool `{}` has no scripted result", tool.value)),
            },
        }
    }
}

/// The reply for attempt `attempt` (1 for the first); the last one repeats. Callers pass a
/// non-empty list.
fn pick(replies: &[Scripted], attempt: u32) -> &Scripted {
    let last = replies.len().saturating_sub(1);
    &replies[(attempt as usize).saturating_sub(1).min(last)]
}

/// One agent of a scripted run.
struct ScriptedAgent {
    scripts: Arc<Scripts>,
    agent: String,
}

impl AgentRuntime for ScriptedAgent {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (reply, latency) = self.scripts.reply(&self.agent, &attempt);
        let call = match self.scripts.script(&self.agent, &attempt) {
            (Some(Scripted::Tool { tool, arguments }), _) => Some((tool.value.clone(), arguments.to_string())),
            _ => None,
        };
        match (attempt.journal, call, reply) {
            (Some(journal), Some(call), Reply::Output { text, .. }) => Box::pin(async move {
                if let Some(latency) = latency {
                    tokio::select! {
                        () = tokio::time::sleep(latency) => {}
                        () = cancel.cancelled() => return stopped(None),
                    }
                }
                journaled_call(&journal, call, text).await
            }),
            (_, _, reply) => crate::runtime::reply_after(latency, reply, cancel),
        }
    }
}

/// A scripted tool call of an llm agent, through the journal as the llm runtime makes one: a
/// turn that calls the tool, the call (which the tool's policy may hold for a person), its
/// result. An attempt that goes on from an earlier one's conversation takes up its open call,
/// or answers with its result when the call has one.
async fn journaled_call(journal: &Journal, (tool, arguments): (String, String), result: String) -> Reply {
    let recorded = &journal.recorded;
    let last = recorded.turns.last().and_then(|turn| turn.tool_calls.first().map(|call| (turn.turn, call.clone())));
    let (turn, call) = match last {
        Some((turn, call)) => match recorded.call(&call.id) {
            Some(CallState::Finished(output)) => return Reply::Output { text: output.clone(), tokens: None },
            _ => (turn, call),
        },
        None => {
            let turn = recorded.last_turn() + 1;
            let call = ToolCallRecord { id: format!("call_{turn}"), name: tool, arguments };
            let record = TurnRecord {
                turn,
                tool_calls: vec![call.clone()],
                finish_reason: Some("tool_calls".to_owned()),
                ..TurnRecord::default()
            };
            if journal.turn(record).await != Verdict::Recorded {
                return stopped(None);
            }
            (turn, call)
        }
    };
    match journal.call(turn, call.clone(), String::new()).await {
        Verdict::Run => match journal.result(call.id, call.name, true, result.clone()).await {
            Verdict::Recorded => Reply::Output { text: result, tokens: None },
            _ => stopped(None),
        },
        Verdict::Answered(text) => Reply::Output { text, tokens: None },
        Verdict::Wait => waiting(&call.name),
        Verdict::Recorded | Verdict::Stop => stopped(None),
    }
}
