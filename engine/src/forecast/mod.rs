//! What a plan will cost before it runs: tokens, money and time, each as what a run is expected
//! to take and the worst a run within the plan's limits can take (docs/critic.md, "Forecast").
//! Expected figures use the critic's estimates and the defaults below. The worst case counts
//! every attempt, every turn, every replan and every map item at its `max_items`, and each model
//! request at its provider's whole context window (a request cannot use more); it is unbounded,
//! with the reason, where the plan sets no limit that bounds it. The duration is the makespan of
//! the run as the state machine schedules it (`makespan.rs`), not a sum.

pub mod budget;
mod history;
mod makespan;
pub mod shown;

use std::collections::BTreeMap;

use manifest::critic::Estimate;
use manifest::plan::{Action, Price, Runtime, Strategy, TaskKind, Vars, Verification};
use manifest::{Plan, TaskGraph};
use serde::Serialize;

pub use machine::event::{Cost, Forecasted, Span};

pub use history::{History, Observed};
pub use makespan::makespan;

/// Model turns an llm task with tools is expected to take: a tool call, then the answer.
pub const EXPECTED_TURNS_WITH_TOOLS: u64 = 2;
/// The expected time of a model request before its first token, in milliseconds.
pub const EXPECTED_REQUEST_MS: u64 = 2_000;
/// The expected time per completion token, in milliseconds (50 tokens a second).
pub const EXPECTED_MS_PER_TOKEN: u64 = 20;
/// The expected time of a command or http attempt, in milliseconds.
pub const EXPECTED_PROCESS_MS: u64 = 1_000;
/// An answer's most tokens when neither the agent nor its provider sets `max_tokens`.
const DEFAULT_MAX_TOKENS: u64 = 4096;
/// The tokens a reviewer's verdict is expected to take.
pub const REVIEW_TOKENS: u64 = 100;
/// The turns an llm attempt with tools may take when its agent sets no `max_turns`.
const DEFAULT_MAX_TURNS: u64 = crate::llm::DEFAULT_MAX_TURNS as u64;

/// The forecast of one task (all its items, for a map).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskForecast {
    /// The task.
    pub task: String,
    /// Tokens its agent and its reviewer use.
    pub tokens: Span<u64>,
    /// What those tokens cost, when the providers they go to have a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// How long one item of it takes, all attempts and backoffs included, in milliseconds.
    pub duration_ms: Span<u64>,
}

/// The forecast of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Forecast {
    /// The run's tokens, cost and duration (`cost` is `None` when a provider in use has no
    /// price: see [`Forecast::unpriced`]).
    #[serde(flatten)]
    pub run: Forecasted,
    /// Why a worst case is unbounded, one line each.
    pub unbounded: Vec<String>,
    /// Providers in use with no price, sorted.
    pub unpriced: Vec<String>,
    /// How many earlier runs the expected figures drew on (0: the documented defaults only).
    #[serde(skip_serializing_if = "is_zero")]
    pub history_runs: usize,
    /// Each task's figures, in plan order (left out of the run's JSON: a plan may have
    /// 100,000 tasks).
    #[serde(skip)]
    pub tasks: Vec<TaskForecast>,
}

/// What the model requests of one agent may use.
struct Model<'p> {
    /// The provider's name.
    provider: &'p str,
    /// Its context window: the most tokens one request can use.
    window: Option<u64>,
    /// The most tokens one answer may have.
    max_tokens: u64,
    price: Option<&'p Price>,
}

impl<'p> Model<'p> {
    /// The model agent `name` of `plan` asks, when it is an llm agent.
    fn of(plan: &'p Plan, name: &str) -> Option<Self> {
        let Runtime::Llm { generation, .. } = &plan.agents.get(name)?.runtime else { return None };
        let provider = plan.provider_of(name)?;
        // A provider the plan does not define (the loader reports it) still gets requests.
        let settings = plan.providers.get(provider);
        let generation = settings.map_or(*generation, |s| generation.or(s.generation));
        Some(Model {
            provider,
            window: settings.and_then(|s| s.context_window),
            max_tokens: generation.max_tokens.map_or(DEFAULT_MAX_TOKENS, u64::from),
            price: plan.price_of(name),
        })
    }

