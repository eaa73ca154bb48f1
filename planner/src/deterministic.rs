//! The deterministic planner: a request in plain words to a manifest, with no model.
//!
//! [`plan`] splits the request into [`Step`]s, assesses its [`Complexity`] and writes an
//! enveloped manifest (`apiVersion: runner/v1`, `kind: Plan`) that always loads without
//! errors:
//!
//! - `metadata.name` is the caller's name; `metadata.description` says the plan was made
//!   deterministically and names any placeholder agents.
//! - `spec.mission` is the normalised request; `control_logic.strategy` is `sequential`, the
//!   seeds' v1 mode: the workflow in list order is a chain.
//! - One task per step; a [`Complexity::Simple`] request is one task (its steps merged: the
//!   whole request, the most demanding kind, every attachment). An empty request is one
//!   `human_review` asking what the plan should do.
//! - A question to the person followed by work (a step ending in `?`, then a step opening
//!   with an action verb) is planned step by step even when the request is otherwise
//!   simple: the question becomes a `human_review` and the next task reads its answer. A
//!   request that is only a question stays one task.
//! - Task ids are the snake_case of the step's first four words that are not filler
//!   (`the`, `at`, ...), at most 40 characters, `step` when none is left, with `_2`, `_3`
//!   on repeats.
//! - A tool or processing step is a task whose `input` is the step's text; after the first
//!   step the input also reads the previous task's output (`{{ tasks.PREV.output }}`), and
//!   after a clarification both the answer and the output of the task before it. Template
//!   syntax in the request (`{{`, `{%`, `{#`) is escaped so it reaches the agent as written.
//! - A clarification step is a `type: human_review` task with the question as its `prompt`
//!   and no agent.
//! - Links and confirmed files become `attachments` (`{link: ...}`, `{file: ...}`).
//!
//! Agents: with a template, its `agent_definitions` (or `agents`, `workers`), `tools` and
//! `providers` are copied into `spec`. A tool or processing step uses the agent
//! `bindings.agents` names for its kind, else the template's first agent (by name), else a
//! placeholder, `tool_agent` or `worker`. An agent named but not defined anywhere is
//! defined as a placeholder: `{runtime: mock, default: echo}`, which echoes its input, so
//! the plan validates and dry-runs; `metadata.description` says to bind real agents with
//! `--agent-map KIND=AGENT` or `--template`. A template that does not load itself makes a
//! plan that does not either.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::complexity::{Assessment, Complexity, assess_normalized};
use crate::steps::{Kind, Step, normalize, split_normalized};
use crate::yaml::to_yaml;

/// How the steps' kinds map to agents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bindings {
    /// The agent for each kind (`--agent-map kind=agent`); clarifications need none.
    pub agents: BTreeMap<Kind, String>,
    /// A manifest (`--template`) parsed to JSON, whose agents, tools and providers the plan
    /// uses.
    pub template: Option<Value>,
}

/// A planned request: the steps, the complexity verdict, the manifest and its YAML.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// The steps the tasks were made from, one per task.
    pub steps: Vec<Step>,
    /// Whether the request needed planning, and why.
    pub complexity: Assessment,
    /// The manifest as JSON.
    pub manifest: Value,
    /// The manifest as YAML, ready to write to a file.
    pub yaml: String,
}

/// The placeholder agent for each kind an agent does.
const PLACEHOLDERS: &[(Kind, &str)] = &[(Kind::Tool, "tool_agent"), (Kind::Processing, "worker")];

/// The question an empty request becomes.
const EMPTY_REQUEST: &str = "The request was empty: what should this plan do?";

/// Words left out of task ids.
const FILLER: &[&str] = &[
    "a", "an", "the", "to", "of", "for", "in", "on", "at", "with", "and", "or", "from", "by", "into", "onto", "my",
    "our", "your", "their", "this", "that", "these", "those", "it", "its", "is", "are", "be", "please", "me", "us",
    "then", "next", "also", "some", "all", "any", "as", "so", "if", "i", "we", "you",
];

/// Template words a task id may not be, or `tasks.ID.output` would not parse.
const RESERVED_IDS: &[&str] = &["true", "false", "none", "and", "or", "not", "in", "is", "if", "else"];

/// Plans a request (the module doc lists the rules). `name` becomes `metadata.name`;
/// `exists` answers whether a relative file the request mentions exists.
pub fn plan(request: &str, name: &str, bindings: &Bindings, exists: &dyn Fn(&str) -> bool) -> Draft {
    let text = normalize(request);
    let mut complexity = assess_normalized(&text);
    let mut steps = split_normalized(&text, exists);
    if steps.is_empty() {
        steps.push(Step {
            text: EMPTY_REQUEST.into(),
            kind: Kind::Clarification,
            links: Vec::new(),
            files: Vec::new(),
        });
    } else if complexity.complexity == Complexity::Simple && steps.len() > 1 {
        match question_before_work(&steps) {
            Some(question) => complexity = asks_first(question),
            None => steps = vec![merge(&text, steps)],
        }
    }
    let manifest = manifest(&text, name, &steps, &complexity, bindings);
    let yaml = to_yaml(&manifest);
    Draft { steps, complexity, manifest, yaml }
}

