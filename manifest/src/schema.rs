//! The JSON Schema of the manifest, for editors and other tools.
//!
//! It is built from the field tables in [`crate::fields`], the same tables the loader reads
//! with, so every field the loader accepts in the enveloped form is in the schema with its
//! description, bounds and words, and nothing else is.

use serde_json::{Map, Value, json};

use crate::fields::{ENVELOPE, Field, Kind, MANIFEST_DOC, Named, Section, Shape};
use crate::plan_test::{TEST_DOC, TEST_ENVELOPE, Vocabulary};

/// The JSON Schema (draft-07) of the enveloped manifest, with a description on every field,
/// the words of every enumeration and `additionalProperties: false` on every mapping.
pub fn manifest_schema() -> Value {
    document(&ENVELOPE, "runner plan manifest", MANIFEST_DOC)
}

/// The JSON Schema (draft-07) of a plan test (`kind: PlanTest`), built the same way from the
/// plan test's field tables and the run log's `vocabulary`.
pub fn plan_test_schema(vocabulary: &Vocabulary) -> Value {
    let mut schema = document(&TEST_ENVELOPE, "runner plan test", TEST_DOC);
    vocabulary.add_to_schema(&mut schema);
    schema
}

/// The schema of a whole document whose top mapping is `envelope`.
fn document(envelope: &Section, title: &str, doc: &str) -> Value {
    let mut definitions = Map::new();
    let mut root = mapping(envelope, &mut definitions);
    root.insert("$schema".into(), json!("http://json-schema.org/draft-07/schema#"));
    root.insert("title".into(), json!(title));
    root.insert("description".into(), json!(doc));
    root.insert("definitions".into(), Value::Object(definitions));
    Value::Object(root)
}

/// The schema of a mapping: its fields (not the bare-only ones), which are required, and no
/// others.
fn mapping(section: &Section, definitions: &mut Map<String, Value>) -> Map<String, Value> {
    let canonical = || section.fields.iter().filter(|f| f.bare_only.is_none());
    let properties: Map<String, Value> = canonical().map(|f| (f.name.to_owned(), property(f, definitions))).collect();
    let required: Vec<&str> = canonical().filter(|f| f.required).map(|f| f.name).collect();
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("additionalProperties".into(), json!(false));
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    if section.exactly_one > 0 {
        let one: Vec<Value> = section.alternatives().map(|name| json!({"required": [name]})).collect();
        schema.insert("oneOf".into(), json!(one));
    }
    schema
}

/// A field's schema with its description; a reference is wrapped in `allOf`, as draft-07
/// ignores the siblings of a `$ref`.
fn property(field: &Field, definitions: &mut Map<String, Value>) -> Value {
    let schema = shape(&field.shape, definitions);
    let mut schema = if schema.contains_key("$ref") { object(json!({"allOf": [schema]})) } else { schema };
    schema.insert("description".into(), json!(field.doc));
    Value::Object(schema)
}

/// The schema of a value of a shape; a named shape is added to `definitions` and referred to.
fn shape(of: &Shape, definitions: &mut Map<String, Value>) -> Map<String, Value> {
    object(match of {
        Shape::Text => json!({"type": "string"}),
        Shape::Pattern(pattern) => json!({"type": "string", "pattern": pattern}),
        Shape::Const(word) => json!({"type": "string", "const": word}),
        Shape::Choice(words) => json!({"type": "string", "enum": words}),
        Shape::Bool => json!({"type": "boolean"}),
        Shape::Count { min } => json!({"type": "integer", "format": "uint32", "minimum": min}),
        Shape::Integer { min } => json!({"type": "integer", "format": "uint64", "minimum": min}),
        Shape::Number { min, max } => json!({"type": "number", "format": "double", "minimum": min, "maximum": max}),
        Shape::Json => json!({}),
        Shape::List(item) => json!({"type": "array", "items": shape(item, definitions)}),
        Shape::NonEmptyList(item) => json!({"type": "array", "items": shape(item, definitions), "minItems": 1}),
        Shape::Map(value) => json!({"type": "object", "additionalProperties": shape(value, definitions)}),
        Shape::Named(named) => {
            define(named, definitions);
            json!({"$ref": format!("#/definitions/{}", named.name)})
        }
    })
}