    /// The most tokens `calls` requests can use, or why it is unbounded.
    fn worst(&self, calls: u64) -> Result<u64, String> {
        self.window.map(|window| window.saturating_mul(calls)).ok_or_else(|| {
            format!("provider `{}` gives no `context_window`, so its requests have no known size", self.provider)
        })
    }
}

/// Whether a count is zero, for leaving it out of JSON.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The forecast of a run of `plan` with these `vars`, from the documented defaults alone.
pub fn forecast(plan: &Plan, graph: &TaskGraph, vars: &Vars) -> Forecast {
    forecast_with(plan, graph, vars, &History::default())
}

/// The forecast of a run of `plan` with these `vars`; an agent that earlier runs observed on the
/// same model is expected to take what it took on average (`history`).
pub fn forecast_with(plan: &Plan, graph: &TaskGraph, vars: &Vars, history: &History) -> Forecast {
    let estimates = manifest::critic::estimates(plan, graph);
    let mut out = Forecast { history_runs: if history.is_empty() { 0 } else { history.runs }, ..Forecast::default() };
    let mut worst_tokens = Some(0_u64);
    let mut costs: Vec<Option<Cost>> = Vec::new();
    // Each reason a worst case is unbounded, with the tasks it holds for.
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, estimate) in estimates.iter().enumerate() {
        let (task, unbounded) = task_forecast(plan, i, *estimate, history, &mut out.unpriced);
        worst_tokens = worst_tokens.zip(task.tokens.worst).map(|(a, b)| a.saturating_add(b));
        out.run.tokens.expected = out.run.tokens.expected.saturating_add(task.tokens.expected);
        for why in unbounded {
            reasons.entry(why).or_default().push(task.task.clone());
        }
        costs.push(task.cost.clone());
        out.tasks.push(task);
    }
    for (who, found) in [("the planner", planner(plan)), ("the compactor", compactor(plan, &estimates))] {
        let Some((model, calls)) = found else { continue };
        match model.worst(calls) {
            Ok(tokens) => {
                worst_tokens = worst_tokens.map(|sum| sum.saturating_add(tokens));
                costs.push(model.price.map(|price| Cost {
                    amount: Span { expected: 0.0, worst: Some(worst_cost(price, tokens)) },
                    currency: price.currency.clone(),
                }));
            }
            Err(why) => {
                worst_tokens = None;
                out.unbounded.push(format!("{who}: {why}"));
            }
        }
        if model.price.is_none() {
            out.unpriced.push(model.provider.to_owned());
        }
    }
    out.run.tokens.worst = worst_tokens;
    for (why, tasks) in reasons {
        out.unbounded.push(format!("{}: {why}", named(&tasks)));
    }
    out.unpriced.sort();
    out.unpriced.dedup();
    out.run.cost = if out.unpriced.is_empty() { sum_costs(&costs) } else { None };
    let expected = |plan: &Plan, i: usize| item_duration(plan, i, history).expected;
    let Some(expected) = makespan(plan, vars, &expected) else {
        out.unbounded.push("the duration: the plan's run could not be simulated to its end".to_owned());
        return out;
    };
    out.run.duration_ms.expected = expected;
    let durations = || out.tasks.iter().map(|t| t.duration_ms);
    if durations().all(|d| d.worst == Some(d.expected)) {
        // Every attempt takes what it is expected to take (mock agents without retries): the
        // same schedule.
        out.run.duration_ms.worst = Some(out.run.duration_ms.expected);
    } else if durations().all(|d| d.worst.is_some()) {
        let worst = |plan: &Plan, i: usize| item_duration(plan, i, history).worst.unwrap_or(0);
        let work = out
            .tasks
            .iter()
            .zip(&estimates)
            .map(|(t, e)| t.duration_ms.worst.unwrap_or(0).saturating_mul(e.runs.max(1)))
            .fold(0, u64::saturating_add);
        out.run.duration_ms.worst = worst_makespan(plan, vars, &worst, work);
    }
    out
}

