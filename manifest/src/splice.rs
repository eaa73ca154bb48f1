//! Splicing a planner's replacement into a running plan, when a task's `replan` policy fires.
//!
//! [`splice`] reads what the planner agent answered (JSON found by the rule every reader of a
//! model's answer shares, [`crate::find_json`]; YAML when the answer holds no JSON: a `yaml` fence,
//! or the whole answer) with the loader's own workflow and task readers in the lenient bare form,
//! so a task in a replacement means exactly what it would mean in a bare-form manifest. The new
//! tasks take the place of the failed task in the workflow, and the whole new plan is validated
//! as the loader validates a plan.
//!
//! Normalisation that depends on the whole plan is applied as a bare-form load would apply it:
//! - under `strategy: sequential` the list is re-chained in its new order (the chain links the
//!   loader added are taken out first, so a kept task chained after a removed one follows the
//!   new tasks instead);
//! - a new task that reads no upstream output through a template gets its dependencies' outputs
//!   appended to its input (`plan::implicit_inputs`), whatever the form of the running plan,
//!   since the replacement itself is bare-form text;
//! - like any bare-form task, a new task is `critical` unless its policy can skip it, and
//!   `{{ results.X }}` reads as `{{ tasks.X.output }}`;
//! - the built-in `default` agent is added for new tasks that name no agent only when the running
//!   plan is itself in the bare form; an enveloped plan must name one of its agents.
//!
//! A replacement carries tasks only: agents, tools and control logic it brings are ignored with
//! a warning.
//!
//! Locations in the replacement have YAML paths rooted at the name of [`Spliced::source`]
//! (`replacement`, or `replacement_N` when the plan already holds tasks of an earlier
//! replacement), so a task's second replan never confuses the two texts. Diagnostics about kept
//! tasks keep their locations in the original manifest.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::ops::Range;

use crate::answer;
use crate::diagnostic::{Diagnostic, Problem, Severity};
use crate::fields::{WORKFLOW_ALIASES, WORKFLOW_KEYS};
use crate::graph::TaskGraph;
use crate::node_path::NodePath;
use crate::normalize::{add_built_in_agent, append_dependency_outputs, chain_in_list_order, read_workflow};
use crate::plan::{Form, Plan, Strategy, Task};
use crate::read::{Field, Foreign, Reader, aliased};
use crate::source::{Loc, Source, Span, plan_limit};
use crate::tree::{self, Node, Value};
use crate::validate::{FileCheck, validate_each};

/// The name of a replacement's source, and the root of the paths of its locations.
pub const REPLACEMENT: &str = "replacement";

/// The fields of a replacement written as a mapping: the workflow, under any name the loader
/// accepts for it.
const WRAPPER: &[Field] = &[aliased(WORKFLOW_KEYS[0], WORKFLOW_ALIASES)];

const AGENTS_INSTEAD: &str = "a replacement can only use the plan's agents: name one of them in each task's `agent`";
const FOREIGN_WRAPPER: &[Foreign] = &[
    Foreign { name: "agent_definitions", what: "`agent_definitions` in a replacement", instead: AGENTS_INSTEAD },
    Foreign { name: "agents", what: "`agents` in a replacement", instead: AGENTS_INSTEAD },
    Foreign { name: "workers", what: "`workers` in a replacement", instead: AGENTS_INSTEAD },
    Foreign {
        name: "tools",
        what: "`tools` in a replacement",
        instead: "a replacement can only use the tools the plan's agents already have",
    },
    Foreign {
        name: "control_logic",
        what: "`control_logic` in a replacement",
        instead: "a replacement holds tasks only; the plan's control logic stays",
    },
];

/// The outcome of splicing a replacement into a plan: the new plan and its graph when they could
/// be built, the ids of the new tasks, and every diagnostic, errors first.
#[derive(Debug, Clone)]
pub struct Spliced {
    /// The plan with the replacement in place, when the replacement held at least one task.
    pub plan: Option<Plan>,
    /// The new plan's task graph, when its dependencies form a DAG.
    pub graph: Option<TaskGraph>,
    /// The ids of the new tasks, in workflow order.
    pub added: Vec<String>,
    /// Everything found: the replacement's own diagnostics first (in its source order), then
    /// errors in kept tasks that the splice caused. Warnings and notes about kept parts of the
    /// plan were reported when it was loaded and are not repeated.
    pub diagnostics: Vec<Diagnostic>,
    /// The planner's answer, named [`REPLACEMENT`] (or `replacement_N`): what snippets of
    /// diagnostics in the replacement are drawn from.
    pub source: Source,
}

