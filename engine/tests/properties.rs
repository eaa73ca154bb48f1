//! Scheduling invariants over random plans: random DAGs, parallel groups and limits,
//! strategies, failure policies and mock scripts (a failure being an agent's error or an
//! output its verification rejected), conditions that hold or not and maps over short lists
//! (whose items follow the map's policy and script), run both through the pure state machine
//! (with a fake executor that delivers results and timers in a random order) and through the
//! real driver with mock agents.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use engine::driver::Driver;
use engine::event::ErrorClass;
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus, Start, TaskStatus};
use manifest::plan::Strategy;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

/// What happens when an attempt of a task fails.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    Fail,
    Skip,
    /// `transient`: `retry_on: transient`, so the mock agents' failures (never transient)
    /// and rejected outputs are not retried.
    Retry {
        max_attempts: u32,
        then_skip: bool,
        transient: bool,
    },
}

impl Policy {
    fn max_attempts(self) -> u32 {
        match self {
            Policy::Retry { max_attempts, .. } => max_attempts,
            _ => 1,
        }
    }

    /// The attempts a task that keeps failing takes.
    fn attempts_to_give_up(self) -> u32 {
        match self {
            Policy::Retry { transient: true, .. } => 1,
            policy => policy.max_attempts(),
        }
    }

    fn can_skip(self) -> bool {
        matches!(self, Policy::Skip | Policy::Retry { then_skip: true, .. })
    }

    fn yaml(self) -> String {
        match self {
            Policy::Fail => "fail".into(),
            Policy::Skip => "skip".into(),
            Policy::Retry { max_attempts, then_skip, transient } => format!(
                "{{action: retry, max_attempts: {max_attempts}, backoff: 1ms, then: {}, retry_on: {}}}",
                if then_skip { "skip" } else { "fail" },
                if transient { "transient" } else { "any" }
            ),
        }
    }
}

#[derive(Debug, Clone)]
struct TaskSpec {
    deps: Vec<usize>,
    group: Option<usize>,
    policy: Policy,
    critical: bool,
    /// One response per attempt, the last repeating: `true` succeeds, `false` fails.
    script: Vec<bool>,
    /// Its `when`, written as the literal `true` or `false`.
    when: Option<bool>,
    /// A map over a list of this many items, each following the script and the policy.
    items: Option<usize>,
}

#[derive(Debug, Clone)]
struct Spec {
    tasks: Vec<TaskSpec>,
    max_concurrency: Option<u32>,
    group_limits: Vec<Option<u32>>,
    strategy: Strategy,
    /// Whether the strategy comes from `Start` rather than the plan (a plan's `sequential`
    /// also chains the tasks in list order).
    override_strategy: bool,
}

/// How a task ends, from its script and policy alone.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Succeeds,
    Skipped,
    FailsRun,
    /// Its condition was false: skipped, and the run may still succeed.
    NotRun,
}

impl TaskSpec {
    /// The fate and the attempts it takes (each item's, for a map).
    fn fate(&self) -> (Fate, u32) {
        if self.when == Some(false) {
            return (Fate::NotRun, 0);
        }
        if self.items == Some(0) {
            return (Fate::Succeeds, 0);
        }
        let max = self.policy.attempts_to_give_up();
        for attempt in 1..=max {
            let ok = self.script[(attempt as usize - 1).min(self.script.len() - 1)];
            if ok {
                return (Fate::Succeeds, attempt);
            }
        }
        let fate = if self.policy.can_skip() { Fate::Skipped } else { Fate::FailsRun };
        (fate, max)
    }
}

fn task_spec(i: usize) -> impl proptest::strategy::Strategy<Value = TaskSpec> {
    let policy = prop_oneof![
        Just(Policy::Fail),
        Just(Policy::Skip),
        (1..=3u32, any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(max_attempts, then_skip, transient)| Policy::Retry { max_attempts, then_skip, transient }),
    ];
    let response = prop_oneof![3 => Just(true), 1 => Just(false)];
    (
        prop::collection::vec(0..1000usize, 0..3),
        prop::option::weighted(0.4, 0..3usize),
        policy,
        any::<bool>(),
        prop::collection::vec(response, 1..=3),
        prop::option::weighted(0.2, prop::bool::weighted(0.7)),
        prop::option::weighted(0.25, 0..=3usize),
    )
        .prop_map(move |(picks, group, policy, critical, script, when, items)| {
            let mut deps: Vec<usize> = if i == 0 { Vec::new() } else { picks.iter().map(|p| p % i).collect() };
            deps.sort_unstable();
            deps.dedup();
            // A critical task that may be skipped is a manifest error.
            TaskSpec { deps, group, policy, critical: critical && !policy.can_skip(), script, when, items }
        })
}