/// The most time a run can take when each item of task `i` is busy (in attempts, or waiting
/// for a retry) at most `worst(plan, i)`, `work` being all of that time summed. With no limit on
/// concurrency, or one task at a time, a run ends later only when a task does, so the makespan
/// of every task at its worst is the bound. Under a limit a shorter attempt can end a run later
/// (it lets another task take a slot first), so the bound is that of a schedule that never
/// leaves a slot idle while a task is ready, as the machine's: at every moment every slot is
/// taken or a task of one chain of dependencies is busy, so `eager` under `max_concurrency`
/// alone takes at most the work over the slots plus the longest chain (Graham's bound), and any
/// other limited run at most the whole work, one task at a time.
fn worst_makespan(plan: &Plan, vars: &Vars, worst: &dyn Fn(&Plan, usize) -> u64, work: u64) -> Option<u64> {
    let control = &plan.control;
    let grouped = control.parallel_groups.values().any(|g| g.max_concurrency.is_some());
    let slots = control.max_concurrency.filter(|&m| m > 1);
    if control.strategy == Strategy::Sequential || (slots.is_none() && !grouped) {
        return makespan(plan, vars, worst);
    }
    match slots {
        Some(slots) if !grouped && control.strategy == Strategy::Eager => {
            let mut free = plan.clone();
            free.control.max_concurrency = None;
            let longest = makespan(&free, vars, worst)?;
            Some(work.min(work.div_ceil(u64::from(slots)).saturating_add(longest)))
        }
        _ => Some(work),
    }
}

