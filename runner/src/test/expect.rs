//! Checking a scenario's expectations against its run: each failed expectation says what was
//! expected, what happened, and shows the events around it.

use std::sync::Arc;

use engine::{Event, Record, RunState};
use manifest::plan_test::{EventMatch, OutputCheck, TaskExpect};
use model::tokens::{Tokenizer, count};

use super::execute::Ran;
use super::scenario::Scenario;

/// How many events a failure shows around the place it concerns.
const AROUND: usize = 3;

/// One expectation the run did not meet.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    /// The expectation, as the scenario names it (`tasks.search.status`).
    pub what: String,
    /// What it expected.
    pub expected: String,
    /// What happened.
    pub actual: String,
    /// The events around it, one line each.
    pub around: Vec<String>,
}

/// Every expectation of the scenario that the run did not meet, in the order they are written.
pub fn check(scenario: &Scenario, ran: &Ran) -> Vec<Failure> {
    let expect = &scenario.test.expect;
    let mut failures = Vec::new();
    let last = ran.records.len().saturating_sub(1);
    if let Some(status) = &expect.status
        && ran.state.status.as_str() != status.value
    {
        let actual = ran.state.status.as_str().to_owned();
        failures.push(failure("status", &status.value, actual, around(&ran.records, last)));
    }
    for (task, task_expect) in &expect.tasks {
        check_task(scenario, ran, &task.value, task_expect, &mut failures);
    }
    for event in &expect.events {
        check_event(ran, event, &mut failures);
    }
    check_order(ran, &expect.order, &mut failures);
    if let Some(cap) = &expect.max_tokens {
        let used = run_tokens(scenario, ran);
        if used > cap.value {
            failures.push(failure("max_tokens", &format!("at most {}", cap.value), format!("{used} tokens"), vec![]));
        }
    }
    if let Some(makespan) = &expect.makespan
        && ran.makespan > makespan.value.to_std()
    {
        let expected = format!("at most {}", seconds(makespan.value.to_std()));
        failures.push(failure("makespan", &expected, seconds(ran.makespan), around(&ran.records, last)));
    }
    for code in &expect.reported {
        if !scenario.findings.contains(&code.value) {
            let actual = found_codes(scenario);
            failures.push(failure("critic.reported", &format!("`{}` reported", code.value), actual, vec![]));
        }
    }
    for code in &expect.not_reported {
        if scenario.findings.contains(&code.value) {
            let expected = format!("`{}` not reported", code.value);
            failures.push(failure("critic.not_reported", &expected, found_codes(scenario), vec![]));
        }
    }
    failures
}

fn failure(what: &str, expected: &str, actual: String, around: Vec<String>) -> Failure {
    Failure { what: what.to_owned(), expected: expected.to_owned(), actual, around }
}

fn check_task(scenario: &Scenario, ran: &Ran, task: &str, expect: &TaskExpect, failures: &mut Vec<Failure>) {
    // The events around a child's task are those around the parent's task that started it.
    let top = task.split_once('/').map_or(task, |(head, _)| head);
    let mine =
        |r: &&Record| r.event.task().is_some_and(|t| t == top || manifest::template::map_of_item(t) == Some(top));
    let last = ran.records.iter().rposition(|r| mine(&r)).unwrap_or(ran.records.len().saturating_sub(1));
    let context = || around(&ran.records, last);
    let top = Run { id: &scenario.test.name, plan: &scenario.plan, state: &ran.state, records: &ran.records };
    let prompts = expect.max_prompt_tokens.is_some() || expect.min_prompt_tokens.is_some();
    for (name, found) in find(ran, top, task, prompts) {
        let what = |field: &str| format!("tasks.{name}.{field}");
        let Some(seen) = found else {
            let actual = if name.contains('/') { "no run has such a task" } else { "the run has no such task" };
            failures.push(failure(&what("status"), "the task to exist", actual.into(), context()));
            continue;
        };
        check_seen(&seen, expect, &what, &context, failures);
    }
}

/// Checks what one task came to against `expect`.
fn check_seen(
    seen: &Seen,
    expect: &TaskExpect,
    what: &dyn Fn(&str) -> String,
    context: &dyn Fn() -> Vec<String>,
    failures: &mut Vec<Failure>,
) {
    if let Some(status) = &expect.status
        && seen.status != status.value
    {
        failures.push(failure(&what("status"), &status.value, seen.status.to_owned(), context()));
    }
    if let Some(attempts) = &expect.attempts
        && seen.attempts != attempts.value
    {
        failures.push(failure(&what("attempts"), &attempts.value.to_string(), seen.attempts.to_string(), context()));
    }
    let output = seen.output.as_deref();
    for check in &expect.output {
        if let Some((expected, actual)) = check_output(&check.value, output) {
            failures.push(failure(&what("output"), &expected, actual, context()));
        }
    }
    let most = seen.largest_prompt;
    if let Some(cap) = expect.max_prompt_tokens.as_ref().filter(|cap| most > cap.value) {
        let expected = format!("at most {} tokens", cap.value);
        failures.push(failure(&what("max_prompt_tokens"), &expected, format!("{most} tokens"), context()));
    }
    if let Some(floor) = expect.min_prompt_tokens.as_ref().filter(|floor| most < floor.value) {
        let expected = format!("at least {} tokens", floor.value);
        failures.push(failure(&what("min_prompt_tokens"), &expected, format!("{most} tokens"), context()));
    }
}

