//! The workflow: tasks in every shape LLMs write them, with verification, failure policies
//! and attachments.

use crate::diagnostic::{Diagnostic, Problem};
use crate::fields::{ACTION, ATTACHMENT, FAILURE, PHASE, RETRY_ON, TASK, TASK_KIND, VERIFICATION, VERIFICATION_KIND};
use crate::node_path::NodePath;
use crate::plan::{Action, At, Attachment, Extras, FailurePolicy, ForEach, Form, Task, TaskKind, Verification};
use crate::read::{Entry, Fields, Foreign, Reader, scalar_text, words_of};
use crate::source::Loc;
use crate::template;
use crate::text::Text;
use crate::tree::{Node, Value};

/// Words the bare form reads as a task `type`, with the type each means.
const TASK_KIND_SYNONYMS: &[(&str, &str)] = &[
    ("gate", "synthesis_gate"),
    ("synthesis", "synthesis_gate"),
    ("compress", "synthesis_gate"),
    ("summarize", "synthesis_gate"),
    ("review", "human_review"),
    ("approval", "human_review"),
    ("human_approval", "human_review"),
    ("manual", "human_review"),
];
/// Words the bare form reads as an `on_failure` action, with the action each means.
const ACTION_SYNONYMS: &[(&str, &str)] = &[("stop", "fail")];

/// Task fields of other planners, ignored with a warning in the bare form.
const FOREIGN_TASK: &[Foreign] = &[
    Foreign {
        name: "signature",
        what: "`signature` (a PTC-Lisp output signature)",
        instead: "to require fields in the output, add `verification: {type: schema_check, schema: ...}`",
    },
    Foreign {
        name: "output_signature",
        what: "`output_signature` (a PTC-Lisp output signature)",
        instead: "to require fields in the output, add `verification: {type: schema_check, schema: ...}`",
    },
    Foreign {
        name: "output",
        what: "`output` (a PTC-Lisp output mode)",
        instead: "outputs are text; JSON outputs are read as JSON by templates",
    },
    Foreign {
        name: "quality_gate",
        what: "`quality_gate`",
        instead: "use `verification: {type: llm_reviewer, agent: ..., criteria: ...}`",
    },
    Foreign {
        name: "on_verification_failure",
        what: "`on_verification_failure`",
        instead: "a failed verification is a failed attempt, handled by `on_failure`",
    },
];

/// Reads the task list in any of its shapes: a list of tasks, of strings, of phases with
/// nested tasks, or (bare form) a mapping of named phases. Each item's nodes are dropped once
/// its tasks are read, so the memory of a large plan's tree goes to its tasks.
pub(crate) fn read_workflow(reader: &mut Reader, node: Node, path: &NodePath) -> Vec<Task> {
    let span = node.span();
    let mut tasks = Vec::new();
    match node.value {
        Value::Seq(items) => {
            // Sized once: a plan of 100k tasks would otherwise leave a quarter of a grown
            // vector's room unused for as long as the plan lives.
            tasks.reserve_exact(items.len());
            for (i, item) in items.into_vec().into_iter().enumerate() {
                let item = reader.whole(item);
                read_workflow_item(reader, &item, &path.index(i), &[], &mut tasks);
            }
        }
        Value::Map(entries) if reader.form == Form::Bare => {
            for (key, phase) in entries.into_vec() {
                let name = scalar_text(&key).unwrap_or_default();
                let phase_path = path.key(&name);
                match phase.value {
                    Value::Seq(items) => {
                        for (i, item) in items.into_vec().into_iter().enumerate() {
                            read_workflow_item(reader, &item, &phase_path.index(i), &[], &mut tasks);
                        }
                    }
                    _ => read_phase(reader, &phase, &phase_path, &mut tasks),
                }
            }
        }
        Value::Null => {}
        value => reader.wrong_type(&Node::new(value, span), path, "the workflow", "a list of tasks"),
    }
    if tasks.is_empty() {
        reader.push(Diagnostic::error(Problem::EmptyWorkflow, Loc::new(span, path)));
    }
    tasks
}

