//! Asking a server to hold an answer to a JSON Schema, in the [`SchemaDialect`] it speaks.

use serde_json::{Value, json};

pub use manifest::plan::SchemaDialect;

/// The longest name OpenAI accepts for a `json_schema`.
const MAX_NAME: usize = 64;

/// The parts of a [`ChatRequest`](crate::protocol::ChatRequest) that constrain its answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Constraint {
    /// The request's `response_format`.
    pub response_format: Option<Value>,
    /// The request's top-level `format` (Ollama).
    pub format: Option<Value>,
}

impl Constraint {
    /// JSON mode without a schema, `{"type": "json_object"}`, which every server takes.
    pub fn json_mode() -> Constraint {
        Constraint { response_format: Some(json!({"type": "json_object"})), format: None }
    }

    /// `schema` asked for in `dialect`, under `name` where the dialect names schemas (characters
    /// OpenAI refuses in a name become `_`); [`SchemaDialect::None`] gives [`json_mode`](Self::json_mode).
    pub fn new(dialect: SchemaDialect, name: &str, schema: &Value) -> Constraint {
        match dialect {
            SchemaDialect::JsonSchema => Constraint {
                response_format: Some(json!({
                    "type": "json_schema",
                    "json_schema": {"name": schema_name(name), "schema": schema, "strict": true},
                })),
                format: None,
            },
            SchemaDialect::JsonObject => {
                Constraint { response_format: Some(json!({"type": "json_object", "schema": schema})), format: None }
            }
            SchemaDialect::Ollama => Constraint { response_format: None, format: Some(schema.clone()) },
            SchemaDialect::None => Constraint::json_mode(),
        }
    }
}

/// `name` as OpenAI accepts a schema's name: letters, digits, `_` and `-`, 1 to 64 of them.
fn schema_name(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(MAX_NAME)
        .collect();
    if name.is_empty() { "answer".to_owned() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }

    #[test]
    fn json_schema_names_the_schema_and_asks_for_strict() {
        let constraint = Constraint::new(SchemaDialect::JsonSchema, "plan", &schema());
        let expected =
            json!({"type": "json_schema", "json_schema": {"name": "plan", "schema": schema(), "strict": true}});
        assert_eq!(constraint, Constraint { response_format: Some(expected), format: None });
    }

    #[test]
    fn json_object_carries_the_schema_beside_the_type() {
        let constraint = Constraint::new(SchemaDialect::JsonObject, "plan", &schema());
        let expected = json!({"type": "json_object", "schema": schema()});
        assert_eq!(constraint, Constraint { response_format: Some(expected), format: None });
    }

    #[test]
    fn ollama_sends_the_schema_as_format_and_no_response_format() {
        let constraint = Constraint::new(SchemaDialect::Ollama, "plan", &schema());
        assert_eq!(constraint, Constraint { response_format: None, format: Some(schema()) });
    }

    #[test]
    fn none_is_plain_json_mode() {
        let constraint = Constraint::new(SchemaDialect::None, "plan", &schema());
        assert_eq!(constraint, Constraint::json_mode());
        assert_eq!(constraint.response_format, Some(json!({"type": "json_object"})));
    }

    #[test]
    fn names_openai_refuses_are_made_acceptable() {
        assert_eq!(schema_name("report.v2 final"), "report_v2_final");
        assert_eq!(schema_name(""), "answer");
        assert_eq!(schema_name(&"x".repeat(100)).len(), MAX_NAME);
    }

    #[test]
    fn every_dialect_has_its_manifest_word() {
        let words: Vec<&str> = SchemaDialect::ALL.iter().map(|dialect| dialect.as_str()).collect();
        assert_eq!(words, ["json_schema", "json_object", "ollama", "none"]);
        for dialect in SchemaDialect::ALL {
            assert_eq!(serde_json::to_value(dialect).ok(), Some(Value::from(dialect.as_str())));
        }
    }
}
