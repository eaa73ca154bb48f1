//! Validation: everything that makes a normalised plan unrunnable, reported in one pass.

use std::collections::HashSet;

use crate::diagnostic::{Diagnostic, Problem, Severity, closest, did_you_mean};
use crate::graph::{Cycles, IdIndex, TaskGraph, TaskIdx};
use crate::plan::{Attachment, DEFAULT_AGENT, ForEach, Form, Plan, Read, Runtime, Task, TaskKind, Verification};
use crate::source::{Loc, Span};
use crate::template::{self, ITEM_ROOTS, ROOTS, Reference, Templates};

/// Answers whether a file an attachment names exists; the loader passes the real file
/// system, tests pass what they like.
pub type FileCheck<'a> = &'a dyn Fn(&str) -> bool;

/// The agent name bare-form plans use for PTC-Lisp code; it has no equivalent here.
const DIRECT_AGENT: &str = "direct";

/// Checks a plan and returns its graph when the dependencies form a DAG.
pub(crate) fn validate(
    plan: &mut Plan,
    source: &str,
    files: FileCheck<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<TaskGraph> {
    validate_each(plan, &|_| source, files, out)
}

/// Like [`validate`], for a plan whose tasks were read from more than one text (a replan's
/// splice): `source_of(i)` is the text the locations of task `i` point into.
pub(crate) fn validate_each<'s>(
    plan: &mut Plan,
    source_of: &dyn Fn(TaskIdx) -> &'s str,
    files: FileCheck<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<TaskGraph> {
    let (ids, repeated) = IdIndex::of(plan);
    check_ids(plan, &ids, &repeated, out);
    check_dependencies(plan, source_of, &ids, out);
    check_agents(plan, source_of, out);
    check_policies(plan, out);
    check_schemas(plan, out);
    check_attachments(plan, files, out);
    check_providers(plan, out);
    check_http_agents(plan, out);
    check_maps(plan, out);
    check_task_types(plan, out);
    let graph = match TaskGraph::with_index(plan, ids) {
        Ok(graph) => graph,
        Err(cycles) => {
            report_cycles(plan, &cycles, out);
            return None;
        }
    };
    check_templates(plan, &graph, source_of, out);
    Some(graph)
}

/// A task whose id an earlier task has is an error at the second definition.
fn check_ids(plan: &Plan, ids: &IdIndex, repeated: &[TaskIdx], out: &mut Vec<Diagnostic>) {
    for &i in repeated {
        let task = &plan.tasks[i];
        let mut diagnostic =
            Diagnostic::error(Problem::DuplicateTask { id: task.id.value.to_string() }, task.id.loc.clone());
        if let Some(first) = ids.get(&task.id.value) {
            diagnostic = diagnostic.related(plan.tasks[first].id.loc.span, "first defined here");
        }
        out.push(diagnostic);
    }
}

fn check_dependencies<'s>(
    plan: &Plan,
    source_of: &dyn Fn(TaskIdx) -> &'s str,
    ids: &IdIndex,
    out: &mut Vec<Diagnostic>,
) {
    for (i, task) in plan.tasks.iter().enumerate() {
        for dep in &task.depends_on {
            if dep.value == task.id.value {
                out.push(Diagnostic::error(
                    Problem::SelfDependency { task: task.id.value.to_string() },
                    dep.loc.clone(),
                ));
            } else if ids.get(&dep.value).is_none() {
                let is_gate_input = task.extras().inputs.iter().any(|input| input.loc == dep.loc);
                let problem = if is_gate_input {
                    Problem::UnknownGateInput { gate: task.id.value.to_string(), input: dep.value.to_string() }
                } else {
                    Problem::UnknownDependency { task: task.id.value.to_string(), dependency: dep.value.to_string() }
                };
                let others = plan.tasks.iter().map(|t| t.id.value.as_str()).filter(|id| *id != task.id.value);
                out.push(
                    Diagnostic::error(problem, dep.loc.clone()).help("remove it, or add a task with this id").suggest(
                        source_of(i),
                        dep.loc.span,
                        &dep.value,
                        others,
                    ),
                );
            }
        }
    }
}

