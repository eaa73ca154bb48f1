//! One provider's endpoint: the HTTP request, its limits, timeouts and retries.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use manifest::plan::Provider;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use tracing::Instrument as _;

use super::error::LlmError;
use super::limiter::{Limiter, SharedWindow};
use super::protocol::{
    AssistantMessage, Body, ChatRequest, ChatResponse, FunctionCall, Sampling, StreamChunk, ToolCall, Usage,
};
use super::redact::{Redactor, excerpt};
use crate::spans;

/// How much of a server's body an error quotes.
const EXCERPT_CHARS: usize = 500;
/// The largest body read from a server.
const BODY_CAP: usize = 16 * 1024 * 1024;
/// The longest wait a `Retry-After` header can ask for.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// Tries after the first one, for errors the runtime retries itself.
const RETRIES: usize = 2;
/// The first wait between tries.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A provider's chat-completions endpoint, shared by every agent on the provider. Its `Debug`
/// never shows the key.
pub struct Endpoint {
    /// The provider's name, for messages.
    pub name: String,
    url: String,
    key: Option<String>,
    /// The limit of an unstreamed request.
    timeout: Duration,
    /// The limit of a whole streamed request, when the provider sets `timeout`.
    stream_timeout: Option<Duration>,
    /// The longest wait for the answer to begin or for its next event.
    idle_timeout: Duration,
    /// Whether agents' requests are streamed.
    stream: bool,
    limiter: Limiter,
    http: reqwest::Client,
    /// Redacts the provider's API key.
    pub redactor: Redactor,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("stream", &self.stream)
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

/// One answer of the model, streamed or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the model said.
    pub message: AssistantMessage,
    /// Why it stopped, when the server says.
    pub finish_reason: Option<String>,
    /// Tokens used, when the server reports them.
    pub usage: Option<Usage>,
    /// The model that answered, when the server says.
    pub model: Option<String>,
}

impl Endpoint {
    /// The endpoint of the plan's provider `name` at `{base_url}/chat/completions`, sharing
    /// `http`.
    pub fn new(name: &str, provider: &Provider, key: Option<String>, http: reqwest::Client) -> Self {
        Endpoint {
            name: name.to_owned(),
            url: format!("{}/chat/completions", provider.base_url.trim_end_matches('/')),
            redactor: Redactor::new(key.as_deref()),
            key,
            timeout: provider.timeout.map_or(super::DEFAULT_TIMEOUT, |t| t.to_std()),
            stream_timeout: provider.timeout.map(|t| t.to_std()),
            idle_timeout: provider.idle_timeout.map_or(super::DEFAULT_IDLE_TIMEOUT, |t| t.to_std()),
            stream: provider.stream.unwrap_or(true),
            limiter: Limiter::new(provider.max_concurrency, provider.requests_per_minute),
            http,
        }
    }

    /// This endpoint with its `requests_per_minute` counted in `window`, with every other
    /// process that sends requests of the same run.
    pub fn sharing(self, window: Arc<dyn SharedWindow>) -> Self {
        let limiter = self.limiter.shared(window, &self.name);
        Endpoint { limiter, ..self }
    }

