//! The forecast's worst case is an upper bound on what a run uses (docs/critic.md,
//! "Forecast"): random plans of llm agents on providers with a `context_window` and
//! `max_tokens`, some offered tools with a `max_turns`, tasks with retries and backoffs,
//! `llm_reviewer` checks, synthesis gates, a planner that may be asked to replan and a
//! compactor that keeps the context summary, each run through the pure state machine with scripted replies in virtual
//! time, as the driver would report them.
//!
//! Every scripted reply stays within what the plan allows: a request uses at most its
//! provider's window (and answers at most its `max_tokens`); an attempt takes at most its
//! agent's turns (`max_turns` with tools, else one) and at most its `timeout`, and a gate's
//! attempt may run its agent once more to shorten its answer; a review, a planner's answer or
//! a summary is one run of its agent (as many turns as that agent may take); a retry waits the
//! jittered backoff the machine asks for. The run's tokens and the
//! virtual time it ends at must not pass the forecast's worst.
//!
//! Each task's tokens and time are held to its own worst as well, and the planner's and the
//! compactor's tokens to what is left, and the run's time to the forecast's worst, also under
//! a concurrency limit, where a run can end later when a task ends sooner (see
//! `under_a_concurrency_limit_the_worst_time_covers_a_run_that_a_shorter_attempt_makes_longer`).
//!
//! What the script leaves out, because nothing in the plan bounds it (and the forecast does
//! not count it): a successful replan (its replacement tasks run and use tokens the forecast
//! never sees, so every replan here fails and fails the run), questions to a person
//! (`allow_clarification: false`: each answered question is one more attempt), and the time
//! of reviews, replans and summaries, which run after or outside the attempt's `timeout` and
//! are charged no time here.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use engine::conversation::ToolCallRecord;
use engine::event::{ContextCompacted, ErrorClass, ModelTurn};
use engine::forecast::{Forecast, forecast};
use engine::{Command, Event, Handler as _, RunState, RunStatus, Scope, Start, Tokens};
use manifest::plan::Strategy;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

/// A provider: the most tokens one request can use, and one answer can have.
#[derive(Debug, Clone, Copy)]
struct ProviderSpec {
    window: u64,
    max_tokens: u64,
}

/// An llm agent on one of the spec's providers.
#[derive(Debug, Clone, Copy)]
struct AgentSpec {
    provider: usize,
    /// Whether it is offered a tool: only then does an attempt take more than one turn.
    tools: bool,
    max_turns: u32,
    timeout_ms: u64,
}

impl AgentSpec {
    /// The most model requests one run of the agent makes: `max_turns` with tools (tool calls,
    /// then the answer), else one (no tool to call, and no `ask_user`).
    fn turns(self) -> u64 {
        if self.tools { u64::from(self.max_turns) } else { 1 }
    }
}

/// What a task's policy does once retries (if any) run out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Then {
    Fail,
    Skip,
    Replan,
}

impl Then {
    /// The policy's word for it.
    fn word(self) -> &'static str {
        match self {
            Then::Fail => "fail",
            Then::Skip => "skip",
            Then::Replan => "replan",
        }
    }
}

/// A task's `on_failure`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    /// `action: fail`, `skip` or `replan`, with no retry.
    Once(Then),
    Retry {
        max_attempts: u32,
        backoff_ms: u64,
        max_backoff_ms: u64,
        then: Then,
    },
}

impl Policy {
    /// The policy with `fail` where it says `replan`.
    fn without_replans(self) -> Self {
        let fail = |then| if then == Then::Replan { Then::Fail } else { then };
        match self {
            Policy::Once(then) => Policy::Once(fail(then)),
            Policy::Retry { max_attempts, backoff_ms, max_backoff_ms, then } => {
                Policy::Retry { max_attempts, backoff_ms, max_backoff_ms, then: fail(then) }
            }
        }
    }

    /// The policy as the plan writes it.
    fn yaml(self) -> String {
        match self {
            Policy::Once(then) => then.word().to_owned(),
            Policy::Retry { max_attempts, backoff_ms, max_backoff_ms, then } => format!(
                "{{action: retry, max_attempts: {max_attempts}, backoff: {backoff_ms}ms, \
                 max_backoff: {max_backoff_ms}ms, then: {}}}",
                then.word()
            ),
        }
    }
}

/// What one attempt comes to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// An output (that its reviewer, if any, passes).
    Succeeds,
    /// The agent fails, after none or some of its turns.
    Fails,
    /// The agent runs out of time, after none or some of its turns.
    TimesOut,
    /// An output its reviewer rejects (a plain failure for a task with no reviewer).
    Rejected,
    /// An empty output (that its reviewer, if any, passes): a failure that replans under
    /// `replan_on_empty_result`, else a success.
    Empty,
}