/// The mapping inside a JSON object; every schema built here is one.
fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Adds a named shape to `definitions`, once.
fn define(named: &Named, definitions: &mut Map<String, Value>) {
    if definitions.contains_key(named.name) {
        return;
    }
    // Reserved first, so that a shape that refers to itself ends.
    definitions.insert(named.name.into(), Value::Null);
    let mut schema = match &named.kind {
        Kind::Mapping(section) => mapping(section, definitions),
        Kind::Words(words) => object(json!({"type": "string", "enum": words})),
        Kind::AnyOf(shapes) => {
            let alternatives: Vec<Map<String, Value>> = shapes.iter().map(|s| shape(s, definitions)).collect();
            object(json!({"anyOf": alternatives}))
        }
        Kind::Alias(inner) => shape(inner, definitions),
    };
    schema.insert("description".into(), json!(named.doc));
    definitions.insert(named.name.into(), Value::Object(schema));
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::manifest_schema;

    fn validator() -> jsonschema::Validator {
        jsonschema::draft7::new(&manifest_schema()).expect("the schema is valid draft-07")
    }

    fn errors(validator: &jsonschema::Validator, manifest: &Value) -> Vec<String> {
        validator.iter_errors(manifest).map(|e| format!("{e} at {}", e.instance_path())).collect()
    }

    /// A valid manifest with one mock agent and one task.
    fn plan() -> Value {
        json!({
            "apiVersion": "runner/v1",
            "kind": "Plan",
            "metadata": {"name": "fixture"},
            "spec": {
                "agent_definitions": {"stub": {"runtime": "mock"}},
                "workflow": [{"id": "a", "agent": "stub", "input": "hello"}],
            },
        })
    }

    #[test]
    fn every_mapping_rejects_unknown_fields() {
        let schema = manifest_schema();
        let definitions = schema["definitions"].as_object().expect("the schema has definitions");
        let all = std::iter::once(("Manifest", &schema)).chain(definitions.iter().map(|(n, d)| (n.as_str(), d)));
        for (name, definition) in all {
            if definition.get("properties").is_some() {
                assert_eq!(definition["additionalProperties"], json!(false), "`{name}` allows unknown fields");
            }
        }
    }

    #[test]
    fn example_manifests_are_valid() {
        let validator = validator();
        let folder = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
        let Ok(entries) = std::fs::read_dir(folder) else { return };
        for path in entries.map(|e| e.expect("a directory entry").path()) {
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable example");
            let manifest: Value = serde_saphyr::from_str(&text).expect("an example is YAML");
            let found = errors(&validator, &manifest);
            assert!(found.is_empty(), "{} does not match the schema:\n{}", path.display(), found.join("\n"));
        }
    }

    #[test]
    fn an_unknown_task_field_is_invalid() {
        let validator = validator();
        let mut manifest = plan();
        assert_eq!(errors(&validator, &manifest), Vec::<String>::new());
        manifest["spec"]["workflow"][0]["dependson"] = json!(["b"]);
        let found = errors(&validator, &manifest);
        assert!(found.iter().any(|e| e.contains("dependson")), "{found:?}");
    }

    #[test]
    fn the_documented_shapes_are_valid_and_near_misses_are_not() {
        let validator = validator();
        let with = |pointer: &str, value: Value| {
            let mut manifest = plan();
            *manifest.pointer_mut(pointer).expect("the fixture has this field") = value;
            errors(&validator, &manifest).is_empty()
        };
        let task = "/spec/workflow/0";
        let on_failure = |value: Value| with(task, json!({"id": "a", "agent": "stub", "on_failure": value}));
        assert!(on_failure(json!("skip")));
        assert!(on_failure(json!({"action": "retry", "max_attempts": 3, "backoff": "1.5s", "then": "skip"})));
        assert!(!on_failure(json!("stop")), "`stop` is read only in the bare form");
        assert!(!on_failure(json!({"action": "retry", "backoff": "30"})), "a duration needs a unit");
        assert!(!on_failure(json!({"action": "retry", "then": "retry"})));
        let responses =
            |value: Value| with("/spec/agent_definitions/stub", json!({"runtime": "mock", "responses": {"a": value}}));
        assert!(responses(json!("done")));
        assert!(responses(json!({"clarify": "Which year?"})));
        assert!(responses(json!([{"fail": "timeout"}, {"output": "ok"}, "text"])));
        assert!(!responses(json!({"output": "ok", "fail": "no"})), "one outcome per response");
        let tokens = json!({"prompt": 700, "completion": 400});
        assert!(responses(json!({"transient": "HTTP 503", "tokens": tokens})));
        assert!(!responses(json!({"tokens": tokens})), "usage alone is no outcome");
        assert!(!responses(json!({"output": "ok", "tokens": {"prompt": 1}})), "usage gives both counts");
        assert!(!with("/metadata", json!({"name": "x", "description": null})), "the loader rejects an explicit null");
        assert!(!with("/metadata", json!({})), "metadata.name is required");
        assert!(!with("/kind", json!("Workflow")));
    }
}
