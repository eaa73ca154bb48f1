//! The one-line form of a run log's event, `HH:MM:SS.mmm TYPE task details`, as `runner logs`,
//! `runner decide`, the plain live view and the web page's event list show it. Every event
//! has its details here: the `match` below names each one, so a new event does not compile
//! until it says what its line shows.

use engine::event::{
    ContextCompacted, ModelTurn, Replanned, RunCreated, ToolApprovalDecided, ToolApprovalRequested, ToolCallFinished,
};
use engine::{Event, Record, Scope};

/// How much of an input, output or error a line shows.
pub(crate) const PREVIEW: usize = 80;

/// One readable line for a record; inputs and outputs are cut to one short line.
pub fn line(record: &Record) -> String {
    let mut line = String::new();
    write_line(&mut line, record);
    line
}

/// Appends [`line`]'s text for `record` to `out`.
pub(crate) fn write_line(out: &mut String, record: &Record) {
    // `2026-11-22T12:45:03.123Z` -> `12:45:03.123`.
    out.push_str(record.at.get(11..23).unwrap_or(&record.at));
    out.push(' ');
    let event = &record.event;
    // A conversation's turns and tool calls sit indented under their task's lines.
    if in_conversation(event) {
        out.push_str("  ");
    }
    out.push_str(event.name());
    if let Some(task) = event.task() {
        out.push(' ');
        out.push_str(task);
    }
    let details = details(event);
    if !details.is_empty() {
        out.push(' ');
        out.push_str(&details);
    }
}

/// Whether an event is a step inside an llm attempt's conversation.
fn in_conversation(event: &Event) -> bool {
    match event {
        Event::ModelTurn(_)
        | Event::ToolCallStarted(_)
        | Event::ToolCallFinished(_)
        | Event::ToolApprovalRequested(_)
        | Event::ToolApprovalDecided(_) => true,
        Event::RunCreated(_)
        | Event::TaskReused { .. }
        | Event::TaskDispatched { .. }
        | Event::TaskSucceeded { .. }
        | Event::TaskFailed { .. }
        | Event::RetryScheduled { .. }
        | Event::RetryDue { .. }
        | Event::TaskSkipped { .. }
        | Event::MapExpanded { .. }
        | Event::ClarificationRequested { .. }
        | Event::ClarificationProvided { .. }
        | Event::ReviewRequested { .. }
        | Event::ReviewDecided { .. }
        | Event::VerificationFailed { .. }
        | Event::ContextCompacted(_)
        | Event::ReplanRequested { .. }
        | Event::Replanned(_)
        | Event::ReplanFailed { .. }
        | Event::TaskPlanned(_)
        | Event::LineRejected { .. }
        | Event::PlanWritten { .. }
        | Event::BudgetExhausted { .. }
        | Event::RunPaused { .. }
        | Event::RunResumed
        | Event::RunCancelled { .. }
        | Event::RunCompleted { .. } => false,
    }
}