fn is_phase(node: &Node) -> bool {
    let Value::Map(entries) = &node.value else { return false };
    let has = |name: &str| entries.iter().any(|(k, _)| matches!(&k.value, Value::Str(s) if s == name));
    (has("tasks") || has("steps")) && !has("input") && !has("agent")
}

fn read_workflow_item(
    reader: &mut Reader,
    item: &Node,
    path: &NodePath,
    inherited: &[At<Text>],
    tasks: &mut Vec<Task>,
) {
    if reader.form == Form::Bare {
        if let Value::Str(text) = &item.value {
            let id = format!("task_{}", tasks.len() + 1);
            let loc = Loc::new(item.span(), path);
            reader.push(
                Diagnostic::info(
                    Problem::Alias { written: "a plain string step".into(), canonical: format!("task `{id}`") },
                    loc.clone(),
                )
                .label(format!("read as task `{id}`")),
            );
            tasks.push(Task {
                id: At::new(Text::from(id), loc.clone()),
                input: Some(At::new(text.to_string(), loc.clone())),
                depends_on: inherited.to_vec(),
                loc,
                ..Task::default()
            });
            return;
        }
        if is_phase(item) {
            read_phase(reader, item, path, tasks);
            return;
        }
    }
    read_task(reader, item, path, inherited, tasks);
}

fn read_phase(reader: &mut Reader, node: &Node, path: &NodePath, tasks: &mut Vec<Task>) {
    let Some(fields) = reader.fields(node, path, "a phase", PHASE.fields, &[]) else { return };
    let depends_on =
        fields.get("depends_on").map(|(entry, path)| reader.strings(entry, path, "a task id")).unwrap_or_default();
    let Some((entry, list_path)) = reader.require(&fields, "tasks", "a phase") else { return };
    let Value::Seq(items) = &entry.value.value else {
        reader.wrong_type(entry.value, list_path, "a phase's tasks", "a list of tasks");
        return;
    };
    for (i, item) in items.iter().enumerate() {
        read_workflow_item(reader, item, &list_path.index(i), &depends_on, tasks);
    }
}

