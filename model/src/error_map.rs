//! From what went wrong on the wire to an [`LlmError`]: network errors, bodies too large or
//! unreadable, broken streams, and the `Retry-After` a server asks for. Every text quoted
//! from a server has the key redacted before it is cut.

use std::time::Duration;

use reqwest::header::RETRY_AFTER;

use crate::endpoint::{BODY_CAP, Endpoint};
use crate::error::LlmError;
use crate::redact::excerpt;

/// How much of a server's body an error quotes.
const EXCERPT_CHARS: usize = 500;
/// The longest wait a `Retry-After` header can ask for.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

impl Endpoint {
    pub(crate) fn broken_stream(&self, reason: &str) -> LlmError {
        LlmError::Stream { provider: self.name.clone(), reason: reason.to_owned() }
    }

    pub(crate) fn too_large(&self, bytes: &[u8]) -> LlmError {
        LlmError::Malformed {
            provider: self.name.clone(),
            reason: format!("the body is larger than {} MiB", BODY_CAP / (1024 * 1024)),
            body: self.quote(bytes),
        }
    }

    pub(crate) fn malformed_event(&self, reason: &str, line: &str) -> LlmError {
        LlmError::Malformed {
            provider: self.name.clone(),
            reason: self.redactor.apply(reason),
            body: self.quote(line.as_bytes()),
        }
    }

    /// An excerpt of a server's body, the key redacted before it is cut.
    pub(crate) fn quote(&self, bytes: &[u8]) -> String {
        excerpt(&self.redactor.apply(&String::from_utf8_lossy(bytes)), EXCERPT_CHARS)
    }

    pub(crate) fn network_error(&self, error: &reqwest::Error) -> LlmError {
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
pub(crate) fn retry_after(response: &reqwest::Response) -> Option<Duration> {
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