/// A task: an llm agent's, with its policy and what each attempt comes to.
#[derive(Debug, Clone)]
struct TaskSpec {
    /// Earlier tasks it depends on.
    deps: Vec<usize>,
    agent: usize,
    /// The agent of its `llm_reviewer` check, if it has one.
    reviewer: Option<usize>,
    policy: Policy,
    /// One ending per attempt, the last repeating.
    script: Vec<Ending>,
    /// Whether its input reads `{{ context_summary }}` (so that a compactor keeps one).
    reads_summary: bool,
    /// Whether it is a `synthesis_gate` over its dependencies, held to [`GATE_CAP`] tokens.
    gate: bool,
}

/// A gate's `max_output_tokens`.
const GATE_CAP: u64 = 50;

/// A plan, and the draws that script its run.
#[derive(Debug, Clone)]
struct Spec {
    providers: Vec<ProviderSpec>,
    agents: Vec<AgentSpec>,
    tasks: Vec<TaskSpec>,
    strategy: Strategy,
    max_concurrency: Option<u32>,
    /// The planner agent and `max_replans`.
    planner: Option<(usize, u32)>,
    /// The compactor agent.
    compactor: Option<usize>,
    /// `replan_on_empty_result`.
    replan_on_empty: bool,
    /// The numbers every scripted choice is drawn from, in turn (see [`Draws`]).
    draws: Vec<u16>,
}

impl Spec {
    /// The plan's manifest.
    fn yaml(&self) -> String {
        let mut providers = String::new();
        for (p, provider) in self.providers.iter().enumerate() {
            providers.push_str(&format!(
                "    p{p}: {{base_url: 'http://127.0.0.1:9/v1', model: m, context_window: {}, max_tokens: {}}}\n",
                provider.window, provider.max_tokens
            ));
        }
        let mut agents = String::new();
        for (a, agent) in self.agents.iter().enumerate() {
            let tools = if agent.tools { "tools: [look], " } else { "" };
            agents.push_str(&format!(
                "    a{a}: {{runtime: llm, provider: p{}, {tools}max_turns: {}, timeout: {}ms}}\n",
                agent.provider, agent.max_turns, agent.timeout_ms
            ));
        }
        let mut workflow = String::new();
        for (i, task) in self.tasks.iter().enumerate() {
            let deps: Vec<String> = task.deps.iter().map(|d| format!("t{d}")).collect();
            let summary = if task.reads_summary { " {{ context_summary }}" } else { "" };
            let check = task
                .reviewer
                .map_or_else(String::new, |r| format!(", verification: {{type: llm_reviewer, agent: a{r}}}"));
            let kind = if task.gate {
                format!("type: synthesis_gate, max_output_tokens: {GATE_CAP}")
            } else {
                format!("input: \"t{i}{summary}\"")
            };
            workflow.push_str(&format!(
                "    - {{id: t{i}, agent: a{}, {kind}, depends_on: [{}], on_failure: {}{check}}}\n",
                task.agent,
                deps.join(", "),
                task.policy.yaml()
            ));
        }
        let mut control =
            format!("  control_logic:\n    strategy: {}\n    allow_clarification: false\n", self.strategy.as_str());
        if let Some(max) = self.max_concurrency {
            control.push_str(&format!("    max_concurrency: {max}\n"));
        }
        if let Some((planner, max_replans)) = self.planner {
            control.push_str(&format!("    planner: a{planner}\n    max_replans: {max_replans}\n"));
        }
        if let Some(compactor) = self.compactor {
            control.push_str(&format!("    compactor: a{compactor}\n"));
        }
        if self.replan_on_empty {
            control.push_str("    replan_on_empty_result: true\n");
        }
        format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: p}}\nspec:\n  mission: m\n  providers:\n{providers}  \
             tools:\n    look: {{description: looks, command: ['true']}}\n  agent_definitions:\n{agents}  \
             workflow:\n{workflow}{control}"
        )
    }

    /// The plan, its graph and its forecast.
    fn load(&self) -> (manifest::Plan, manifest::TaskGraph, Forecast) {
        let yaml = self.yaml();
        let loaded = manifest::load_str("t.yaml", "t", &yaml, &|_| true);
        let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{yaml}");
        let (plan, graph) = loaded.valid().expect("a plan with no errors is valid");
        let vars = plan.run_vars(std::iter::empty()).expect("the plan has no vars");
        let forecast = forecast(plan, graph, &vars);
        (plan.clone(), graph.clone(), forecast)
    }

    /// Whether the compactor keeps the context summary: only when a task reads it.
    fn summarized(&self) -> bool {
        self.compactor.is_some() && self.tasks.iter().any(|t| t.reads_summary)
    }

    /// The provider agent `agent` asks.
    fn provider_of(&self, agent: usize) -> ProviderSpec {
        self.providers[self.agents[agent].provider]
    }
}

