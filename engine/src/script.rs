//! Scripted agents and tools for plan tests: a [`Scripts`] answers every attempt of a run from
//! a scenario's overrides, so a test never calls a model, starts a program or makes a request.
//! Latencies are tokio sleeps, which a paused clock turns into virtual time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use manifest::Plan;
use manifest::plan::Runtime;
use manifest::plan_test::{Outcome, Overrides, Reply as Scripted, Script, Vocabulary};
use tokio_util::sync::CancellationToken;

use crate::driver::{Driver, LlmRuntimes};
use crate::journal::{Journal, Verdict, stopped, waiting};
use crate::runtime::{AgentRuntime, Attempt, Children, MockRuntime, Pending, Registry, Reply};
use crate::store::EventStore;
use machine::conversation::{CallState, ToolCallRecord};
use machine::event::{ModelTurn, Tokens};
use machine::{Event, TaskStatus};

/// The run log's words a scenario's expectations may name, as `machine` declares them: what
/// reading a plan test ([`manifest::plan_test::load_test_file`]) checks its events and task
/// statuses against.
pub const VOCABULARY: Vocabulary = Vocabulary { events: Event::NAMES, task_statuses: TaskStatus::NAMES };

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

    /// `driver`, with every agent of the run answered from these scripts, and the child runs of
    /// its sub-plan and `expand` tasks kept in `children` (without them, those tasks refuse).
    pub fn install<S: EventStore>(
        self: &Arc<Self>,
        driver: Driver<S>,
        children: Option<Arc<dyn Children>>,
    ) -> Driver<S> {
        let scripts = Arc::clone(self);
        let llm: LlmRuntimes = Arc::new(move |name: &str| {
            Arc::new(ScriptedAgent { scripts: Arc::clone(&scripts), agent: name.to_owned() }) as Arc<dyn AgentRuntime>
        });
        let by_name = |setup: &crate::runtime::Setup<'_>| (setup.llm)(setup.name);
        let mut registry =
            ["llm", "command", "mock", "http"].into_iter().fold(Registry::builtin(), |r, n| r.with(n, by_name));
        if let Some(children) = children {
            registry = registry.with_children(children);
        }
        driver.with_runtimes(registry).with_llm(llm)
    }

    /// The scripted reply to one attempt of `agent`, when a script has one, and how long it takes.
    fn script(&self, agent: &str, attempt: &Attempt) -> (Option<&Scripted>, Option<Duration>) {
        // An item of a map (`read[2]`) takes its own script, else its map's.
        let task = attempt.task.as_str();
        let by_task =
            self.tasks.get(task).or_else(|| manifest::template::map_of_item(task).and_then(|map| self.tasks.get(map)));
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

    /// A scripted reply as a runtime's reply, with the usage it states; a tool call returns the
    /// tool's scripted result.
    fn convert(&self, reply: &Scripted) -> Reply {
        let tokens = reply.tokens.map(|usage| Tokens { prompt: usage.prompt, completion: usage.completion });
        let output = |text: String| Reply::Output { text, tokens };
        match &reply.outcome {
            Outcome::Output(text) => output(text.clone()),
            Outcome::Json(value) => output(value.to_string()),
            Outcome::Fail(error) => Reply::failed(error.clone()).with_tokens(tokens),
            Outcome::Transient(error) => Reply::transient(error.clone()).with_tokens(tokens),
            Outcome::Clarify(question) => Reply::Question(question.clone(), tokens),
            Outcome::Tool { tool, .. } => match self.tools.get(&tool.value) {
                Some(serde_json::Value::String(text)) => output(text.clone()),
                Some(result) => output(result.to_string()),
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
            (Some(Scripted { outcome: Outcome::Tool { tool, arguments }, .. }), _) => {
                Some((tool.value.clone(), arguments.to_string()))
            }
            _ => None,
        };
        match (attempt.journal, call, reply) {
            (Some(journal), Some(call), Reply::Output { text, tokens }) => Box::pin(async move {
                if let Some(latency) = latency {
                    tokio::select! {
                        () = tokio::time::sleep(latency) => {}
                        () = cancel.cancelled() => return stopped(None),
                    }
                }
                journaled_call(&journal, call, text, tokens).await
            }),
            (_, _, reply) => crate::runtime::reply_after(latency, reply, cancel),
        }
    }
}

/// A scripted tool call of an llm agent, through the journal as the llm runtime makes one: a
/// turn that calls the tool, the call (which the tool's policy may hold for a person), its
/// result, and a last turn that answers with the result. An attempt that goes on from an
/// earlier one's conversation takes up its open call, or answers with its result when the call
/// has one. The reply's `tokens` are each turn's usage, as a server reports one per request;
/// the attempt reports the turns it made.
async fn journaled_call(
    journal: &Journal,
    (tool, arguments): (String, String),
    result: String,
    tokens: Option<Tokens>,
) -> Reply {
    let recorded = &journal.recorded;
    let last = recorded.turns.last().and_then(|turn| turn.tool_calls.first().map(|call| (turn.turn, call.clone())));
    let (turn, call, earlier) = match last {
        Some((turn, call)) => match recorded.call(&call.id) {
            Some(CallState::Finished(output)) => return answer(journal, turn + 1, output.clone(), tokens, None).await,
            _ => (turn, call, None),
        },
        None => {
            let turn = recorded.last_turn() + 1;
            let call = ToolCallRecord { id: format!("call_{turn}"), name: tool, arguments };
            let record = ModelTurn {
                tool_calls: vec![call.clone()],
                tokens,
                finish_reason: Some("tool_calls".to_owned()),
                ..journal.model_turn(turn)
            };
            if journal.turn(record).await != Verdict::Recorded {
                return stopped(None);
            }
            (turn, call, tokens)
        }
    };
    let text = match journal.call(turn, call.clone(), String::new()).await {
        Verdict::Run => match journal.result(call.id, call.name, true, result.clone()).await {
            Verdict::Recorded => result,
            _ => return stopped(None),
        },
        Verdict::Answered(text) => text,
        Verdict::Wait => return waiting(&call.name),
        Verdict::Recorded | Verdict::Stop | Verdict::Conversation(_) => return stopped(None),
    };
    answer(journal, turn + 1, text, tokens, earlier).await
}

/// The model's last turn, which answers with `text` as an llm agent's final message does,
/// using `tokens`; the reply reports them with `earlier`, the usage of the attempt's calling
/// turn if it made one.
async fn answer(journal: &Journal, turn: u32, text: String, tokens: Option<Tokens>, earlier: Option<Tokens>) -> Reply {
    let content = Some(text.clone()).filter(|c| !c.is_empty());
    let record = ModelTurn { content, tokens, finish_reason: Some("stop".to_owned()), ..journal.model_turn(turn) };
    if journal.turn(record).await != Verdict::Recorded {
        return stopped(None);
    }
    let used = match (tokens, earlier) {
        (Some(a), Some(b)) => Some(Tokens { prompt: a.prompt + b.prompt, completion: a.completion + b.completion }),
        (one, other) => one.or(other),
    };
    Reply::Output { text, tokens: used }
}
