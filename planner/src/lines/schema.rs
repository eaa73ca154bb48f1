//! JSON Schemas that constrain a model's answer where the server honours one (a schema
//! dialect that works): the line protocol's single-object form, and a whole manifest. Agent names are an `enum` of the template's agents, so a small model cannot
//! invent one, and ids a pattern; a task has the fields a small model needs.

use manifest::Plan;
use serde_json::{Value, json};

/// The pattern of a task id in a constrained answer: snake_case.
pub const ID_PATTERN: &str = "^[a-z][a-z0-9_]{0,39}$";

/// The most tasks a constrained answer may hold.
pub const MAX_TASKS: usize = 20;

/// The longest `input` or `prompt` a constrained answer may write, in characters.
const MAX_TEXT: usize = 600;

/// The schema of `{"plan": HEADER, "tasks": [TASK, ...]}`, the form a constrained server
/// writes the line protocol in. With a template, a task's agent is one of its agents and the
/// header defines none; without one, the header defines mock agents by name.
pub fn line_schema(template: Option<&Plan>) -> Value {
    let mut header = json!({
        "type": "object",
        "properties": {
            "mission": {"type": "string"},
            "strategy": words("Strategy"),
        },
        "required": ["mission"],
        "additionalProperties": false,
    });
    if template.is_none() {
        header["properties"]["agents"] = json!({
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"runtime": {"const": "mock"}},
                "required": ["runtime"],
                "additionalProperties": false,
            },
        });
        header["required"] = json!(["mission", "agents"]);
    }
    json!({
        "type": "object",
        "properties": {
            "plan": header,
            "tasks": {"type": "array", "minItems": 1, "maxItems": MAX_TASKS, "items": task(template)},
        },
        "required": ["plan", "tasks"],
        "additionalProperties": false,
    })
}

/// The schema of one task line, `{"task": TASK}`, for the repair of a line: its dependencies
/// can only be tasks of `earlier` lines (none when there are none), so a repaired line never
/// names a task that does not exist.
pub fn task_line_schema(template: Option<&Plan>, earlier: &[String]) -> Value {
    let mut task = task(template);
    // With no earlier task the field is left out (`additionalProperties: false` then refuses
    // it): llama-cpp-python's grammars ignore `maxItems: 0`.
    let on = json!({"type": "array", "items": {"type": "string", "enum": earlier}, "maxItems": 8});
    if let Some(shapes) = task["anyOf"].as_array_mut() {
        for shape in shapes {
            match earlier.is_empty() {
                true => {
                    if let Some(properties) = shape["properties"].as_object_mut() {
                        properties.remove("depends_on");
                    }
                    if let Some(required) = shape["required"].as_array_mut() {
                        required.retain(|field| field != "depends_on");
                    }
                }
                false => shape["properties"]["depends_on"] = on.clone(),
            }
        }
    }
    json!({
        "type": "object",
        "properties": {"task": task},
        "required": ["task"],
        "additionalProperties": false,
    })
}

/// The schema of a whole manifest as the author asks for it: the manifest's own, with a
/// task's agent one of the template's agents when there is a template.
pub fn manifest_schema(template: Option<&Plan>) -> Value {
    let mut schema = crate::author::prompt::for_authors(manifest::schema::manifest_schema());
    if let Some(names) = agents(template)
        && let Some(agent) = schema.pointer_mut("/definitions/Task/properties/agent")
    {
        *agent = names;
    }
    schema
}

/// A task with the fields a small model needs, in one of two shapes: work for an agent
/// (`agent`, `input` and `depends_on` required, so the model cannot leave out what makes a
/// task run) or a person's review (`prompt` and `depends_on`, no agent). Lengths are capped so
/// that a small model cannot write one string forever.
fn task(template: Option<&Plan>) -> Value {
    let id = json!({"type": "string", "pattern": ID_PATTERN});
    let ids = json!({"type": "array", "items": id, "maxItems": 8});
    let text = json!({"type": "string", "minLength": 1, "maxLength": MAX_TEXT});
    let work = json!({
        "type": "object",
        "properties": {
            "id": id,
            "type": {"enum": ["task", "synthesis_gate"]},
            "agent": agents(template).unwrap_or_else(|| id.clone()),
            "input": text,
            "depends_on": ids,
        },
        "required": ["id", "agent", "input", "depends_on"],
        "additionalProperties": false,
    });
    let review = json!({
        "type": "object",
        "properties": {
            "id": id,
            "type": {"const": "human_review"},
            "prompt": text,
            "depends_on": ids,
        },
        "required": ["id", "type", "prompt", "depends_on"],
        "additionalProperties": false,
    });
    json!({"anyOf": [work, review]})
}