/// The scripted choices, drawn in turn from the spec's numbers (cycling). A draw of 0 always
/// picks the most the plan allows (every turn, the whole window, the whole timeout, no
/// jitter), so shrinking heads for the worst case.
struct Draws<'a> {
    draws: &'a [u16],
    next: usize,
}

impl Draws<'_> {
    /// The next number.
    fn take(&mut self) -> u64 {
        let draw = self.draws[self.next % self.draws.len()];
        self.next += 1;
        u64::from(draw)
    }

    /// A number from 0 to `max`: `max` itself half the time.
    fn up_to(&mut self, max: u64) -> u64 {
        let draw = self.take();
        if draw.is_multiple_of(2) { max } else { (draw / 2) % (max + 1) }
    }

    /// A number from 1 to `max` (at least 1).
    fn one_to(&mut self, max: u64) -> u64 {
        1 + self.up_to(max.max(1) - 1)
    }

    /// A retry's jitter, in `[0, 1)`.
    fn jitter(&mut self) -> f64 {
        self.take() as f64 / 65_536.0
    }

    /// One model request to `provider`: an answer of at most `max_tokens`, and prompt and
    /// answer together at most the window.
    fn request(&mut self, provider: ProviderSpec) -> Tokens {
        let completion = self.up_to(provider.max_tokens.min(provider.window));
        let prompt = self.up_to(provider.window - completion);
        Tokens { prompt, completion }
    }

    /// The tokens of one run of `agent` that takes `turns` requests.
    fn run(&mut self, spec: &Spec, agent: usize, turns: u64) -> Tokens {
        let mut sum = Tokens::default();
        for _ in 0..turns {
            let tokens = self.request(spec.provider_of(agent));
            sum.prompt += tokens.prompt;
            sum.completion += tokens.completion;
        }
        sum
    }
}

/// A report's tokens, prompt and completion.
fn total(tokens: Option<Tokens>) -> u64 {
    tokens.map_or(0, |t| t.prompt + t.completion)
}

/// Commands the driver sends together, and what they stand for.
#[derive(Debug, Default)]
struct Batch {
    commands: Vec<Command>,
    /// The task (the spec's index) whose attempt or retry it is; `None` for the planner and
    /// the compactor.
    task: Option<usize>,
    /// The tokens the commands report between them.
    tokens: u64,
    /// How long the task waited for it: the agent's time, or a retry's delay.
    took_ms: u64,
}

impl Batch {
    /// One command of the planner or the compactor that reports `tokens`.
    fn of(command: Command, tokens: Option<Tokens>) -> Self {
        Batch { commands: vec![command], tokens: total(tokens), ..Batch::default() }
    }
}