fn spec() -> impl proptest::strategy::Strategy<Value = Spec> {
    (5..=40usize)
        .prop_flat_map(|n| (0..n).map(task_spec).collect::<Vec<_>>())
        .prop_flat_map(|tasks| {
            (
                Just(tasks),
                prop::option::of(1..=4u32),
                prop::collection::vec(prop::option::of(1..=3u32), 3),
                prop_oneof![Just(Strategy::Eager), Just(Strategy::Phased), Just(Strategy::Sequential)],
                any::<bool>(),
            )
        })
        .prop_map(|(tasks, max_concurrency, group_limits, strategy, override_strategy)| Spec {
            tasks,
            max_concurrency,
            group_limits,
            strategy,
            override_strategy,
        })
}

impl Spec {
    fn yaml(&self) -> String {
        let mut responses = String::new();
        let mut workflow = String::new();
        for (i, task) in self.tasks.iter().enumerate() {
            let script: Vec<String> = task
                .script
                .iter()
                .map(|&ok| if ok { format!("{{output: o{i}}}") } else { format!("{{fail: f{i}}}") })
                .collect();
            responses.push_str(&format!("        t{i}: [{}]\n", script.join(", ")));
            let deps: Vec<String> = task.deps.iter().map(|d| format!("t{d}")).collect();
            // Dependents read the status of their first dependency, skipped ones included.
            let input = match task.deps.first() {
                Some(d) => format!("\"t{i} {{{{ tasks.t{d}.status }}}}\""),
                None => format!("t{i}"),
            };
            let mut group = task.group.map_or_else(String::new, |g| format!(", parallel_group: g{g}"));
            if let Some(when) = task.when {
                group.push_str(&format!(", when: '{when}'"));
            }
            if let Some(items) = task.items {
                let list: Vec<String> = (0..items).map(|k| k.to_string()).collect();
                group.push_str(&format!(", for_each: [{}]", list.join(", ")));
            }
            workflow.push_str(&format!(
                "    - {{id: t{i}, agent: m, input: {input}, depends_on: [{}]{group}, on_failure: {}, critical: {}}}\n",
                deps.join(", "),
                task.policy.yaml(),
                task.critical
            ));
        }
        let mut control = String::from("  control_logic:\n");
        if !self.override_strategy {
            control.push_str(&format!("    strategy: {}\n", self.strategy.as_str()));
        }
        if let Some(max) = self.max_concurrency {
            control.push_str(&format!("    max_concurrency: {max}\n"));
        }
        control.push_str("    parallel_groups:\n");
        for (g, limit) in self.group_limits.iter().enumerate() {
            match limit {
                Some(limit) => control.push_str(&format!("      g{g}: {{max_concurrency: {limit}}}\n")),
                None => control.push_str(&format!("      g{g}: {{}}\n")),
            }
        }
        format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: p}}\nspec:\n  mission: m\n  agent_definitions:\n    \
             m:\n      runtime: mock\n      default: echo\n      responses:\n{responses}  workflow:\n{workflow}{control}"
        )
    }

    fn plan(&self) -> Arc<manifest::Plan> {
        let loaded = manifest::load_str("t.yaml", "t", &self.yaml(), &|_| true);
        let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{}", self.yaml());
        Arc::new(loaded.plan.expect("the plan loads"))
    }

    fn start(&self, plan: &Arc<manifest::Plan>) -> Command {
        let strategy = self.override_strategy.then_some(self.strategy);
        Command::Start(Start { strategy, ..Start::plan(Arc::clone(plan)) })
    }

    /// The result of an attempt; a failure is an agent's error or, when `by_check`, an output
    /// its verification rejected (the same to the policy).
    fn reply(&self, task: &str, attempt: u32, by_check: bool, jitter: f64) -> Command {
        let i = spec_index(task);
        let script = &self.tasks[i].script;
        let ok = script[(attempt as usize - 1).min(script.len() - 1)];
        match (ok, by_check) {
            (true, _) => {
                Command::Succeeded { task: task.into(), attempt, output: format!("o{i}"), tokens: None, duration_ms: 0 }
            }
            (false, false) => {
                let (error, class) = (format!("f{i}"), ErrorClass::Agent);
                Command::Failed { task: task.into(), attempt, error, class, tokens: None, jitter }
            }
            (false, true) => {
                let reason = format!("v{i}");
                Command::VerificationFailed { task: task.into(), attempt, reason, tokens: None, jitter }
            }
        }
    }
}

