//! Every declared task and agent field, loaded from a manifest that sets it, written to the
//! plan's JSON and read back. The field lists come from the declarations, so a new field is in
//! these tests the moment it is declared: one the reader in `normalize/` forgets loads the same
//! as a manifest without it and fails here.

use serde_json::{Map, Value, json};

use super::agents::AGENT_EXAMPLES;
use super::declare::Example;
use super::{AGENT, TASK};
use crate::load::{Loaded, load_str};
use crate::plan::task::TASK_EXAMPLES;
use crate::plan::{Plan, Task};

/// The example's entries, as a JSON object.
fn entries(example: &Example) -> Map<String, Value> {
    match serde_json::from_str(example.json) {
        Ok(Value::Object(entries)) => entries,
        other => panic!("the example of `{}` is not a JSON object: {other:?}", example.key),
    }
}

/// `base` with the example's entries over it; a null entry removes the base's.
fn with_example(mut base: Map<String, Value>, example: &Example) -> Map<String, Value> {
    for (key, value) in entries(example) {
        match value {
            Value::Null => base.remove(&key),
            value => base.insert(key, value),
        };
    }
    base
}

/// A plan with two mock agents, an llm agent `probe`, providers, a tool and tasks `a` and `b`:
/// in the bare form when `bare`, else enveloped.
fn load(task: &Map<String, Value>, probe: &Map<String, Value>, bare: bool) -> Loaded {
    let spec = json!({
        "providers": {
            "default": {"base_url": "http://localhost:1/v1", "model": "m"},
            "other": {"base_url": "http://localhost:2/v1", "model": "m"},
        },
        "tools": {"search": {"command": ["cat"], "description": "Searches."}},
        "agent_definitions": {
            "worker": {"runtime": "mock"},
            "reviewer": {"runtime": "mock"},
            "probe": probe,
        },
        "control_logic": {"parallel_groups": {"pair": {"max_concurrency": 1}}},
        "workflow": [{"id": "a", "agent": "worker", "input": "Start."}, task],
    });
    let document = if bare {
        spec
    } else {
        json!({"apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "fields"}, "spec": spec})
    };
    load_str("fields.json", "fields", &document.to_string(), &|_| true)
}

/// The task `b` of the tests' plans, before any example.
fn base_task() -> Map<String, Value> {
    match json!({"id": "b", "agent": "worker", "input": "Go on."}) {
        Value::Object(task) => task,
        _ => unreachable!("a JSON object literal"),
    }
}

fn valid_plan(loaded: Loaded, what: &str) -> Plan {
    assert!(loaded.is_valid(), "{what} does not load cleanly: {:#?}", loaded.diagnostics);
    loaded.plan.expect("a valid load has a plan")
}

/// Whether `key` holds something other than null anywhere in `value`.
fn holds(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| (k == key && !v.is_null()) || holds(v, key)),
        Value::Array(items) => items.iter().any(|item| holds(item, key)),
        _ => false,
    }
}

#[test]
fn every_task_field_is_declared_with_an_example() {
    let declared: Vec<&str> = TASK_EXAMPLES.iter().filter_map(|example| example.name).collect();
    let table: Vec<&str> = TASK.fields.iter().map(|field| field.name).collect();
    assert_eq!(declared, table);
}

#[test]
fn every_task_field_is_read_written_and_read_back() {
    for example in TASK_EXAMPLES {
        let Some(name) = example.name else { continue };
        let bare = TASK.fields.iter().any(|field| field.name == name && field.bare_only.is_some());
        let with = with_example(base_task(), example);
        let mut without = with.clone();
        without.remove(name);
        let plan = valid_plan(load(&with, &Map::new(), bare), &format!("the example of `{name}`"));
        let unset = load(&without, &Map::new(), bare).plan.expect("the plan without the field has a shape");
        let json = serde_json::to_value(&plan).expect("a plan serialises");
        let task = &json["tasks"][1];
        assert_ne!(
            task,
            &serde_json::to_value(&unset.tasks[1]).expect("a task serialises"),
            "the task's JSON is the same with `{name}` as without it: normalize/tasks.rs does not read it (or the JSON leaves it out)"
        );
        assert!(task.get(example.key).is_some(), "`{name}` is not written under `{}`: {task}", example.key);
        let back: Plan = serde_json::from_value(json.clone()).expect("the plan's JSON reads back");
        let back = serde_json::to_value(&back).expect("a plan serialises");
        assert_eq!(back["tasks"][1].get(example.key), task.get(example.key), "`{}` is lost reading back", example.key);
        assert_eq!(back, json, "the plan with `{name}` is not read back as written");
    }
}

#[test]
fn every_plan_only_task_field_is_written_and_read_back() {
    for example in TASK_EXAMPLES.iter().filter(|example| example.name.is_none()) {
        let plain: Task = serde_json::from_value(json!({"id": "b"})).expect("a task reads");
        let mut json = entries(example);
        json.insert("id".into(), json!("b"));
        let task: Task = serde_json::from_value(Value::Object(json)).expect("the example reads as a task");
        assert_ne!(task, plain, "`{}` is not read from the task's JSON", example.key);
        let written = serde_json::to_value(&task).expect("a task serialises");
        assert!(written.get(example.key).is_some(), "`{}` is not written: {written}", example.key);
        let back: Task = serde_json::from_value(written).expect("and reads back");
        assert_eq!(back, task);
    }
}

#[test]
fn every_agent_field_is_read_written_and_read_back() {
    let declared: Vec<&str> = AGENT_EXAMPLES.iter().filter_map(|example| example.name).collect();
    assert_eq!(declared, AGENT.fields.iter().map(|field| field.name).collect::<Vec<_>>());
    for example in AGENT_EXAMPLES {
        let name = example.key;
        let with = with_example(Map::new(), example);
        let mut without = with.clone();
        without.remove(name);
        let plan = valid_plan(load(&base_task(), &with, false), &format!("the example of `{name}`"));
        let unset = load(&base_task(), &without, false).plan.expect("the plan without the field has a shape");
        let json = serde_json::to_value(&plan).expect("a plan serialises");
        let agent = &json["agents"]["probe"];
        assert_ne!(
            agent,
            &serde_json::to_value(unset.agents.get("probe")).expect("an agent serialises"),
            "the agent's JSON is the same with `{name}` as without it: normalize/agents.rs does not read it"
        );
        assert!(holds(agent, name), "`{name}` is not written: {agent}");
        let back: Plan = serde_json::from_value(json.clone()).expect("the plan's JSON reads back");
        assert_eq!(
            serde_json::to_value(&back).expect("a plan serialises"),
            json,
            "the plan with `{name}` is not read back as written"
        );
    }
}