fn agent_help(plan: &Plan, name: &str) -> String {
    let known: Vec<&str> = plan.agents.keys().map(String::as_str).collect();
    if known.is_empty() {
        format!("define it under `agent_definitions: {{{name}: ...}}`")
    } else {
        format!("define it under `agent_definitions`, or use one of: {}", known.join(", "))
    }
}

fn check_agents<'s>(plan: &Plan, source_of: &dyn Fn(TaskIdx) -> &'s str, out: &mut Vec<Diagnostic>) {
    // The agents, providers and tools are in the text of the plan's first task; a text that does
    // not hold a misspelt word where it was found gets no fix (a replan's splice passes none).
    let plan_text = source_of(0);
    // The owner is named only for an unknown agent: formatting it for every task of a large
    // plan was 3% of loading it.
    let unknown = |owner: &dyn Fn() -> String, name: &str, loc: &Loc, text: &str, out: &mut Vec<Diagnostic>| {
        if !plan.agents.contains_key(name) {
            out.push(
                Diagnostic::error(Problem::UnknownAgent { owner: owner(), agent: name.into() }, loc.clone())
                    .help(agent_help(plan, name))
                    .suggest(text, loc.span, name, plan.agents.keys().map(String::as_str)),
            );
        }
    };
    for (i, task) in plan.tasks.iter().enumerate() {
        let text = source_of(i);
        match &task.agent {
            Some(agent)
                if agent.value == DIRECT_AGENT
                    && plan.form == Form::Bare
                    && !plan.agents.contains_key(DIRECT_AGENT) =>
            {
                out.push(
                    Diagnostic::warning(
                        Problem::Unsupported { what: "the built-in `direct` agent (PTC-Lisp code)".into() },
                        agent.loc.clone(),
                    )
                    .label("runs on the `default` agent instead")
                    .help("runner has no Lisp interpreter: to run code, define a `runtime: command` agent"),
                );
            }
            Some(agent) => unknown(&|| format!("task `{}`", task.id.value), &agent.value, &agent.loc, text, out),
            None if matches!(task.kind, TaskKind::Task | TaskKind::Expand)
                && !plan.agents.contains_key(DEFAULT_AGENT) =>
            {
                out.push(
                    Diagnostic::error(
                        Problem::MissingField { field: "agent".into(), context: format!("task `{}`", task.id.value) },
                        task.id.loc.clone(),
                    )
                    .label("this task names no agent")
                    .help(format!("add `agent: ...`, or {}", agent_help(plan, DEFAULT_AGENT))),
                );
            }
            None => {}
        }
        if let Some(Verification::LlmReviewer { agent, .. }) = task.extras().verification.as_ref() {
            let owner = || format!("the verification of task `{}`", task.id.value);
            unknown(&owner, &agent.value, &agent.loc, text, out);
        }
    }
    for (field, agent) in [("planner", &plan.control.planner), ("compactor", &plan.control.compactor)] {
        if let Some(agent) = agent {
            unknown(&|| format!("control_logic.{field}"), &agent.value, &agent.loc, plan_text, out);
        }
    }
    check_providers_and_tools(plan, plan_text, out);
}

/// The providers and tools llm agents name must be defined.
fn check_providers_and_tools(plan: &Plan, text: &str, out: &mut Vec<Diagnostic>) {
    for (name, agent) in &plan.agents {
        let Runtime::Llm { provider, tools, allow_tools, .. } = &agent.runtime else { continue };
        if let Some(provider) = provider
            && !plan.providers.contains_key(&provider.value)
        {
            out.push(
                Diagnostic::error(
                    Problem::UnknownProvider { agent: name.clone(), provider: provider.value.clone() },
                    provider.loc.clone(),
                )
                .help("define it under `providers`")
                .suggest(
                    text,
                    provider.loc.span,
                    &provider.value,
                    plan.providers.keys().map(String::as_str),
                ),
            );
        }
        for tool in tools.iter().chain(allow_tools) {
            if !plan.tools.contains_key(&tool.value) {
                let diagnostic = Diagnostic::error(
                    Problem::UnknownTool { agent: name.clone(), tool: tool.value.clone() },
                    tool.loc.clone(),
                )
                .help("define it under `tools` with a `command`")
                .suggest(text, tool.loc.span, &tool.value, plan.tools.keys().map(String::as_str));
                // LLM-written bare plans name tools their own runtime provided; they load, but say so.
                out.push(if plan.form == Form::Bare {
                    Diagnostic { severity: Severity::Warning, ..diagnostic }
                } else {
                    diagnostic
                });
            }
        }
    }
}

