//! General checks outside the five dimensions: unused definitions, unreliable agents on the
//! critical path, long unverified chains, destructive tools without review, optimism bias,
//! missing turn limits, `expand` steps nothing bounds and a critical path the author got wrong.
//! Each is linear in the plan (upstream facts are carried along the topological order).

use std::collections::HashSet;

use crate::normalize::DEPENDENCY_OUTPUTS;
use crate::plan::{Action, At, DEFAULT_AGENT, Plan, Runtime, Task, TaskKind, Verification};

use super::found::{Found, index, push_whole};
use super::{Facts, Finding, Lint};

/// This many tasks in a row without verification make a long unverified chain.
pub const CHAIN_LIMIT: usize = 4;

/// Agents below this reliability weight need verification on the critical path.
pub const RELIABILITY_FLOOR: f64 = 0.5;

/// Words that suggest a call to an outside service.
const EXTERNAL: &[&str] =
    &["search", "fetch", "http", "api", "web", "request", "query", "external", "download", "scrape"];

pub(super) fn check(facts: &Facts<'_>, found: &mut Vec<Found>) {
    unused(facts, found);
    unreliable(facts, found);
    unverified_chains(facts, found);
    destructive(facts, found);
    optimism(facts, found);
    turn_limits(facts, found);
    expand_bounds(facts, found);
    critical_path(facts, found);
}

/// The agents a task, a review, the planner or the compactor uses.
pub(super) fn used_agents(plan: &Plan) -> HashSet<&str> {
    let mut used = HashSet::new();
    let mut last = None;
    for name in plan.tasks.iter().filter_map(|t| plan.agent_of(t)) {
        // Tasks in a row mostly share an agent: comparing with the last is cheaper than hashing.
        if last != Some(name) {
            used.insert(name);
            last = Some(name);
        }
    }
    for task in &plan.tasks {
        if let Some(Verification::LlmReviewer { agent, .. }) = task.extras().verification.as_ref() {
            used.insert(&agent.value);
        }
    }
    used.extend([&plan.control.planner, &plan.control.compactor].into_iter().flatten().map(|a| a.value.as_str()));
    used
}

fn unused(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let (plan, agents) = (facts.plan, &facts.used_agents);
    let mut tools = HashSet::new();
    let mut providers = HashSet::new();
    for (name, agent) in &plan.agents {
        if !agents.contains(name.as_str()) {
            push_whole(
                found,
                Finding::info(Lint::UnusedAgent { name: name.clone() }, None, &agent.loc)
                    .label("no task, gate, verification, planner or compactor uses it")
                    .help("remove it, or assign it to a task"),
            );
            continue;
        }
        if let Runtime::Llm { provider, tools: agent_tools, .. } = &agent.runtime {
            tools.extend(agent_tools.iter().map(|t| t.value.as_str()));
            providers.insert(provider.as_ref().map_or(DEFAULT_AGENT, |p| p.value.as_str()));
        }
    }
    for (name, tool) in &plan.tools {
        if !tools.contains(name.as_str()) {
            push_whole(
                found,
                Finding::info(Lint::UnusedTool { name: name.clone() }, None, &tool.loc)
                    .label("no agent in use offers it")
                    .help("remove it, or list it in an agent's `tools`"),
            );
        }
    }
    for (name, provider) in &plan.providers {
        if !providers.contains(name.as_str()) {
            push_whole(
                found,
                Finding::info(Lint::UnusedProvider { name: name.clone() }, None, &provider.loc)
                    .label("no agent in use calls it")
                    .help("remove it, or set `provider:` on an llm agent"),
            );
        }
    }
}

fn unreliable(facts: &Facts<'_>, found: &mut Vec<Found>) {
    for &i in &facts.critical_path {
        let task = &facts.plan.tasks[i];
        if task.extras().verification.is_some() {
            continue;
        }
        let Some(name) = facts.plan.agent_of(task) else { continue };
        let Some(weight) = facts.plan.agents.get(name).and_then(|a| a.reliability_weight) else { continue };
        if weight < RELIABILITY_FLOOR {
            let loc = task.agent.as_ref().map_or(&task.id.loc, |a| &a.loc);
            let lint = Lint::UnreliableAgent { task: task.id.value.to_string(), agent: name.into(), weight };
            push_whole(
                found,
                Finding::warning(lint, Some(&task.id.value), loc)
                    .label(format!("reliability_weight {weight}"))
                    .help("add a `verification` to this task, or give the work to a more reliable agent"),
            );
        }
    }
}