    /// An endpoint for the plan's provider `name`, with its own HTTP client, limiter and
    /// timeout ([`DEFAULT_TIMEOUT`](super::DEFAULT_TIMEOUT) when the provider sets none).
    pub fn for_provider(name: &str, provider: &Provider, key: Option<String>) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| LlmError::Client(error.to_string()))?;
        Ok(Endpoint::new(name, provider, key, http))
    }

    /// One answer for an agent: streamed unless the provider sets `stream: false`, so that
    /// a live server is waited for as long as it sends events and a silent one is given up
    /// after `idle_timeout`. Retries as [`complete_with`](Self::complete_with) does.
    pub async fn answer(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<Answer, LlmError> {
        if self.stream {
            return self.stream_answer(request, sampling, None).await;
        }
        let response = self.complete_with(request, sampling).await?;
        let (model, usage) = (response.model, response.usage);
        let choice = response.choices.into_iter().next().ok_or_else(|| LlmError::Malformed {
            provider: self.name.clone(),
            reason: "no choices".to_owned(),
            body: String::new(),
        })?;
        Ok(Answer { message: choice.message, finish_reason: choice.finish_reason, usage, model })
    }

    /// Sends an unstreamed request with sampling settings such as the temperature, retrying
    /// rate limits, server errors, network errors and timeouts (twice, backing off
    /// exponentially from 500 ms or as `Retry-After` says).
    pub async fn complete_with(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<ChatResponse, LlmError> {
        let span = spans::model_request(&self.name, request.model, false);
        let result = self.complete_retrying(request, sampling).instrument(span.clone()).await;
        match &result {
            Ok(response) => {
                spans::model_answered(&span, response.model.as_deref(), response.usage.as_ref(), None);
                let text = response.choices.first().and_then(|choice| choice.message.content.as_deref());
                self.record_content(&span, request, text);
            }
            Err(error) => spans::model_answered(&span, None, None, Some(error.class().as_str())),
        }
        result
    }

    async fn complete_retrying(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<ChatResponse, LlmError> {
        let body = self.encode(&Body { request, sampling, stream: false, stream_options: None })?;
        let tries = AtomicU32::new(0);
        let backoff = ExponentialBuilder::default()
            .with_min_delay(FIRST_BACKOFF)
            .with_factor(2.0)
            .with_max_times(RETRIES)
            .with_jitter();
        let result = (|| self.send(&body, &tries))
            .retry(backoff)
            .when(LlmError::transient)
            .adjust(|error, delay| delay.map(|delay| error.retry_after().unwrap_or(delay)))
            .await;
        let tries = tries.load(Ordering::SeqCst);
        result.map_err(|error| {
            if tries > 1 && error.transient() { LlmError::Exhausted { last: Box::new(error), tries } } else { error }
        })
    }

    /// Sends a request with `stream: true` and reads the server-sent events, handing each piece
    /// of the answer's text to `on_text` as it arrives; returns the whole text and the usage
    /// when the server reports it. Failures before the first piece are retried as
    /// [`complete_with`](Self::complete_with) retries them; once text has been handed on, a failure
    /// ends the call. A server that ignores `stream` and answers with one JSON completion
    /// is read as well. The provider's `idle_timeout` bounds each wait for an event, its
    /// `timeout` (if set) the whole answer. Texts are not redacted.
    pub async fn complete_streaming(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(String, Option<Usage>), LlmError> {
        let answer = self.stream_answer(request, sampling, Some(on_text)).await?;
        Ok((answer.message.content.unwrap_or_default(), answer.usage))
    }

    /// A streamed answer, retried while nothing has been handed to `on_text`.
    async fn stream_answer(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        on_text: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> Result<Answer, LlmError> {
        let span = spans::model_request(&self.name, request.model, true);
        let result = self.stream_retrying(request, sampling, on_text).instrument(span.clone()).await;
        match &result {
            Ok(answer) => {
                spans::model_answered(&span, answer.model.as_deref(), answer.usage.as_ref(), None);
                self.record_content(&span, request, answer.message.content.as_deref());
            }
            Err(error) => spans::model_answered(&span, None, None, Some(error.class().as_str())),
        }
        result
    }

    /// The conversation and the answer on a model request's span, with the key redacted, when
    /// the operator lets content into spans.
    fn record_content(&self, span: &tracing::Span, request: &ChatRequest<'_>, answer: Option<&str>) {
        let messages = || self.redactor.apply(&serde_json::to_string(request.messages).unwrap_or_default());
        spans::model_content(span, messages, || answer.map(|text| self.redactor.apply(text)));
    }

    async fn stream_retrying(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        mut on_text: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> Result<Answer, LlmError> {
        let stream_options = Some(serde_json::json!({"include_usage": true}));
        let body = self.encode(&Body { request, sampling, stream: true, stream_options })?;
        let mut tries: u32 = 0;
        let mut delay = FIRST_BACKOFF;
        loop {
            tries += 1;
            let mut delivered = false;
            let result = {
                let _permit = self.limiter.acquire().await;
                let mut forward = |piece: &str| {
                    if let Some(on_text) = on_text.as_mut() {
                        delivered = true;
                        on_text(piece);
                    }
                };
                let exchange = self.exchange_streaming(&body, &mut forward);
                match self.stream_timeout {
                    Some(limit) => tokio::time::timeout(limit, exchange)
                        .await
                        .unwrap_or_else(|_| Err(LlmError::Timeout { provider: self.name.clone(), after: limit })),
                    None => exchange.await,
                }
            };
            match result {
                Ok(answer) => return Ok(answer),
                Err(error) if error.transient() && !delivered && tries <= RETRIES as u32 => {
                    tokio::time::sleep(error.retry_after().unwrap_or(delay)).await;
                    delay *= 2;
                }
                Err(error) if tries > 1 && error.transient() => {
                    return Err(LlmError::Exhausted { last: Box::new(error), tries });
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn encode(&self, body: &Body<'_>) -> Result<Vec<u8>, LlmError> {
        serde_json::to_vec(body).map_err(|error| LlmError::Request {
            provider: self.name.clone(),
            reason: format!("cannot encode the request: {error}"),
            retryable: false,
        })
    }

    /// One try: waits for the limiter, then sends and reads the answer within the timeout.
    async fn send(&self, body: &[u8], tries: &AtomicU32) -> Result<ChatResponse, LlmError> {
        let _permit = self.limiter.acquire().await;
        tries.fetch_add(1, Ordering::SeqCst);
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout { provider: self.name.clone(), after: self.timeout }),
        }
    }

    async fn exchange(&self, body: &[u8]) -> Result<ChatResponse, LlmError> {
        let response = self.post(body).await?;
        let bytes = self.read_body(response).await?;
        self.parse(&bytes)
    }

    /// Sends the request body, with the key in its header.
    async fn post(&self, body: &[u8]) -> Result<reqwest::Response, LlmError> {
        let mut request = self.http.post(&self.url).header(CONTENT_TYPE, "application/json").body(body.to_vec());
        if let Some(key) = &self.key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        request.send().await.map_err(|error| self.network_error(&error))
    }

    /// Reads a whole answer, capped; a status other than success is an `Http` error quoting it.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, LlmError> {
        let status = response.status();
        let retry_after = retry_after(&response);
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| self.network_error(&error))? {
            if bytes.len() + chunk.len() > BODY_CAP {
                return Err(self.too_large(&bytes));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let transient = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
            return Err(LlmError::Http {
                provider: self.name.clone(),
                status: status.as_u16(),
                body: self.quote(&bytes),
                retry_after: if transient { retry_after } else { None },
            });
        }
        Ok(bytes)
    }

    /// A chat completion from its body; one with no choices is malformed.
    fn parse(&self, bytes: &[u8]) -> Result<ChatResponse, LlmError> {
        let malformed = |reason: String| LlmError::Malformed {
            provider: self.name.clone(),
            reason: self.redactor.apply(&reason),
            body: self.quote(bytes),
        };
        let parsed: ChatResponse = serde_json::from_slice(bytes).map_err(|error| malformed(error.to_string()))?;
        if parsed.choices.is_empty() {
            return Err(malformed("no choices".to_owned()));
        }
        Ok(parsed)
    }

    /// One streamed exchange: the events of a `text/event-stream` answer, or a whole
    /// completion when the server did not stream. Every wait (for the headers, for the next
    /// event) is bounded by the idle timeout; a stream that ends before its last event is the
    /// server's failure.
    async fn exchange_streaming(
        &self,
        body: &[u8],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Answer, LlmError> {
        let idle = || LlmError::Idle { provider: self.name.clone(), after: self.idle_timeout };
        let mut response = tokio::time::timeout(self.idle_timeout, self.post(body)).await.map_err(|_| idle())??;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !response.status().is_success() || !is_stream {
            let bytes =
                tokio::time::timeout(self.idle_timeout, self.read_body(response)).await.map_err(|_| idle())??;
            let parsed = self.parse(&bytes)?;
            let (model, usage) = (parsed.model, parsed.usage);
            let Some(choice) = parsed.choices.into_iter().next() else {
                return Err(self.malformed_event("no choices", ""));
            };
            if let Some(text) = choice.message.content.as_deref().filter(|text| !text.is_empty()) {
                on_text(text);
            }
            return Ok(Answer { message: choice.message, finish_reason: choice.finish_reason, usage, model });
        }
        let mut events = EventStream::default();
        let mut read = 0;
        let mut deadline = tokio::time::Instant::now() + self.idle_timeout;
        loop {
            let chunk = tokio::time::timeout_at(deadline, response.chunk()).await.map_err(|_| idle())?;
            let Some(chunk) = chunk.map_err(|error| self.network_error(&error))? else { break };
            read += chunk.len();
            if read > BODY_CAP {
                return Err(self.too_large(events.text.as_bytes()));
            }
            events.buffer.extend_from_slice(&chunk);
            let before = events.events;
            if self.drain(&mut events, false, on_text)? {
                return Ok(events.into_answer());
            }
            if events.events > before {
                deadline = tokio::time::Instant::now() + self.idle_timeout;
            }
        }
        self.drain(&mut events, true, on_text)?;
        if events.events == 0 {
            return Err(self.broken_stream("the server sent a success status, then closed the stream without an event"));
        }
        if events.finish_reason.is_none() {
            return Err(self.broken_stream("the stream ended before the answer was complete"));
        }
        Ok(events.into_answer())
    }

    /// Reads the complete events in the buffer; an error event is the server's failure, an
    /// unreadable one a malformed answer.
    fn drain(
        &self,
        events: &mut EventStream,
        end: bool,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, LlmError> {
        events.drain(end, on_text).map_err(|problem| match problem {
            Problem::Reported(line) => LlmError::Stream {
                provider: self.name.clone(),
                reason: format!("it reported an error: {}", self.quote(line.as_bytes())),
            },
            Problem::Unreadable(reason, line) => self.malformed_event(&reason, &line),
        })
    }

    fn broken_stream(&self, reason: &str) -> LlmError {
        LlmError::Stream { provider: self.name.clone(), reason: reason.to_owned() }
    }

    fn too_large(&self, bytes: &[u8]) -> LlmError {
        LlmError::Malformed {
            provider: self.name.clone(),
            reason: format!("the body is larger than {} MiB", BODY_CAP / (1024 * 1024)),
            body: self.quote(bytes),
        }
    }

    fn malformed_event(&self, reason: &str, line: &str) -> LlmError {
        LlmError::Malformed {
            provider: self.name.clone(),
            reason: self.redactor.apply(reason),
            body: self.quote(line.as_bytes()),
        }
    }

    /// An excerpt of a server's body, the key redacted before it is cut.
    fn quote(&self, bytes: &[u8]) -> String {
        excerpt(&self.redactor.apply(&String::from_utf8_lossy(bytes)), EXCERPT_CHARS)
    }

    fn network_error(&self, error: &reqwest::Error) -> LlmError {
        let reason = self.redactor.apply(&error_chain(error));
        if error.is_timeout() {
            LlmError::Timeout { provider: self.name.clone(), after: self.timeout }
        } else if error.is_connect() {
            LlmError::Connect { provider: self.name.clone(), reason }
        } else {
            LlmError::Request { provider: self.name.clone(), reason, retryable: !error.is_builder() }
        }
    }
}

/// The most tool calls one streamed message may make.
const MAX_STREAMED_CALLS: usize = 128;

/// What is wrong with an event of a stream.
#[derive(Debug, PartialEq)]
enum Problem {
    /// The server reported an error in the stream; the event's data.
    Reported(String),
    /// The event cannot be read: why, and its data.
    Unreadable(String, String),
}

/// The server-sent events read so far: the bytes of an unfinished line, and the message they
/// build.
#[derive(Default)]
struct EventStream {
    buffer: Vec<u8>,
    /// `data:` events read.
    events: usize,
    text: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
}

impl EventStream {
    /// Handles every complete line in the buffer (and, at `end`, the unfinished one too).
    /// Returns whether `data: [DONE]` was seen.
    fn drain(&mut self, end: bool, on_text: &mut (dyn FnMut(&str) + Send)) -> Result<bool, Problem> {
        loop {
            let line = match self.buffer.iter().position(|byte| *byte == b'\n') {
                Some(newline) => self.buffer.drain(..=newline).collect::<Vec<_>>(),
                None if end && !self.buffer.is_empty() => std::mem::take(&mut self.buffer),
                None => return Ok(false),
            };
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else { continue };
            let data = data.trim();
            if data.is_empty() {
                continue;
            }
            self.events += 1;
            if data == "[DONE]" {
                return Ok(true);
            }
            let chunk: StreamChunk =
                serde_json::from_str(data).map_err(|error| Problem::Unreadable(error.to_string(), data.to_owned()))?;
            if chunk.error.is_some() {
                return Err(Problem::Reported(data.to_owned()));
            }
            if chunk.usage.is_some() {
                self.usage = chunk.usage;
            }
            if chunk.model.is_some() {
                self.model = chunk.model;
            }
            let Some(choice) = chunk.choices.into_iter().next() else { continue };
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            for piece in choice.delta.tool_calls {
                if piece.index >= MAX_STREAMED_CALLS {
                    let reason = format!("a tool call index above {MAX_STREAMED_CALLS}");
                    return Err(Problem::Unreadable(reason, data.to_owned()));
                }
                while self.calls.len() <= piece.index {
                    let function = FunctionCall { name: String::new(), arguments: String::new() };
                    self.calls.push(ToolCall { id: String::new(), kind: "function".to_owned(), function });
                }
                let call = &mut self.calls[piece.index];
                if let Some(id) = piece.id {
                    call.id = id;
                }
                if let Some(name) = piece.function.name {
                    call.function.name.push_str(&name);
                }
                call.function.arguments.push_str(&piece.function.arguments);
            }
            let text = choice.delta.content.unwrap_or_default();
            if !text.is_empty() {
                self.text.push_str(&text);
                on_text(&text);
            }
        }
    }

    /// The message the events built.
    fn into_answer(self) -> Answer {
        let content = (!self.text.is_empty()).then_some(self.text);
        Answer {
            message: AssistantMessage { content, tool_calls: self.calls },
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
        }
    }
}

/// The `Retry-After` header in seconds, capped at a minute.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response.headers().get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(RETRY_AFTER_CAP))
}

/// An error and its sources, which is where reqwest keeps the useful part.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &mut EventStream, bytes: &[u8], end: bool, seen: &mut Vec<String>) -> Result<bool, Problem> {
        events.buffer.extend_from_slice(bytes);
        events.drain(end, &mut |piece: &str| seen.push(piece.to_owned()))
    }

    #[test]
    fn events_split_anywhere_are_read_in_order() {
        let stream = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"hé\"}}]}\n\n\
                      event: message\ndata:{\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
                      data: [DONE]\n\n";
        for cut in 1..stream.len() {
            let (first, rest) = stream.as_bytes().split_at(cut);
            let mut events = EventStream::default();
            let mut seen = Vec::new();
            events.buffer.extend_from_slice(first);
            let done = events.drain(false, &mut |piece: &str| seen.push(piece.to_owned())).unwrap();
            let done = done || feed(&mut events, rest, false, &mut seen).unwrap();
            assert!(done, "cut at {cut}");
            assert_eq!(seen.concat(), "héllo");
            assert_eq!(events.text, "héllo");
            assert_eq!(events.usage, Some(Usage { prompt_tokens: Some(3), completion_tokens: Some(2) }));
        }
    }

    #[test]
    fn a_last_line_without_newline_is_read_at_the_end() {
        let mut events = EventStream::default();
        let mut seen = Vec::new();
        let done =
            feed(&mut events, b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", true, &mut seen).unwrap();
        assert!(!done);
        assert_eq!(seen, ["x"]);
    }

    #[test]
    fn bad_or_error_events_are_reported() {
        let mut seen = Vec::new();
        let problem = feed(&mut EventStream::default(), b"data: {nope\n", false, &mut seen).unwrap_err();
        assert!(matches!(&problem, Problem::Unreadable(reason, _) if reason.contains("key must be a string")));
        let problem =
            feed(&mut EventStream::default(), b"data: {\"error\":{\"message\":\"overloaded\"}}\n", false, &mut seen)
                .unwrap_err();
        assert!(matches!(&problem, Problem::Reported(line) if line.contains("overloaded")), "{problem:?}");
    }

    #[test]
    fn tool_calls_are_built_from_their_pieces() {
        let stream = "data: {\"model\":\"m2\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,\
                      \"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\
                      \"function\":{\"name\":\"lookup\",\"arguments\":\"\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}},\
                      {\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"other\",\"arguments\":\"{}\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
        let mut events = EventStream::default();
        let mut seen = Vec::new();
        let done = feed(&mut events, stream.as_bytes(), false, &mut seen).unwrap();
        assert!(!done && seen.is_empty());
        assert_eq!(events.events, 4);
        let answer = events.into_answer();
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(answer.model.as_deref(), Some("m2"));
        assert_eq!(answer.message.content, None);
        let calls: Vec<(&str, &str, &str)> = answer
            .message
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.function.name.as_str(), c.function.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("c1", "lookup", "{\"q\":1}"), ("c2", "other", "{}")]);
    }
}
