//! A plan's duration as its run would take it: the state machine itself, driven in virtual time
//! with a duration for each task, so that the plan's strategy, its concurrency limits and its
//! groups decide what starts when, as they do in a run and in `runner test`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use manifest::Plan;
use manifest::plan::{ForEach, MockOutcome, Runtime, TaskKind, Vars};

use crate::event::Event;
use crate::{Command, Handler as _, Start};
use machine::tokens::{TokenCounter, Tokenizer};

/// A counter for the simulation: no budget is checked against what a forecast runs.
#[derive(Debug, Clone, Copy, Default)]
struct Uncounted;

impl TokenCounter for Uncounted {
    fn count(&self, _text: &str, _tokenizer: Tokenizer) -> usize {
        0
    }
}

/// What happens next in the simulation, at a time in milliseconds.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// An attempt finishes.
    Finished { task: String, attempt: u32 },
    /// A retry's backoff has passed.
    Timer { task: String },
}

/// How long a run of `plan` takes when each attempt of a task takes `duration(plan, i)`
/// milliseconds (`plan` is the run's, which a map's items join) and succeeds, reviews are
/// approved at once and no other wait happens (see [`simulated`] for what is assumed of what
/// only outputs decide); `None` when the run cannot start (a cycle) or does not succeed.
pub fn makespan(plan: &Plan, vars: &Vars, duration: &dyn Fn(&Plan, usize) -> u64) -> Option<u64> {
    let mut state = machine::RunState::<Uncounted>::new();
    // The machine builds the graph: the simulated plan keeps every dependency.
    let start = Start { plan: Arc::new(simulated(plan)), vars: vars.clone(), ..Start::default() };
    let mut events = state.process(Command::Start(start)).ok()?;
    let mut due: BinaryHeap<Reverse<(u64, u64, Due)>> = BinaryHeap::new();
    let (mut now, mut order) = (0_u64, 0_u64);
    loop {
        let mut decisions = Vec::new();
        for event in &events {
            match event {
                Event::TaskDispatched { task, attempt, .. } => {
                    let took = state.index_of(task).map_or(0, |i| duration(&state.plan, i));
                    order += 1;
                    due.push(Reverse((now + took, order, Due::Finished { task: task.clone(), attempt: *attempt })));
                }
                Event::RetryScheduled { task, delay_ms, .. } => {
                    order += 1;
                    due.push(Reverse((now + delay_ms, order, Due::Timer { task: task.clone() })));
                }
                Event::ReviewRequested { task, .. } => {
                    decisions.push(Command::Decide { task: task.clone(), approved: true, comment: None });
                }
                _ => {}
            }
        }
        if state.status.is_final() {
            return (state.status == machine::RunStatus::Finished(crate::Outcome::Succeeded)).then_some(now);
        }
        events = Vec::new();
        if decisions.is_empty() {
            let Reverse((at, _, next)) = due.pop()?;
            now = at;
            let command = match next {
                Due::Finished { task, attempt } => {
                    let output = output_of(&state.plan, state.index_of(&task)?, &state.tasks);
                    Command::Succeeded { task, attempt, output, tokens: None, duration_ms: 0 }
                }
                Due::Timer { task } => Command::TimerFired { task },
            };
            decisions.push(command);
        }
        for command in decisions {
            events.extend(state.process(command).ok()?);
        }
        // A review decided while the run had paused for it: go on, as a person's answer does.
        if state.status == machine::RunStatus::Paused {
            events.extend(state.process(Command::Continue).ok()?);
        }
    }
}

/// `plan` as the simulation runs it: what decides when tasks start is kept (dependencies,
/// agents, groups, limits, retries), what only outputs decide is fixed. No input or prompt is
/// rendered (outputs are not known), every condition holds, no output is empty enough to
/// replan, a map has its `max_items` items (one when it has none), and a sub-plan or an expand
/// step runs as one task.
fn simulated(plan: &Plan) -> Plan {
    let mut plan = plan.clone();
    // Every attempt succeeds: an output the simulation leaves empty (an llm task's) asks for no
    // replan, which nothing would answer.
    plan.control.replan_on_empty_result = false;
    for task in &mut plan.tasks {
        task.input = None;
        task.reads.clear();
        if matches!(task.kind, TaskKind::Plan | TaskKind::Expand) {
            task.kind = TaskKind::Task;
        }
        let extras = task.extras_mut();
        extras.prompt = None;
        extras.when = None;
        if let Some(items) = extras.for_each.as_mut() {
            let count = extras.max_items.as_ref().map_or(1, |max| max.value);
            items.value = ForEach::List(vec![serde_json::Value::Null; count as usize]);
        }
    }
    plan
}

/// The output the simulation gives task `i`: a mock agent's first scripted output or its
/// default (its input for `echo`), else nothing.
fn output_of(plan: &Plan, i: usize, tasks: &[machine::TaskState]) -> String {
    let task = &plan.tasks[i];
    let agent = plan.agent_of(task).and_then(|name| plan.agents.get(name));
    let Some(Runtime::Mock { default, responses, .. }) = agent.map(|a| &a.runtime) else { return String::new() };
    let scripted = responses.get(task.id.value.as_str()).and_then(|r| r.first()).map(|r| &r.outcome);
    match scripted {
        Some(MockOutcome::Output(output)) => output.clone(),
        Some(_) => String::new(),
        None if default == "echo" => tasks[i].input.as_deref().unwrap_or_default().to_owned(),
        None => default.clone(),
    }
}
