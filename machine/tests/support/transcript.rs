//! The harness of the rule tables (`tests/rules.rs`): a plan, and a transcript of the steps
//! given to a fresh run of it with the events each one caused.
//!
//! A transcript is lines (indentation and blank lines are not significant). A line starting
//! with `> ` is a step, and the lines up to the next step are the events it caused, one line
//! each as [`line`] writes them, or `refused: ...` when the machine refused the command.
//! [`check`] runs the steps, writes the transcript the machine produced, and fails with a
//! line diff when the two differ. The steps:
//!
//! | step | means |
//! | --- | --- |
//! | `start [eager\|phased\|sequential] [var:NAME=JSON ...] [reuse ID=OUTPUT ...]` | `Command::Start`, with a strategy, vars and outputs taken over |
//! | `ok ID#N [tokens=P+C] [OUTPUT]` | `Succeeded` (output `ok` unless given; `""` is empty) |
//! | `fail ID#N [CLASS] [tokens=P+C] [jitter=J] [ERROR]` | `Failed` (class `agent`, error `boom` unless given) |
//! | `verify ID#N [jitter=J] REASON` | `VerificationFailed` |
//! | `ask ID#N QUESTION` | `NeedsClarification` |
//! | `timer ID` | `TimerFired` |
//! | `answer ID TEXT` | `Answer` |
//! | `approve ID [COMMENT]`, `reject ID [COMMENT]` | `Decide` |
//! | `replan-failed ID REASON` | `ReplanFailed` |
//! | `cancel [REASON]` | `Cancel` (reason `stop` unless given) |
//! | `start growing` | `Start` of a plan a planner is still writing |
//! | `plan LINE TASK_JSON` | `PlanTask`: the task, as JSON, written on that line |
//! | `reject-line LINE CODE REASON` | `RejectLine` |
//! | `close [ERROR]` | `ClosePlan`, with the error when given |
//! | `continue` | `Continue` |
//! | `crash` | the process dies: the state is folded again from the events so far |
//! | `limit N`, `next-slice` | `RunState::limit_dispatches(N)`, `RunState::next_slice` |

use std::fmt::Write as _;
use std::sync::Arc;

use machine::event::{ErrorClass, SkipCause, Tokens};
use machine::tokens::{TokenCounter, Tokenizer};
use machine::{Command, Event, Handler, Start};
use manifest::Plan;
use manifest::plan::Strategy;

/// Counts a text's words as its tokens, so that a budget case can say what a dispatch costs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Words;

impl TokenCounter for Words {
    fn count(&self, text: &str, _tokenizer: Tokenizer) -> usize {
        text.split_whitespace().count()
    }
}

/// The run state of the rule tables.
pub type RunState = machine::RunState<Words>;

/// Runs the steps of `transcript` against a new run of the plan made from `spec` (see
/// [`plan`]) and fails with a diff unless the machine writes the same transcript. After every
/// step the live state must equal the fold of the events so far, and a refused command must
/// leave it as it was.
#[track_caller]
pub fn check(spec: &str, transcript: &str) {
    let plan = plan(spec);
    let expected: Vec<&str> = transcript.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut run = RunState::new();
    let mut log: Vec<Event> = Vec::new();
    let mut actual: Vec<String> = Vec::new();
    for step in expected.iter().filter_map(|l| l.strip_prefix("> ")) {
        actual.push(format!("> {step}"));
        let mut events = Vec::new();
        match parse(step, &plan) {
            Step::Command(command) => {
                let before = run.clone();
                if let Err(error) = run.process_into(*command, &mut events) {
                    assert!(run == before, "the refused `{step}` changed the run");
                    actual.push(format!("refused: {error}"));
                }
            }
            Step::Crash => run = RunState::fold(&log),
            Step::Limit(most) => run.limit_dispatches(most),
            Step::NextSlice => run.next_slice(&mut events),
        }
        actual.extend(events.iter().map(|event| line(event, &run.plan)));
        log.extend(events);
        assert!(RunState::fold(&log) == run, "after `{step}`, the live state is not the fold of its events");
    }
    let actual: Vec<&str> = actual.iter().map(String::as_str).collect();
    if actual != expected {
        panic!(
            "the transcript differs (- expected, + actual):\n{}\nthe whole actual transcript:\n{}",
            diff(&expected, &actual),
            actual.join("\n")
        );
    }
}

