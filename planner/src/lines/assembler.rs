//! Building a plan a line at a time: each line is checked against the lines accepted before
//! it, and each accepted task leaves a prefix plan that loads and validates.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use manifest::Plan;
use manifest::critic::{Lint, critique};
use serde_json::{Map, Value, json};

use super::problem::{LineError, LineProblem};
use super::verdict::Verdict;
use crate::author::check::{self, Problem};
use crate::author::extract::kind;
use crate::author::prompt::available_spec;

/// The fields a header may hold.
pub(crate) const HEADER_FIELDS: [&str; 5] = ["name", "mission", "strategy", "agents", "vars"];

/// Takes the lines of a plan one at a time and keeps those that hold with the lines before
/// them: the header first, then tasks whose agents are defined and whose dependencies are
/// earlier tasks, each leaving a prefix plan that loads without error (the plan's name is the
/// one given, whatever the header says). The template's agents are held to the same policy as
/// a whole authored plan: a model may define mock agents and llm agents on the template's
/// providers, and use the template's agents, tools and providers, nothing else.
#[derive(Debug, Clone)]
pub struct Assembler {
    name: String,
    template: Option<Plan>,
    blocking: bool,
    /// The header's fields, once a header is accepted, and its line.
    header: Option<(Map<String, Value>, usize)>,
    /// The accepted tasks' objects, in order.
    tasks: Vec<Value>,
    /// Each accepted task's id and line.
    ids: BTreeMap<String, usize>,
    /// Each rejected task line's id and line.
    rejected: BTreeMap<String, usize>,
    /// The texts of the accepted lines, in order.
    accepted: Vec<String>,
}

impl Assembler {
    /// An assembler for a plan named `name` that may use `template`'s agents, tools and
    /// providers.
    pub fn new(name: &str, template: Option<&Plan>) -> Self {
        Assembler {
            name: name.to_owned(),
            template: template.cloned(),
            blocking: false,
            header: None,
            tasks: Vec::new(),
            ids: BTreeMap::new(),
            rejected: BTreeMap::new(),
            accepted: Vec::new(),
        }
    }

    /// An assembler that has taken `accepted`, lines an earlier assembler accepted (numbered
    /// from 1); the problem of the first line that is not accepted again.
    pub fn resume(name: &str, template: Option<&Plan>, accepted: &[String]) -> Result<Self, LineProblem> {
        let mut assembler = Assembler::new(name, template);
        for (index, line) in accepted.iter().enumerate() {
            match assembler.take(index + 1, line) {
                Verdict::Header | Verdict::Task { .. } => {}
                Verdict::Rejected(problem) => return Err(problem),
                Verdict::Questions(_) => {
                    let what = "questions are not a line of a plan to continue".to_owned();
                    return Err(LineProblem::new(index + 1, None, &LineError::Order { what }));
                }
            }
        }
        Ok(assembler)
    }

    /// With `on`, also rejects a task that may call a destructive tool with no human review
    /// upstream (`critic::destructive_without_review`): a plan that runs as it is written
    /// cannot put a review before a task that has already started.
    pub fn blocking(mut self, on: bool) -> Self {
        self.blocking = on;
        self
    }

    /// The texts of the lines accepted so far, in order: the header, then the tasks.
    pub fn accepted(&self) -> &[String] {
        &self.accepted
    }

    /// How many tasks were accepted.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// The manifest of the lines accepted so far, as JSON.
    pub fn manifest_json(&self) -> Value {
        self.manifest(&self.tasks)
    }