fn unverified_chains(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let graph = facts.graph;
    let mut run = vec![0usize; graph.len()];
    for &i in graph.topo_order() {
        let task = &facts.plan.tasks[i];
        if task.extras().verification.is_some() || task.kind == TaskKind::HumanReview {
            continue;
        }
        run[i] = 1 + graph.parents(i).map(|p| run[p]).max().unwrap_or(0);
        if run[i] == CHAIN_LIMIT {
            found.push(Found::LongUnverifiedChain { task: index(i) });
        }
    }
}

/// The warning on task `i`, which ends a chain of [`CHAIN_LIMIT`] unverified tasks.
pub(super) fn long_unverified_chain(facts: &Facts<'_>, i: usize) -> Finding {
    let task = &facts.plan.tasks[i];
    let id = task.id.value.as_str();
    Finding::warning(Lint::LongUnverifiedChain { task: id.into(), length: CHAIN_LIMIT }, Some(id), &task.id.loc)
        .label(format!("{CHAIN_LIMIT} unverified tasks in a row end here"))
        .help("verify an intermediate result (`verification:`) or put a `human_review` in the chain")
}

fn destructive(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let graph = facts.graph;
    let mut reviewed = vec![false; graph.len()];
    for &i in graph.topo_order() {
        reviewed[i] = graph.parents(i).any(|p| reviewed[p] || facts.plan.tasks[p].kind == TaskKind::HumanReview);
    }
    for (i, task) in facts.plan.tasks.iter().enumerate() {
        if reviewed[i] {
            continue;
        }
        let (tools, allowed) = agent_tools(facts.plan, task);
        // A call that waits for a person's approval at run time is reviewed there.
        let unasked = |name: &str| {
            facts.plan.tools.get(name).is_some_and(|t| t.destructive)
                && (allowed.iter().any(|a| a.value == name)
                    || facts.plan.tools.get(name).is_some_and(|t| !t.approval.asks(true)))
        };
        for tool in tools.iter().map(|t| t.value.as_str()).filter(|t| unasked(t)) {
            let id = task.id.value.as_str();
            push_whole(
                found,
                Finding::warning(
                    Lint::DestructiveWithoutReview { task: id.into(), tool: tool.into() },
                    Some(id),
                    &task.id.loc,
                )
                .label(format!("may call `{tool}` without asking"))
                .help("put a `type: human_review` task upstream of this one, or let its calls wait for approval (the tool's `approval: destructive`, and not in the agent's `allow_tools`)"),
            );
        }
    }
}

/// The tools a task's agent is offered, and those it may call without approval.
fn agent_tools<'p>(plan: &'p Plan, task: &'p Task) -> (&'p [At<String>], &'p [At<String>]) {
    let agent = plan.agent_of(task).and_then(|name| plan.agents.get(name));
    match agent.map(|agent| &agent.runtime) {
        Some(Runtime::Llm { tools, allow_tools, .. }) => (tools, allow_tools),
        _ => (&[], &[]),
    }
}

/// The first word in `text` that suggests an outside service.
fn external_word(text: &str) -> Option<&'static str> {
    text.split(|c: char| !c.is_ascii_alphanumeric()).map(str::to_ascii_lowercase).find_map(|word| {
        EXTERNAL.iter().copied().find(|w| {
            // A past participle ("the fetched sections") describes data already at hand.
            let participle = word.len() > w.len() && word.ends_with("ed");
            word == *w || (w.len() >= 4 && word.starts_with(w) && !participle) || word == format!("{w}s")
        })
    })
}

/// The first word in a task's input that suggests an outside service, ignoring the ids of
/// tasks it names (`{{ tasks.search_news.output }}` reads a task, it calls no service).
fn external_word_in_input(text: &str, is_task: impl Fn(&str) -> bool) -> Option<&'static str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|token| !token.is_empty() && !is_task(token))
        .find_map(external_word)
}