/// One run of a scenario: the scenario's own, or a child run.
#[derive(Clone, Copy)]
struct Run<'a> {
    id: &'a str,
    /// The plan whose agents count a task's tokens.
    plan: &'a manifest::Plan,
    state: &'a RunState,
    records: &'a [Record],
}

/// The tasks `name` stands for in `run`, each named as an expectation names it and with what
/// it came to (with its largest prompt when `prompts`), or `None` when there is no such task.
/// A name `TASK/CHILD_TASK` is read in the child run that TASK started last; when TASK is a
/// map, in the child run of each of its items.
fn find(ran: &Ran, run: Run<'_>, name: &str, prompts: bool) -> Vec<(String, Option<Seen>)> {
    if let Some(mut seen) = seen(run.state, run.records, name) {
        if prompts {
            seen.largest_prompt = largest_prompt(run.plan, run.records, name);
        }
        return vec![(name.to_owned(), Some(seen))];
    }
    let Some((head, rest)) = name.split_once('/') else { return vec![(name.to_owned(), None)] };
    let items: Vec<&str> = run
        .state
        .plan
        .tasks
        .iter()
        .map(|t| t.id.value.as_str())
        .filter(|id| manifest::template::map_of_item(id) == Some(head))
        .collect();
    let tasks = if items.is_empty() { vec![head] } else { items };
    let mut all = Vec::new();
    for task in tasks {
        match ran.children.child_of(run.id, run.state, task) {
            Some((id, state, records)) => {
                let child = Run { id: &id, plan: &state.plan, state: &state, records: &records };
                all.extend(
                    find(ran, child, rest, prompts).into_iter().map(|(name, seen)| (format!("{task}/{name}"), seen)),
                );
            }
            None => all.push((format!("{task}/{rest}"), None)),
        }
    }
    all
}

/// The tokens of the largest rendered input of `task` in a run of `plan` with `records`.
fn largest_prompt(plan: &manifest::Plan, records: &[Record], task: &str) -> u64 {
    let tokenizer = tokenizer_of(plan, task);
    let inputs = records.iter().filter_map(|r| match &r.event {
        Event::TaskDispatched { task: t, input, .. } if t == task => Some(count(input, tokenizer)),
        _ => None,
    });
    inputs.max().unwrap_or(0) as u64
}

/// What an output check expected and what it found, when they differ.
fn check_output(check: &OutputCheck, output: Option<&str>) -> Option<(String, String)> {
    let shown = || output.map_or_else(|| "no output".to_owned(), |o| format!("{o:?}"));
    let Some(text) = output else {
        return Some((describe(check), shown()));
    };
    let holds = match check {
        OutputCheck::Equals(expected) => text == expected,
        OutputCheck::Contains(part) => text.contains(part.as_str()),
        OutputCheck::Matches(pattern) => match regex::Regex::new(pattern) {
            Ok(regex) => regex.is_match(text),
            Err(error) => return Some((describe(check), format!("an invalid regular expression: {error}"))),
        },
        OutputCheck::Pointer(pointer, value) => {
            let found = manifest::find_json(text).ok().and_then(|f| f.value.pointer(pointer).cloned());
            return match found {
                Some(found) if &found == value => None,
                Some(found) => Some((describe(check), format!("`{pointer}` is {found}"))),
                None => Some((describe(check), format!("no `{pointer}` in {}", shown()))),
            };
        }
    };
    (!holds).then(|| (describe(check), shown()))
}

fn describe(check: &OutputCheck) -> String {
    match check {
        OutputCheck::Equals(text) => format!("exactly {text:?}"),
        OutputCheck::Contains(text) => format!("containing {text:?}"),
        OutputCheck::Matches(pattern) => format!("matching /{pattern}/"),
        OutputCheck::Pointer(pointer, value) => format!("`{pointer}` equal to {value}"),
    }
}

/// A task as the run left it: from the final state, or, for a task a replan replaced, from
/// its events.
struct Seen {
    status: &'static str,
    attempts: u32,
    output: Option<Arc<str>>,
    /// The tokens of its largest rendered input, when an expectation asks.
    largest_prompt: u64,
}

