//! Test support: a local server that speaks the OpenAI chat-completions protocol with
//! scripted replies, for the tests and benchmarks of the `llm` runtime.
//!
//! [`FakeOpenAi`] runs on its own thread with its own tokio runtime, so synchronous tests,
//! async tests and other processes can all talk to it over real HTTP. Each request to
//! `POST /v1/chat/completions` is recorded ([`Recorded`]) and answered with the [`Step`] a
//! responder chooses; `GET /v1/models` answers what [`FakeOpenAi::serve_models`] set.
//! [`OtlpReceiver`] is a collector that keeps the OTLP trace exports it receives.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::background::Background;

pub mod api;
mod background;
pub mod lsp;
mod otlp;
pub mod pg;
pub mod process;
mod real_server;

pub use otlp::{Export, OtlpReceiver};

pub use real_server::{JSON_MODEL, RealServer, TOOLS_MODEL, real_server};

/// The text in a response (a body, an answer, tool-call arguments) that the server replaces with
/// the request's `Authorization` header, to test that clients never leak what a server echoes.
pub const AUTHORIZATION_ECHO: &str = "{{authorization}}";

/// Tokens reported in `usage` for every answer: prompt tokens.
pub const PROMPT_TOKENS: u64 = 10;
/// Tokens reported in `usage` for every answer: completion tokens.
pub const COMPLETION_TOKENS: u64 = 5;

/// How the server answers one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A final assistant message with this content, and `usage` of [`PROMPT_TOKENS`] and
    /// [`COMPLETION_TOKENS`].
    Answer(String),
    /// An assistant message calling tools: `(name, arguments as a JSON string)`, with ids
    /// `call_<request>_<index>` and the same `usage` as an answer.
    ToolCalls(Vec<(String, String)>),
    /// An error status with this body and, if set, a `Retry-After` header in seconds.
    Status {
        /// The HTTP status code.
        code: u16,
        /// The response body.
        body: String,
        /// The `Retry-After` header, in seconds.
        retry_after: Option<u64>,
    },
    /// `200 OK` with exactly this body, to test malformed responses.
    Raw(String),
    /// A streamed answer: `text/event-stream` with one `data:` chunk per piece
    /// (`choices[0].delta.content`), a last chunk with `usage`, then `data: [DONE]`. The whole
    /// stream is sent at once.
    Stream(Vec<String>),
    /// A streamed answer whose events are sent one by one, `gap` apart: the first event
    /// (the role) at once, then one per piece, the last one, the usage and `[DONE]`.
    SlowStream(Vec<String>, Duration),
    /// A stream that breaks off: `200 OK` and `text/event-stream`, one event per piece, then
    /// the body ends with no finish reason and no `[DONE]` (no pieces: an empty body, which is
    /// how llama-cpp-python answers when it fails after sending its headers).
    BrokenStream(Vec<String>),
    /// A streamed answer calling tools, each call's arguments split in two pieces, with the
    /// same `usage` as an answer.
    StreamToolCalls(Vec<(String, String)>),
    /// A final answer cut at the token limit: `finish_reason: "length"`, with `usage`.
    Truncated(String),
    /// Answers with the inner step, naming this model in the response instead of the one
    /// asked for.
    As(String, Box<Step>),
    /// Never answers.
    Hang,
    /// Waits, then answers with the inner step.
    Delay(Duration, Box<Step>),
    /// Answers with the inner step without any `usage`, as llama-cpp-python's server does when
    /// it streams (it ignores `stream_options.include_usage`).
    Unmetered(Box<Step>),
    /// Answers with the inner step, reporting this `usage` (prompt, completion) instead of
    /// [`PROMPT_TOKENS`] and [`COMPLETION_TOKENS`].
    Metered(u64, u64, Box<Step>),
    /// Waits until this many requests have arrived in all (this one included), then answers
    /// with the inner step: requests that may overlap then do, however busy the machine, so a
    /// test can count them in flight without timing. Gives up waiting after [`TOGETHER_WAIT`].
    Together(usize, Box<Step>),
}

/// How long a [`Step::Together`] waits for the others before it answers anyway (a test whose
/// requests never overlap then fails on its count instead of hanging).
pub const TOGETHER_WAIT: Duration = Duration::from_secs(30);

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The JSON body.
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

