//! A provider's schema dialect for the run: the manifest's, until its server refuses a request
//! that carries a schema, then plain JSON mode, with one warning.

use std::sync::atomic::{AtomicBool, Ordering};

use model::LlmError;
use model::dialect::{Constraint, SchemaDialect};
use model::redact::excerpt;

/// How much of the server's refusal the warning quotes.
const REFUSAL_CHARS: usize = 300;

/// How one provider's requests ask for an answer held to a `schema_check` schema; shared by
/// every agent on the provider.
#[derive(Debug)]
pub struct ProviderDialect {
    provider: String,
    dialect: SchemaDialect,
    refused: AtomicBool,
}

impl ProviderDialect {
    /// `dialect` for `provider`, not refused yet.
    pub fn new(provider: &str, dialect: SchemaDialect) -> Self {
        ProviderDialect { provider: provider.to_owned(), dialect, refused: AtomicBool::new(false) }
    }

    /// The constraint for an answer held to `schema`: the provider's dialect, or JSON mode once
    /// the server has refused it (and always with `none`).
    pub fn constraint(&self, name: &str, schema: &serde_json::Value) -> Constraint {
        if self.refused.load(Ordering::Relaxed) {
            return Constraint::json_mode();
        }
        Constraint::new(self.dialect, name, schema)
    }

    /// Notes that the server refused a request with the schema (`error`) and took the same
    /// request in JSON mode: the provider's requests use JSON mode from now on, and the first
    /// refusal is warned about.
    pub fn refuse(&self, error: &LlmError) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "provider `{}` refused a JSON Schema in the `{}` dialect ({}); its agents ask for plain JSON \
                 from now on. Set the provider's `schema_dialect` to one `runner probe` finds working, or `none`",
                self.provider,
                self.dialect.as_str(),
                excerpt(&error.to_string(), REFUSAL_CHARS),
            );
        }
    }
}

/// Whether `error` is a server refusing the request as malformed (400, 422), or
/// llama-cpp-python's 500 for a `response_format` it does not know, rather than failing it.
pub fn refuses_request(error: &LlmError) -> bool {
    match error {
        LlmError::Http { status: 400 | 422, .. } => true,
        LlmError::Http { status: 500, body, .. } => body.contains("response_format"),
        LlmError::Exhausted { last, .. } => refuses_request(last),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn http(status: u16, body: &str) -> LlmError {
        LlmError::Http { provider: "p".to_owned(), status, body: body.to_owned(), retry_after: None }
    }

    #[test]
    fn refusals_are_bad_requests_and_llama_cpp_pythons_response_format_errors() {
        assert!(refuses_request(&http(400, "unknown field")));
        assert!(refuses_request(&http(422, "invalid schema")));
        let validation = "Input should be 'text' or 'json_object' at ('body', 'response_format', 'type')";
        assert!(refuses_request(&LlmError::Exhausted { last: Box::new(http(500, validation)), tries: 3 }));
        assert!(!refuses_request(&http(500, "out of memory")));
        assert!(!refuses_request(&http(429, "slow down")));
    }

    #[test]
    fn a_refused_dialect_gives_json_mode_from_then_on() {
        let schema = json!({"type": "object"});
        let dialect = ProviderDialect::new("p", SchemaDialect::JsonSchema);
        assert_eq!(dialect.constraint("t", &schema), Constraint::new(SchemaDialect::JsonSchema, "t", &schema));
        dialect.refuse(&http(400, "no"));
        assert_eq!(dialect.constraint("t", &schema), Constraint::json_mode());
    }
}