    /// Checks line `number`, `text`, against the lines accepted before it and keeps it when it
    /// holds.
    pub fn take(&mut self, number: usize, text: &str) -> Verdict {
        let reject = |task: Option<String>, error: LineError| Verdict::Rejected(LineProblem::new(number, task, &error));
        let object = match serde_json::from_str::<Value>(text.trim()) {
            Ok(Value::Object(object)) => object,
            Ok(other) => return reject(None, LineError::Parse { reason: format!("it is {}", kind(&other)) }),
            Err(error) => return reject(None, LineError::Parse { reason: error.to_string() }),
        };
        let mut members = object.into_iter();
        let (key, value) = match (members.next(), members.next()) {
            (Some(member), None) => member,
            (None, _) => return reject(None, LineError::Kind { found: "an empty object".to_owned() }),
            (Some((first, _)), Some((second, _))) => {
                let found = format!("an object with the keys `{first}`, `{second}`...");
                return reject(None, LineError::Kind { found });
            }
        };
        match key.as_str() {
            "plan" => self.header(number, text, value),
            "task" => self.task(number, text, value),
            "questions" => self.questions(number, &value),
            other => reject(None, LineError::Kind { found: format!("an object with the key `{other}`") }),
        }
    }

    fn questions(&self, number: usize, value: &Value) -> Verdict {
        let reject = |error: LineError| Verdict::Rejected(LineProblem::new(number, None, &error));
        if let Some((_, line)) = &self.header {
            return reject(LineError::Order {
                what: format!("questions come instead of a plan, but line {line} already began one"),
            });
        }
        let questions: Option<Vec<String>> =
            value.as_array().map(|list| list.iter().filter_map(Value::as_str).map(|q| q.trim().to_owned()).collect());
        match questions {
            Some(questions)
                if !questions.is_empty()
                    && questions.iter().all(|q| !q.is_empty())
                    && value.as_array().is_some_and(|list| list.len() == questions.len()) =>
            {
                Verdict::Questions(questions)
            }
            _ => reject(LineError::Kind { found: "`questions` that are not a non-empty list of texts".to_owned() }),
        }
    }

    fn header(&mut self, number: usize, text: &str, value: Value) -> Verdict {
        let reject = |error: LineError| Verdict::Rejected(LineProblem::new(number, None, &error));
        if let Some((_, line)) = &self.header {
            return reject(LineError::Order { what: format!("the header was already given on line {line}") });
        }
        let Value::Object(fields) = value else {
            return reject(LineError::Header { what: "is not a JSON object".to_owned() });
        };
        if let Some(key) = fields.keys().find(|key| !HEADER_FIELDS.contains(&key.as_str())) {
            return reject(LineError::Header {
                what: format!("has `{key}`; it may hold only {}", HEADER_FIELDS.join(", ")),
            });
        }
        if fields.get("mission").and_then(Value::as_str).is_none_or(|m| m.trim().is_empty()) {
            return reject(LineError::Header { what: "has no `mission` text".to_owned() });
        }
        for (field, object) in [("name", false), ("strategy", false), ("agents", true), ("vars", true)] {
            let fits = |v: &Value| if object { v.is_object() } else { v.is_string() };
            if fields.get(field).is_some_and(|v| !fits(v)) {
                let shape = if object { "an object" } else { "a text" };
                return reject(LineError::Header { what: format!("has `{field}` that is not {shape}") });
            }
        }
        // The header is checked as the plan it begins: the loader's and the policy's errors
        // about anything but the (still empty) workflow are its own.
        self.header = Some((fields, number));
        let loaded = self.load(&self.manifest(&[]));
        let mut problems = Vec::new();
        if let Some(plan) = &loaded.plan {
            check::policy(plan, self.template.as_ref(), &mut problems);
        }
        problems.extend(
            loaded
                .errors()
                .filter(|d| {
                    let path = d.loc.path.to_string();
                    !path.is_empty() && !path.starts_with("spec.workflow")
                })
                .map(problem_of),
        );
        if let Some(problem) = problems.first() {
            self.header = None;
            return Verdict::Rejected(located(number, None, problem));
        }
        self.accepted.push(text.trim().to_owned());
        Verdict::Header
    }

