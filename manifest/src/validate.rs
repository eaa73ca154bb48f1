//! Validation: everything that makes a normalised plan unrunnable, reported in one pass.

use crate::diagnostic::{Diagnostic, Problem, Severity, closest, did_you_mean};
use crate::graph::{Cycles, IdIndex, TaskGraph, TaskIdx};
use crate::plan::{Attachment, DEFAULT_AGENT, Form, Plan, Read, Runtime, Task, TaskKind, Verification};
use crate::source::{Loc, Span};
use crate::template::{ROOTS, Templates};

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
    check_dependencies(plan, &ids, out);
    check_agents(plan, out);
    check_policies(plan, out);
    check_schemas(plan, out);
    check_attachments(plan, files, out);
    check_providers(plan, out);
    check_http_agents(plan, out);
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

fn check_dependencies(plan: &Plan, ids: &IdIndex, out: &mut Vec<Diagnostic>) {
    for task in &plan.tasks {
        for dep in &task.depends_on {
            if dep.value == task.id.value {
                out.push(Diagnostic::error(
                    Problem::SelfDependency { task: task.id.value.to_string() },
                    dep.loc.clone(),
                ));
            } else if ids.get(&dep.value).is_none() {
                let help = did_you_mean(
                    &dep.value,
                    plan.tasks.iter().map(|t| t.id.value.as_str()).filter(|id| *id != task.id.value),
                )
                .or_else(|| Some("remove it, or add a task with this id".into()));
                let is_gate_input = task.extras().inputs.iter().any(|input| input.loc == dep.loc);
                let problem = if is_gate_input {
                    Problem::UnknownGateInput { gate: task.id.value.to_string(), input: dep.value.to_string() }
                } else {
                    Problem::UnknownDependency { task: task.id.value.to_string(), dependency: dep.value.to_string() }
                };
                out.push(Diagnostic::error(problem, dep.loc.clone()).maybe_help(help));
            }
        }
    }
}

fn agent_help(plan: &Plan, name: &str) -> Option<String> {
    did_you_mean(name, plan.agents.keys().map(String::as_str)).or_else(|| {
        let known: Vec<&str> = plan.agents.keys().map(String::as_str).collect();
        Some(if known.is_empty() {
            format!("define it under `agent_definitions: {{{name}: ...}}`")
        } else {
            format!("define it under `agent_definitions`, or use one of: {}", known.join(", "))
        })
    })
}

fn check_agents(plan: &Plan, out: &mut Vec<Diagnostic>) {
    // The owner is named only for an unknown agent: formatting it for every task of a large
    // plan was 3% of loading it.
    let unknown = |owner: &dyn Fn() -> String, name: &str, loc: &Loc, out: &mut Vec<Diagnostic>| {
        if !plan.agents.contains_key(name) {
            out.push(
                Diagnostic::error(Problem::UnknownAgent { owner: owner(), agent: name.into() }, loc.clone())
                    .maybe_help(agent_help(plan, name)),
            );
        }
    };
    for task in &plan.tasks {
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
            Some(agent) => unknown(&|| format!("task `{}`", task.id.value), &agent.value, &agent.loc, out),
            None if task.kind == TaskKind::Task && !plan.agents.contains_key(DEFAULT_AGENT) => {
                out.push(
                    Diagnostic::error(
                        Problem::MissingField { field: "agent".into(), context: format!("task `{}`", task.id.value) },
                        task.id.loc.clone(),
                    )
                    .label("this task names no agent")
                    .maybe_help(agent_help(plan, DEFAULT_AGENT).map(|h| format!("add `agent: ...`, or {h}"))),
                );
            }
            None => {}
        }
        if let Some(Verification::LlmReviewer { agent, .. }) = task.extras().verification.as_ref() {
            unknown(&|| format!("the verification of task `{}`", task.id.value), &agent.value, &agent.loc, out);
        }
    }
    for (field, agent) in [("planner", &plan.control.planner), ("compactor", &plan.control.compactor)] {
        if let Some(agent) = agent {
            unknown(&|| format!("control_logic.{field}"), &agent.value, &agent.loc, out);
        }
    }
    check_providers_and_tools(plan, out);
}