/// `{"enum": [...]}` of the template's agents, if there is a template with agents.
fn agents(template: Option<&Plan>) -> Option<Value> {
    let names: Vec<&String> = template?.agents.keys().collect();
    (!names.is_empty()).then(|| json!({"type": "string", "enum": names}))
}

/// The manifest schema's definition of a set of words, such as `Strategy`.
fn words(definition: &str) -> Value {
    manifest::schema::manifest_schema()["definitions"][definition].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Plan {
        let text = "spec:\n  agent_definitions:\n    researcher: {runtime: mock}\n    writer: {runtime: mock}\n  workflow:\n    - {id: a, agent: researcher, input: x}\n";
        manifest::load_str("t.yaml", "t", text, &|_| false).plan.expect("the template loads")
    }

    #[test]
    fn agents_are_an_enum_of_the_template_s_and_ids_a_pattern() {
        let schema = line_schema(Some(&template()));
        let task = &schema["properties"]["tasks"]["items"]["anyOf"][0];
        assert_eq!(task["properties"]["agent"]["enum"], json!(["researcher", "writer"]));
        assert_eq!(task["properties"]["id"]["pattern"], ID_PATTERN);
        assert_eq!(task["required"], json!(["id", "agent", "input", "depends_on"]));
        let review = &schema["properties"]["tasks"]["items"]["anyOf"][1];
        assert_eq!(review["properties"]["type"]["const"], "human_review");
        assert!(review["properties"].get("agent").is_none(), "a review takes no agent");
        assert!(schema["properties"]["plan"]["properties"].get("agents").is_none(), "no agents to invent");
        let free = line_schema(None);
        assert_eq!(free["properties"]["plan"]["required"], json!(["mission", "agents"]));
        assert_eq!(
            free["properties"]["plan"]["properties"]["strategy"]["enum"],
            json!(["eager", "phased", "sequential"])
        );
        let whole = manifest_schema(Some(&template()));
        assert_eq!(whole["definitions"]["Task"]["properties"]["agent"]["enum"], json!(["researcher", "writer"]));
    }

    #[test]
    fn a_repaired_line_may_depend_only_on_tasks_already_taken() {
        let schema = task_line_schema(Some(&template()), &["a".to_owned(), "b".to_owned()]);
        let work = &schema["properties"]["task"]["anyOf"][0];
        assert_eq!(work["properties"]["depends_on"]["items"]["enum"], json!(["a", "b"]));
        let first = task_line_schema(Some(&template()), &[]);
        let review = &first["properties"]["task"]["anyOf"][1];
        assert!(review["properties"].get("depends_on").is_none(), "{review}");
        assert_eq!(review["required"], json!(["id", "type", "prompt"]));
    }

    #[test]
    fn an_answer_in_the_schema_s_form_is_a_plan_the_assembler_takes() {
        let answer = json!({
            "plan": {"mission": "m", "strategy": "sequential"},
            "tasks": [{"id": "a", "agent": "researcher", "input": "x"}, {"id": "b", "agent": "writer", "input": "y", "depends_on": ["a"]}],
        });
        let template = template();
        let mut splitter = super::super::Splitter::new();
        let mut assembler = super::super::Assembler::new("p", Some(&template));
        for (n, line) in splitter.push(&answer.to_string()).into_iter().enumerate() {
            let verdict = assembler.take(n + 1, &line.expect("a line"));
            assert!(!matches!(verdict, super::super::Verdict::Rejected(_)), "{verdict:?}");
        }
        assert_eq!(assembler.tasks(), 2);
    }
}