fn check_policies(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for task in &plan.tasks {
        let policy = &task.on_failure;
        if task.critical && policy.value.can_skip() {
            out.push(Diagnostic::error(
                Problem::SkipOnCritical { task: task.id.value.to_string() },
                policy.loc.clone(),
            ));
        }
        if policy.value.can_replan() && task.extras().for_each.is_some() {
            out.push(Diagnostic::error(Problem::ReplanInMap { task: task.id.value.to_string() }, policy.loc.clone()));
        } else if policy.value.can_replan() && plan.control.planner.is_none() {
            out.push(Diagnostic::error(
                Problem::ReplanWithoutPlanner { task: task.id.value.to_string() },
                policy.loc.clone(),
            ));
        }
    }
}

fn check_schemas(plan: &Plan, out: &mut Vec<Diagnostic>) {
    let check = |owner: String, schema: &serde_json::Value, loc: Loc, out: &mut Vec<Diagnostic>| {
        if let Err(error) = jsonschema::meta::validate(schema) {
            out.push(Diagnostic::error(Problem::InvalidSchema { owner, detail: error.to_string() }, loc));
        }
    };
    for task in &plan.tasks {
        if let Some(Verification::SchemaCheck { schema }) = task.extras().verification.as_ref() {
            check(format!("the verification of task `{}`", task.id.value), &schema.value, schema.loc.clone(), out);
        }
    }
    for (name, tool) in &plan.tools {
        if let Some(schema) = &tool.input_schema {
            check(format!("tool `{name}`"), &schema.value, schema.loc.clone(), out);
        }
    }
}

fn check_attachments(plan: &Plan, files: FileCheck<'_>, out: &mut Vec<Diagnostic>) {
    for task in &plan.tasks {
        for attachment in &task.extras().attachments {
            if let Attachment::File(file) = &attachment.value
                && !files(file)
            {
                out.push(Diagnostic::error(
                    Problem::MissingAttachment { task: task.id.value.to_string(), file: file.clone() },
                    attachment.loc.clone(),
                ));
            }
        }
    }
}

/// `for_each` and `max_items` go together, a written list within its bound, and a person's
/// review is never mapped. What a `for_each` expression reads is checked with the templates.
fn check_maps(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for task in &plan.tasks {
        let extras = task.extras();
        match (&extras.for_each, &extras.max_items) {
            (None, Some(max)) => out.push(
                Diagnostic::error(
                    Problem::InvalidValue {
                        what: "max_items".into(),
                        reason: format!("task `{}` has no `for_each`; `max_items` bounds a map's list", task.id.value),
                    },
                    max.loc.clone(),
                )
                .help("remove `max_items`, or add the `for_each` list it bounds"),
            ),
            (Some(for_each), Some(max)) => {
                if let ForEach::List(items) = &for_each.value
                    && items.len() > max.value as usize
                {
                    let problem =
                        Problem::TooManyItems { task: task.id.value.to_string(), items: items.len(), max: max.value };
                    out.push(
                        Diagnostic::error(problem, for_each.loc.clone())
                            .related(max.loc.span, format!("at most {} items", max.value)),
                    );
                }
            }
            _ => {}
        }
        if let Some(for_each) = &extras.for_each
            && task.kind == TaskKind::HumanReview
        {
            out.push(Diagnostic::error(
                Problem::InvalidValue {
                    what: "for_each".into(),
                    reason: format!(
                        "task `{}` is a `human_review`: a person reviews once, not per item",
                        task.id.value
                    ),
                },
                for_each.loc.clone(),
            ));
        }
    }
}