/// The providers and tools llm agents name must be defined.
fn check_providers_and_tools(plan: &Plan, out: &mut Vec<Diagnostic>) {
    for (name, agent) in &plan.agents {
        let Runtime::Llm { provider, tools, allow_tools, .. } = &agent.runtime else { continue };
        if let Some(provider) = provider
            && !plan.providers.contains_key(&provider.value)
        {
            let help = did_you_mean(&provider.value, plan.providers.keys().map(String::as_str))
                .or_else(|| Some("define it under `providers`".into()));
            out.push(
                Diagnostic::error(
                    Problem::UnknownProvider { agent: name.clone(), provider: provider.value.clone() },
                    provider.loc.clone(),
                )
                .maybe_help(help),
            );
        }
        for tool in tools.iter().chain(allow_tools) {
            if !plan.tools.contains_key(&tool.value) {
                let help = did_you_mean(&tool.value, plan.tools.keys().map(String::as_str))
                    .or_else(|| Some("define it under `tools` with a `command`".into()));
                let diagnostic = Diagnostic::error(
                    Problem::UnknownTool { agent: name.clone(), tool: tool.value.clone() },
                    tool.loc.clone(),
                )
                .maybe_help(help);
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
        if policy.value.can_replan() && plan.control.planner.is_none() {
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

/// Checks every template and records on each task the upstream outputs it reads.
fn check_templates<'s>(
    plan: &mut Plan,
    graph: &TaskGraph,
    source_of: &dyn Fn(TaskIdx) -> &'s str,
    out: &mut Vec<Diagnostic>,
) {
    let templates = Templates::default();
    let mut all_reads = Vec::with_capacity(plan.tasks.len());
    for (i, task) in plan.tasks.iter().enumerate() {
        let mut reads = Vec::new();
        for text in [task.input.as_ref(), task.extras().prompt.as_ref()].into_iter().flatten() {
            let owner = || format!("the input of task `{}`", task.id.value);
            let references = match templates.references(&text.value) {
                Ok(references) => references,
                Err(error) => {
                    let detail = error.to_string();
                    out.push(Diagnostic::error(Problem::TemplateSyntax { owner: owner(), detail }, text.loc.clone()));
                    continue;
                }
            };
            for reference in references {
                let loc = narrow(source_of(i), &text.loc, &reference.path);
                if !ROOTS.contains(&reference.root.as_str()) {
                    out.push(
                        Diagnostic::error(
                            Problem::TemplateUnknownVariable { owner: owner(), variable: reference.root.clone() },
                            loc,
                        )
                        .maybe_help(
                            did_you_mean(&reference.root, ROOTS.iter().copied())
                                .or_else(|| Some(format!("templates can read: {}", ROOTS.join(", ")))),
                        ),
                    );
                    continue;
                }
                let Some(read) = reference.task else { continue };
                reads.push(Read {
                    task: read.clone(),
                    attribute: reference.attribute.clone(),
                    field: reference.field.clone(),
                    loc: loc.clone(),
                });
                match graph.index_of(&read) {
                    // An unknown dependency is reported already; one error per mistake.
                    None if task.depends_on.iter().any(|d| d.value == read) => {}
                    None => out.push(
                        Diagnostic::error(
                            Problem::TemplateUnknownVariable { owner: owner(), variable: format!("tasks.{read}") },
                            loc,
                        )
                        .label("no task has this id")
                        .maybe_help(did_you_mean(&read, plan.tasks.iter().map(|t| t.id.value.as_str()))),
                    ),
                    // `depends_on: [serach]` is reported already, with "did you mean `search`?".
                    Some(j) if !graph.is_ancestor(j, i) && !misspells(task, graph, &read) => {
                        out.push(Diagnostic::error(
                            Problem::TemplateNotAncestor { task: task.id.value.to_string(), read: read.clone() },
                            loc,
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        all_reads.push(reads);
    }
    for (task, reads) in plan.tasks.iter_mut().zip(all_reads) {
        task.reads = reads;
    }
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
        _ => text.find(root).map(|at| (at, root.len())),
    };
    found.map_or_else(|| loc.clone(), |(at, len)| Loc::new(Span::new(loc.span.offset() + at, len), &loc.path))
}