    fn task(&mut self, number: usize, text: &str, value: Value) -> Verdict {
        let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
        let verdict = self.check_task(number, value, id.clone());
        match (&verdict, id) {
            (Verdict::Task { .. }, _) => self.accepted.push(text.trim().to_owned()),
            (Verdict::Rejected(_), Some(id)) if !self.ids.contains_key(&id) => {
                self.rejected.insert(id, number);
            }
            _ => {}
        }
        verdict
    }

    fn check_task(&mut self, number: usize, value: Value, id: Option<String>) -> Verdict {
        let reject = |error: LineError| Verdict::Rejected(LineProblem::new(number, id.clone(), &error));
        if self.header.is_none() {
            return reject(LineError::Order {
                what: "a task came before the header; the first line is `{\"plan\": {...}}`".to_owned(),
            });
        }
        if !value.is_object() {
            return reject(LineError::TaskId { what: "is not a JSON object".to_owned() });
        }
        let Some(id) = id.clone() else {
            return reject(LineError::TaskId { what: "has no `id` text".to_owned() });
        };
        if !well_formed(&id) {
            return reject(LineError::TaskId {
                what: format!("id `{id}` is not a word of letters, digits, `_` and `-` (at most 64)"),
            });
        }
        if let Some(&line) = self.ids.get(&id) {
            return reject(LineError::Duplicate { id, line });
        }
        if let Some(agent) = value.get("agent").and_then(Value::as_str) {
            let known = self.agents();
            if !known.contains(agent) {
                let known = known.into_iter().collect::<Vec<_>>().join(", ");
                return reject(LineError::Agent { id, agent: agent.to_owned(), known });
            }
        }
        for on in upstream(&value) {
            if self.ids.contains_key(&on) {
                continue;
            }
            return reject(match self.rejected.get(&on) {
                Some(&line) => LineError::UpstreamDropped { id, on, line },
                None => LineError::Dependency { id, on },
            });
        }
        let index = self.tasks.len();
        self.tasks.push(value);
        let loaded = self.load(&self.manifest(&self.tasks));
        let here = format!("spec.workflow[{index}]");
        let mut problems = loaded.plan.as_ref().map(check::sub_plans).unwrap_or_default();
        let refused = |d: &manifest::Diagnostic| loaded.plan.as_ref().is_some_and(|p| check::about_sub_plans(d, p));
        let mut errors: Vec<Problem> = loaded.errors().filter(|d| !refused(d)).map(problem_of).collect();
        // An error in the new task comes first; any other is new with this line too, as the
        // lines before it loaded without one.
        errors.sort_by_key(|p| !in_task(&p.path, &here));
        problems.extend(errors);
        let plan = match (loaded.plan, problems.first()) {
            (Some(plan), None) => plan,
            (_, Some(problem)) => {
                self.tasks.pop();
                return Verdict::Rejected(located(number, Some(id), problem));
            }
            (None, None) => {
                self.tasks.pop();
                return reject(LineError::Kind { found: "a task the loader reads no plan from".to_owned() });
            }
        };
        if self.blocking
            && let Some(tool) = destructive_unreviewed(&plan, &id)
        {
            self.tasks.pop();
            return reject(LineError::Blocked { id, tool });
        }
        self.ids.insert(id.clone(), number);
        Verdict::Task { plan: Arc::new(plan), id }
    }

    /// The agents a task may name: the template's and the header's.
    fn agents(&self) -> BTreeSet<String> {
        let mut agents: BTreeSet<String> = self.template.iter().flat_map(|plan| plan.agents.keys().cloned()).collect();
        if let Some((header, _)) = &self.header
            && let Some(defined) = header.get("agents").and_then(Value::as_object)
        {
            agents.extend(defined.keys().cloned());
        }
        agents
    }

    fn load(&self, manifest: &Value) -> manifest::Loaded {
        let text = serde_json::to_string_pretty(manifest).unwrap_or_default();
        // As for a whole authored plan: nothing here looks at the disk.
        manifest::load_str("lines.json", &self.name, &text, &|_| false)
    }

