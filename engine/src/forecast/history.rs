//! What earlier runs observed, for the forecast's expected figures: per agent and model, the
//! tokens a task used and how long it took from its first attempt to its last, retries
//! included. Built from run logs; the forecast falls back on its documented defaults for an
//! agent no run has observed.

use std::collections::HashMap;
use std::sync::Arc;

use manifest::Plan;
use manifest::plan::Runtime;

use crate::event::{Event, Record, Tokens};

/// What the finished tasks of one agent on one model took, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// Tasks (map items each count) that ran at least one attempt to its end.
    pub tasks: u64,
    /// Tokens their attempts used, checks and rewrites included.
    pub tokens: Tokens,
    /// Milliseconds from each task's first dispatch to its last attempt's end.
    pub duration_ms: u64,
}

impl Observed {
    /// Tokens a task is expected to use: the mean of those observed.
    pub fn tokens_per_task(&self) -> Tokens {
        let tasks = self.tasks.max(1);
        Tokens { prompt: self.tokens.prompt / tasks, completion: self.tokens.completion / tasks }
    }

    /// How long a task is expected to take: the mean of those observed, in milliseconds.
    pub fn duration_per_task(&self) -> u64 {
        self.duration_ms / self.tasks.max(1)
    }
}

/// What earlier runs observed, by agent name and model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    seen: HashMap<(String, String), Observed>,
    /// How many runs it was built from.
    pub runs: usize,
}

/// One task's part of a run, as its records go by.
#[derive(Default)]
struct TaskSeen {
    tokens: Tokens,
    first_dispatch: Option<i64>,
    last_end: Option<i64>,
}

impl History {
    /// Adds what one run's log records; a log with no `RunCreated` adds nothing.
    pub fn add(&mut self, records: &[Record]) {
        let mut plan: Option<Arc<Plan>> = None;
        let mut tasks: HashMap<&str, TaskSeen> = HashMap::new();
        for record in records {
            let at = || crate::clock::parse_millis(&record.at);
            match &record.event {
                Event::RunCreated(created) => plan = Some(Arc::clone(&created.plan)),
                Event::Replanned(replanned) => plan = Some(Arc::clone(&replanned.plan)),
                Event::TaskDispatched { task, .. } => {
                    let seen = tasks.entry(task).or_default();
                    seen.first_dispatch = seen.first_dispatch.or_else(at);
                }
                Event::TaskSucceeded { task, tokens, .. } | Event::TaskFailed { task, tokens, .. } => {
                    let seen = tasks.entry(task).or_default();
                    add(&mut seen.tokens, *tokens);
                    seen.last_end = at().or(seen.last_end);
                }
                Event::VerificationFailed { task, tokens, .. } | Event::ClarificationRequested { task, tokens, .. } => {
                    add(&mut tasks.entry(task).or_default().tokens, *tokens)
                }
                _ => {}
            }
        }
        let Some(plan) = plan else { return };
        self.runs += 1;
        for (task, seen) in tasks {
            let (Some(start), Some(end)) = (seen.first_dispatch, seen.last_end) else { continue };
            // A map's item `ID[N]` runs on the map's agent.
            let id = task.split_once('[').map_or(task, |(map, _)| map);
            let Some(agent) = plan.tasks.iter().find(|t| t.id.value == id).and_then(|t| plan.agent_of(t)) else {
                continue;
            };
            let Some(key) = key(&plan, agent) else { continue };
            let observed = self.seen.entry(key).or_default();
            observed.tasks += 1;
            add(&mut observed.tokens, Some(seen.tokens));
            observed.duration_ms += u64::try_from(end - start).unwrap_or(0);
        }
    }

    /// What earlier runs observed of agent `agent` of `plan`, on the model it asks now.
    pub fn of(&self, plan: &Plan, agent: &str) -> Option<&Observed> {
        self.seen.get(&key(plan, agent)?)
    }

    /// Whether no run observed anything.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The key of agent `agent` of `plan`: its name and the model it asks (its runtime's name for an
/// agent that asks none).
fn key(plan: &Plan, agent: &str) -> Option<(String, String)> {
    let model = match &plan.agents.get(agent)?.runtime {
        Runtime::Llm { model, .. } => {
            let provider = plan.provider_of(agent).and_then(|p| plan.providers.get(p));
            model.clone().or_else(|| provider.and_then(|p| p.model.clone())).unwrap_or_default()
        }
        other => other.name().to_owned(),
    };
    Some((agent.to_owned(), model))
}

/// Adds `more` to `sum`.
fn add(sum: &mut Tokens, more: Option<Tokens>) {
    if let Some(more) = more {
        sum.prompt += more.prompt;
        sum.completion += more.completion;
    }
}