/// The fields only one type of task reads (`plan` and `with` for sub-plans, `max_tasks` for
/// `expand`), and what those types need: a `type: plan` task names a plan file and no agent.
fn check_task_types(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for task in &plan.tasks {
        let extras = task.extras();
        let id = || task.id.value.to_string();
        let wrong = |field: &str, kind: TaskKind, loc: &Loc, out: &mut Vec<Diagnostic>| {
            let problem = Problem::WrongTaskType { task: id(), field: field.into(), kind: kind.as_str().into() };
            out.push(Diagnostic::error(problem, loc.clone()));
        };
        if task.kind == TaskKind::Plan {
            if extras.plan.is_none() {
                let problem = Problem::MissingField { field: "plan".into(), context: format!("task `{}`", id()) };
                out.push(
                    Diagnostic::error(problem, task.id.loc.clone())
                        .label("a `type: plan` task names the plan file it runs")
                        .help("add `plan: PATH`, relative to this plan's file"),
                );
            }
            if let Some(agent) = &task.agent {
                let reason = format!("task `{}` runs a plan file as a child run, not an agent", id());
                out.push(Diagnostic::error(Problem::InvalidValue { what: "agent".into(), reason }, agent.loc.clone()));
            }
        } else {
            if let Some(path) = &extras.plan {
                wrong("plan", TaskKind::Plan, &path.loc, out);
            }
            if let Some(value) = extras.with.values().next() {
                wrong("with", TaskKind::Plan, &value.loc, out);
            }
        }
        if task.kind != TaskKind::Expand
            && let Some(max) = &extras.max_tasks
        {
            wrong("max_tasks", TaskKind::Expand, &max.loc, out);
        }
    }
}

/// Whether `text` can be the name of an environment variable.
fn is_variable_name(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Secrets of `http` agents are named by variable, never written in the plan: not in
/// `api_key_env`, `headers_env`, nor as `user:password@` in the url.
fn check_http_agents(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for (name, agent) in &plan.agents {
        let Runtime::Http { url, api_key_env, headers_env, .. } = &agent.runtime else { continue };
        let authority =
            url.value.split_once("://").map_or("", |(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""));
        if authority.contains('@') {
            out.push(
                Diagnostic::error(Problem::LiteralSecret { agent: name.clone(), field: "url".into() }, url.loc.clone())
                    .help("put them in an environment variable and name it in `api_key_env` or `headers_env`"),
            );
        }
        let key = api_key_env.iter().map(|v| ("api_key_env", "`api_key_env: SERVICE_KEY`", v));
        let headers = headers_env.values().map(|v| ("headers_env", "`headers_env: {X-Token: SERVICE_TOKEN}`", v));
        for (field, example, variable) in key.chain(headers).filter(|(_, _, v)| !is_variable_name(&v.value)) {
            // Never echo the value: it may be a real key. The loader masks it in the source too.
            out.push(
                Diagnostic::error(
                    Problem::LiteralSecret { agent: name.clone(), field: field.into() },
                    variable.loc.clone(),
                )
                .help(format!("put the secret in an environment variable and write its name, e.g. {example}")),
            );
        }
    }
}

fn check_providers(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for (name, provider) in &plan.providers {
        let Some(variable) = &provider.api_key_env else { continue };
        if !is_variable_name(&variable.value) {
            // Never echo the value: it may be a real key. The loader masks it in the source too.
            out.push(Diagnostic::error(Problem::LiteralApiKey { provider: name.clone() }, variable.loc.clone()));
        }
    }
}

fn report_cycles(plan: &Plan, cycles: &Cycles, out: &mut Vec<Diagnostic>) {
    for members in &cycles.0 {
        let ids: Vec<&str> = members.iter().map(|&m| plan.tasks[m].id.value.as_str()).collect();
        let first = &plan.tasks[members[0]];
        let mut diagnostic = Diagnostic::error(
            Problem::Cycle { members: ids.iter().map(|s| (*s).to_owned()).collect() },
            first.id.loc.clone(),
        );
        for &m in members {
            let task = &plan.tasks[m];
            for dep in &task.depends_on {
                if dep.value != task.id.value && ids.contains(&dep.value.as_str()) {
                    let span: Span = dep.loc.span;
                    diagnostic = diagnostic.related(span, format!("`{}` depends on `{}`", task.id.value, dep.value));
                }
            }
        }
        out.push(diagnostic);
    }
}

/// How a task's text is read: a template is rendered, an expression evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Template,
    Expression,
}