/// The commands that report attempt `attempt` of task `i`, as the driver sends them (each
/// model turn as the attempt's journal records it, a gate's compaction, then the result with
/// every token the attempt and its review used, turns included), and how long the agent took.
fn attempt(spec: &Spec, i: usize, attempt: u32, draws: &mut Draws<'_>) -> Batch {
    let task_spec = &spec.tasks[i];
    let task = format!("t{i}");
    let agent = spec.agents[task_spec.agent];
    let mut ending = task_spec.script[(attempt as usize - 1).min(task_spec.script.len() - 1)];
    if ending == Ending::Rejected && task_spec.reviewer.is_none() {
        ending = Ending::Fails;
    }
    let answers = matches!(ending, Ending::Succeeds | Ending::Rejected | Ending::Empty);
    let mut journal = Journal { task: &task, attempt, commands: Vec::new(), used: None, turn: 0 };
    // An attempt that answers takes at least one turn; one that fails may fail before any.
    let turns = if answers { draws.one_to(agent.turns()) } else { draws.up_to(agent.turns()) };
    journal.run(spec, task_spec.agent, turns, answers, draws);
    let mut took = if ending == Ending::TimesOut { agent.timeout_ms } else { draws.up_to(agent.timeout_ms) };
    if answers && ending != Ending::Empty && task_spec.gate {
        // An answer over the gate's cap: its agent is asked once to shorten it, a run of its
        // own under the same timeout (none when the answer was within the cap).
        let turns = draws.up_to(agent.turns());
        if turns > 0 {
            journal.run(spec, task_spec.agent, turns, true, draws);
            took += draws.up_to(agent.timeout_ms);
            journal.commands.push(Command::Compacted(ContextCompacted {
                task: task.clone(),
                scope: Scope::Gate,
                by: format!("a{}", task_spec.agent),
                tokens_before: GATE_CAP + 1,
                tokens_after: GATE_CAP,
                summary: None,
                tokens: None,
            }));
        }
    }
    let Journal { mut commands, mut used, .. } = journal;
    if answers && let Some(reviewer) = task_spec.reviewer {
        let turns = draws.one_to(spec.agents[reviewer].turns());
        let review = draws.run(spec, reviewer, turns);
        let sum = used.get_or_insert_with(Tokens::default);
        sum.prompt += review.prompt;
        sum.completion += review.completion;
    }
    let result = match ending {
        Ending::Succeeds | Ending::Empty => {
            let output = if ending == Ending::Empty { String::new() } else { format!("o{i}") };
            Command::Succeeded { task, attempt, output, tokens: used, duration_ms: took }
        }
        Ending::Fails => Command::Failed {
            task,
            attempt,
            error: format!("f{i}"),
            class: ErrorClass::Agent,
            tokens: used,
            jitter: draws.jitter(),
        },
        Ending::TimesOut => Command::Failed {
            task,
            attempt,
            error: "timed out".into(),
            class: ErrorClass::Timeout,
            tokens: used,
            jitter: draws.jitter(),
        },
        Ending::Rejected => {
            Command::VerificationFailed { task, attempt, reason: format!("v{i}"), tokens: used, jitter: draws.jitter() }
        }
    };
    commands.push(result);
    Batch { commands, task: Some(i), tokens: total(used), took_ms: took }
}

/// An attempt's model turns as its journal records them, and the tokens they used.
struct Journal<'a> {
    task: &'a str,
    attempt: u32,
    commands: Vec<Command>,
    used: Option<Tokens>,
    /// The last turn recorded.
    turn: u32,
}

impl Journal<'_> {
    /// Records one run of `agent` that takes `turns` requests: tool calls, then the answer
    /// when it `answers` (a run that fails may stop after any turn).
    fn run(&mut self, spec: &Spec, agent: usize, turns: u64, answers: bool, draws: &mut Draws<'_>) {
        for n in 1..=turns {
            let tokens = draws.request(spec.provider_of(agent));
            let sum = self.used.get_or_insert_with(Tokens::default);
            sum.prompt += tokens.prompt;
            sum.completion += tokens.completion;
            self.turn += 1;
            let last = answers && n == turns;
            let tool_calls = if last {
                Vec::new()
            } else {
                vec![ToolCallRecord {
                    id: format!("call_{}_0", self.turn),
                    name: "look".into(),
                    arguments: "{}".into(),
                }]
            };
            self.commands.push(Command::ModelTurn(ModelTurn {
                task: self.task.to_owned(),
                attempt: self.attempt,
                turn: self.turn,
                content: last.then(|| format!("the answer of {}", self.task)),
                tool_calls,
                tokens: Some(tokens),
                finish_reason: Some(if last { "stop" } else { "tool_calls" }.into()),
            }));
        }
    }
}

/// The planner's answer to a replan of task `task`: no usable replacement, after one or two
/// rounds (an answer, then a repair), each one run of the planner agent.
fn replan(spec: &Spec, task: &str, draws: &mut Draws<'_>) -> Batch {
    let (planner, _) = spec.planner.expect("a replan is requested only when the plan has a planner");
    let mut used = Tokens::default();
    for _ in 0..draws.one_to(2) {
        let turns = draws.one_to(spec.agents[planner].turns());
        let round = draws.run(spec, planner, turns);
        used.prompt += round.prompt;
        used.completion += round.completion;
    }
    let command = Command::ReplanFailed { task: task.into(), reason: "still invalid".into(), tokens: Some(used) };
    Batch::of(command, Some(used))
}

/// The compactor's merge of task `task`'s output into the context summary: one run of it.
fn compaction(spec: &Spec, task: &str, draws: &mut Draws<'_>) -> Batch {
    let compactor = spec.compactor.expect("outputs are summarized only when the plan has a compactor");
    let turns = draws.one_to(spec.agents[compactor].turns());
    let tokens = draws.run(spec, compactor, turns);
    let command = Command::Compacted(ContextCompacted {
        task: task.into(),
        scope: Scope::Summary,
        by: format!("a{compactor}"),
        tokens_before: 0,
        tokens_after: 0,
        summary: Some(format!("after {task}")),
        tokens: Some(tokens),
    });
    Batch::of(command, Some(tokens))
}