/// The plan whose `spec` has one agent, a mock called `m`, and then the fields in `spec`
/// (indented as one block); it must load without errors.
fn plan(spec: &str) -> Arc<Plan> {
    let mut yaml = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: rules}\nspec:\n  mission: rules\n  \
         agent_definitions:\n    m: {runtime: mock}\n",
    );
    let lines: Vec<&str> = spec.lines().filter(|l| !l.trim().is_empty()).collect();
    let indent = lines.iter().map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    for l in lines {
        let _ = writeln!(yaml, "  {}", &l[indent..]);
    }
    let loaded = manifest::load_str("rules.yaml", "rules", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "the plan does not load: {errors:?}\n{yaml}");
    Arc::new(loaded.plan.unwrap_or_else(|| unreachable!("a plan without errors is loaded")))
}

/// What a transcript's step does.
enum Step {
    Command(Box<Command>),
    Crash,
    Limit(usize),
    NextSlice,
}

/// Reads a step (see the module doc); an unreadable step is a mistake in the table.
fn parse(step: &str, plan: &Arc<Plan>) -> Step {
    let (verb, rest) = step.split_once(' ').unwrap_or((step, ""));
    let mut words: Vec<&str> = rest.split_whitespace().collect();
    let command = match verb {
        "start" => start(&words, plan),
        "ok" => {
            let (task, attempt) = attempt_of(&mut words);
            let tokens = option(&mut words, "tokens").map(tokens_of);
            Command::Succeeded { task, attempt, output: text(&words, "ok"), tokens, duration_ms: 0 }
        }
        "fail" => {
            let (task, attempt) = attempt_of(&mut words);
            let class = class_of(&mut words);
            let tokens = option(&mut words, "tokens").map(tokens_of);
            let jitter = option(&mut words, "jitter").map_or(0.0, number);
            Command::Failed { task, attempt, error: text(&words, "boom"), class, tokens, jitter }
        }
        "verify" => {
            let (task, attempt) = attempt_of(&mut words);
            let jitter = option(&mut words, "jitter").map_or(0.0, number);
            Command::VerificationFailed { task, attempt, reason: text(&words, "wrong"), tokens: None, jitter }
        }
        "ask" => {
            let (task, attempt) = attempt_of(&mut words);
            Command::NeedsClarification { task, attempt, question: text(&words, "what?"), tokens: None }
        }
        "timer" => Command::TimerFired { task: first(&mut words) },
        "answer" => Command::Answer { task: first(&mut words), text: text(&words, "") },
        "approve" | "reject" => {
            let task = first(&mut words);
            let comment = (!words.is_empty()).then(|| words.join(" "));
            Command::Decide { task, approved: verb == "approve", comment }
        }
        "replan-failed" => {
            Command::ReplanFailed { task: first(&mut words), reason: text(&words, "no idea"), tokens: None }
        }
        "cancel" => Command::Cancel { reason: text(&words, "stop") },
        "plan" => {
            let line = first(&mut words).parse().unwrap_or_else(|_| panic!("`{step}`: plan LINE TASK_JSON"));
            let text = words.join(" ");
            let task = serde_json::from_str(&text).unwrap_or_else(|e| panic!("`{step}`: the task is not a task: {e}"));
            Command::PlanTask(machine::event::TaskPlanned { line, text, task })
        }
        "reject-line" => {
            let line = first(&mut words).parse().unwrap_or_else(|_| panic!("`{step}`: reject-line LINE CODE REASON"));
            let code = first(&mut words);
            Command::RejectLine { line, task: None, code, reason: text(&words, "unreadable") }
        }
        "close" => {
            let error = (!words.is_empty()).then(|| words.join(" "));
            Command::ClosePlan { error, score: None, findings: Vec::new() }
        }
        "continue" => Command::Continue,
        "crash" => return Step::Crash,
        "limit" => return Step::Limit(text(&words, "").parse().unwrap_or_else(|_| panic!("`{step}`: limit N"))),
        "next-slice" => return Step::NextSlice,
        _ => panic!("unknown step `{step}`"),
    };
    Step::Command(Box::new(command))
}

