//! The `http` runtime: each attempt POSTs the rendered input to a web service and takes the
//! response body as the output. Secrets (the API key, header values) come only from
//! environment variables named in the plan; they never appear in a reply, error or log.

use std::sync::Arc;
use std::time::Duration;

use manifest::plan::Runtime;
use model::redact::excerpt;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use super::command::clarification;
use super::registry::Setup;
use super::{AgentRuntime, Attempt, Pending, Refusing, Reply};
use crate::event::ErrorClass;

/// How many characters of an error response's body a failure quotes.
const ERROR_EXCERPT: usize = 300;

/// Why an `http` agent cannot be set up. The messages name variables, never their values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
enum SetupError {
    /// The agent's runtime is another one.
    #[error("agent `{agent}` is not an `http` agent")]
    #[diagnostic(code(http::not_http))]
    NotHttp {
        /// The agent.
        agent: String,
    },
    /// A variable the agent names is not set.
    #[error(
        "agent `{agent}`: the environment variable `{variable}` named in `{field}` is not set (or empty); set it before the run"
    )]
    #[diagnostic(code(http::unset_variable))]
    Unset {
        /// The agent.
        agent: String,
        /// The variable.
        variable: String,
        /// The field that names it: `api_key_env` or `headers_env`.
        field: &'static str,
    },
    /// A key of `headers_env` is no header name.
    #[error("agent `{agent}`: `{name}` is not a valid header name")]
    #[diagnostic(code(http::header_name))]
    HeaderName {
        /// The agent.
        agent: String,
        /// The name given.
        name: String,
    },
    /// A variable's value cannot be a header value.
    #[error(
        "agent `{agent}`: the value of `{variable}` cannot be sent in a header (it has a line break or other control character)"
    )]
    #[diagnostic(code(http::header_value))]
    HeaderValue {
        /// The agent.
        agent: String,
        /// The variable holding the value.
        variable: String,
    },
    /// reqwest could not build a client.
    #[error("agent `{agent}`: cannot build an HTTP client: {message}")]
    #[diagnostic(code(http::client))]
    Client {
        /// The agent.
        agent: String,
        /// reqwest's message.
        message: String,
    },
}

/// POSTs each attempt's input to a URL: a 2xx body is the output (capped, secrets redacted),
/// 5xx, 429 and connection errors are failures worth retrying, other statuses are not.
/// No `Debug`: it holds the secrets.
#[derive(Clone)]
pub struct HttpRuntime {
    url: String,
    headers: HeaderMap,
    secrets: Arc<[String]>,
    max_output_bytes: u64,
    client: reqwest::Client,
}

impl HttpRuntime {
    /// The runtime of an `http` agent, its secrets read from the process environment.
    pub fn from_agent(setup: &Setup<'_>) -> Arc<dyn AgentRuntime> {
        HttpRuntime::with_env(setup.name, &setup.agent.runtime, |name| std::env::var(name).ok())
    }

    /// The runtime of an `http` agent named `agent`, its secrets read through `env`. A
    /// misconfigured agent (an unset variable, a value no header can carry) gets a runtime that
    /// refuses every attempt and says why, without the value.
    pub fn with_env(agent: &str, runtime: &Runtime, env: impl Fn(&str) -> Option<String>) -> Arc<dyn AgentRuntime> {
        match HttpRuntime::build(agent, runtime, env) {
            Ok(runtime) => Arc::new(runtime),
            Err(error) => Arc::new(Refusing(error.to_string())),
        }
    }

    fn build(agent: &str, runtime: &Runtime, env: impl Fn(&str) -> Option<String>) -> Result<Self, SetupError> {
        let Runtime::Http { url, api_key_env, headers_env, max_output_bytes } = runtime else {
            return Err(SetupError::NotHttp { agent: agent.to_owned() });
        };
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        let mut secret = |field: &'static str, variable: &str| match env(variable) {
            Some(value) if !value.trim().is_empty() => {
                secrets.push(value.clone());
                Ok(value)
            }
            _ => Err(SetupError::Unset { agent: agent.to_owned(), variable: variable.to_owned(), field }),
        };
        if let Some(variable) = api_key_env {
            let key = secret("api_key_env", &variable.value)?;
            headers.insert(AUTHORIZATION, header_value(agent, &format!("Bearer {key}"), &variable.value)?);
        }
        for (name, variable) in headers_env {
            let value = secret("headers_env", &variable.value)?;
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SetupError::HeaderName { agent: agent.to_owned(), name: name.clone() })?;
            headers.insert(name, header_value(agent, &value, &variable.value)?);
        }
        headers.entry(CONTENT_TYPE).or_insert(HeaderValue::from_static("text/plain; charset=utf-8"));
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| SetupError::Client { agent: agent.to_owned(), message: error.to_string() })?;
        Ok(HttpRuntime {
            url: url.value.clone(),
            headers,
            secrets: secrets.into(),
            max_output_bytes: *max_output_bytes,
            client,
        })
    }

    /// `text` with every secret replaced, so a service that echoes a key does not leak it.
    fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), "[redacted]"))
    }

    async fn post(&self, attempt: &Attempt) -> Reply {
        let request = self.client.post(&self.url).headers(self.headers.clone()).body(attempt.input.to_string());
        let mut response = match request.send().await {
            Ok(response) => response,
            // reqwest names the URL, never the headers.
            Err(error) if error.is_builder() => return Reply::refused(format!("cannot POST to {}: {error}", self.url)),
            Err(error) => return Reply::transient(format!("cannot reach {}: {error}", self.url)),
        };
        let status = response.status();
        let cap = self.max_output_bytes;
        let mut body = Vec::new();
        let too_long = || format!("{} answered more than max_output_bytes ({cap} bytes)", self.url);
        if status.is_success() && response.content_length().is_some_and(|length| length > cap) {
            return Reply::refused(too_long());
        }
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    body.extend_from_slice(&chunk);
                    if body.len() as u64 > cap {
                        if status.is_success() {
                            return Reply::refused(too_long());
                        }
                        break;
                    }
                }
                Ok(None) => break,
                Err(error) => return Reply::transient(format!("the response from {} broke off: {error}", self.url)),
            }
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let detail = self.redact(&excerpt(&text, ERROR_EXCERPT));
            let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
            let error = format!("{} answered {status}{detail}", self.url);
            let transient = status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
            return if transient { Reply::transient(error) } else { Reply::refused(error) };
        }
        let text = self.redact(text.trim_end());
        if let Some(question) = clarification(&text) {
            return Reply::Question(question, None);
        }
        Reply::Output { text, tokens: None }
    }
}

/// A header value marked sensitive; an error names the variable, never the value.
fn header_value(agent: &str, value: &str, variable: &str) -> Result<HeaderValue, SetupError> {
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| SetupError::HeaderValue { agent: agent.to_owned(), variable: variable.to_owned() })?;
    value.set_sensitive(true);
    Ok(value)
}

impl AgentRuntime for HttpRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let runtime = self.clone();
        Box::pin(async move {
            tokio::select! {
                reply = runtime.post(&attempt) => reply,
                () = cancel.cancelled() => Reply::Failure { error: "cancelled".to_owned(), class: ErrorClass::Cancelled, tokens: None },
            }
        })
    }
}