/// The question a request asks the person before its work, if any: a step that ends in `?`
/// followed by a step that opens with an action verb ("Should the report cover 2023 or 2024?
/// Then write the report."). Such a request is planned, not merged, so the question is asked
/// first and the step after it reads the answer.
fn question_before_work(steps: &[Step]) -> Option<&Step> {
    let at = steps.iter().position(Step::is_question)?;
    steps[at + 1..].iter().any(Step::opens_with_action).then(|| &steps[at])
}

/// The verdict for a simple request that asks a question before its work: planned, and why.
fn asks_first(question: &Step) -> Assessment {
    Assessment {
        complexity: Complexity::Planned,
        reasons: vec![format!("asks a question before the work: `{}`", question.text)],
    }
}

/// One step for a simple request: its whole text, the most demanding kind, every attachment.
fn merge(text: &str, steps: Vec<Step>) -> Step {
    let rank = |kind: Kind| match kind {
        Kind::Clarification => 2,
        Kind::Tool => 1,
        Kind::Processing => 0,
    };
    let kind = steps.iter().map(|s| s.kind).max_by_key(|k| rank(*k)).unwrap_or(Kind::Processing);
    let mut links: Vec<String> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    for step in steps {
        for link in step.links {
            if !links.contains(&link) {
                links.push(link);
            }
        }
        for file in step.files {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    Step { text: text.trim_end_matches(['.', ' ']).to_owned(), kind, links, files }
}

fn manifest(text: &str, name: &str, steps: &[Step], complexity: &Assessment, bindings: &Bindings) -> Value {
    let template = bindings.template.as_ref().map(|t| t.get("spec").filter(|s| s.is_object()).unwrap_or(t));
    let section = |names: &[&str]| -> Map<String, Value> {
        template
            .and_then(|t| names.iter().find_map(|n| t.get(*n)))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut agents = section(&["agent_definitions", "agents", "workers"]);
    for definition in agents.values_mut() {
        // The bare form allows an agent that is only its system prompt.
        if let Value::String(prompt) = definition {
            *definition = json!({ "system_prompt": prompt });
        }
    }
    let first_agent = agents.keys().next().cloned();
    let mut placeholders: Vec<String> = Vec::new();
    let mut agent_of: HashMap<Kind, String> = HashMap::new();
    for (kind, placeholder) in PLACEHOLDERS {
        if !steps.iter().any(|s| s.kind == *kind) {
            continue;
        }
        let agent = bindings
            .agents
            .get(kind)
            .cloned()
            .or_else(|| first_agent.clone())
            .unwrap_or_else(|| (*placeholder).to_owned());
        if !agents.contains_key(&agent) {
            agents.insert(agent.clone(), json!({ "runtime": "mock", "default": "echo" }));
            placeholders.push(agent.clone());
        }
        agent_of.insert(*kind, agent);
    }

    let workflow = workflow(steps, &agent_of);
    let mut spec = Map::new();
    if !text.is_empty() {
        spec.insert("mission".into(), Value::String(text.to_owned()));
    }
    for (key, value) in [("tools", section(&["tools"])), ("providers", section(&["providers"]))] {
        if !value.is_empty() {
            spec.insert(key.into(), Value::Object(value));
        }
    }
    if !agents.is_empty() {
        spec.insert("agent_definitions".into(), Value::Object(agents));
    }
    spec.insert("workflow".into(), Value::Array(workflow));
    spec.insert("control_logic".into(), json!({ "strategy": "sequential" }));
    let name = if name.trim().is_empty() { "plan" } else { name };
    json!({
        "apiVersion": manifest::API_VERSION,
        "kind": "Plan",
        "metadata": { "name": name, "description": description(steps, complexity, &placeholders) },
        "spec": spec,
    })
}

fn description(steps: &[Step], complexity: &Assessment, placeholders: &[String]) -> String {
    let count = |kind: Kind| steps.iter().filter(|s| s.kind == kind).count();
    let mut text = match complexity.complexity {
        Complexity::Simple => "Planned deterministically (no model) from a simple request: one task.".to_owned(),
        Complexity::Planned => format!(
            "Planned deterministically (no model) from a request: {} steps ({} tool, {} processing, {} clarification).",
            steps.len(),
            count(Kind::Tool),
            count(Kind::Processing),
            count(Kind::Clarification)
        ),
    };
    if !placeholders.is_empty() {
        let names: Vec<String> = placeholders.iter().map(|p| format!("`{p}`")).collect();
        text.push_str(&format!(
            " {} {} placeholder mock {} that echo their input: bind real agents with `--agent-map KIND=AGENT` or \
             `--template`.",
            names.join(" and "),
            if names.len() == 1 { "is a" } else { "are" },
            if names.len() == 1 { "agent" } else { "agents" },
        ));
    }
    text
}

fn workflow(steps: &[Step], agent_of: &HashMap<Kind, String>) -> Vec<Value> {
    let mut ids = Ids::default();
    let mut tasks = Vec::with_capacity(steps.len());
    // The previous task, and the last one an agent did.
    let mut previous: Option<(String, Kind)> = None;
    let mut last_work: Option<String> = None;
    for step in steps {
        let id = ids.make(&step.text);
        let mut task = Map::new();
        task.insert("id".into(), Value::String(id.clone()));
        if step.kind == Kind::Clarification {
            task.insert("type".into(), "human_review".into());
            task.insert("prompt".into(), Value::String(literal(&step.text)));
        } else {
            if let Some(agent) = agent_of.get(&step.kind) {
                task.insert("agent".into(), Value::String(agent.clone()));
            }
            let mut input = literal(&step.text);
            match &previous {
                Some((answer, Kind::Clarification)) => {
                    input.push_str(&format!("\n\nThe answer to `{answer}`:\n{{{{ tasks.{answer}.output }}}}"));
                    if let Some(work) = &last_work {
                        input.push_str(&format!("\n\nThe output of `{work}`:\n{{{{ tasks.{work}.output }}}}"));
                    }
                }
                Some((before, _)) => {
                    input.push_str(&format!(
                        "\n\nThe output of the previous step (`{before}`):\n{{{{ tasks.{before}.output }}}}"
                    ));
                }
                None => {}
            }
            task.insert("input".into(), Value::String(input));
            last_work = Some(id.clone());
        }
        let attachments: Vec<Value> = step
            .links
            .iter()
            .map(|link| json!({ "link": link }))
            .chain(step.files.iter().map(|file| json!({ "file": file })))
            .collect();
        if !attachments.is_empty() {
            task.insert("attachments".into(), Value::Array(attachments));
        }
        tasks.push(Value::Object(task));
        previous = Some((id, step.kind));
    }
    tasks
}

/// Text as a template that renders to exactly that text: each `{{`, `{%` and `{#` becomes
/// an expression printing it.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('{') {
        match rest.as_bytes().get(at + 1) {
            Some(b'{' | b'%' | b'#') => {
                out.push_str(&rest[..at]);
                out.push_str("{{ \"");
                out.push_str(&rest[at..at + 2]);
                out.push_str("\" }}");
                rest = &rest[at + 2..];
            }
            _ => {
                out.push_str(&rest[..=at]);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Task ids made from step texts, unique within a plan.
#[derive(Default)]
struct Ids {
    used: HashSet<String>,
    /// The next suffix to try for each base.
    next: HashMap<String, usize>,
}

impl Ids {
    fn make(&mut self, text: &str) -> String {
        let base = base_id(text);
        if self.used.insert(base.clone()) {
            return base;
        }
        let next = self.next.entry(base.clone()).or_insert(2);
        loop {
            let candidate = format!("{base}_{next}");
            *next += 1;
            if self.used.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// The snake_case of the first four words of a text that are not filler, links or paths.
fn base_id(text: &str) -> String {
    let mut id = String::new();
    let mut words = 0;
    for token in text.split_whitespace().filter(|t| !t.contains("://") && !t.starts_with("./")) {
        for (_, word) in crate::steps::words(token) {
            let word: String = word.chars().filter(char::is_ascii_alphanumeric).collect();
            if word.is_empty() || FILLER.contains(&word.as_str()) {
                continue;
            }
            if words == 4 || id.len() + word.len() + 1 > 40 {
                break;
            }
            if !id.is_empty() {
                id.push('_');
            }
            id.push_str(&word);
            words += 1;
        }
        if words == 4 {
            break;
        }
    }
    if id.is_empty() {
        return "step".into();
    }
    if id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert_str(0, "step_");
    }
    if RESERVED_IDS.contains(&id.as_str()) {
        id.push_str("_step");
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_snake_case_of_the_first_words() {
        assert_eq!(base_id("Read API spec at https://example.com/spec.pdf"), "read_api_spec");
        assert_eq!(base_id("Add login with session cookies and a form"), "add_login_session_cookies");
        assert_eq!(base_id("42 is the answer"), "step_42_answer");
        assert_eq!(base_id("Quelle base ? 日本"), "quelle_base");
        assert_eq!(base_id("日本語"), "step");
        assert_eq!(base_id("True"), "true_step");
        let mut ids = Ids::default();
        let made: Vec<String> = ["Fetch", "fetch", "fetch 2", "fetch"].iter().map(|t| ids.make(t)).collect();
        assert_eq!(made, ["fetch", "fetch_2", "fetch_2_2", "fetch_3"]);
    }

    #[test]
    fn template_syntax_is_escaped() {
        assert_eq!(literal("a {{ b }} {% c {# d { e"), "a {{ \"{{\" }} b }} {{ \"{%\" }} c {{ \"{#\" }} d { e");
    }
}