impl Spliced {
    /// Whether the new plan can run: it was built, its graph too, and nothing is an error.
    pub fn is_valid(&self) -> bool {
        self.plan.is_some() && self.graph.is_some() && !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The diagnostics that are errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    /// Whether a diagnostic's location is in the replacement, so it can be drawn with a snippet
    /// of [`Spliced::source`]; other locations point into the original manifest.
    pub fn in_replacement(&self, diagnostic: &Diagnostic) -> bool {
        under(&diagnostic.loc.path.to_string(), &self.source.name)
    }

    /// The errors as plain text for a repair prompt: per error its code and message, which task
    /// it concerns (new or kept) and where, then its help; empty when there is no error.
    pub fn problems(&self) -> String {
        let tasks = self.plan.as_ref().map_or(&[][..], |plan| plan.tasks.as_slice());
        let by_path = by_path(tasks);
        let mut out = String::new();
        // Writing into a String cannot fail.
        for diagnostic in self.errors() {
            let _ = write!(out, "- {}: {}", diagnostic.code(), diagnostic);
            let path = &diagnostic.loc.path.to_string();
            let owner = task_at(&by_path, path);
            let new = self.in_replacement(diagnostic);
            match (owner, path.is_empty()) {
                (Some(task), _) if new => {
                    let _ = write!(out, " [new task `{}`, at {path}]", task.id.value);
                }
                (Some(task), _) => {
                    let _ = write!(out, " [kept task `{}`, which cannot change]", task.id.value);
                }
                (None, false) if new => {
                    let _ = write!(out, " [at {path}]");
                }
                _ => {}
            }
            out.push('\n');
            if let Some(help) = &diagnostic.help {
                let _ = writeln!(out, "  help: {help}");
            }
        }
        out
    }

    fn failed(source: Source, diagnostic: Diagnostic) -> Self {
        Spliced { plan: None, graph: None, added: Vec::new(), diagnostics: vec![diagnostic], source }
    }
}

/// Replaces the tasks `removed` of `plan` by the tasks the planner answered in `text`, inserted
/// where task `at` was, and validates the result. File attachments of new tasks are not checked
/// (see [`splice_with`]).
pub fn splice(plan: &Plan, removed: &[&str], at: &str, text: &str) -> Spliced {
    splice_with(plan, removed, at, text, &|_| true)
}

/// Like [`splice`], with `files` answering whether a file a new task attaches exists (relative to
/// the plan's folder), as [`crate::load_str`] takes it.
pub fn splice_with(plan: &Plan, removed: &[&str], at: &str, text: &str, files: FileCheck<'_>) -> Spliced {
    let root_path = root_for(plan);
    let source = Source::new(root_path.clone(), text);
    let root_node = NodePath::from(root_path.as_str());
    let root_loc = |span: Span| Loc::new(span, &root_node);
    let limit = plan_limit();
    if text.len() as u64 > limit {
        let diagnostic = crate::load::too_large(text.len() as u64, limit, root_loc(Span::default()));
        return Spliced::failed(source, diagnostic.label("too large"));
    }
    let root = match read_answer(&source) {
        Ok(root) => root,
        Err((message, offset)) => {
            let diagnostic = Diagnostic::error(Problem::ReplacementNotJson { message }, root_loc(Span::new(offset, 0)))
                .label("here")
                .help(r#"answer with one JSON object, `{"workflow": [{"id": ..., "agent": ..., "input": ...}]}`"#);
            return Spliced::failed(source, diagnostic);
        }
    };

    let mut reader = Reader::new(Form::Bare, std::sync::Arc::clone(&source.text));
    let mut tasks = Vec::new();
    if matches!(root.value, Value::Seq(_)) {
        tasks = read_workflow(&mut reader, root, &root_node);
    } else if let Some(fields) = reader.fields(&root, &root_node, "the replacement", WRAPPER, FOREIGN_WRAPPER) {
        match fields.get(WORKFLOW_KEYS[0]) {
            // A replacement is a model's answer, a few tasks: its workflow is read from a copy.
            Some((entry, path)) => tasks = read_workflow(&mut reader, entry.value.clone(), path),
            None => reader.push(
                Diagnostic::error(Problem::EmptyWorkflow, root_loc(root.span()))
                    .label("no `workflow` here")
                    .help(r#"answer with `{"workflow": [...]}` or a JSON list of tasks"#),
            ),
        }
    }
    if tasks.is_empty() {
        let mut diagnostics = reader.diagnostics;
        sort(&mut diagnostics, &root_path);
        return Spliced { plan: None, graph: None, added: Vec::new(), diagnostics, source };
    }

    let mut diagnostics = Vec::new();
    let added: Vec<String> = tasks.iter().map(|t| t.id.value.to_string()).collect();
    let (mut new_plan, new) = insert(plan, removed, at, tasks, &mut diagnostics);
    if new_plan.control.strategy == Strategy::Sequential {
        rechain(&mut new_plan.tasks);
    }
    for task in &mut new_plan.tasks[new.clone()] {
        append_dependency_outputs(&mut reader, task);
    }
    if new_plan.form == Form::Bare {
        add_built_in_agent(&mut new_plan);
    }
    diagnostics.append(&mut reader.diagnostics);

    let mut checked = Vec::new();
    let source_of = |i: usize| if new.contains(&i) { text } else { "" };
    let graph = validate_each(&mut new_plan, &source_of, files, &mut checked);
    let context = Context::new(&new_plan, new.clone(), removed, &root_path);
    diagnostics.extend(checked.into_iter().filter_map(|d| context.adjust(d)));
    sort(&mut diagnostics, &root_path);
    Spliced { plan: Some(new_plan), graph, added, diagnostics, source }
}

/// The root of the paths in this replacement: `replacement`, unless tasks of an earlier
/// replacement already use it.
fn root_for(plan: &Plan) -> String {
    let taken = |root: &str| plan.tasks.iter().any(|t| under(&t.loc.path.to_string(), root));
    if !taken(REPLACEMENT) {
        return REPLACEMENT.to_owned();
    }
    // At most one root per task is taken, so one of these is free.
    (2..plan.tasks.len() + 3)
        .map(|n| format!("{REPLACEMENT}_{n}"))
        .find(|root| !taken(root))
        .unwrap_or_else(|| REPLACEMENT.to_owned())
}

/// The tasks by the path of their mapping (the first task at a path wins).
fn by_path(tasks: &[Task]) -> HashMap<String, &Task> {
    let mut map = HashMap::with_capacity(tasks.len());
    for task in tasks.iter().filter(|t| !t.loc.path.is_empty()) {
        map.entry(task.loc.path.to_string()).or_insert(task);
    }
    map
}

/// The task whose mapping holds a path: the one at the longest prefix of it that ends where a
/// path part ends.
fn task_at<'t>(by_path: &HashMap<String, &'t Task>, path: &str) -> Option<&'t Task> {
    let ends = path.match_indices(['.', '[']).map(|(i, _)| i).chain([path.len()]);
    let mut found = None;
    for end in ends {
        if let Some(task) = by_path.get(&path[..end]) {
            found = Some(*task);
        }
    }
    found
}

/// Whether a YAML path is `root` or inside it.
fn under(path: &str, root: &str) -> bool {
    path.strip_prefix(root).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The plan without the removed tasks and with `tasks` where `at` was (at the end when the plan
/// has no task `at`, which is reported); also the range of the new tasks.
fn insert(
    plan: &Plan,
    removed: &[&str],
    at: &str,
    tasks: Vec<Task>,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Plan, Range<usize>) {
    let removed: HashSet<&str> = removed.iter().copied().collect();
    let mut new_plan = plan.clone();
    let old = std::mem::take(&mut new_plan.tasks);
    let mut kept = Vec::with_capacity(old.len() + tasks.len());
    let mut position = None;
    for task in old {
        if position.is_none() && task.id.value == at {
            position = Some(kept.len());
        }
        if !removed.contains(task.id.value.as_str()) {
            kept.push(task);
        }
    }
    let position = position.unwrap_or_else(|| {
        diagnostics.push(
            Diagnostic::error(
                Problem::InvalidValue {
                    what: "replan position".into(),
                    reason: format!("the plan has no task `{at}`; the new tasks were put at the end"),
                },
                Loc::default(),
            )
            .label("no such task"),
        );
        kept.len()
    });
    let new = position..position + tasks.len();
    kept.splice(position..position, tasks);
    new_plan.tasks = kept;
    (new_plan, new)
}

/// Takes out the chain links `strategy: sequential` added at load, then chains the list again in
/// its new order.
fn rechain(tasks: &mut [Task]) {
    for task in tasks.iter_mut() {
        if let Some(previous) = task.chained_after.take() {
            let link = task.depends_on.iter().position(|d| d.value == *previous && d.loc == task.id.loc);
            if let Some(link) = link {
                task.depends_on.remove(link);
            }
        }
    }
    chain_in_list_order(tasks);
}

/// What the validator's diagnostics are adjusted with.
struct Context<'a> {
    new: Range<usize>,
    removed: &'a [&'a str],
    root: &'a str,
    /// The position of the first task with each id.
    first: HashMap<&'a str, usize>,
    /// The first new task with each id.
    first_new: HashMap<&'a str, &'a Task>,
    /// The kept tasks by path.
    kept: HashMap<String, &'a Task>,
}

impl<'a> Context<'a> {
    fn new(plan: &'a Plan, new: Range<usize>, removed: &'a [&'a str], root: &'a str) -> Self {
        let mut first = HashMap::with_capacity(plan.tasks.len());
        for (i, task) in plan.tasks.iter().enumerate() {
            first.entry(task.id.value.as_str()).or_insert(i);
        }
        let mut first_new = HashMap::new();
        for task in &plan.tasks[new.clone()] {
            first_new.entry(task.id.value.as_str()).or_insert(task);
        }
        let kept = by_path(&plan.tasks[..new.start]).into_iter().chain(by_path(&plan.tasks[new.end..])).collect();
        Context { new, removed, root, first, first_new, kept }
    }

    fn is_new(&self, id: &str) -> bool {
        self.first_new.contains_key(id)
    }

    fn first_new(&self, id: &str) -> Option<&'a Task> {
        self.first_new.get(id).copied()
    }

