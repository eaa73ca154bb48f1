//! What an OpenAI-compatible server serves: `GET {base_url}/models`, with each model's context
//! window where the server's metadata gives it.
//!
//! Servers differ in what they say about a model. vLLM gives `max_model_len`; OpenRouter,
//! Together and LM Studio `context_length`; Groq `context_window`; Mistral
//! `max_context_length`; llama.cpp's own server `meta.n_ctx_train` (the window the model was
//! trained with: a server started with a smaller `--ctx-size` has a smaller one).
//! llama-cpp-python and Ollama list only the ids, so their windows are unknown here.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use serde_json::Value;

use crate::error::LlmError;
use crate::error_map::error_chain;
use crate::redact::{Redactor, excerpt};

/// The largest `/models` answer read.
const BODY_CAP: usize = 4 * 1024 * 1024;
/// How much of a bad answer an error quotes.
const EXCERPT_CHARS: usize = 300;

/// The fields that give a model's context window, in the order they are looked for; a dot
/// goes one object down.
const WINDOW_FIELDS: [&str; 5] =
    ["max_model_len", "context_length", "context_window", "max_context_length", "meta.n_ctx_train"];

/// The models a server lists, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Each model listed.
    pub models: Vec<Served>,
}

/// One model a server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Its id, the name requests use.
    pub id: String,
    /// Its context window in tokens and the field that gave it, when the server says.
    pub context_window: Option<(u64, &'static str)>,
}

impl Catalog {
    /// The model called `id`, if the server lists it.
    pub fn get(&self, id: &str) -> Option<&Served> {
        self.models.iter().find(|model| model.id == id)
    }

    /// The catalog in a `/models` answer: `{"data": [{"id": ...}, ...]}`. Entries without an
    /// id are skipped; a body of another shape is an error saying what was wrong.
    pub fn parse(body: &[u8]) -> Result<Catalog, CatalogError> {
        let value: Value =
            serde_json::from_slice(body).map_err(|error| CatalogError::NotJson { reason: error.to_string() })?;
        let Some(data) = value.get("data").and_then(Value::as_array) else {
            return Err(CatalogError::NoData);
        };
        let models = data
            .iter()
            .filter_map(|entry| {
                let id = entry.get("id").and_then(Value::as_str)?;
                let context_window = WINDOW_FIELDS.iter().find_map(|field| {
                    let found = field.split('.').try_fold(entry, |value, key| value.get(key))?;
                    found.as_u64().filter(|tokens| *tokens > 0).map(|tokens| (tokens, *field))
                });
                Some(Served { id: id.to_owned(), context_window })
            })
            .collect();
        Ok(Catalog { models })
    }
}

/// Why a `/models` answer is not a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The body does not parse as JSON.
    #[error("the answer is not JSON: {reason}")]
    NotJson {
        /// The JSON reader's reason.
        reason: String,
    },
    /// The body is JSON without a `data` list.
    #[error("the answer has no `data` list of models")]
    NoData,
}

/// Asks the server at `base_url` what it serves, within `timeout`; `provider` names it in
/// errors and `key`, when set, goes in the `Authorization` header and never into an error.
pub async fn list(provider: &str, base_url: &str, key: Option<&str>, timeout: Duration) -> Result<Catalog, LlmError> {
    let redactor = Redactor::new(key);
    let failed = |reason: String, retryable: bool| LlmError::Request {
        provider: provider.to_owned(),
        reason: redactor.apply(&reason),
        retryable,
    };
    let http = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .map_err(|error| LlmError::Client(error.to_string()))?;
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let mut request = http.get(&url);
    if let Some(key) = key {
        request = request.header(AUTHORIZATION, format!("Bearer {key}"));
    }
    let network = |error: reqwest::Error| {
        let reason = redactor.apply(&error_chain(&error));
        if error.is_timeout() {
            LlmError::Timeout { provider: provider.to_owned(), after: timeout }
        } else if error.is_connect() {
            LlmError::Connect { provider: provider.to_owned(), reason }
        } else {
            failed(reason, true)
        }
    };
    let mut response = request.send().await.map_err(network)?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(network)? {
        if body.len() + chunk.len() > BODY_CAP {
            return Err(failed(format!("the list of models is larger than {} MiB", BODY_CAP >> 20), false));
        }
        body.extend_from_slice(&chunk);
    }
    let quote = || excerpt(&redactor.apply(&String::from_utf8_lossy(&body)), EXCERPT_CHARS);
    if !status.is_success() {
        return Err(LlmError::Http {
            provider: provider.to_owned(),
            status: status.as_u16(),
            body: quote(),
            retry_after: None,
        });
    }
    Catalog::parse(&body).map_err(|reason| LlmError::Malformed {
        provider: provider.to_owned(),
        reason: redactor.apply(&reason.to_string()),
        body: quote(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_window_field_is_read_and_ids_alone_leave_it_unknown() {
        let body = br#"{"object": "list", "data": [
            {"id": "vllm", "max_model_len": 32768},
            {"id": "router", "context_length": 128000, "pricing": {}},
            {"id": "groq", "context_window": 8192},
            {"id": "mistral", "max_context_length": 4096},
            {"id": "llamacpp", "meta": {"n_vocab": 49152, "n_ctx_train": 8192}},
            {"id": "plain", "object": "model", "owned_by": "me"},
            {"id": "zero", "context_length": 0},
            {"object": "model"}
        ]}"#;
        let catalog = Catalog::parse(body).unwrap();
        let windows: Vec<(&str, Option<(u64, &str)>)> =
            catalog.models.iter().map(|m| (m.id.as_str(), m.context_window)).collect();
        assert_eq!(
            windows,
            [
                ("vllm", Some((32768, "max_model_len"))),
                ("router", Some((128_000, "context_length"))),
                ("groq", Some((8192, "context_window"))),
                ("mistral", Some((4096, "max_context_length"))),
                ("llamacpp", Some((8192, "meta.n_ctx_train"))),
                ("plain", None),
                ("zero", None),
            ]
        );
        assert_eq!(catalog.get("groq").map(|m| m.id.as_str()), Some("groq"));
        assert!(catalog.get("nope").is_none());
    }

    #[test]
    fn answers_of_another_shape_say_what_is_wrong() {
        assert!(matches!(Catalog::parse(b"<html>"), Err(CatalogError::NotJson { .. })));
        assert_eq!(Catalog::parse(br#"{"models": []}"#), Err(CatalogError::NoData));
        assert_eq!(
            Catalog::parse(br#"{"models": []}"#).map_err(|error| error.to_string()),
            Err("the answer has no `data` list of models".to_owned())
        );
        assert_eq!(Catalog::parse(br#"{"data": []}"#), Ok(Catalog::default()));
    }
}
