//! The `tracing` spans the engine opens for an operator's tools: a run, a task, an attempt,
//! a model request, a tool call, a verification and a replan. Model requests carry the field
//! names of OpenTelemetry's GenAI conventions, so an exporter passes them on as they are.
//! No span records a prompt, an output or a key.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::Empty;
use tracing::{Span, info_span};

use crate::Command;
use crate::llm::protocol::Usage;

/// Whether model-request spans carry the prompts and answers.
static CONTENT: AtomicBool = AtomicBool::new(false);

/// Lets prompts and answers into model-request spans, or keeps them out (the default: they
/// hold whatever the plan's data holds).
pub fn include_content(yes: bool) {
    CONTENT.store(yes, Ordering::Relaxed);
}

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

/// The span of one chat request to a model (with its retries), named as the GenAI
/// conventions name it: `chat {model}`.
pub fn model_request(provider: &str, model: &str, streamed: bool) -> Span {
    info_span!(
        "model_request",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.system = "openai",
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        provider,
        streamed,
        error.type = Empty
    )
}

/// Records a model's answer on its request's span: the model that answered and the tokens
/// the server counted, or the class of the error.
pub fn model_answered(span: &Span, model: Option<&str>, usage: Option<&Usage>, error: Option<&str>) {
    if let Some(model) = model {
        span.record("gen_ai.response.model", model);
    }
    if let Some(usage) = usage {
        if let Some(input) = usage.prompt_tokens {
            span.record("gen_ai.usage.input_tokens", input);
        }
        if let Some(output) = usage.completion_tokens {
            span.record("gen_ai.usage.output_tokens", output);
        }
    }
    if let Some(error) = error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", error);
    }
}

/// Records the messages sent and the answer's text on a model request's span, when content is
/// included (see [`include_content`]); the closures are only called then.
pub fn model_content(span: &Span, messages: impl FnOnce() -> String, answer: impl FnOnce() -> Option<String>) {
    if !CONTENT.load(Ordering::Relaxed) {
        return;
    }
    span.record("gen_ai.input.messages", messages());
    if let Some(answer) = answer() {
        span.record("gen_ai.output.messages", answer);
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