/// Task `i`'s figures, and why its worst cases are unbounded; providers it uses with no price
/// join `unpriced`.
fn task_forecast(
    plan: &Plan,
    i: usize,
    estimate: Estimate,
    history: &History,
    unpriced: &mut Vec<String>,
) -> (TaskForecast, Vec<String>) {
    let task = &plan.tasks[i];
    let id = task.id.value.as_str();
    let mut unbounded = Vec::new();
    let attempts = attempts(plan, i);
    let runs = estimate.runs.max(1);
    let mut tokens: Span<u64> = Span { expected: 0, worst: Some(0) };
    let mut cost = Some(Cost { amount: Span { expected: 0.0, worst: Some(0.0) }, currency: String::new() });
    let agent = plan.agent_of(task);
    // Each agent asked: its model, the prompt and completion tokens expected, the most requests.
    let mut requests: Vec<(Model<'_>, u64, u64, u64)> = Vec::new();
    if let Some(model) = agent.and_then(|name| Model::of(plan, name)) {
        let turns = turns(plan, agent.unwrap_or_default());
        let expected_turns = if turns > 1 { EXPECTED_TURNS_WITH_TOOLS } else { 1 };
        let completion = estimate.output.min(model.max_tokens);
        let calls = runs * expected_turns;
        let most = runs * attempts * agent_runs(plan, i) * turns;
        requests.push((model, calls * estimate.input, calls * completion, most));
    }
    if let Some(Verification::LlmReviewer { agent: reviewer, .. }) = task.extras().verification.as_ref()
        && let Some(model) = Model::of(plan, &reviewer.value)
    {
        // The reviewer reads the output and answers pass or fail with a reason; a reviewer
        // offered tools may call them first, as any run of its agent may.
        let completion = model.max_tokens.min(REVIEW_TOKENS);
        let turns = turns(plan, &reviewer.value);
        requests.push((model, runs * estimate.output, runs * completion, runs * attempts * turns));
    }
    for (model, prompt, completion, calls) in &requests {
        let expected = prompt + completion;
        tokens.expected = tokens.expected.saturating_add(expected);
        match model.worst(*calls) {
            Ok(worst) => tokens.worst = tokens.worst.map(|sum| sum.saturating_add(worst)),
            Err(why) => {
                tokens.worst = None;
                unbounded.push(why);
            }
        }
        match (model.price, cost.as_mut()) {
            (Some(price), Some(sum)) if sum.currency.is_empty() || sum.currency == price.currency => {
                sum.currency.clone_from(&price.currency);
                sum.amount.expected += price.cost(*prompt, *completion);
                sum.amount.worst =
                    sum.amount.worst.zip(model.window).map(|(w, window)| w + worst_cost(price, window * calls));
            }
            (Some(_), _) => cost = None,
            (None, _) => {
                unpriced.push(model.provider.to_owned());
                cost = None;
            }
        }
    }
    if requests.is_empty() {
        cost = None;
    } else if let Some(name) = agent
        && let Some(observed) = history.of(plan, name)
    {
        // Earlier runs: what a task on this agent and model used, checks and retries included.
        let each = observed.tokens_per_task();
        // Never past the worst case: a run within the limits cannot take more.
        tokens.expected = tokens.worst.unwrap_or(u64::MAX).min(runs * (each.prompt + each.completion));
        if let (Some(sum), Some(price)) = (cost.as_mut(), plan.price_of(name)) {
            sum.amount.expected = runs as f64 * price.cost(each.prompt, each.completion);
        }
    }
    let duration = item_duration(plan, i, history);
    if duration.worst.is_none() {
        unbounded.push(unbounded_duration(plan, i).to_owned());
    }
    (TaskForecast { task: id.to_owned(), tokens, cost, duration_ms: duration }, unbounded)
}

/// Tasks by name: the first few, and how many more.
fn named(tasks: &[String]) -> String {
    const SHOWN: usize = 3;
    let shown: Vec<String> = tasks.iter().take(SHOWN).map(|t| format!("`{t}`")).collect();
    let noun = if tasks.len() == 1 { "task" } else { "tasks" };
    match tasks.len().saturating_sub(SHOWN) {
        0 => format!("{noun} {}", shown.join(", ")),
        more => format!("{noun} {} and {more} more", shown.join(", ")),
    }
}

/// What `tokens` worst-case tokens cost: each at the dearer of the two prices.
fn worst_cost(price: &Price, tokens: u64) -> f64 {
    tokens as f64 * price.input_per_mtok.max(price.output_per_mtok) / 1_000_000.0
}

/// The sum of the tasks' costs, when they are all in one currency.
fn sum_costs(costs: &[Option<Cost>]) -> Option<Cost> {
    let mut total: Option<Cost> = None;
    for cost in costs.iter().flatten() {
        let sum = total.get_or_insert_with(|| Cost {
            amount: Span { expected: 0.0, worst: Some(0.0) },
            currency: cost.currency.clone(),
        });
        if sum.currency != cost.currency {
            return None;
        }
        sum.amount.expected += cost.amount.expected;
        sum.amount.worst = sum.amount.worst.zip(cost.amount.worst).map(|(a, b)| a + b);
    }
    total
}

/// The most attempts task `i` may take: `max_attempts` under `retry`, else one.
fn attempts(plan: &Plan, i: usize) -> u64 {
    let policy = &plan.tasks[i].on_failure.value;
    if policy.action == Action::Retry { u64::from(policy.max_attempts.max(1)) } else { 1 }
}

/// The most model turns one attempt of agent `name` may take: its `max_turns` when it is
/// offered tools, else one.
fn turns(plan: &Plan, name: &str) -> u64 {
    match plan.agents.get(name).map(|a| &a.runtime) {
        Some(Runtime::Llm { tools, max_turns, .. }) if !tools.is_empty() => {
            max_turns.map_or(DEFAULT_MAX_TURNS, u64::from).max(1)
        }
        _ => 1,
    }
}

/// The planner's model and the most requests it may get: two runs (an answer and a repair) for
/// each replan the plan allows, when a task may ask for one, each run as many turns as the
/// planner agent may take.
fn planner(plan: &Plan) -> Option<(Model<'_>, u64)> {
    let replans = plan.tasks.iter().any(|t| {
        let policy = &t.on_failure.value;
        policy.action == Action::Replan || policy.then == Action::Replan
    }) || plan.control.replan_on_empty_result;
    let name = &plan.control.planner.as_ref()?.value;
    let model = Model::of(plan, name)?;
    replans.then(|| (model, 2 * u64::from(plan.control.max_replans) * turns(plan, name)))
}

/// The compactor's model and the most requests it may get: one run for each output recorded,
/// each as many turns as the compactor agent may take.
fn compactor<'p>(plan: &'p Plan, estimates: &[Estimate]) -> Option<(Model<'p>, u64)> {
    let name = &plan.control.compactor.as_ref()?.value;
    let model = Model::of(plan, name)?;
    let outputs: u64 = estimates.iter().enumerate().map(|(i, e)| e.runs.max(1) * attempts(plan, i)).sum();
    Some((model, outputs * turns(plan, name)))
}