    /// Keeps a diagnostic where the model that writes the replacement can act on it: in the
    /// replacement when it involves a new task, with help that says what a kept task needs.
    /// Warnings and notes about kept parts were reported at load and are dropped.
    fn adjust(&self, mut d: Diagnostic) -> Option<Diagnostic> {
        let in_replacement = under(&d.loc.path.to_string(), self.root);
        if !d.is_error() && !in_replacement {
            return None;
        }
        match d.problem.clone() {
            Problem::DuplicateTask { id } if self.is_new(&id) => {
                let kept_first = self.first.get(id.as_str()).is_some_and(|i| !self.new.contains(i));
                let kept_later = !in_replacement;
                if kept_first || kept_later {
                    if let Some(task) = self.first_new(&id) {
                        d.loc = task.id.loc.clone();
                    }
                    d.related.clear();
                    d = d
                        .label("a kept task already has this id")
                        .help(format!("give this task another id: the plan keeps its task `{id}`"));
                }
            }
            Problem::Cycle { members } if members.iter().any(|m| self.is_new(m)) => {
                let kept: Vec<&str> = members.iter().filter(|m| !self.is_new(m)).map(String::as_str).collect();
                if let Some(task) = members.iter().find_map(|m| self.first_new(m)) {
                    d.loc = task.id.loc.clone();
                }
                d.related.clear();
                let in_cycle: HashSet<&str> = members.iter().map(String::as_str).collect();
                for task in members.iter().filter_map(|m| self.first_new(m)) {
                    for dep in &task.depends_on {
                        if dep.value != task.id.value && in_cycle.contains(dep.value.as_str()) {
                            d.related.push((dep.loc.span, format!("`{}` depends on `{}`", task.id.value, dep.value)));
                        }
                    }
                }
                if !kept.is_empty() {
                    let kept = kept.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                    d = d.help(format!(
                        "remove one of the labelled dependencies to break the cycle; the kept tasks {kept} cannot change"
                    ));
                }
            }
            Problem::UnknownDependency { task, dependency: missing }
            | Problem::UnknownGateInput { gate: task, input: missing }
                if !in_replacement && self.removed.contains(&missing.as_str()) =>
            {
                d.help = Some(replaced_help(&task, &missing));
            }
            Problem::TemplateUnknownVariable { variable, .. } if !in_replacement => {
                let read = variable.strip_prefix("tasks.").filter(|read| self.removed.contains(read));
                if let (Some(owner), Some(read)) = (self.owner(&d.loc), read) {
                    d.help = Some(replaced_help(&owner.id.value, read));
                }
            }
            Problem::TemplateNotAncestor { task, read } => {
                // The label at `read`'s definition is drawn from one source: keep it only when
                // the reader and the task it reads are on the same side of the splice.
                if in_replacement != self.is_new(&read) {
                    d.related.clear();
                }
                if let Some(owner) = self.owner(&d.loc).filter(|_| !in_replacement) {
                    let deps: Vec<String> = owner.depends_on.iter().map(|dep| format!("`{}`", dep.value)).collect();
                    d.help = Some(format!(
                        "the kept task `{task}` reads `{read}`, so `{read}` must run before it: \
                         make `{read}` lead to one of the tasks `{task}` depends on ({})",
                        deps.join(", ")
                    ));
                }
            }
            _ => {}
        }
        Some(d)
    }