/// The task of the spec an id names: `t3`, or an item `t3[1]` of map `t3`.
fn spec_index(task: &str) -> usize {
    let id = manifest::template::map_of_item(task).unwrap_or(task);
    id[1..].parse().expect("task ids are t<N>")
}

/// Checks every invariant on the log of a run that ended, and its final state.
fn check(spec: &Spec, log: &[Event], state: &RunState) -> Result<(), TestCaseError> {
    let plan = &state.plan;
    let graph = &state.graph;
    let id = |i: usize| plan.tasks[i].id.value.to_string();
    let index = |task: &str| state.index_of(task).expect("a known task");
    let limit = spec.max_concurrency.map_or(usize::MAX, |m| m as usize);
    let strategy = spec.strategy;

    // (c) The live state is the fold of the log.
    prop_assert_eq!(&RunState::fold(log), state);

    let mut done: HashSet<String> = HashSet::new();
    let mut finals: HashMap<String, TaskStatus> = HashMap::new();
    let mut in_flight: HashSet<String> = HashSet::new();
    let mut dispatches: HashMap<String, u32> = HashMap::new();
    let mut rejected: HashSet<String> = HashSet::new();
    // The seq of each task's latest TaskDispatched (events are numbered from 1).
    let mut dispatched_at: HashMap<String, u64> = HashMap::new();
    let mut completed = None;
    for (at, event) in log.iter().enumerate() {
        prop_assert!(completed.is_none(), "{} after RunCompleted", event.name());
        // (g) Every result names the TaskDispatched of its attempt.
        if let Event::TaskSucceeded { task, dispatched_seq, .. }
        | Event::TaskFailed { task, dispatched_seq, .. }
        | Event::VerificationFailed { task, dispatched_seq, .. } = event
        {
            prop_assert_eq!(
                *dispatched_seq,
                dispatched_at.get(task).copied(),
                "{} of {} at {}",
                event.name(),
                task,
                at
            );
        }
        match event {
            Event::TaskDispatched { task, attempt, input } => {
                let i = spec_index(task);
                // (a) Dependencies are done before a task starts.
                for p in graph.parents(index(task)) {
                    prop_assert!(done.contains(&id(p)), "{task} dispatched at {at} before {} was done", id(p));
                }
                prop_assert!(spec.tasks[i].items.is_none() || task.contains('['), "map {task} dispatched itself");
                let count = dispatches.entry(task.clone()).or_default();
                *count += 1;
                prop_assert_eq!(*count, *attempt);
                // (f) Attempts never exceed max_attempts.
                prop_assert!(*attempt <= spec.tasks[i].policy.max_attempts(), "{task} attempt {attempt}");
                // Dependents read their dependency's status, skipped ones included; a retry
                // after a rejected output is told why.
                let mut expected = match spec.tasks[i].deps.first() {
                    Some(&d) => format!("t{i} {}", finals.get(&format!("t{d}")).map_or("?", |s| s.as_str())),
                    None => format!("t{i}"),
                };
                if rejected.remove(task) {
                    expected.push_str(&format!(
                        "\n\nThe previous answer failed verification: v{i}\nAnswer again and fix this."
                    ));
                }
                prop_assert_eq!(&**input, expected.as_str());
                prop_assert!(in_flight.insert(task.clone()), "{task} dispatched twice at once");
                dispatched_at.insert(task.clone(), at as u64 + 1);
            }
            // A map succeeds, with no attempt, once every item is final.
            Event::TaskSucceeded { task, attempt: 0, .. } => {
                let items = spec.tasks[spec_index(task)].items;
                prop_assert!(items.is_some(), "{task} succeeded without an attempt");
                for k in 0..items.unwrap_or_default() {
                    prop_assert!(done.contains(&format!("{task}[{k}]")), "{task} collected before item {k}");
                }
                done.insert(task.clone());
                finals.insert(task.clone(), TaskStatus::Succeeded);
            }
            Event::TaskSucceeded { task, .. } => {
                prop_assert!(in_flight.remove(task));
                done.insert(task.clone());
                finals.insert(task.clone(), TaskStatus::Succeeded);
            }
            Event::MapExpanded { task, items } => {
                prop_assert_eq!(Some(items.len()), spec.tasks[spec_index(task)].items);
            }
            Event::TaskFailed { task, class, retryable, .. } => {
                prop_assert!(in_flight.remove(task));
                let transient_only =
                    matches!(spec.tasks[spec_index(task)].policy, Policy::Retry { transient: true, .. });
                // A run that fails stops the attempts still in flight: those are cancelled.
                let expected = *class != ErrorClass::Cancelled && !transient_only;
                prop_assert_eq!(*retryable, expected, "{} failed as {:?}", task, class);
            }
            // (h) The wait before a retry is the backoff (1ms, doubled) less at most half of it.
            Event::RetryScheduled { delay_ms, backoff_ms: Some(backoff), .. } => {
                prop_assert!(*delay_ms <= *backoff && *delay_ms >= backoff - backoff / 2, "{delay_ms} of {backoff}");
            }
            Event::VerificationFailed { task, attempt, .. } => {
                prop_assert_eq!(log.get(at + 1).and_then(Event::task), Some(task.as_str()), "a TaskFailed follows");
                prop_assert_eq!(dispatches.get(task), Some(attempt));
                rejected.insert(task.clone());
            }
            Event::TaskSkipped { task, .. } => {
                done.insert(task.clone());
                finals.insert(task.clone(), TaskStatus::Skipped);
            }
            Event::RunCompleted { status, summary } => completed = Some((*status, summary.clone())),
            Event::RunCreated(_) | Event::RetryDue { .. } => {}
            other => prop_assert!(false, "unexpected {}", other.name()),
        }
        // (d) Limits hold at every point of the log; (e) sequential runs one attempt at a time.
        prop_assert!(in_flight.len() <= limit, "{} in flight, limit {limit}", in_flight.len());
        if strategy == Strategy::Sequential {
            prop_assert!(in_flight.len() <= 1, "sequential with {in_flight:?} in flight");
        }
        for (g, group_limit) in spec.group_limits.iter().enumerate() {
            let Some(group_limit) = group_limit else { continue };
            let running = in_flight.iter().filter(|t| spec.tasks[spec_index(t)].group == Some(g)).count();
            prop_assert!(running <= *group_limit as usize, "group g{g}: {running} > {group_limit}");
        }
    }

    // (b) The run completes with exactly the outcome the scripts lead to.
    let fates: Vec<(Fate, u32)> = spec.tasks.iter().map(TaskSpec::fate).collect();
    let expected = if fates.iter().any(|(f, _)| *f == Fate::FailsRun) {
        Outcome::Failed
    } else if fates.iter().any(|(f, _)| *f == Fate::Skipped) {
        Outcome::Partial
    } else {
        Outcome::Succeeded
    };
    let Some((outcome, summary)) = completed else {
        return Err(TestCaseError::fail(format!("the run did not complete: {:?}", state.status)));
    };
    prop_assert_eq!(outcome, expected, "{}", summary);
    prop_assert_eq!(state.status, RunStatus::Finished(outcome));
    if outcome == Outcome::Failed {
        let culprit = summary.split_once("task `").and_then(|(_, rest)| rest.split_once("` failed")).map(|(id, _)| id);
        let Some(culprit) = culprit else { return Err(TestCaseError::fail(format!("no task in `{summary}`"))) };
        let i = spec_index(culprit);
        prop_assert_eq!(fates[i].0, Fate::FailsRun);
        prop_assert_eq!(
            spec.tasks[i].items.is_some(),
            culprit.contains('['),
            "{}: a map fails through an item",
            culprit
        );
        let state_of = &state.tasks[index(culprit)];
        prop_assert_eq!(state_of.status, TaskStatus::Failed);
        prop_assert_eq!(state_of.attempts, fates[i].1);
    } else {
        for (i, (fate, attempts)) in fates.iter().enumerate() {
            let task = &state.tasks[index(&format!("t{i}"))];
            let items = spec.tasks[i].items.filter(|_| *fate != Fate::NotRun);
            // What ran: the task itself, or each item of a map (which itself succeeds).
            let ran: Vec<&engine::TaskState> = match items {
                Some(items) => {
                    prop_assert_eq!((task.status, task.attempts), (TaskStatus::Succeeded, 0), "t{}", i);
                    (0..items).map(|k| &state.tasks[index(&format!("t{i}[{k}]"))]).collect()
                }
                None => vec![task],
            };
            for state_of in ran {
                let want = if *fate == Fate::Succeeds { TaskStatus::Succeeded } else { TaskStatus::Skipped };
                prop_assert_eq!(state_of.status, want, "t{}", i);
                prop_assert_eq!(state_of.attempts, *attempts, "t{}", i);
                prop_assert_eq!(state_of.skipped_by_condition, *fate == Fate::NotRun, "t{}", i);
            }
        }
        prop_assert_eq!(state.running(), 0);
        let succeeded = state.tasks.iter().filter(|t| t.status == TaskStatus::Succeeded).count();
        prop_assert_eq!(state.succeeded_tasks(), succeeded, "the tally's count of succeeded tasks");
    }
    Ok(())
}