fn optimism(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let plan = facts.plan;
    let is_task = |token: &str| facts.graph.index_of(token).is_some();
    for task in plan.tasks.iter().filter(|t| t.critical && t.on_failure.value.action == Action::Fail) {
        let from_tools = agent_tools(plan, task).0.iter().map(|t| t.value.as_str()).find_map(|name| {
            let description = plan.tools.get(name).map_or("", |t| t.description.as_str());
            external_word(name).or_else(|| external_word(description)).map(|w| format!("tool `{name}`: {w}"))
        });
        // Only the author's words count, not the dependency outputs the bare form appends.
        let authored = |text: &str| text.split(DEPENDENCY_OUTPUTS).next().unwrap_or_default().to_owned();
        let from_input = || {
            task.input
                .as_ref()
                .and_then(|i| external_word_in_input(&authored(&i.value), is_task))
                .map(|w| format!("its input says \"{w}\""))
        };
        let Some(evidence) = from_tools.or_else(from_input) else { continue };
        let id = task.id.value.as_str();
        push_whole(
            found,
            Finding::warning(Lint::OptimismBias { task: id.into(), evidence }, Some(id), &task.id.loc)
                .label("outside services fail now and then")
                .help(
                    "retry the service's failures with backoff (`on_failure: {action: retry, max_attempts: 3, retry_on: transient}`) before failing the run",
                ),
        );
    }
}

fn turn_limits(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let used = &facts.used_agents;
    for (name, agent) in &facts.plan.agents {
        if let Runtime::Llm { max_turns: None, .. } = agent.runtime
            && used.contains(name.as_str())
        {
            push_whole(
                found,
                Finding::info(Lint::MissingMaxTurns { name: name.clone() }, None, &agent.loc)
                    .label("the tool loop is bounded only by the runner's default")
                    .help("set `max_turns:` to the most model turns one attempt should take"),
            );
        }
    }
}

/// A `type: expand` step without `max_tasks`: the plan its agent writes at run time could have
/// any number of tasks.
fn expand_bounds(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let unbounded = facts.plan.tasks.iter().filter(|t| t.kind == TaskKind::Expand && t.extras().max_tasks.is_none());
    for task in unbounded {
        let id = task.id.value.as_str();
        push_whole(
            found,
            Finding::warning(Lint::ExpandWithoutBounds { task: id.into() }, Some(id), &task.id.loc)
                .label("nothing bounds the plan written for this step")
                .help("set `max_tasks:` to the most tasks the plan written for this step may have"),
        );
    }
}

fn critical_path(facts: &Facts<'_>, found: &mut Vec<Found>) {
    let Some(analysis) = &facts.plan.mission_analysis else { return };
    let Some(first) = analysis.critical_path.first() else { return };
    let declared: Vec<Option<usize>> =
        analysis.critical_path.iter().map(|id| facts.graph.index_of(&id.value)).collect();
    let is_chain = declared.iter().all(Option::is_some)
        && declared.windows(2).all(|pair| match (pair[0], pair[1]) {
            (Some(a), Some(b)) => facts.graph.children(a).any(|c| c == b),
            _ => false,
        });
    if is_chain && declared.len() == facts.critical_path.len() {
        return;
    }
    let show = |ids: Vec<&str>| format!("[{}]", ids.join(", "));
    let lint = Lint::CriticalPathMismatch {
        declared: show(analysis.critical_path.iter().map(|a| a.value.as_str()).collect()),
        computed: show(facts.ids(&facts.critical_path)),
    };
    push_whole(
        found,
        Finding::info(lint, None, &first.loc)
            .label("declared here")
            .help("update `mission_analysis.critical_path` to the longest chain of dependencies"),
    );
}

#[cfg(test)]
mod tests {
    use crate::critic::{Lint, critique};

    /// The findings of `critic::expand_without_bounds` in a plan of one mock agent and `workflow`.
    fn unbounded(workflow: &str) -> Vec<(Lint, String)> {
        let text = format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions: {{m: {{runtime: mock}}}}\n  workflow:\n{workflow}"
        );
        let loaded = crate::load_str("t.yaml", "t", &text, &|_| true);
        let errors: Vec<String> = loaded.errors().map(ToString::to_string).collect();
        assert!(errors.is_empty(), "{errors:?}");
        let plan = loaded.plan.as_ref().expect("a valid plan");
        critique(plan)
            .findings
            .into_iter()
            .filter(|f| f.code() == "critic::expand_without_bounds")
            .map(|f| (f.lint, loaded.source.slice(f.loc.span).to_owned()))
            .collect()
    }

    #[test]
    fn an_expand_step_without_max_tasks_is_warned_at_its_id() {
        let found = unbounded("    - {id: dig, type: expand, agent: m, input: x}\n");
        assert_eq!(found, [(Lint::ExpandWithoutBounds { task: "dig".into() }, "dig".to_owned())]);
        assert!(unbounded("    - {id: dig, type: expand, agent: m, input: x, max_tasks: 8}\n").is_empty());
        assert!(unbounded("    - {id: plain, agent: m, input: x}\n").is_empty(), "only `expand` steps write plans");
    }
}
