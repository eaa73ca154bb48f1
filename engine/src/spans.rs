//! The `tracing` spans the engine opens for an operator's tools: a run, a task, an attempt,
//! a tool call, a verification and a replan (a model request's span is opened by the `model`
//! crate, in `model::spans`).
//! No span records a prompt, an output or a key.

use tracing::field::Empty;
use tracing::{Span, info_span};

use crate::Command;

/// The span of a whole run; every span the run opens nests in it.
pub fn run(run_id: &str, plan: &str) -> Span {
    info_span!("run", run_id, plan, status = Empty)
}

/// The span of one task, from its first dispatch to its end, across its attempts.
pub fn task(task: &str, agent: &str) -> Span {
    info_span!("task", task, agent, status = Empty)
}

/// The span of one attempt of a task, inside `parent` (the task's span).
pub fn attempt(parent: &Span, task: &str, attempt: u32) -> Span {
    info_span!(
        parent: parent,
        "attempt",
        task,
        attempt,
        status = Empty,
        tokens.prompt = Empty,
        tokens.completion = Empty,
        error.type = Empty
    )
}

/// Records on an attempt's span what the attempt came to, from the command that reports it.
pub fn attempt_ended(span: &Span, report: &Command) {
    let (status, tokens) = match report {
        Command::Succeeded { tokens, .. } => ("succeeded", tokens),
        Command::Failed { class, tokens, .. } => {
            span.record("error.type", class.as_str());
            ("failed", tokens)
        }
        Command::VerificationFailed { tokens, .. } => ("verification_failed", tokens),
        Command::NeedsClarification { tokens, .. } => ("asked", tokens),
        _ => return,
    };
    span.record("status", status);
    if let Some(tokens) = tokens {
        span.record("tokens.prompt", tokens.prompt);
        span.record("tokens.completion", tokens.completion);
    }
}

/// The span of one tool call a model asked for.
pub fn tool_call(tool: &str) -> Span {
    info_span!("tool_call", otel.name = format!("execute_tool {tool}"), gen_ai.tool.name = tool, outcome = Empty)
}

/// The span of a task's verification.
pub fn verification(task: &str, kind: &str) -> Span {
    info_span!("verification", task, kind, passed = Empty)
}

/// The span of a replan: the planner asked for tasks to replace a failed one.
pub fn replan(task: &str) -> Span {
    info_span!("replan", task, outcome = Empty)
}