/// What the fake executor owes the machine.
#[derive(Debug, Clone)]
enum Owed {
    Reply(String, u32),
    Timer(String),
}

/// Runs the plan on the pure machine; `choices` decide which owed result comes next, and
/// whether an old result is delivered again first.
fn run_machine(spec: &Spec, choices: &[(u16, bool)]) -> Result<(Vec<Event>, RunState), TestCaseError> {
    let plan = spec.plan();
    let mut state = RunState::new();
    let mut log = Vec::new();
    let mut owed: Vec<Owed> = Vec::new();
    let mut delivered: Vec<Command> = Vec::new();
    let mut batch = state.process(spec.start(&plan)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut turn = 0usize;
    loop {
        for event in &batch {
            match event {
                Event::TaskDispatched { task, attempt, .. } => owed.push(Owed::Reply(task.clone(), *attempt)),
                Event::RetryScheduled { task, .. } => owed.push(Owed::Timer(task.clone())),
                _ => {}
            }
        }
        log.append(&mut batch);
        if owed.is_empty() {
            break;
        }
        let (pick, replay) = choices[turn % choices.len()];
        turn += 1;
        if replay && !delivered.is_empty() {
            // A duplicate of a result already handled changes nothing.
            let old = delivered[pick as usize % delivered.len()].clone();
            let before = state.clone();
            prop_assert_eq!(state.process(old), Ok(vec![]));
            prop_assert_eq!(&state, &before);
        }
        let command = match owed.swap_remove(pick as usize % owed.len()) {
            Owed::Reply(task, attempt) => spec.reply(&task, attempt, pick % 2 == 0, f64::from(pick % 1000) / 1000.0),
            Owed::Timer(task) => Command::TimerFired { task },
        };
        if matches!(command, Command::Succeeded { .. } | Command::Failed { .. } | Command::VerificationFailed { .. }) {
            delivered.push(command.clone());
        }
        batch = state.process(command).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    Ok((log, state))
}

/// Runs the plan through the driver with mock agents on a paused clock; the log is the one
/// the store gives back (PostgreSQL's when it answers).
fn run_driver(spec: &Spec) -> (Vec<Event>, RunState) {
    let plan = spec.plan();
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("a runtime");
    let store = TestStore::new("p");
    let driver = Driver::new("p".into(), store.clone(), &[], std::env::temp_dir());
    let run = driver.run(spec.start(&plan), CancellationToken::new());
    let state = runtime
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(3600), run).await })
        .expect("the run ends")
        .expect("the run is driven");
    let records = store.read_back();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    (records.into_iter().map(|r| r.event).collect(), state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_machine_keeps_every_invariant(
        spec in spec(),
        choices in prop::collection::vec((any::<u16>(), prop::bool::weighted(0.1)), 1..64),
    ) {
        let (log, state) = run_machine(&spec, &choices)?;
        check(&spec, &log, &state)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_driver_keeps_every_invariant(spec in spec()) {
        let (log, state) = run_driver(&spec);
        check(&spec, &log, &state)?;
    }
}

#[test]
fn fates_follow_the_scripts() {
    let task = |policy, script: &[bool]| TaskSpec {
        deps: vec![],
        group: None,
        policy,
        critical: false,
        script: script.to_vec(),
        when: None,
        items: None,
    };
    let retry = |max_attempts, then_skip| Policy::Retry { max_attempts, then_skip, transient: false };
    assert_eq!(task(Policy::Fail, &[false, true]).fate(), (Fate::FailsRun, 1));
    assert_eq!(task(Policy::Skip, &[false]).fate(), (Fate::Skipped, 1));
    assert_eq!(task(retry(3, false), &[false, true]).fate(), (Fate::Succeeds, 2));
    assert_eq!(task(retry(2, true), &[false]).fate(), (Fate::Skipped, 2));
    assert_eq!(task(retry(3, false), &[true, false]).fate(), (Fate::Succeeds, 1));
    let transient = Policy::Retry { max_attempts: 3, then_skip: true, transient: true };
    assert_eq!(task(transient, &[false, true]).fate(), (Fate::Skipped, 1));
    assert_eq!(TaskSpec { when: Some(false), ..task(Policy::Fail, &[false]) }.fate(), (Fate::NotRun, 0));
    assert_eq!(TaskSpec { items: Some(0), ..task(Policy::Fail, &[false]) }.fate(), (Fate::Succeeds, 0));
    assert_eq!(TaskSpec { items: Some(2), ..task(Policy::Skip, &[false]) }.fate(), (Fate::Skipped, 1));
}