/// One text of a task whose reads are checked: how it is read, the field it is in, the text,
/// and where it is written.
struct Checked<'t> {
    kind: Kind,
    field: &'static str,
    text: &'t str,
    loc: &'t Loc,
}

/// The texts of a task that read variables: its input and prompt (templates), its `when`, and
/// a `for_each` written as an expression.
fn checked_texts(task: &Task) -> impl Iterator<Item = Checked<'_>> {
    let extras = task.extras();
    let templates =
        [("input", task.input.as_ref()), ("prompt", extras.prompt.as_ref())].into_iter().filter_map(|(field, text)| {
            text.map(|text| Checked { kind: Kind::Template, field, text: &text.value, loc: &text.loc })
        });
    let when = extras.when.as_ref().map(|when| Checked {
        kind: Kind::Expression,
        field: "when",
        text: template::expression(&when.value),
        loc: &when.loc,
    });
    let for_each = extras.for_each.as_ref().and_then(|for_each| {
        for_each.value.expr().map(|expr| Checked {
            kind: Kind::Expression,
            field: "for_each",
            text: template::expression(expr),
            loc: &for_each.loc,
        })
    });
    let with = extras.with.values().filter_map(|value| match &value.value {
        serde_json::Value::String(text) => Some(Checked { kind: Kind::Template, field: "with", text, loc: &value.loc }),
        _ => None,
    });
    templates.chain(when).chain(for_each).chain(with)
}

/// Checks every template and expression and records on each task the upstream outputs they read.
fn check_templates<'s>(
    plan: &mut Plan,
    graph: &TaskGraph,
    source_of: &dyn Fn(TaskIdx) -> &'s str,
    out: &mut Vec<Diagnostic>,
) {
    let templates = Templates::default();
    let maps: HashSet<&str> =
        plan.tasks.iter().filter(|t| t.extras().for_each.is_some()).map(|t| t.id.value.as_str()).collect();
    let mut all_reads = Vec::with_capacity(plan.tasks.len());
    for (i, task) in plan.tasks.iter().enumerate() {
        let in_map = task.extras().for_each.is_some()
            || template::map_of_item(&task.id.value).is_some_and(|map| maps.contains(map));
        let mut reads = Vec::new();
        for checked in checked_texts(task) {
            let owner = || match checked.field {
                "input" | "prompt" => format!("the input of task `{}`", task.id.value),
                field => format!("the `{field}` of task `{}`", task.id.value),
            };
            let parsed = match checked.kind {
                Kind::Template => templates.references(checked.text),
                Kind::Expression => templates.expression_references(checked.text),
            };
            let references = match parsed {
                Ok(references) => references,
                Err(error) => {
                    let detail = error.to_string();
                    let problem = match checked.kind {
                        Kind::Template => Problem::TemplateSyntax { owner: owner(), detail },
                        Kind::Expression => Problem::ExpressionSyntax { owner: owner(), detail },
                    };
                    out.push(Diagnostic::error(problem, checked.loc.clone()));
                    continue;
                }
            };
            // The list a map's items come from is known before its items exist.
            let scope = Scope { kind: checked.kind, items: in_map && checked.field != "for_each" };
            let check = Reads { plan, graph, index: i, task, owner: &owner, scope, text: source_of(i) };
            let mut runtime = false;
            for reference in references {
                runtime |= reference.root == "tasks";
                let loc = narrow(source_of(i), checked.loc, &reference.path);
                reads.extend(check.check(reference, loc, out));
            }
            if checked.field == "for_each" && runtime && task.extras().max_items.is_none() {
                out.push(Diagnostic::error(
                    Problem::UnboundedMap { task: task.id.value.to_string() },
                    checked.loc.clone(),
                ));
            }
        }
        all_reads.push(reads);
    }
    for (task, reads) in plan.tasks.iter_mut().zip(all_reads) {
        task.reads = reads;
    }
}