/// What a run came to.
#[derive(Debug)]
struct Run {
    /// The state at the end.
    state: RunState,
    /// Tokens of every command the run took, as the script counted them.
    scripted_tokens: u64,
    /// Of those, the tokens of each task's attempts and reviews, in spec order.
    task_tokens: Vec<u64>,
    /// Each task's time in its attempts and its retries' delays, in milliseconds.
    task_ms: Vec<u64>,
    /// The virtual time the run ended at, in milliseconds.
    elapsed_ms: u64,
}

/// The spec's task index of a task id `tN`.
fn index(task: &str) -> usize {
    task[1..].parse().expect("task ids are t<N>")
}

/// Runs `plan` (the spec's) on the pure machine in virtual time: each attempt's commands are
/// delivered when its agent is done, a retry's `TimerFired` after the delay the machine asked
/// for, a replan's answer and a summary at once (see the module doc). The machine decides what
/// starts when, under the plan's strategy and `max_concurrency`, as it does for the driver.
fn run(spec: &Spec, plan: manifest::Plan, graph: manifest::TaskGraph) -> Result<Run, TestCaseError> {
    let mut draws = Draws { draws: &spec.draws, next: 0 };
    let summarized = spec.summarized();
    let mut state = RunState::new();
    let start = Start { graph: Some(Arc::new(graph)), ..Start::plan(Arc::new(plan)) };
    let mut events = state.process(Command::Start(start)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    // What is due when: (time, index into `batches`, which keeps the order of scheduling).
    let mut due: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut batches: Vec<Batch> = Vec::new();
    let (mut now, mut scripted_tokens) = (0_u64, 0_u64);
    let (mut task_tokens, mut task_ms) = (vec![0; spec.tasks.len()], vec![0; spec.tasks.len()]);
    loop {
        for event in &events {
            let batch = match event {
                Event::TaskDispatched { task, attempt: n, .. } => attempt(spec, index(task), *n, &mut draws),
                Event::RetryScheduled { task, delay_ms, .. } => Batch {
                    task: Some(index(task)),
                    took_ms: *delay_ms,
                    ..Batch::of(Command::TimerFired { task: task.clone() }, None)
                },
                Event::ReplanRequested { task, .. } => replan(spec, task, &mut draws),
                Event::TaskSucceeded { task, attempt: 1.., .. } if summarized => compaction(spec, task, &mut draws),
                _ => continue,
            };
            due.push(Reverse((now + batch.took_ms, batches.len())));
            batches.push(batch);
        }
        if state.status.is_final() {
            break;
        }
        let Some(Reverse((at, k))) = due.pop() else {
            return Err(TestCaseError::fail(format!("the run is stuck at {now} ms: {:?}", state.status)));
        };
        now = at;
        events = Vec::new();
        // Nothing else happens between a batch's commands: the run goes on until its last.
        let batch = std::mem::take(&mut batches[k]);
        scripted_tokens += batch.tokens;
        if let Some(i) = batch.task {
            task_tokens[i] += batch.tokens;
            task_ms[i] += batch.took_ms;
        }
        for command in batch.commands {
            events.extend(state.process(command).map_err(|e| TestCaseError::fail(e.to_string()))?);
        }
    }
    Ok(Run { state, scripted_tokens, task_tokens, task_ms, elapsed_ms: now })
}

/// Runs the spec and checks the run against its forecast's worst case; returns the run and
/// the forecast.
fn check(spec: &Spec) -> Result<(Run, Forecast), TestCaseError> {
    let (plan, graph, forecast) = spec.load();
    prop_assert!(forecast.unbounded.is_empty(), "{:?}\n{}", forecast.unbounded, spec.yaml());
    let run = run(spec, plan, graph)?;
    let state = &run.state;
    prop_assert!(matches!(state.status, RunStatus::Finished(_)), "{:?}", state.status);
    let used = state.tokens.prompt + state.tokens.completion;
    // The machine counted every token the script reported, no more and no less.
    prop_assert_eq!(used, run.scripted_tokens);
    let worst = forecast.run.tokens.worst.expect("every provider has a window");
    prop_assert!(used <= worst, "the run used {} tokens, the worst forecast is {}\n{}", used, worst, spec.yaml());
    // Each task's share: its attempts and reviews within its own worst, its attempts and
    // backoffs within its own longest; the planner and the compactor within the rest.
    let mut tasks_worst = 0;
    for (i, task) in forecast.tasks.iter().enumerate() {
        prop_assert_eq!(&task.task, &format!("t{i}"));
        let task_worst = task.tokens.worst.expect("every provider has a window");
        tasks_worst += task_worst;
        let (tokens, took) = (run.task_tokens[i], run.task_ms[i]);
        prop_assert!(
            tokens <= task_worst,
            "t{} used {} tokens, its worst is {}\n{}",
            i,
            tokens,
            task_worst,
            spec.yaml()
        );
        let longest = task.duration_ms.worst.expect("every agent has a timeout");
        prop_assert!(took <= longest, "t{} took {} ms, its worst is {} ms\n{}", i, took, longest, spec.yaml());
    }
    let support = used - run.task_tokens.iter().sum::<u64>();
    prop_assert!(
        support <= worst - tasks_worst,
        "the planner and the compactor used {} tokens, their worst is {}\n{}",
        support,
        worst - tasks_worst,
        spec.yaml()
    );
    let longest = forecast.run.duration_ms.worst.expect("every agent has a timeout");
    prop_assert!(
        run.elapsed_ms <= longest,
        "the run took {} ms, the worst forecast is {} ms\n{}",
        run.elapsed_ms,
        longest,
        spec.yaml()
    );
    Ok((run, forecast))
}

/// A provider with a window of 16 to 4,096 tokens, answers of up to all of it.
fn provider() -> impl proptest::strategy::Strategy<Value = ProviderSpec> {
    (16..=4096u64, 1..=100u64)
        .prop_map(|(window, share)| ProviderSpec { window, max_tokens: (window * share / 100).max(1) })
}

/// An agent with or without a tool, up to 4 turns and up to 5 s an attempt.
fn agent() -> impl proptest::strategy::Strategy<Value = AgentSpec> {
    (0..2usize, any::<bool>(), 1..=4u32, 1..=50u64).prop_map(|(provider, tools, max_turns, tenths)| AgentSpec {
        provider,
        tools,
        max_turns,
        timeout_ms: tenths * 100,
    })
}

/// What follows the last failure.
fn then() -> impl proptest::strategy::Strategy<Value = Then> {
    prop_oneof![1 => Just(Then::Fail), 2 => Just(Then::Skip), 1 => Just(Then::Replan)]
}

/// No retry, or up to 4 attempts with backoffs of up to 2 s (capped at up to 3 s).
fn policy() -> impl proptest::strategy::Strategy<Value = Policy> {
    prop_oneof![
        1 => then().prop_map(Policy::Once),
        2 => (1..=4u32, 0..=2000u64, 0..=3000u64, then()).prop_map(|(max_attempts, backoff_ms, max_backoff_ms, then)| {
            Policy::Retry { max_attempts, backoff_ms, max_backoff_ms, then }
        }),
    ]
}

/// Mostly successes.
fn ending() -> impl proptest::strategy::Strategy<Value = Ending> {
    prop_oneof![
        8 => Just(Ending::Succeeds),
        1 => Just(Ending::Fails),
        1 => Just(Ending::TimesOut),
        1 => Just(Ending::Rejected),
        1 => Just(Ending::Empty),
    ]
}

/// Task `i`, with agents picked among `agents`.
fn task(i: usize, agents: usize) -> impl proptest::strategy::Strategy<Value = TaskSpec> {
    (
        prop::collection::vec(0..1000usize, 0..3),
        0..agents,
        prop::option::weighted(0.35, 0..agents),
        policy(),
        prop::collection::vec(ending(), 1..=4),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.25),
    )
        .prop_map(move |(picks, agent, reviewer, policy, script, reads_summary, gate)| {
            let mut deps: Vec<usize> = if i == 0 { Vec::new() } else { picks.iter().map(|p| p % i).collect() };
            deps.sort_unstable();
            deps.dedup();
            // A gate condenses its dependencies' outputs, and has no input of its own.
            let gate = gate && !deps.is_empty();
            TaskSpec { deps, agent, reviewer, policy, script, reads_summary: reads_summary && !gate, gate }
        })
}

