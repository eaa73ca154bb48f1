//! `cache` on an llm agent whose answers are not repeatable: without a fixed seed and a
//! temperature of 0 the model may answer the same input differently, so a stored answer stands
//! in for one the model might not give again.

use crate::plan::{Agent, Generation, Plan, Runtime};
use crate::source::Loc;

use super::found::{Found, push_whole};
use super::{Finding, Lint};

pub(super) fn check(plan: &Plan, found: &mut Vec<Found>) {
    for (name, agent) in &plan.agents {
        if agent.cache.as_ref().is_some_and(|cache| cache.enabled)
            && let Some(missing) = unrepeatable(plan, agent)
        {
            push_whole(found, finding(format!("agent `{name}`"), None, name, missing, &agent.loc));
        }
    }
    for task in &plan.tasks {
        let (Some(cache), Some(agent)) = (&task.extras().cache, &task.agent) else { continue };
        if !cache.value.enabled {
            continue;
        }
        if let Some(missing) = plan.agents.get(agent.value.as_str()).and_then(|a| unrepeatable(plan, a)) {
            let id = task.id.value.as_str();
            push_whole(found, finding(format!("task `{id}`"), Some(id), &agent.value, missing, &cache.loc));
        }
    }
}

/// What makes an llm agent's answers vary, if anything does: `None` for other runtimes.
fn unrepeatable(plan: &Plan, agent: &Agent) -> Option<&'static str> {
    let Runtime::Llm { provider, generation, .. } = &agent.runtime else { return None };
    let provider = plan.providers.get(provider.as_ref().map_or("default", |p| p.value.as_str()));
    let Generation { temperature, seed, .. } = generation.or(provider.map(|p| p.generation).unwrap_or_default());
    match (temperature == Some(0.0), seed.is_some()) {
        (true, true) => None,
        (true, false) => Some("no `seed`"),
        (false, true) => Some("no `temperature: 0`"),
        (false, false) => Some("no `seed` and no `temperature: 0`"),
    }
}

fn finding(owner: String, task: Option<&str>, agent: &str, missing: &str, loc: &Loc) -> Finding {
    let lint = Lint::CacheNotDeterministic { owner, agent: agent.to_owned(), missing: missing.to_owned() };
    Finding::warning(lint, task, loc)
        .label("a stored answer stands in for one the model might not give again")
        .help("set `temperature: 0` and a `seed` on the agent, or leave `cache` off and reuse outputs with `runner apply --reuse` when you mean to")
}