/// What a text may read: how it is read, and whether `item` and `index` are set.
#[derive(Debug, Clone, Copy)]
struct Scope {
    kind: Kind,
    items: bool,
}

impl Scope {
    /// The variables it may read.
    fn roots(self) -> impl Iterator<Item = &'static str> + Clone {
        let items: &[&str] = if self.items { ITEM_ROOTS } else { &[] };
        ROOTS.iter().chain(items).copied()
    }
}

/// The checks of what one text of a task reads.
#[derive(Clone, Copy)]
struct Reads<'a> {
    plan: &'a Plan,
    graph: &'a TaskGraph,
    index: TaskIdx,
    task: &'a Task,
    owner: &'a dyn Fn() -> String,
    scope: Scope,
    /// The text the task's locations point into.
    text: &'a str,
}

impl Reads<'_> {
    /// Checks one variable the text reads, and returns the upstream output it reads, if any.
    fn check(&self, reference: Reference, loc: Loc, out: &mut Vec<Diagnostic>) -> Option<Read> {
        let Reads { plan, graph, index, task, owner, scope, text } = *self;
        let root = reference.root.as_str();
        if ITEM_ROOTS.contains(&root) && !scope.items {
            out.push(Diagnostic::error(Problem::ItemOutsideMap { owner: owner(), variable: reference.path }, loc));
            return None;
        }
        if !scope.roots().any(|known| known == root) {
            let what = match scope.kind {
                Kind::Template => "templates",
                Kind::Expression => "expressions",
            };
            let roots: Vec<&str> = scope.roots().collect();
            let help =
                did_you_mean(root, scope.roots()).unwrap_or_else(|| format!("{what} can read: {}", roots.join(", ")));
            out.push(
                Diagnostic::error(
                    Problem::TemplateUnknownVariable { owner: owner(), variable: reference.root.clone() },
                    loc,
                )
                .help(help),
            );
            return None;
        }
        if root == "vars"
            && let Some(declared) = &plan.vars
            && let Some(name) = reference.path.split('.').nth(1)
            && !declared.contains_key(name)
        {
            let mut diagnostic =
                Diagnostic::error(Problem::UndeclaredVar { owner: owner(), name: name.to_owned() }, loc);
            if let Some(help) = did_you_mean(name, declared.keys().map(String::as_str)) {
                diagnostic = diagnostic.help(help);
            }
            out.push(diagnostic);
            return None;
        }
        let read = reference.task?;
        match graph.index_of(&read) {
            // An unknown dependency is reported already; one error per mistake.
            None if task.depends_on.iter().any(|d| d.value == read) => {}
            None => out.push(
                Diagnostic::error(
                    Problem::TemplateUnknownVariable { owner: owner(), variable: format!("tasks.{read}") },
                    loc.clone(),
                )
                .label("no task has this id")
                .suggest(
                    text,
                    id_in(text, &loc, &read),
                    &read,
                    plan.tasks.iter().map(|t| t.id.value.as_str()),
                ),
            ),
            // `depends_on: [serach]` is reported already, with "did you mean `search`?".
            Some(j) if !graph.is_ancestor(j, index) && !misspells(task, graph, &read) => out.push(
                Diagnostic::error(
                    Problem::TemplateNotAncestor { task: task.id.value.to_string(), read: read.clone() },
                    loc.clone(),
                )
                .related(plan.tasks[j].id.loc.span, format!("`{read}` is defined here, not upstream"))
                .with_fix(if graph.is_ancestor(index, j) {
                    None
                } else {
                    depend_on(text, task, &read)
                }),
            ),
            Some(_) => {}
        }
        Some(Read { task: read, attribute: reference.attribute, field: reference.field, loc })
    }
}