/// `start [STRATEGY] [var:NAME=JSON ...] [reuse ID=OUTPUT ...]`.
fn start(words: &[&str], plan: &Arc<Plan>) -> Command {
    let mut start = Start::plan(Arc::clone(plan));
    for word in words {
        match *word {
            "eager" => start.strategy = Some(Strategy::Eager),
            "phased" => start.strategy = Some(Strategy::Phased),
            "sequential" => start.strategy = Some(Strategy::Sequential),
            "reuse" => {}
            "growing" => start.growing = Some(machine::event::Growing::default()),
            var if var.starts_with("var:") => {
                let (name, json) =
                    var["var:".len()..].split_once('=').unwrap_or_else(|| panic!("`start {var}`: var:NAME=JSON"));
                let value =
                    serde_json::from_str(json).unwrap_or_else(|_| panic!("`start {var}`: the value is not JSON"));
                start.vars.insert(name.to_owned(), value);
            }
            pair => {
                let (task, output) = pair.split_once('=').unwrap_or_else(|| panic!("`start {pair}`: reuse ID=OUTPUT"));
                start.reuse.insert(task.to_owned(), output.to_owned());
            }
        }
    }
    Command::Start(start)
}

/// Takes the leading `ID#N`.
fn attempt_of(words: &mut Vec<&str>) -> (String, u32) {
    let word = first(words);
    let (task, attempt) = word.split_once('#').unwrap_or_else(|| panic!("`{word}`: expected ID#N"));
    (task.to_owned(), attempt.parse().unwrap_or_else(|_| panic!("`{word}`: expected ID#N")))
}

/// Takes the leading word.
fn first(words: &mut Vec<&str>) -> String {
    assert!(!words.is_empty(), "a step lacks its task");
    words.remove(0).to_owned()
}

/// Takes a leading error class, `agent` when there is none.
fn class_of(words: &mut Vec<&str>) -> ErrorClass {
    let classes = [
        ErrorClass::Timeout,
        ErrorClass::Transient,
        ErrorClass::Agent,
        ErrorClass::Verification,
        ErrorClass::Permanent,
        ErrorClass::Cancelled,
    ];
    match words.first().and_then(|w| classes.into_iter().find(|c| c.as_str() == *w)) {
        Some(class) => {
            words.remove(0);
            class
        }
        None => ErrorClass::Agent,
    }
}

/// Takes the word `NAME=VALUE` and gives its value.
fn option<'a>(words: &mut Vec<&'a str>, name: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| w.split_once('=').is_some_and(|(key, _)| key == name))?;
    words.remove(at).split_once('=').map(|(_, value)| value)
}

/// `P+C` as tokens.
fn tokens_of(value: &str) -> Tokens {
    let (prompt, completion) = value.split_once('+').unwrap_or_else(|| panic!("`tokens={value}`: expected P+C"));
    let count = |n: &str| n.parse().unwrap_or_else(|_| panic!("`tokens={value}`: expected P+C"));
    Tokens { prompt: count(prompt), completion: count(completion) }
}

/// A jitter.
fn number(value: &str) -> f64 {
    value.parse().unwrap_or_else(|_| panic!("`{value}` is not a number"))
}

/// The words left, or `default` when there are none; `""` is the empty text.
fn text(words: &[&str], default: &str) -> String {
    match words.join(" ") {
        rest if rest.is_empty() => default.to_owned(),
        rest if rest == "\"\"" => String::new(),
        rest => rest,
    }
}