/// One or two providers, one to four agents (which also review, plan and compact), 2 to 12
/// tasks.
fn spec() -> impl proptest::strategy::Strategy<Value = Spec> {
    (prop::collection::vec(provider(), 1..=2), prop::collection::vec(agent(), 1..=4), 2..=12usize)
        .prop_flat_map(|(providers, mut agents, n)| {
            for agent in &mut agents {
                agent.provider %= providers.len();
            }
            let count = agents.len();
            (
                Just(providers),
                Just(agents),
                (0..n).map(|i| task(i, count)).collect::<Vec<_>>(),
                prop_oneof![Just(Strategy::Eager), Just(Strategy::Phased), Just(Strategy::Sequential)],
                prop::option::of(1..=3u32),
                prop::option::weighted(0.5, (0..count, 0..=2u32)),
                prop::option::weighted(0.3, 0..count),
                prop::bool::weighted(0.3),
                // A quarter of the runs take the most of everything.
                prop_oneof![1 => Just(vec![0]), 3 => prop::collection::vec(any::<u16>(), 1..48)],
            )
        })
        .prop_map(
            |(providers, agents, mut tasks, strategy, max_concurrency, planner, compactor, replan_on_empty, draws)| {
                if planner.is_none() {
                    // A plan that replans names its planner (the loader says so).
                    for task in &mut tasks {
                        task.policy = task.policy.without_replans();
                    }
                }
                Spec { providers, agents, tasks, strategy, max_concurrency, planner, compactor, replan_on_empty, draws }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_run_passes_the_forecasts_worst_case(spec in spec()) {
        check(&spec)?;
    }
}

/// A run that takes everything the plan allows (every attempt, every turn at the whole
/// window, every review turn, a gate's second run, every attempt at its timeout and every
/// backoff in full) uses exactly the forecast's worst: a forecast that counted one attempt,
/// turn, review turn, run or backoff fewer would be below it.
#[test]
fn a_run_that_takes_all_the_plan_allows_meets_the_worst_exactly() {
    let spec = Spec {
        providers: vec![ProviderSpec { window: 1000, max_tokens: 250 }],
        agents: vec![
            AgentSpec { provider: 0, tools: true, max_turns: 3, timeout_ms: 10_000 },
            AgentSpec { provider: 0, tools: true, max_turns: 2, timeout_ms: 2_000 },
            AgentSpec { provider: 0, tools: false, max_turns: 1, timeout_ms: 5_000 },
        ],
        tasks: vec![
            TaskSpec {
                deps: vec![],
                agent: 0,
                reviewer: Some(1),
                policy: Policy::Retry { max_attempts: 3, backoff_ms: 1_000, max_backoff_ms: 60_000, then: Then::Fail },
                script: vec![Ending::Rejected, Ending::Rejected, Ending::Succeeds],
                reads_summary: false,
                gate: false,
            },
            TaskSpec {
                deps: vec![0],
                agent: 2,
                reviewer: None,
                policy: Policy::Once(Then::Fail),
                script: vec![Ending::Succeeds],
                reads_summary: false,
                gate: true,
            },
        ],
        strategy: Strategy::Eager,
        max_concurrency: None,
        planner: None,
        compactor: None,
        replan_on_empty: false,
        // Every draw picks the most.
        draws: vec![0],
    };
    let (run, forecast) = check(&spec).expect("the run stays within the forecast");
    assert_eq!(run.state.status, RunStatus::Finished(engine::Outcome::Succeeded));
    // `t0`: three attempts of three turns and a review of two turns each; the gate: its answer
    // and its shortening. Every request at the window.
    assert_eq!(run.task_tokens, [3 * (3 + 2) * 1000, 2 * 1000]);
    let worsts: Vec<Option<u64>> = forecast.tasks.iter().map(|t| t.tokens.worst).collect();
    assert_eq!(worsts, [Some(15_000), Some(2_000)]);
    let used = run.state.tokens.prompt + run.state.tokens.completion;
    assert_eq!((used, forecast.run.tokens.worst), (17_000, Some(17_000)));
    // `t0`: three attempts at the timeout and backoffs of one and two seconds between them;
    // then the gate's two runs at theirs.
    assert_eq!(run.task_ms, [3 * 10_000 + 1_000 + 2_000, 2 * 5_000]);
    assert_eq!((run.elapsed_ms, forecast.run.duration_ms.worst), (43_000, Some(43_000)));
}

/// The planner and the compactor are agents too: each of their runs may take every turn
/// their agent allows (an answer and a repair for each replan, a summary for each output).
#[test]
fn the_planner_and_the_compactor_may_take_every_turn_of_their_agents() {
    let agents = vec![
        AgentSpec { provider: 0, tools: false, max_turns: 1, timeout_ms: 1_000 },
        AgentSpec { provider: 0, tools: true, max_turns: 3, timeout_ms: 1_000 },
    ];
    let task = |policy, ending| TaskSpec {
        deps: vec![],
        agent: 0,
        reviewer: None,
        policy,
        script: vec![ending],
        reads_summary: true,
        gate: false,
    };
    let plain = Spec {
        providers: vec![ProviderSpec { window: 1000, max_tokens: 250 }],
        agents,
        tasks: vec![task(Policy::Once(Then::Fail), Ending::Succeeds)],
        strategy: Strategy::Eager,
        max_concurrency: None,
        planner: None,
        compactor: None,
        replan_on_empty: false,
        // Every draw picks the most.
        draws: vec![0],
    };
    // Two answers, the first summarized in three turns before the second reads the summary
    // (the run ends before the second's summary). The forecast counts a summary for every
    // attempt: 2,000 for the answers and 6,000 for the summaries; one turn a summary would be
    // 4,000, below the run.
    let second = TaskSpec { deps: vec![0], ..task(Policy::Once(Then::Fail), Ending::Succeeds) };
    let summarized = Spec { compactor: Some(1), tasks: vec![plain.tasks[0].clone(), second], ..plain.clone() };
    let (run, forecast) = check(&summarized).expect("the run stays within the forecast");
    assert_eq!(run.state.status, RunStatus::Finished(engine::Outcome::Succeeded));
    let used = run.state.tokens.prompt + run.state.tokens.completion;
    assert_eq!((used, forecast.run.tokens.worst), (5_000, Some(8_000)));
    // One failed request, then a replan: an answer and a repair of three turns each.
    let replanned =
        Spec { tasks: vec![task(Policy::Once(Then::Replan), Ending::Fails)], planner: Some((1, 1)), ..plain };
    let (run, forecast) = check(&replanned).expect("the run stays within the forecast");
    assert_eq!(run.state.status, RunStatus::Finished(engine::Outcome::Failed));
    let used = run.state.tokens.prompt + run.state.tokens.completion;
    assert_eq!((used, forecast.run.tokens.worst), (7_000, Some(7_000)));
}

/// Under a concurrency limit a schedule is not monotone in its tasks' times, so the worst time
/// is not the makespan of every task at its worst. Two slots; `t0` (2 s) before `t1` (3 s) and
/// `t2` (1 s); `t3` may retry once (2 s at worst, 1 s here); `t4` (6 s), `t5` (1 s) and `t6`
/// (3 s) on their own. With `t3` at its worst, `t1` and `t2` take both slots at 2 s and the run
/// ends at 9 s. With `t3` done at 1 s, `t4` takes its slot at once, `t2` waits behind `t1` until
/// 5 s, and the run ends at 10 s. The forecast's worst is Graham's bound: 18 s of work over two
/// slots plus the longest chain, 6 s.
#[test]
fn under_a_concurrency_limit_the_worst_time_covers_a_run_that_a_shorter_attempt_makes_longer() {
    let seconds = [2, 3, 1, 1, 6, 1, 3];
    let task = |i: usize, deps: Vec<usize>, policy| TaskSpec {
        deps,
        agent: i,
        reviewer: None,
        policy,
        script: vec![Ending::Succeeds],
        reads_summary: false,
        gate: false,
    };
    let once = Policy::Once(Then::Fail);
    let retry = Policy::Retry { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0, then: Then::Fail };
    let spec = Spec {
        providers: vec![ProviderSpec { window: 100, max_tokens: 10 }],
        agents: seconds
            .iter()
            .map(|s| AgentSpec { provider: 0, tools: false, max_turns: 1, timeout_ms: s * 1000 })
            .collect(),
        tasks: vec![
            task(0, vec![], once),
            task(1, vec![0], once),
            task(2, vec![0], once),
            task(3, vec![], retry),
            task(4, vec![], once),
            task(5, vec![], once),
            task(6, vec![], once),
        ],
        strategy: Strategy::Eager,
        max_concurrency: Some(2),
        planner: None,
        compactor: None,
        replan_on_empty: false,
        // Every attempt takes its whole timeout.
        draws: vec![0],
    };
    let (plan, graph, forecast) = spec.load();
    let run = run(&spec, plan, graph).expect("the run ends");
    assert_eq!(run.state.status, RunStatus::Finished(engine::Outcome::Succeeded));
    assert_eq!(run.task_ms, [2_000, 3_000, 1_000, 1_000, 6_000, 1_000, 3_000], "every task within its worst");
    assert_eq!(run.elapsed_ms, 10_000, "a second past the schedule of every task at its worst");
    assert_eq!(forecast.run.duration_ms.worst, Some(15_000));
    check(&spec).expect("within the forecast");
}