/// The fix that makes `task` depend on `read`: an entry after the last dependency it writes in
/// `depends_on`, or a `depends_on` of its own when it writes none.
fn depend_on(text: &str, task: &Task, read: &str) -> Option<crate::fix::Fix> {
    let title = format!("add `{read}` to the dependencies of `{}`", task.id.value);
    let inputs = &task.extras().inputs;
    let written = task.depends_on.iter().filter(|d| {
        let at = text.get(d.loc.span.offset()..d.loc.span.offset() + d.loc.span.len()).unwrap_or("");
        !d.loc.span.is_empty()
            && at.trim_matches(['"', '\'']) == d.value.as_str()
            && !inputs.iter().any(|i| i.loc == d.loc)
    });
    match written.last() {
        Some(last) => crate::fix::Fix::add_entry(text, last.loc.span, read, title),
        None => {
            let json = serde_json::to_string(&[read]).ok()?;
            crate::fix::Fix::add_field(text, task.id.loc.span, "depends_on", &format!("[{read}]"), &json, title)
        }
    }
}

/// Where a template names task `id`: the end of its narrowed location `tasks.ID`; an empty
/// span when the location was not narrowed to it, so no fix is offered.
fn id_in(text: &str, loc: &Loc, id: &str) -> Span {
    let written = text.get(loc.span.offset()..loc.span.offset() + loc.span.len()).unwrap_or("");
    let named = ["tasks.", "results."].iter().any(|prefix| written.strip_prefix(prefix) == Some(id));
    if named { Span::new(loc.span.offset() + loc.span.len() - id.len(), id.len()) } else { Span::default() }
}

/// Whether one of the task's dependencies names no task but is a likely typo for `read`.
fn misspells(task: &Task, graph: &TaskGraph, read: &str) -> bool {
    task.depends_on.iter().any(|d| graph.index_of(&d.value).is_none() && closest(&d.value, [read]).is_some())
}

/// Narrows a template's location to the first place its text mentions `path`, when the
/// scalar is written plainly enough to find it; otherwise keeps the whole value.
fn narrow(source: &str, loc: &Loc, path: &str) -> Loc {
    let Some(text) = source.get(loc.span.offset()..loc.span.offset() + loc.span.len()) else { return loc.clone() };
    let mut parts = path.split('.');
    let root = parts.next().unwrap_or(path);
    let found = match (root, parts.next()) {
        // `tasks.X`, or the bare form's `results.X` it was rewritten from; searched without
        // building the strings, as this runs for every reference of every task.
        ("tasks", Some(task)) => ["tasks.", "results."].iter().find_map(|prefix| {
            text.match_indices(task)
                .find(|(at, _)| text[..*at].ends_with(prefix))
                .map(|(at, _)| (at - prefix.len(), prefix.len() + task.len()))
        }),
        // `vars.NAME`, `item.FIELD`: the name after its root, so two reads of one root are told apart.
        (_, Some(name)) => text
            .match_indices(name)
            .find(|(at, _)| {
                !text[at + name.len()..].starts_with(is_name)
                    && text[..*at].strip_suffix('.').is_some_and(|before| ends_with_word(before, root))
            })
            .map(|(at, _)| (at - root.len() - 1, root.len() + 1 + name.len()))
            .or_else(|| word(text, root)),
        _ => word(text, root),
    };
    found.map_or_else(|| loc.clone(), |(at, len)| Loc::new(Span::new(loc.span.offset() + at, len), &loc.path))
}

/// Whether a character can be part of a name in a template.
fn is_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Where `word` first stands in `text` as a whole name, not part of a longer one; else where it
/// first stands at all.
fn word(text: &str, word: &str) -> Option<(usize, usize)> {
    text.match_indices(word)
        .find(|(at, _)| !text[..*at].ends_with(is_name) && !text[at + word.len()..].starts_with(is_name))
        .map(|(at, _)| (at, word.len()))
        .or_else(|| text.find(word).map(|at| (at, word.len())))
}

/// Whether `text` ends with `word` as a whole name, not the end of a longer name or path.
fn ends_with_word(text: &str, word: &str) -> bool {
    text.strip_suffix(word).is_some_and(|before| !before.ends_with(|c: char| is_name(c) || c == '.'))
}
