//! `runner plan --lines`: the model writes the plan a line at a time (`planner::lines`). Each
//! line's verdict is printed on stderr and appended to the provenance's `lines.ndjson` as it
//! arrives; lines dropped in the end are the provenance's `problems`. The deterministic
//! planner takes over only when no task line was accepted.

use model::Endpoint;
use planner::author::{Request, Windows};
use planner::lines::{LINE_PROTOCOL_VERSION, LINES_PROMPT_VERSION, LineEvent, LineProblem, Verdict, author_lines};
use serde_json::{Value, json};

use super::Outcome;
use super::author::record_attempts;
use crate::provenance::{self, PlanDir, Provenance};

/// Has the model write the plan a line at a time; the plan (or the model's questions), or,
/// when no task line was accepted, why, with the provenance so far for the fallback.
pub(super) fn write(
    request: &Request,
    windows: &Windows,
    endpoint: &Endpoint,
    runtime: &tokio::runtime::Runtime,
    dir: &PlanDir,
    mut provenance: Provenance,
) -> anyhow::Result<Result<Outcome, (String, Provenance)>> {
    provenance.prompt_version = Some(LINES_PROMPT_VERSION.to_owned());
    provenance.protocol = Some(LINE_PROTOCOL_VERSION.to_owned());
    provenance.candidates = 1;
    let mut trouble: Option<anyhow::Error> = None;
    let mut on_line = |event: LineEvent| {
        let (said, record) = describe(&event);
        eprintln!("{}", dir.redact(&said));
        if let Err(error) = dir.append("lines.ndjson", &record.to_string()) {
            trouble.get_or_insert(error);
        }
    };
    let authored = runtime.block_on(author_lines(request, windows, endpoint, &[], &mut on_line));
    if let Some(error) = trouble {
        return Err(error);
    }
    provenance.questions.clone_from(&authored.questions);
    provenance.problems = authored.problems.iter().map(recorded).collect();
    record_attempts(dir, &authored.attempts, &mut provenance)?;
    if let Some(manifest) = &authored.manifest {
        let tasks = manifest["spec"]["workflow"].as_array().map_or(0, Vec::len);
        if let Some(why) = &authored.failed {
            eprintln!("warning: {why}; the plan holds the {tasks} task(s) accepted before");
            provenance.failed = Some(dir.redact(why));
        }
        if !authored.problems.is_empty() {
            eprintln!(
                "warning: {} line(s) dropped (listed above); the plan holds the other {tasks}",
                authored.problems.len()
            );
        }
        return Ok(Ok(Outcome { yaml: planner::yaml::to_yaml(manifest), provenance }));
    }
    if !authored.questions.is_empty() {
        return Ok(Ok(Outcome { yaml: String::new(), provenance }));
    }
    let why = authored.failed.unwrap_or_else(|| "the model wrote no task line that holds".to_owned());
    Ok(Err((why, provenance)))
}

/// What to print of a line's event, and its record in `lines.ndjson`.
fn describe(event: &LineEvent) -> (String, Value) {
    match event {
        LineEvent::Accepted { line, text, verdict } => taken(*line, text, verdict, "accepted", ""),
        LineEvent::Repaired { line, text, verdict } => taken(*line, text, verdict, "repaired", " after repair"),
        LineEvent::Rejected(problem) => (format!("rejected {problem}"), problem_record(problem, "rejected")),
        LineEvent::Dropped(problem) => (format!("dropped {problem}"), problem_record(problem, "dropped")),
    }
}

/// A line taken as `verdict`.
fn taken(line: usize, text: &str, verdict: &Verdict, event: &str, how: &str) -> (String, Value) {
    let (kind, what, task) = match verdict {
        Verdict::Header => ("header", "header".to_owned(), None),
        Verdict::Task { id, .. } => ("task", format!("task `{id}`"), Some(id.as_str())),
        Verdict::Questions(questions) => ("questions", format!("{} question(s)", questions.len()), None),
        Verdict::Rejected(problem) => return (format!("rejected {problem}"), problem_record(problem, "rejected")),
    };
    let mut record = json!({"line": line, "event": event, "kind": kind, "text": text});
    if let Some(task) = task {
        record["task"] = json!(task);
    }
    (format!("line {line}: {what} accepted{how}"), record)
}

fn problem_record(problem: &LineProblem, event: &str) -> Value {
    let mut record = json!({"line": problem.line, "event": event, "code": problem.code, "message": problem.message});
    if let Some(task) = &problem.task {
        record["task"] = json!(task);
    }
    record
}

fn recorded(problem: &LineProblem) -> provenance::LineProblem {
    provenance::LineProblem {
        line: problem.line,
        task: problem.task.clone(),
        code: problem.code.clone(),
        message: problem.message.clone(),
    }
}