/// Reads a task onto the end of `tasks`; nothing when the node is not a mapping. The task is
/// filled in where it stays rather than built and moved: a task is 304 bytes, and a large
/// plan has 100,000 of them.
fn read_task(reader: &mut Reader, node: &Node, path: &NodePath, inherited: &[At<Text>], tasks: &mut Vec<Task>) {
    let Some(fields) = reader.fields(node, path, "a task", TASK.fields, FOREIGN_TASK) else { return };
    tasks.push(Task { loc: Loc::new(node.span(), path), ..Task::default() });
    let position = tasks.len();
    let Some(task) = tasks.last_mut() else { return };
    task.id = match fields
        .get("id")
        .and_then(|(entry, path)| Some((reader.string::<Text>(entry, path, "a task id")?, entry, path)))
    {
        Some((id, entry, path)) => {
            if let Some(map) = template::map_of_item(&id.value) {
                reader.invalid(
                    entry.value,
                    path,
                    "task id",
                    &format!(
                        "an id ending in `[N]` names an item of the map `{map}` (a task with `for_each`); rename it"
                    ),
                );
            }
            id
        }
        None => {
            if !fields.has("id") && reader.form == Form::Enveloped {
                reader.require(&fields, "id", "a task");
            }
            At::new(Text::from(format!("task_{position}")), task.loc.clone())
        }
    };
    if let Some((entry, path)) = fields.get("type") {
        task.kind = reader
            .word_or(
                entry,
                path,
                "task type",
                &words_of(&TASK_KIND),
                TASK_KIND_SYNONYMS,
                Some(("task", TaskKind::Task)),
            )
            .unwrap_or_default();
    }
    task.agent = reader.text_of(&fields, "agent");
    task.input = reader.text_of(&fields, "input");
    let mut extras = Extras { prompt: reader.text_of(&fields, "prompt"), ..Extras::default() };
    if task.kind == TaskKind::HumanReview && extras.prompt.is_none() && reader.form == Form::Bare {
        extras.prompt = task.input.take();
    }
    extras.inputs = read_dependencies(reader, &fields, inherited, task);
    extras.parallel_group = reader.text_of(&fields, "parallel_group");
    if let Some((entry, path)) = fields.get("verification") {
        extras.verification = read_verification(reader, entry, path);
    }
    task.on_failure = read_policy(reader, &fields, task.id.loc.clone());
    // The seed planner treats a task as critical unless told otherwise; a task that may be
    // skipped cannot be critical.
    let bare_default = reader.form == Form::Bare && !task.on_failure.value.can_skip();
    task.critical = reader.boolean_of(&fields, "critical").unwrap_or(bare_default);
    extras.timeout = reader.duration_of(&fields, "timeout");
    if let Some((entry, path)) = fields.get("attachments") {
        extras.attachments = read_attachments(reader, entry.value, path);
    }
    extras.max_output_tokens = reader.count_of(&fields, "max_output_tokens");
    extras.when = reader.text_of(&fields, "when");
    if let Some((entry, path)) = fields.get("for_each") {
        extras.for_each = read_for_each(reader, entry, path);
    }
    extras.max_items = fields.get("max_items").and_then(|(entry, path)| {
        Some(At::new(reader.count_of(&fields, "max_items")?, Loc::new(entry.value.span(), path)))
    });
    extras.plan = reader.text_of(&fields, "plan");
    if let Some((entry, path)) = fields.get("with") {
        extras.with = reader
            .named(entry, path, "with")
            .into_iter()
            .map(|(name, node, path)| (name.value, At::new(reader.json(node), Loc::new(node.span(), &path))))
            .collect();
    }
    extras.max_tasks = fields.get("max_tasks").and_then(|(entry, path)| {
        Some(At::new(reader.count_of(&fields, "max_tasks")?, Loc::new(entry.value.span(), path)))
    });
    if let Some((entry, path)) = fields.get("cache") {
        extras.cache = super::cache::read_cache(reader, entry, path);
    }
    if reader.form == Form::Bare {
        rewrite_result_references(reader, [task.input.as_mut(), extras.prompt.as_mut()]);
    }
    task.set_extras(extras);
    if task.kind == TaskKind::HumanReview
        && task.agent.is_some()
        && let Some((entry, path)) = fields.get("agent")
    {
        reader.invalid(
            entry.value,
            path,
            "agent",
            &format!("task `{}` is a `human_review`: a person does it, not an agent", task.id.value),
        );
    }
}