    /// The kept task a location is in.
    fn owner(&self, loc: &Loc) -> Option<&'a Task> {
        task_at(&self.kept, &loc.path.to_string())
    }
}

fn replaced_help(task: &str, missing: &str) -> String {
    format!(
        "this replan removes `{missing}`, and the kept task `{task}` still needs it: \
         give one of the new tasks the id `{missing}`"
    )
}

/// Errors first; within a severity the replacement's diagnostics in source order, then the rest
/// in the order they were found.
fn sort(diagnostics: &mut [Diagnostic], root: &str) {
    diagnostics.sort_by_cached_key(|d| {
        let rank = match d.severity {
            Severity::Error => 0,
            Severity::Warning => 1,
            Severity::Info => 2,
        };
        let in_replacement = under(&d.loc.path.to_string(), root);
        (rank, !in_replacement, if in_replacement { d.loc.span.offset() } else { 0 })
    });
}

/// Finds the workflow in the planner's answer and reads it into a spanned tree whose spans point
/// into the whole answer: the JSON the shared rule finds ([`crate::find_json`]), else YAML (see
/// [`yaml_workflow`]). On failure, the reason and the offset it concerns.
fn read_answer(source: &Source) -> Result<Node, (String, usize)> {
    let text = &*source.text;
    let range = match answer::find_json(text) {
        Ok(found) => found.range,
        Err(error) => yaml_workflow(text).ok_or_else(|| (error.to_string(), error.offset()))?,
    };
    let body = &text[range.clone()];
    let mut node = tree::parse(body).map_err(|error| {
        let offset = (range.start + error.span.offset()).min(text.len());
        let (line, column) = source.line_column(offset);
        (format!("{} (line {line}, column {column})", error.message), offset)
    })?;
    if !matches!(node.value, Value::Seq(_) | Value::Map(_)) {
        let found = node.value.kind();
        return Err((format!("found {found}, not a list of tasks or an object with `workflow`"), range.start));
    }
    shift(&mut node, range.start);
    Ok(node)
}