/// How long one item of task `i` takes: one attempt expected (what earlier runs observed of its
/// agent, when they did), every attempt with the backoffs between them at worst.
fn item_duration(plan: &Plan, i: usize, history: &History) -> Span<u64> {
    let task = &plan.tasks[i];
    let agent = plan.agent_of(task).and_then(|name| plan.agents.get(name));
    let timeout = task.extras().timeout.or(agent.and_then(|a| a.timeout)).map(manifest::Duration::as_millis);
    let (expected, attempt_worst) = match (task.kind, agent.map(|a| &a.runtime)) {
        (TaskKind::HumanReview, _) => (0, None),
        (TaskKind::Plan | TaskKind::Expand, _) => (0, None),
        (_, None) => (0, Some(0)),
        (_, Some(Runtime::Mock { latency, .. })) => {
            let latency = latency.map_or(0, |l| l.as_millis());
            (latency, Some(timeout.map_or(latency, |t| t.min(latency))))
        }
        (_, Some(Runtime::Llm { .. })) => {
            let model = plan.agent_of(task).and_then(|name| Model::of(plan, name));
            let completion =
                model.map_or(DEFAULT_MAX_TOKENS, |m| m.max_tokens).min(manifest::critic::output_budget(task));
            let turns = turns(plan, plan.agent_of(task).unwrap_or_default());
            let expected_turns = if turns > 1 { EXPECTED_TURNS_WITH_TOOLS } else { 1 };
            (expected_turns * (EXPECTED_REQUEST_MS + completion * EXPECTED_MS_PER_TOKEN), timeout)
        }
        (_, Some(Runtime::Command { .. } | Runtime::Http { .. })) => (EXPECTED_PROCESS_MS, timeout),
    };
    let attempts = attempts(plan, i);
    let each = attempt_worst.map(|each| each.saturating_mul(agent_runs(plan, i)));
    let worst = each.map(|each| each.saturating_mul(attempts).saturating_add(backoffs(plan, i, attempts)));
    // What earlier runs observed, never past the worst case (their time includes runner's own
    // work, which the worst case leaves out).
    let observed = plan.agent_of(task).and_then(|name| history.of(plan, name));
    let expected = observed.map_or(expected, |o| worst.unwrap_or(u64::MAX).min(o.duration_per_task()));
    Span { expected, worst }
}

/// The most runs of its agent one attempt of task `i` may take: a synthesis gate with an agent
/// and a `max_output_tokens` asks its agent once more, under the same timeout, to shorten an
/// answer over the cap (docs/running.md); any other task asks once.
fn agent_runs(plan: &Plan, i: usize) -> u64 {
    let task = &plan.tasks[i];
    let shortens =
        task.kind == TaskKind::SynthesisGate && task.extras().max_output_tokens.is_some() && task.agent.is_some();
    if shortens { 2 } else { 1 }
}

/// Why task `i`'s duration is unbounded.
fn unbounded_duration(plan: &Plan, i: usize) -> &'static str {
    match plan.tasks[i].kind {
        TaskKind::HumanReview => "a person decides it, whenever they do",
        TaskKind::Plan | TaskKind::Expand => "its sub-plan is not forecast",
        TaskKind::Task | TaskKind::SynthesisGate => "no `timeout` (the task's or its agent's) bounds its attempts",
    }
}

/// The longest waits between `attempts` attempts of task `i`: each backoff at its full length.
fn backoffs(plan: &Plan, i: usize, attempts: u64) -> u64 {
    let policy = &plan.tasks[i].on_failure.value;
    let (mut wait, cap) = (policy.backoff.as_millis(), policy.max_backoff.as_millis());
    let mut total = 0_u64;
    for _ in 1..attempts {
        total = total.saturating_add(wait.min(cap));
        wait = wait.saturating_mul(u64::from(policy.factor.max(1)));
    }
    total
}