    /// The manifest of the header and `tasks`: the header's mission, strategy, variables and
    /// agents, and the template's agents the tasks name with the tools and providers they use.
    fn manifest(&self, tasks: &[Value]) -> Value {
        let empty = Map::new();
        let header = self.header.as_ref().map_or(&empty, |(fields, _)| fields);
        let mut spec = Map::new();
        if let Some(mission) = header.get("mission") {
            spec.insert("mission".into(), mission.clone());
        }
        if let Some(vars) = header.get("vars") {
            spec.insert("vars".into(), vars.clone());
        }
        let mut agents = header.get("agents").and_then(Value::as_object).cloned().unwrap_or_default();
        if let Some(template) = &self.template {
            let available = available_spec(template);
            let pick = |section: &str, names: &BTreeSet<String>| -> Map<String, Value> {
                available[section]
                    .as_object()
                    .map(|all| {
                        all.iter()
                            .filter(|(name, _)| names.contains(*name))
                            .map(|(n, v)| (n.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let named: BTreeSet<String> = tasks
                .iter()
                .filter_map(|task| task.get("agent").and_then(Value::as_str))
                .filter(|agent| !agents.contains_key(*agent))
                .map(str::to_owned)
                .collect();
            agents.extend(pick("agent_definitions", &named));
            let tools: BTreeSet<String> = agents
                .values()
                .filter_map(|agent| agent.get("tools").and_then(Value::as_array))
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            let llm = |agent: &&Value| agent.get("runtime").and_then(Value::as_str) == Some("llm");
            let mut providers: BTreeSet<String> = agents
                .values()
                .filter(llm)
                .filter_map(|agent| agent.get("provider").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            // An llm agent that names no provider uses the plan's only one.
            if agents.values().filter(llm).any(|agent| agent.get("provider").is_none()) {
                providers.extend(template.providers.keys().cloned());
            }
            for (section, names) in [("providers", &providers), ("tools", &tools)] {
                let picked = pick(section, names);
                if !picked.is_empty() {
                    spec.insert(section.into(), Value::Object(picked));
                }
            }
        }
        spec.insert("agent_definitions".into(), Value::Object(agents));
        if let Some(strategy) = header.get("strategy") {
            spec.insert("control_logic".into(), json!({"strategy": strategy}));
        }
        spec.insert("workflow".into(), Value::Array(tasks.to_vec()));
        json!({"apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": self.name}, "spec": spec})
    }
}

/// The tasks a task's object names as running before it: `depends_on` and a gate's `inputs`.
fn upstream(task: &Value) -> Vec<String> {
    ["depends_on", "inputs"]
        .iter()
        .filter_map(|field| task.get(*field))
        .flat_map(|names| match names {
            Value::String(one) => vec![one.clone()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Whether an id is a word of letters, digits, `_` and `-`, at most 64 bytes.
fn well_formed(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `path` is in the task at `task` (`spec.workflow[3]`).
fn in_task(path: &str, task: &str) -> bool {
    path.strip_prefix(task).is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// The destructive tool task `id` may call with no review upstream, if any.
fn destructive_unreviewed(plan: &Plan, id: &str) -> Option<String> {
    critique(plan).findings.into_iter().find_map(|finding| match finding.lint {
        Lint::DestructiveWithoutReview { task, tool } if task == id => Some(tool),
        _ => None,
    })
}

/// A loader's diagnostic as a problem.
fn problem_of(d: &manifest::Diagnostic) -> Problem {
    Problem { code: d.code(), message: d.to_string(), path: d.loc.path.to_string(), help: d.help.clone() }
}

/// A loader's or the policy's problem on line `number`.
fn located(number: usize, task: Option<String>, problem: &Problem) -> LineProblem {
    let mut message = problem.message.clone();
    if !problem.path.is_empty() {
        message.push_str(&format!(" (at {})", problem.path));
    }
    if let Some(help) = &problem.help {
        message.push_str(&format!("; help: {help}"));
    }
    LineProblem { line: number, task, code: problem.code.clone(), message }
}
