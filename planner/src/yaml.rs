//! A small YAML emitter for manifests: block mappings and sequences, every string
//! double-quoted.
//!
//! Strings are written as YAML double-quoted scalars with JSON-style escapes (`\"`, `\\`,
//! `\n`, `\t`, `\r`, `\uXXXX`), so no text (a `#`, a `: `, leading spaces, `{{ }}`) is ever
//! read as YAML syntax; characters YAML does not allow raw (C0 and C1 controls, `U+2028`,
//! `U+2029`, `U+FEFF`, `U+FFFE`, `U+FFFF`) are escaped. Keys are plain when they are simple
//! identifiers (`[A-Za-z_][A-Za-z0-9_-]*` and not a word YAML reads as a boolean or null),
//! quoted otherwise. Numbers, booleans and null are plain; empty mappings and sequences are
//! `{}` and `[]`. In a mapping, `apiVersion`, `kind`, `metadata`, `name`, `mission`, `id`,
//! `type` and `runtime` come first, in that order (so a manifest, its tasks and agents read
//! in their usual order), the other keys in the map's order. Reading the output back as YAML gives the same JSON value.

use std::fmt::Write;

use serde_json::{Map, Value};

/// Keys written before the others, in this order.
const FIRST_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "name", "mission", "id", "type", "runtime"];

/// Words a YAML reader may take for a boolean or null when plain.
const RESERVED: &[&str] = &["true", "false", "null", "yes", "no", "on", "off", "y", "n"];

/// Writes a JSON value as a YAML document (ending in a newline).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0, false),
        scalar => {
            inline(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

/// Writes a mapping's entries at `indent`; `started` means the cursor already sits there
/// (after a sequence's `- `).
fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize, started: bool) {
    let first = FIRST_KEYS.iter().filter_map(|k| map.get_key_value(*k));
    let rest = map.iter().filter(|(k, _)| !FIRST_KEYS.contains(&k.as_str()));
    for (i, (key, value)) in first.chain(rest).enumerate() {
        if i > 0 || !started {
            pad(out, indent);
        }
        write_key(out, key);
        out.push(':');
        nested(out, value, indent);
    }
}

/// Writes a sequence's items at `indent`, as [`mapping`] does.
fn sequence(out: &mut String, items: &[Value], indent: usize, started: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !started {
            pad(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => mapping(out, map, indent + 2, true),
            Value::Array(items) if !items.is_empty() => sequence(out, items, indent + 2, true),
            scalar => {
                inline(out, scalar);
                out.push('\n');
            }
        }
    }
}

/// Writes the value of a mapping entry, after its `key:`.
fn nested(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            mapping(out, map, indent + 2, false);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            sequence(out, items, indent + 2, false);
        }
        scalar => {
            out.push(' ');
            inline(out, scalar);
            out.push('\n');
        }
    }
}

/// Writes a scalar or an empty collection on the current line.
fn inline(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => quote(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn write_key(out: &mut String, key: &str) {
    let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(key));
    if plain { out.push_str(key) } else { quote(out, key) }
}

/// Writes a double-quoted scalar.
fn quote(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Characters outside YAML's printable set, or that a reader may take for a line break.
fn needs_escape(c: char) -> bool {
    matches!(c, '\0'..='\u{1F}' | '\u{7F}'..='\u{9F}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}')
}

#[cfg(test)]
mod tests {
    use super::to_yaml;
    use serde_json::json;

    #[test]
    fn layout() {
        let value = json!({
            "spec": {"workflow": [{"input": "a: b # c", "id": "x", "attachments": [{"link": "u"}]}, [1, [true]], []]},
            "kind": "Plan",
            "apiVersion": "runner/v1",
            "on": null,
            "empty": {},
        });
        assert_eq!(
            to_yaml(&value),
            "apiVersion: \"runner/v1\"\nkind: \"Plan\"\nempty: {}\n\"on\": null\nspec:\n  workflow:\n    - id: \"x\"\n      \
             attachments:\n        - link: \"u\"\n      input: \"a: b # c\"\n    - - 1\n      - - true\n    - []\n"
        );
    }
}
