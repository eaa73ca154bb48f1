//! One provider's endpoint: its address, key, limits and timeouts, and one unstreamed
//! exchange with it. The retries are in `retry.rs`, the streamed exchange in `sse.rs`.

use std::sync::Arc;
use std::time::Duration;

use manifest::plan::Provider;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};

use crate::error::LlmError;
use crate::error_map::retry_after;
use crate::limiter::{Limiter, SharedWindow};
use crate::protocol::{Body, ChatResponse};
use crate::redact::Redactor;

/// How long one unstreamed request may take when the provider sets no `timeout`. Streamed
/// requests have no overall limit unless the provider sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a streamed answer may go without an event when the provider sets no
/// `idle_timeout`; it covers the wait for the answer to begin as well.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest body read from a server.
pub(crate) const BODY_CAP: usize = 16 * 1024 * 1024;

/// A provider's chat-completions endpoint, shared by every agent on the provider. Its `Debug`
/// never shows the key.
pub struct Endpoint {
    /// The provider's name, for messages.
    pub name: String,
    url: String,
    key: Option<String>,
    /// The limit of an unstreamed request.
    pub(crate) timeout: Duration,
    /// The limit of a whole streamed request, when the provider sets `timeout`.
    pub(crate) stream_timeout: Option<Duration>,
    /// The longest wait for the answer to begin or for its next event.
    pub(crate) idle_timeout: Duration,
    /// Whether agents' requests are streamed.
    pub(crate) stream: bool,
    pub(crate) limiter: Limiter,
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

impl Endpoint {
    /// The endpoint of the plan's provider `name` at `{base_url}/chat/completions`, sharing
    /// `http`.
    pub fn new(name: &str, provider: &Provider, key: Option<String>, http: reqwest::Client) -> Self {
        Endpoint {
            name: name.to_owned(),
            url: format!("{}/chat/completions", provider.base_url.trim_end_matches('/')),
            redactor: Redactor::new(key.as_deref()),
            key,
            timeout: provider.timeout.map_or(DEFAULT_TIMEOUT, |t| t.to_std()),
            stream_timeout: provider.timeout.map(|t| t.to_std()),
            idle_timeout: provider.idle_timeout.map_or(DEFAULT_IDLE_TIMEOUT, |t| t.to_std()),
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
    /// timeout ([`DEFAULT_TIMEOUT`] when the provider sets none).
    pub fn for_provider(name: &str, provider: &Provider, key: Option<String>) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| LlmError::Client(error.to_string()))?;
        Ok(Endpoint::new(name, provider, key, http))
    }

    pub(crate) fn encode(&self, body: &Body<'_>) -> Result<Vec<u8>, LlmError> {
        serde_json::to_vec(body).map_err(|error| LlmError::Request {
            provider: self.name.clone(),
            reason: format!("cannot encode the request: {error}"),
            retryable: false,
        })
    }

    /// One unstreamed exchange: sends the body, reads the whole answer and parses it.
    pub(crate) async fn exchange(&self, body: &[u8]) -> Result<ChatResponse, LlmError> {
        let response = self.post(body).await?;
        let bytes = self.read_body(response).await?;
        self.parse(&bytes)
    }

    /// Sends the request body, with the key in its header.
    pub(crate) async fn post(&self, body: &[u8]) -> Result<reqwest::Response, LlmError> {
        let mut request = self.http.post(&self.url).header(CONTENT_TYPE, "application/json").body(body.to_vec());
        if let Some(key) = &self.key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        request.send().await.map_err(|error| self.network_error(&error))
    }

    /// Reads a whole answer, capped; a status other than success is an `Http` error quoting it.
    pub(crate) async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, LlmError> {
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
    pub(crate) fn parse(&self, bytes: &[u8]) -> Result<ChatResponse, LlmError> {
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
}