/// Where a replacement written in YAML is, in an answer that holds no JSON: the body of the
/// first fence labelled `yaml` or `yml` (any case), whatever it holds, so its syntax error is
/// reported; else the whole answer when it reads as a YAML list or a mapping with a workflow.
fn yaml_workflow(text: &str) -> Option<Range<usize>> {
    let yaml = |label: &str| label.eq_ignore_ascii_case("yaml") || label.eq_ignore_ascii_case("yml");
    if let Some(fence) = answer::fences(text).into_iter().find(|fence| yaml(&text[fence.label.clone()])) {
        return Some(answer::trim(text, fence.body));
    }
    let whole = answer::trim(text, 0..text.len());
    tree::parse_yaml(&text[whole.clone()]).is_ok_and(|node| is_yaml_workflow(&node)).then_some(whole)
}

/// A YAML list, or a mapping with a `workflow` under one of its names.
fn is_yaml_workflow(node: &Node) -> bool {
    match &node.value {
        Value::Seq(_) => true,
        Value::Map(entries) => entries.iter().any(|(key, _)| {
            matches!(&key.value, Value::Str(name) if WRAPPER.iter().any(|f| *name == f.name || f.aliases.contains(&name.as_str())))
        }),
        _ => false,
    }
}

/// Moves every span of a tree `by` bytes, from a part of the answer to the whole answer.
fn shift(root: &mut Node, by: usize) {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        node.shift(by);
        match &mut node.value {
            Value::Seq(items) => stack.extend(items.iter_mut()),
            Value::Map(entries) => {
                for (key, value) in entries.iter_mut() {
                    stack.push(key);
                    stack.push(value);
                }
            }
            _ => {}
        }
    }
}