type Responder = dyn Fn(&Value, usize) -> Step + Send + Sync;

struct Shared {
    responder: Box<Responder>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    arrived: tokio::sync::Notify,
    models: Mutex<Option<Value>>,
}

/// A scripted OpenAI-compatible server on `127.0.0.1`, shut down when dropped.
pub struct FakeOpenAi {
    server: Background,
    shared: Arc<Shared>,
}

impl FakeOpenAi {
    /// Starts a server that answers request number `n` (from 0) with `responder(body, n)`.
    ///
    /// # Panics
    /// When no local port can be bound or no runtime built: the test cannot go on.
    pub fn start(responder: impl Fn(&Value, usize) -> Step + Send + Sync + 'static) -> Self {
        let shared = Arc::new(Shared {
            responder: Box::new(responder),
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            arrived: tokio::sync::Notify::new(),
            models: Mutex::new(None),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/models", get(models))
            .with_state(Arc::clone(&shared));
        FakeOpenAi { server: Background::serve(app), shared }
    }

    /// Starts a server that answers with `steps` in order, repeating the last one (an empty
    /// script answers `500`).
    pub fn script(steps: Vec<Step>) -> Self {
        FakeOpenAi::start(move |_, n| match steps.get(n).or_else(|| steps.last()) {
            Some(step) => step.clone(),
            None => Step::Status { code: 500, body: "empty script".to_owned(), retry_after: None },
        })
    }

    /// The base URL to configure a provider with, ending in `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.address)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Answers `GET /v1/models` with `body` from now on (until then it answers `404`).
    pub fn serve_models(&self, body: Value) {
        *self.shared.models.lock().unwrap_or_else(PoisonError::into_inner) = Some(body);
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }
}

/// Counts a request in flight until dropped.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Returns once `count` requests have arrived, or after [`TOGETHER_WAIT`].
async fn wait_for_arrivals(shared: &Shared, count: usize) {
    let deadline = tokio::time::Instant::now() + TOGETHER_WAIT;
    loop {
        // Registered before the count is read, so an arrival in between is not missed.
        let arrived = shared.arrived.notified();
        if shared.requests.lock().unwrap_or_else(PoisonError::into_inner).len() >= count {
            return;
        }
        tokio::select! {
            () = arrived => {}
            () = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// Answers `GET /v1/models` with the listing set by [`FakeOpenAi::serve_models`], or 404.
async fn models(State(shared): State<Arc<Shared>>) -> Response {
    match shared.models.lock().unwrap_or_else(PoisonError::into_inner).clone() {
        Some(body) => axum::Json(body).into_response(),
        None => (StatusCode::NOT_FOUND, "no models route").into_response(),
    }
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return (StatusCode::BAD_REQUEST, format!("the body is not JSON: {error}")).into_response(),
    };
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let number = {
        let mut requests = shared.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.push(Recorded { body: body.clone(), authorization: authorization.clone() });
        requests.len() - 1
    };
    shared.arrived.notify_waiters();
    let mut step = (shared.responder)(&body, number);
    let mut model = body.get("model").cloned().unwrap_or(Value::Null);
    let mut metered = true;
    let (mut prompt_tokens, mut completion_tokens) = (PROMPT_TOKENS, COMPLETION_TOKENS);
    let step = loop {
        step = match step {
            Step::Delay(pause, inner) => {
                tokio::time::sleep(pause).await;
                *inner
            }
            Step::Together(count, inner) => {
                wait_for_arrivals(&shared, count).await;
                *inner
            }
            Step::As(name, inner) => {
                model = Value::String(name);
                *inner
            }
            Step::Unmetered(inner) => {
                metered = false;
                *inner
            }
            Step::Metered(prompt, completion, inner) => {
                (prompt_tokens, completion_tokens) = (prompt, completion);
                *inner
            }
            other => break other,
        }
    };
    let echo = |text: String| text.replace(AUTHORIZATION_ECHO, authorization.as_deref().unwrap_or(""));
    let usage = metered.then(|| {
        json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        })
    });
    let completion = |message: Value, finish: &str| {
        let mut body = json!({
            "id": format!("chatcmpl-{number}"),
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        });
        if let Some(usage) = &usage {
            body["usage"] = usage.clone();
        }
        axum::Json(body).into_response()
    };
    match step {
        Step::Answer(content) => completion(json!({"role": "assistant", "content": echo(content)}), "stop"),
        Step::Truncated(content) => completion(json!({"role": "assistant", "content": echo(content)}), "length"),
        Step::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    json!({
                        "id": format!("call_{number}_{i}"),
                        "type": "function",
                        "function": {"name": name, "arguments": echo(arguments)},
                    })
                })
                .collect();
            completion(json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
        }
        Step::Status { code, body, retry_after } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (status, echo(body)).into_response();
            if let Some(seconds) = retry_after {
                response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
            }
            response
        }
        Step::Stream(pieces) => {
            let mut events = vec![chunk(&model, number, json!({"role": "assistant", "content": ""}), Value::Null)];
            events.extend(
                pieces.into_iter().map(|piece| chunk(&model, number, json!({"content": echo(piece)}), Value::Null)),
            );
            events.extend(ending(&model, number, "stop", &usage));
            event_stream(events.concat(), Vec::new(), Duration::ZERO)
        }
        Step::SlowStream(pieces, gap) => {
            let first = chunk(&model, number, json!({"role": "assistant", "content": ""}), Value::Null);
            let mut rest: Vec<String> = pieces
                .into_iter()
                .map(|piece| chunk(&model, number, json!({"content": echo(piece)}), Value::Null))
                .collect();
            rest.push(ending(&model, number, "stop", &usage).concat());
            event_stream(first, rest, gap)
        }
        Step::BrokenStream(pieces) => {
            let events =
                pieces.into_iter().map(|piece| chunk(&model, number, json!({"content": echo(piece)}), Value::Null));
            event_stream(events.collect::<Vec<_>>().concat(), Vec::new(), Duration::ZERO)
        }
        Step::StreamToolCalls(calls) => {
            let mut events = vec![chunk(&model, number, json!({"role": "assistant", "content": null}), Value::Null)];
            for (i, (name, arguments)) in calls.into_iter().enumerate() {
                let arguments = echo(arguments);
                let (head, tail) = arguments.split_at(arguments.len() / 2);
                let first = json!({"tool_calls": [{"index": i, "id": format!("call_{number}_{i}"), "type": "function",
                    "function": {"name": name, "arguments": head}}]});
                events.push(chunk(&model, number, first, Value::Null));
                let second = json!({"tool_calls": [{"index": i, "function": {"arguments": tail}}]});
                events.push(chunk(&model, number, second, Value::Null));
            }
            events.extend(ending(&model, number, "tool_calls", &usage));
            event_stream(events.concat(), Vec::new(), Duration::ZERO)
        }
        Step::Raw(text) => ([(header::CONTENT_TYPE, "application/json")], echo(text)).into_response(),
        Step::Hang => std::future::pending().await,
        Step::Delay(..) | Step::Together(..) | Step::As(..) | Step::Unmetered(..) | Step::Metered(..) => {
            unreachable!("waits and renamings are unwrapped above")
        }
    }
}

/// One `data:` event of a streamed completion.
fn chunk(model: &Value, number: usize, delta: Value, finish: Value) -> String {
    let chunk = json!({
        "id": format!("chatcmpl-{number}"),
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// The last events of a stream: the finish reason, the usage if there is one, `[DONE]`.
fn ending(model: &Value, number: usize, finish: &str, usage: &Option<Value>) -> Vec<String> {
    let mut events = vec![chunk(model, number, json!({}), json!(finish))];
    if let Some(usage) = usage {
        let mut last = json!({"id": format!("chatcmpl-{number}"), "object": "chat.completion.chunk", "model": model});
        last["choices"] = json!([]);
        last["usage"] = usage.clone();
        events.push(format!("data: {last}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// A `text/event-stream` response: `first` at once, then each of `rest` after `gap`.
fn event_stream(first: String, rest: Vec<String>, gap: Duration) -> Response {
    let (mut writer, reader) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        if writer.write_all(first.as_bytes()).await.is_err() {
            return;
        }
        for event in rest {
            tokio::time::sleep(gap).await;
            if writer.write_all(event.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(reader));
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}