/// One event as one line: its name, its task (`ID#N` for an attempt) and what matters about
/// it. A dispatched input is shown only when it is not the task's `input` as written (a
/// template rendered, an answer or a verification's reason appended); tokens only when given.
pub fn line(event: &Event, plan: &Plan) -> String {
    match event {
        Event::RunCreated(_) => "RunCreated".to_owned(),
        Event::TaskReused { task, output, .. } => format!("TaskReused {task} {output:?}"),
        Event::TaskDispatched { task, attempt, input } => {
            let written = plan.tasks.iter().find(|t| t.id.value == task.as_str()).and_then(|t| t.input.as_ref());
            match written {
                Some(written) if written.value.as_str() == &**input => format!("TaskDispatched {task}#{attempt}"),
                _ => format!("TaskDispatched {task}#{attempt} input={input:?}"),
            }
        }
        // Attempt 0 is a map's collected output, which the machine made: it is shown.
        Event::TaskSucceeded { task, attempt: 0, output, .. } => format!("TaskSucceeded {task}#0 {output}"),
        Event::TaskSucceeded { task, attempt, tokens, .. } => {
            format!("TaskSucceeded {task}#{attempt}{}", used(*tokens))
        }
        Event::TaskFailed { task, attempt, error, class, retryable, tokens, .. } => {
            let retryable = if *retryable { " retryable" } else { "" };
            format!("TaskFailed {task}#{attempt} {}{retryable}{}: {error}", class.as_str(), used(*tokens))
        }
        Event::RetryScheduled { task, attempt, delay_ms, backoff_ms } => match backoff_ms {
            Some(backoff) if backoff != delay_ms => {
                format!("RetryScheduled {task}#{attempt} {delay_ms}ms of {backoff}ms")
            }
            _ => format!("RetryScheduled {task}#{attempt} {delay_ms}ms"),
        },
        Event::RetryDue { task } => format!("RetryDue {task}"),
        Event::TaskSkipped { task, reason, cause } => match cause {
            SkipCause::Failure => format!("TaskSkipped {task}: {reason}"),
            SkipCause::Condition => format!("TaskSkipped {task} (condition): {reason}"),
        },
        Event::MapExpanded { task, items } => {
            format!("MapExpanded {task} {}", serde_json::to_string(items).unwrap_or_default())
        }
        Event::ClarificationRequested { task, question, tokens } => {
            format!("ClarificationRequested {task}{}: {question}", used(*tokens))
        }
        Event::ClarificationProvided { task, answer } => format!("ClarificationProvided {task}: {answer}"),
        Event::ReviewRequested { task, prompt, outputs } => {
            let outputs: Vec<String> = outputs.iter().map(|(id, output)| format!("{id}={output:?}")).collect();
            format!("ReviewRequested {task} [{}]: {prompt}", outputs.join(" "))
        }
        Event::ReviewDecided { task, approved, comment } => {
            let decision = if *approved { "approved" } else { "rejected" };
            match comment {
                Some(comment) => format!("ReviewDecided {task} {decision}: {comment}"),
                None => format!("ReviewDecided {task} {decision}"),
            }
        }
        Event::VerificationFailed { task, attempt, reason, tokens, .. } => {
            format!("VerificationFailed {task}#{attempt}{}: {reason}", used(*tokens))
        }
        Event::ContextCompacted(c) => {
            let scope = match c.scope {
                machine::Scope::Summary => "summary",
                machine::Scope::Gate => "gate",
            };
            format!("ContextCompacted {} {scope} by {}: {} -> {} tokens", c.task, c.by, c.tokens_before, c.tokens_after)
        }
        Event::ReplanRequested { task, reason } => format!("ReplanRequested {task}: {reason}"),
        Event::ReplanFailed { task, reason, tokens } => format!("ReplanFailed {task}{}: {reason}", used(*tokens)),
        Event::TaskPlanned(planned) => format!("TaskPlanned {} line {}", planned.task.id.value, planned.line),
        Event::LineRejected { line, task, code, reason } => {
            format!("LineRejected line {line} {} {code}: {reason}", task.as_deref().unwrap_or("-"))
        }
        Event::PlanWritten { error, .. } => match error {
            Some(error) => format!("PlanWritten: {error}"),
            None => "PlanWritten".to_owned(),
        },
        Event::BudgetExhausted { reason } => format!("BudgetExhausted: {reason}"),
        Event::RunPaused { reason } => format!("RunPaused: {reason}"),
        Event::RunResumed => "RunResumed".to_owned(),
        Event::RunCancelled { reason } => format!("RunCancelled: {reason}"),
        Event::RunCompleted { status, summary } => format!("RunCompleted {}: {summary}", status.as_str()),
        // A conversation and a replacement plan come from the commands the tables leave to
        // the engine's tests.
        Event::ModelTurn(_)
        | Event::ToolCallStarted(_)
        | Event::ToolCallFinished(_)
        | Event::ToolApprovalRequested(_)
        | Event::ToolApprovalDecided(_)
        | Event::Replanned(_) => format!("{} {}", event.name(), event.task().unwrap_or_default()),
    }
}

/// ` tokens=P+C`, when tokens were reported.
fn used(tokens: Option<Tokens>) -> String {
    tokens.map_or_else(String::new, |t| format!(" tokens={}+{}", t.prompt, t.completion))
}

/// The lines of `expected` and `actual`, marked `-` where only expected has them and `+` where
/// only actual does (a longest common subsequence).
fn diff(expected: &[&str], actual: &[&str]) -> String {
    let (n, m) = (expected.len(), actual.len());
    // common[i][j]: the longest common subsequence of expected[i..] and actual[j..].
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if expected[i] == actual[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && expected[i] == actual[j] {
            let _ = writeln!(out, "  {}", expected[i]);
            (i, j) = (i + 1, j + 1);
        } else if j == m || (i < n && common[i + 1][j] >= common[i][j + 1]) {
            let _ = writeln!(out, "- {}", expected[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "+ {}", actual[j]);
            j += 1;
        }
    }
    out
}