/// What an event says, besides its type and task.
fn details(event: &Event) -> String {
    match event {
        Event::RunCreated(event) => {
            let RunCreated { plan, strategy, retry_of, parent, .. } = &**event;
            let mut retry = retry_of.as_ref().map(|r| format!(", retrying {r}")).unwrap_or_default();
            if let Some(parent) = parent {
                retry.push_str(&format!(", sub-plan of task `{}` of run {}", parent.task, parent.run));
            }
            format!("plan {} ({} tasks, {}{retry})", plan.name, plan.tasks.len(), strategy.as_str())
        }
        Event::TaskReused { output, from: None, .. } => format!("output: {}", preview(output, PREVIEW)),
        Event::TaskReused { output, from: Some(from), .. } => {
            format!("from the cache (run {}, attempt {}) output: {}", from.run, from.attempt, preview(output, PREVIEW))
        }
        Event::TaskPlanned(planned) => {
            let task = &planned.task;
            let agent = task.agent.as_ref().map_or("no agent", |a| a.value.as_str());
            let after: Vec<&str> = task.depends_on.iter().map(|d| d.value.as_str()).collect();
            match after.is_empty() {
                true => format!("line {} ({agent})", planned.line),
                false => format!("line {} ({agent}) after {}", planned.line, after.join(", ")),
            }
        }
        Event::LineRejected { line, code, reason, .. } => format!("line {line} {code}: {}", preview(reason, PREVIEW)),
        Event::PlanWritten { error, score, findings } => {
            let mut text = match error {
                Some(error) => format!("stopped early: {}", preview(error, PREVIEW)),
                None => "complete".to_owned(),
            };
            if let Some(score) = score {
                text.push_str(&format!(", critic score {score:.1}/10"));
            }
            if !findings.is_empty() {
                text.push_str(&format!(", {} finding(s)", findings.len()));
            }
            text
        }
        Event::TaskDispatched { attempt, input, .. } => format!("attempt {attempt} input: {}", preview(input, PREVIEW)),
        Event::TaskSucceeded { attempt, output, duration_ms, .. } => {
            format!("attempt {attempt} in {duration_ms} ms output: {}", preview(output, PREVIEW))
        }
        Event::TaskFailed { attempt, error, class, .. } => {
            format!("attempt {attempt} {} error: {}", class.as_str(), preview(error, PREVIEW))
        }
        Event::RetryScheduled { attempt, delay_ms, backoff_ms, .. } => match backoff_ms {
            Some(backoff) => format!("attempt {attempt} after {delay_ms} ms (backoff {backoff} ms)"),
            None => format!("attempt {attempt} after {delay_ms} ms"),
        },
        Event::RetryDue { .. } | Event::RunResumed => String::new(),
        Event::TaskSkipped { reason, .. } => preview(reason, PREVIEW),
        Event::MapExpanded { items, .. } => format!("{} item(s)", items.len()),
        Event::ClarificationRequested { question, .. } => format!("asks: {}", preview(question, PREVIEW)),
        Event::ClarificationProvided { answer, .. } => format!("answer: {}", preview(answer, PREVIEW)),
        Event::ReviewRequested { prompt, outputs, .. } => {
            format!("of {} output(s): {}", outputs.len(), preview(prompt, PREVIEW))
        }
        Event::ReviewDecided { approved, comment, .. } => {
            let verdict = if *approved { "approved" } else { "rejected" };
            match comment {
                Some(comment) => format!("{verdict}: {}", preview(comment, PREVIEW)),
                None => verdict.to_owned(),
            }
        }
        Event::ModelTurn(event) => {
            let ModelTurn { attempt, turn, content, tool_calls, .. } = &**event;
            let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            let text = content.as_deref().map(|c| preview(c, PREVIEW)).unwrap_or_default();
            match calls.is_empty() {
                true => format!("attempt {attempt} turn {turn}: {text}"),
                false => format!("attempt {attempt} turn {turn} calls {}: {text}", calls.join(", ")),
            }
        }
        Event::ToolCallStarted(call) => format!("{} {}", call.tool, preview(&call.arguments, PREVIEW)),
        Event::ToolCallFinished(event) => {
            let ToolCallFinished { tool, ok, output, .. } = &**event;
            format!("{tool} {}: {}", if *ok { "ok" } else { "failed" }, preview(output, PREVIEW))
        }
        Event::ToolApprovalRequested(event) => {
            let ToolApprovalRequested { tool, arguments, .. } = &**event;
            format!("{tool} waits for approval: {}", preview(arguments, PREVIEW))
        }
        Event::ToolApprovalDecided(event) => {
            let ToolApprovalDecided { tool, approved, comment, .. } = &**event;
            let verdict = if *approved { "approved" } else { "rejected" };
            match comment {
                Some(comment) => format!("{tool} {verdict}: {}", preview(comment, PREVIEW)),
                None => format!("{tool} {verdict}"),
            }
        }
        Event::VerificationFailed { attempt, reason, .. } => format!("attempt {attempt}: {}", preview(reason, PREVIEW)),
        Event::ContextCompacted(event) => {
            let ContextCompacted { scope, by, tokens_before, tokens_after, .. } = &**event;
            let what = match scope {
                Scope::Summary => "context summary",
                Scope::Gate => "gate output",
            };
            format!("{what} {tokens_before} -> {tokens_after} tokens by {by}")
        }
        Event::ReplanRequested { reason, .. } => format!("after: {}", preview(reason, PREVIEW)),
        Event::Replanned(event) => {
            let Replanned { removed, added, score, .. } = &**event;
            format!("removed [{}] added [{}] score {score:.1}", removed.join(", "), added.join(", "))
        }
        Event::ReplanFailed { reason, .. } => preview(reason, PREVIEW),
        Event::RunPaused { reason } | Event::RunCancelled { reason } | Event::BudgetExhausted { reason } => {
            preview(reason, PREVIEW)
        }
        Event::RunCompleted { status, summary } => format!("{}: {}", status.as_str(), preview(summary, PREVIEW)),
    }
}

/// `text` on one line (runs of whitespace become one space), at most `max` characters.
pub fn preview(text: &str, max: usize) -> String {
    // Only the start is read: a preview of a large output costs what its first line does.
    let mut flat = String::new();
    let mut chars = 0;
    let mut more = false;
    'words: for word in text.split_whitespace() {
        for c in (!flat.is_empty()).then_some(' ').into_iter().chain(word.chars()) {
            if chars == max {
                more = true;
                break 'words;
            }
            flat.push(c);
            chars += 1;
        }
    }
    if more {
        let cut = flat.char_indices().nth(max.saturating_sub(1)).map_or(flat.len(), |(at, _)| at);
        flat.truncate(cut);
        flat.push('…');
    }
    format!("{flat:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event: Event) -> Record {
        Record { seq: 1, at: "2026-11-23T12:00:00.000Z".into(), run_id: "r".into(), event }
    }

    #[test]
    fn a_preview_is_one_line_cut_at_its_limit() {
        assert_eq!(preview("  two\n\twords  ", 80), "\"two words\"");
        assert_eq!(preview("abc def", 7), "\"abc def\"");
        assert_eq!(preview("abc def", 6), "\"abc d…\"");
        assert_eq!(preview("ééé ééé", 4), "\"ééé…\"");
        assert_eq!(preview("say \"hi\"", 0), "\"…\"");
        assert_eq!(preview("", 0), "\"\"");
        let large = "word ".repeat(1_000_000);
        assert_eq!(preview(&large, 10), "\"word word…\"");
    }

    #[test]
    fn a_failure_shows_its_class_and_a_retry_its_wait_and_backoff() {
        let failed = Event::TaskFailed {
            task: "a".into(),
            attempt: 1,
            dispatched_seq: Some(2),
            error: "HTTP 503".into(),
            class: engine::event::ErrorClass::Transient,
            retryable: true,
            tokens: None,
        };
        assert_eq!(line(&record(failed)), "12:00:00.000 TaskFailed a attempt 1 transient error: \"HTTP 503\"");
        let retry = Event::RetryScheduled { task: "a".into(), attempt: 2, delay_ms: 700, backoff_ms: Some(1000) };
        assert_eq!(line(&record(retry)), "12:00:00.000 RetryScheduled a attempt 2 after 700 ms (backoff 1000 ms)");
    }
}