fn seen(state: &RunState, records: &[Record], task: &str) -> Option<Seen> {
    if let Some(i) = state.index_of(task) {
        let state = &state.tasks[i];
        let (status, attempts, output) = (state.status.as_str(), state.attempts, state.output.clone());
        return Some(Seen { status, attempts, output, largest_prompt: 0 });
    }
    let mut seen = Seen { status: "replaced", attempts: 0, output: None, largest_prompt: 0 };
    let mut any = false;
    for record in records.iter().filter(|r| r.event.task() == Some(task)) {
        any = true;
        match &record.event {
            Event::TaskDispatched { .. } => seen.attempts += 1,
            Event::TaskSucceeded { output, .. } => seen.output = Some(output.clone()),
            _ => {}
        }
    }
    any.then_some(seen)
}

fn matches(record: &Record, event: &EventMatch) -> bool {
    if record.event.name() != event.kind
        || event.task.as_ref().is_some_and(|task| record.event.task() != Some(task.value.as_str()))
    {
        return false;
    }
    if event.tool.is_none() && event.arguments.is_none() {
        return true;
    }
    // Only tool calls and their approvals have these fields; they are read from the record's JSON.
    let Ok(value) = serde_json::to_value(&record.event) else { return false };
    let tool = event.tool.as_ref().is_none_or(|tool| value["tool"] == tool.value.as_str());
    let arguments = event.arguments.as_ref().is_none_or(|expected| {
        value["arguments"].as_str().and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok()).as_ref()
            == Some(expected)
    });
    tool && arguments
}

fn check_event(ran: &Ran, event: &EventMatch, failures: &mut Vec<Failure>) {
    let found = ran.records.iter().position(|r| matches(r, event));
    match (found, event.absent) {
        (Some(at), true) => {
            let expected = format!("no {}", event.describe());
            let actual = format!("{} at #{}", event.describe(), ran.records[at].seq);
            failures.push(failure("events", &expected, actual, around(&ran.records, at)));
        }
        (None, false) => {
            let last = ran.records.len().saturating_sub(1);
            failures.push(failure("events", &event.describe(), "it never occurred".into(), around(&ran.records, last)));
        }
        _ => {}
    }
}

/// The events of `order` must occur in that order (others may come between).
fn check_order(ran: &Ran, order: &[EventMatch], failures: &mut Vec<Failure>) {
    let mut next = 0;
    let mut at = 0;
    for (i, record) in ran.records.iter().enumerate() {
        if next < order.len() && matches(record, &order[next]) {
            next += 1;
            at = i;
        }
    }
    if next == order.len() {
        return;
    }
    let expected: Vec<String> = order.iter().map(EventMatch::describe).collect();
    let missing = &order[next];
    let actual = match ran.records.iter().position(|r| matches(r, missing)) {
        Some(i) => format!("{} came at #{}, before the ones ahead of it", missing.describe(), ran.records[i].seq),
        None => format!("{} never occurred", missing.describe()),
    };
    failures.push(failure("order", &expected.join(" -> "), actual, around(&ran.records, at)));
}

/// Tokens the run used: every rendered input plus every output, counted with each task's
/// tokenizer (scripted agents report none of their own).
fn run_tokens(scenario: &Scenario, ran: &Ran) -> u64 {
    let counted: usize = ran
        .records
        .iter()
        .map(|r| match &r.event {
            Event::TaskDispatched { task, input, .. } => count(input, tokenizer_of(&scenario.plan, task)),
            Event::TaskSucceeded { task, output, .. } => count(output, tokenizer_of(&scenario.plan, task)),
            _ => 0,
        })
        .sum();
    counted as u64
}

fn tokenizer_of(plan: &manifest::Plan, task: &str) -> Tokenizer {
    let agent = plan.tasks.iter().find(|t| t.id.value == task).and_then(|t| plan.agent_of(t));
    Tokenizer::of_agent(plan, agent)
}

fn found_codes(scenario: &Scenario) -> String {
    if scenario.findings.is_empty() {
        return "no findings".to_owned();
    }
    let mut codes = scenario.findings.clone();
    codes.sort();
    codes.dedup();
    format!("findings: {}", codes.join(", "))
}

/// The events around record `at`, one line each: `#seq time Type(task)`.
fn around(records: &[Record], at: usize) -> Vec<String> {
    let from = at.saturating_sub(AROUND);
    let to = (at + AROUND + 1).min(records.len());
    records[from.min(to)..to].iter().map(line).collect()
}

/// One record as a line: sequence, virtual time of day, type and task.
pub fn line(record: &Record) -> String {
    let time = record.at.get(11..23).unwrap_or(&record.at);
    match record.event.task() {
        Some(task) => format!("#{} {time} {}({task})", record.seq, record.event.name()),
        None => format!("#{} {time} {}", record.seq, record.event.name()),
    }
}

/// A duration as seconds with up to three decimals.
fn seconds(duration: std::time::Duration) -> String {
    format!("{}s", duration.as_millis() as f64 / 1000.0)
}
