//! The `tracing` span of a model request, with the field names of OpenTelemetry's GenAI
//! conventions, so an exporter passes them on as they are. Prompts and answers are recorded
//! only when [`include_content`] lets them in.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::Empty;
use tracing::{Span, info_span};

use crate::protocol::Usage;

/// Whether model-request spans carry the prompts and answers.
static CONTENT: AtomicBool = AtomicBool::new(false);

/// Lets prompts and answers into model-request spans, or keeps them out (the default: they
/// hold whatever the plan's data holds).
pub fn include_content(yes: bool) {
    CONTENT.store(yes, Ordering::Relaxed);
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