/// `for_each`: an expression (a string) or a list written out; anything else is the wrong type.
fn read_for_each(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> Option<At<ForEach>> {
    let loc = Loc::new(entry.value.span(), path);
    match &entry.value.value {
        Value::Seq(_) => match reader.json(entry.value) {
            serde_json::Value::Array(items) => Some(At::new(ForEach::List(items), loc)),
            _ => None,
        },
        Value::Str(_) => {
            reader.string(entry, path, "for_each").map(|expr: At<String>| At::new(ForEach::Expr(expr.value), loc))
        }
        _ => {
            reader.wrong_type(entry.value, path, "`for_each`", "a list, or an expression that yields one");
            None
        }
    }
}

/// A task's `depends_on` after what its phase inherits, and a gate's `inputs` (returned), which
/// it also depends on.
fn read_dependencies(
    reader: &mut Reader,
    fields: &Fields<'_>,
    inherited: &[At<Text>],
    task: &mut Task,
) -> Vec<At<Text>> {
    let written =
        fields.get("depends_on").map(|(entry, path)| reader.strings(entry, path, "a task id")).unwrap_or_default();
    // The list as read when nothing is inherited: extending an empty one would leave it room
    // for four ids.
    task.depends_on = if inherited.is_empty() { written } else { [inherited, &written].concat() };
    let mut inputs = Vec::new();
    if let Some((entry, path)) = fields.get("inputs") {
        inputs = reader.strings(entry, path, "a task id");
        if task.kind != TaskKind::SynthesisGate {
            reader.invalid(entry.value, path, "inputs", "only a `synthesis_gate` has `inputs`; use `depends_on`");
        }
        for input in &inputs {
            if !task.depends_on.iter().any(|d| d.value == input.value) {
                task.depends_on.push(input.clone());
            }
        }
    }
    if task.kind == TaskKind::SynthesisGate && inputs.is_empty() {
        inputs = task.depends_on.clone();
    }
    inputs
}

/// A task's failure policy: `on_failure`, or the bare form's `max_retries`; `fail` at `id`
/// when neither is given.
fn read_policy(reader: &mut Reader, fields: &Fields<'_>, id: Loc) -> At<FailurePolicy> {
    let mut policy = At::new(FailurePolicy::default(), id);
    if let Some((entry, path)) = fields.get("on_failure")
        && let Some(read) = read_failure(reader, entry.value, path)
    {
        policy = read;
    }
    if let Some((entry, path)) = fields.get("max_retries")
        && let Some(retries) = reader.count_of(fields, "max_retries")
        && retries > 0
        && policy.value.action != Action::Retry
    {
        let then = policy.value.action;
        let mut retry = FailurePolicy::of(Action::Retry);
        retry.max_attempts = retries.saturating_add(1);
        retry.then = then;
        policy = At::new(retry, Loc::new(entry.value.span(), path));
    }
    policy
}

/// The bare form's `{{ results.X }}` means `{{ tasks.X.output }}`: rewritten in a task's input
/// and prompt.
fn rewrite_result_references(reader: &mut Reader, templates: [Option<&mut At<String>>; 2]) {
    for text in templates.into_iter().flatten() {
        if let Some(rewritten) = template::rewrite_results(&text.value) {
            reader.push(
                Diagnostic::info(
                    Problem::Alias { written: "{{ results.X }}".into(), canonical: "{{ tasks.X.output }}".into() },
                    text.loc.clone(),
                )
                .label("template rewritten"),
            );
            text.value = rewritten;
        }
    }
}

fn read_verification(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> Option<Verification> {
    if reader.form == Form::Bare && matches!(entry.value.value, Value::Str(_)) {
        reader.push(
            Diagnostic::warning(
                Problem::Unsupported { what: "a PTC-Lisp verification predicate".into() },
                Loc::new(entry.value.span(), path),
            )
            .help("use `verification: {type: schema_check, schema: ...}` or `{type: command, command: [...]}`"),
        );
        return None;
    }
    let fields = reader.fields(entry.value, path, "a verification", VERIFICATION.fields, &[])?;
    let (kind_entry, kind_path) = reader.require(&fields, "type", "a verification")?;
    let kinds: Vec<(&str, &str)> = VERIFICATION_KIND.words().iter().map(|k| (*k, *k)).collect();
    let kind = reader.word(kind_entry, kind_path, "verification type", &kinds, &[])?;
    let extras: Vec<_> =
        fields.not_for(kind).map(|(field, extra, path)| (field.name, extra, path.to_owned())).collect();
    for (name, extra, extra_path) in extras {
        reader.push(
            Diagnostic::error(
                Problem::UnknownField { field: name.into(), context: format!("a `{kind}` verification") },
                Loc::new(extra.key.span(), extra_path),
            )
            .label("does not apply here"),
        );
    }
    let context = format!("a `{kind}` verification");
    match kind {
        "schema_check" => {
            let (schema, schema_path) = reader.require(&fields, "schema", &context)?;
            let loc = Loc::new(schema.value.span(), schema_path);
            Some(Verification::SchemaCheck { schema: At::new(reader.json(schema.value), loc) })
        }
        "llm_reviewer" => {
            let (agent, agent_path) = reader.require(&fields, "agent", &context)?;
            let agent = reader.string(agent, agent_path, "agent")?;
            let criteria = fields.get("criteria").and_then(|(e, p)| reader.string(e, p, "criteria")).map(|c| c.value);
            Some(Verification::LlmReviewer { agent, criteria })
        }
        "command" => {
            let (command, command_path) = reader.require(&fields, "command", &context)?;
            Some(Verification::Command { command: reader.argv(command, command_path, "command")? })
        }
        _ => None,
    }
}

/// Reads a policy, located at the word that decides what finally happens: the action, or the
/// `then` after retries.
fn read_failure(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<At<FailurePolicy>> {
    if !matches!(node.value, Value::Map(_)) {
        let action = read_action(reader, node, path, "on_failure")?;
        return Some(At::new(FailurePolicy::of(action), Loc::new(node.span(), path)));
    }
    let fields = reader.fields(node, path, "on_failure", FAILURE.fields, &[])?;
    let (action_entry, action_path) = reader.require(&fields, "action", "on_failure")?;
    let action = read_action(reader, action_entry.value, action_path, "on_failure.action")?;
    let mut policy = FailurePolicy::of(action);
    let mut loc = Loc::new(action_entry.value.span(), action_path);
    let extras: Vec<_> =
        fields.not_for(action.as_str()).map(|(f, entry, path)| (f.name, entry, path.to_owned())).collect();
    for (name, entry, path) in extras {
        reader.invalid(entry.value, &path, name, &format!("`{name}` applies only to `action: retry`"));
    }
    policy.max_attempts = reader.count_of(&fields, "max_attempts").unwrap_or(policy.max_attempts);
    policy.backoff = reader.duration_of(&fields, "backoff").unwrap_or(policy.backoff);
    policy.max_backoff = reader.duration_of(&fields, "max_backoff").unwrap_or(policy.max_backoff);
    if let Some((entry, path)) = fields.get("retry_on") {
        policy.retry_on = reader.word(entry, path, "retry_on", &words_of(&RETRY_ON), &[]).unwrap_or(policy.retry_on);
    }
    if let Some((entry, path)) = fields.get("then")
        && let Some(then) = read_action(reader, entry.value, path, "on_failure.then")
    {
        if then == Action::Retry {
            reader.invalid(
                entry.value,
                path,
                "then",
                "`then` says what happens after the retries: skip, replan or fail",
            );
        } else {
            policy.then = then;
            loc = Loc::new(entry.value.span(), path);
        }
    }
    Some(At::new(policy, loc))
}

fn read_action(reader: &mut Reader, node: &Node, path: &NodePath, what: &str) -> Option<Action> {
    let actions = words_of(&ACTION);
    reader.word_or(
        Entry { key: node, value: node },
        path,
        what,
        &actions,
        ACTION_SYNONYMS,
        Some(("fail", Action::Fail)),
    )
}

fn read_attachments(reader: &mut Reader, node: &Node, path: &NodePath) -> Vec<At<crate::plan::Attachment>> {
    let Value::Seq(items) = &node.value else {
        reader.wrong_type(node, path, "attachments", "a list of `{link: ...}` or `{file: ...}`");
        return Vec::new();
    };
    let mut attachments = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = path.index(i);
        let Some(fields) = reader.fields(item, &item_path, "an attachment", ATTACHMENT.fields, &[]) else { continue };
        match (fields.get("link"), fields.get("file")) {
            (Some((entry, path)), None) => {
                if let Some(link) = reader.string(entry, path, "link") {
                    attachments.push(At::new(Attachment::Link(link.value), link.loc));
                }
            }
            (None, Some((entry, path))) => {
                if let Some(file) = reader.string(entry, path, "file") {
                    attachments.push(At::new(Attachment::File(file.value), file.loc));
                }
            }
            _ => reader.invalid(item, &item_path, "attachment", "give exactly one of `link` or `file`"),
        }
    }
    attachments
}

#[cfg(test)]
mod tests {
    #[test]
    fn dependency_lists_keep_no_spare_room() {
        let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  \
                    agent_definitions: {m: {runtime: mock}}\n  control_logic: {strategy: sequential}\n  workflow:\n    \
                    - {id: a, agent: m, input: go}\n    - {id: b, agent: m, input: go, depends_on: [a]}\n    \
                    - {id: c, agent: m, input: go}\n";
        let loaded = crate::load_str("t.yaml", "t", yaml, &|_| true);
        let plan = loaded.plan.expect("the plan loads");
        // A grown vector keeps room for four ids: on a plan of 100,000 tasks, 20 MB for nothing.
        let lists: Vec<(usize, usize)> =
            plan.tasks.iter().map(|t| (t.depends_on.len(), t.depends_on.capacity())).collect();
        assert_eq!(lists, [(0, 0), (1, 1), (1, 1)]);
    }
}
