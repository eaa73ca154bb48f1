//! One provider's endpoint: the HTTP request, its limits, timeouts and retries.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};

use super::error::LlmError;
use super::limiter::Limiter;
use super::protocol::{ChatRequest, ChatResponse};
use super::redact::{Redactor, excerpt};

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
    timeout: Duration,
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
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `{base_url}/chat/completions`.
    pub fn new(
        name: &str,
        base_url: &str,
        key: Option<String>,
        timeout: Duration,
        limiter: Limiter,
        http: reqwest::Client,
    ) -> Self {
        Endpoint {
            name: name.to_owned(),
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            redactor: Redactor::new(key.as_deref()),
            key,
            timeout,
            limiter,
            http,
        }
    }

    /// Sends a request, retrying rate limits, server errors, network errors and timeouts
    /// (twice, backing off exponentially from 500 ms or as `Retry-After` says).
    pub async fn complete(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, LlmError> {
        let body = serde_json::to_vec(request).map_err(|error| LlmError::Request {
            provider: self.name.clone(),
            reason: format!("cannot encode the request: {error}"),
            retryable: false,
        })?;
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
        let mut request = self.http.post(&self.url).header(CONTENT_TYPE, "application/json").body(body.to_vec());
        if let Some(key) = &self.key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let mut response = request.send().await.map_err(|error| self.network_error(&error))?;
        let status = response.status();
        let retry_after = retry_after(&response);
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| self.network_error(&error))? {
            if bytes.len() + chunk.len() > BODY_CAP {
                return Err(LlmError::Malformed {
                    provider: self.name.clone(),
                    reason: format!("the body is larger than {} MiB", BODY_CAP / (1024 * 1024)),
                    body: self.quote(&bytes),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(LlmError::Http {
                provider: self.name.clone(),
                status: status.as_u16(),
                body: self.quote(&bytes),
                retry_after: if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    retry_after
                } else {
                    None
                },
            });
        }
        let malformed = |reason: String| LlmError::Malformed {
            provider: self.name.clone(),
            reason: self.redactor.apply(&reason),
            body: self.quote(&bytes),
        };
        let parsed: ChatResponse = serde_json::from_slice(&bytes).map_err(|error| malformed(error.to_string()))?;
        if parsed.choices.is_empty() {
            return Err(malformed("no choices".to_owned()));
        }
        Ok(parsed)
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

/// The `Retry-After` header in seconds, capped at a minute.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response.headers().get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(RETRY_AFTER_CAP))
}

/// An error and its sources, which is where reqwest keeps the useful part.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
