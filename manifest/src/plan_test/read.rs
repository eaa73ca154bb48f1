//! Reading a scenario from the spanned tree with the plan's reader, so unknown fields, wrong
//! types and bad words get the same located diagnostics as in a plan.

use super::fields::{
    CRITIC_EXPECT, DECISION, EVENT_MATCH, EXPECT, KIND, OUTPUT_CHECK, OVERRIDES, REPLACED, REPLY, RUN_STATUSES, SCRIPT,
    TASK_EXPECT, TEST_ENVELOPE, TEST_METADATA, TEST_SPEC, TOOL_RESULT,
};
use super::{
    EventMatch, Expect, Outcome, OutputCheck, Overrides, PlanTest, Reply, Script, Subject, TaskExpect, Vocabulary,
};
use crate::diagnostic::{Diagnostic, Problem};
use crate::fields::{API_VERSION, STRATEGY};
use crate::node_path::NodePath;
use crate::normalize::read_usage;
use crate::plan::{At, Form, Strategy};
use crate::read::{Entry, Fields, Reader, scalar_text, words_of};
use crate::source::Loc;
use crate::tree::{self, Node, Value};

/// The scenario in `text`, its event types and task statuses taken from `vocabulary`, and
/// every diagnostic.
pub(super) fn read(text: &str, vocabulary: &Vocabulary) -> (Option<PlanTest>, Vec<Diagnostic>) {
    let root = match tree::parse(text) {
        Ok(root) => root,
        Err(error) => {
            let diagnostic = error.diagnostic();
            return (None, vec![diagnostic]);
        }
    };
    let mut reader = Reader::new(Form::Enveloped, text.into());
    let test = read_document(&mut reader, &root, vocabulary);
    (test, reader.diagnostics)
}

fn read_document(reader: &mut Reader, root: &Node, vocabulary: &Vocabulary) -> Option<PlanTest> {
    let top = reader.fields(root, &NodePath::root(), "the plan test", TEST_ENVELOPE.fields, &[])?;
    for (name, expected) in [("apiVersion", API_VERSION), ("kind", KIND)] {
        let Some((entry, path)) = reader.require(&top, name, "the plan test") else { continue };
        let Some(value) = reader.string::<String>(entry, path, name) else { continue };
        if value.value != expected {
            let field = if name == "kind" { "kind" } else { "apiVersion" };
            let problem = Problem::UnsupportedVersion { field, found: value.value.clone(), expected };
            reader.push(Diagnostic::error(problem, value.loc));
        }
    }
    let mut test = PlanTest::default();
    if let Some((entry, path)) = reader.require(&top, "metadata", "the plan test")
        && let Some(metadata) = reader.fields(entry.value, path, "metadata", TEST_METADATA.fields, &[])
    {
        reader.require(&metadata, "name", "metadata");
        test.name = reader.text_of(&metadata, "name").map(|n| n.value).unwrap_or_default();
        test.description = reader.text_of(&metadata, "description").map(|d| d.value);
    }
    let (entry, path) = reader.require(&top, "spec", "the plan test")?;
    let spec = reader.fields(entry.value, path, "spec", TEST_SPEC.fields, &[])?;
    read_spec(reader, &spec, &mut test, vocabulary);
    Some(test)
}

fn read_spec(reader: &mut Reader, spec: &Fields<'_>, test: &mut PlanTest, vocabulary: &Vocabulary) {
    let plan = reader.text_of(spec, "plan");
    let request = reader.text_of(spec, "request");
    test.subject = match (plan, request) {
        (Some(plan), None) => Some(Subject::Plan(plan)),
        (None, Some(request)) => Some(Subject::Request(request)),
        (Some(_), Some(request)) => {
            let problem =
                Problem::InvalidValue { what: "spec".into(), reason: "give `plan` or `request`, not both".into() };
            reader.push(Diagnostic::error(problem, request.loc).label("second subject"));
            None
        }
        (None, None) => {
            let problem = Problem::MissingField { field: "plan".into(), context: "spec".into() };
            reader
                .push(Diagnostic::error(problem, spec.loc.clone()).help("add `plan: FILE` or `request: TEXT` to spec"));
            None
        }
    };
    if let Some((entry, path)) = spec.get("vars") {
        for (name, node, _) in reader.named(entry, path, "vars") {
            let value = reader.json(node);
            test.vars.push((name, value));
        }
    }
    if let Some((entry, path)) = spec.get("strategy") {
        let strategies = words_of::<Strategy>(&STRATEGY);
        test.strategy = reader.word(entry, path, "strategy", &strategies, &[]);
    }
    if let Some((entry, path)) = spec.get("overrides") {
        test.overrides = read_overrides(reader, entry.value, path);
    }
    if let Some((entry, path)) = spec.get("answers") {
        for (task, node, item_path) in reader.named(entry, path, "answers") {
            if let Some(text) = reader.string(Entry { key: entry.key, value: node }, &item_path, "an answer") {
                test.answers.push((task, text.value));
            }
        }
    }
    if let Some((entry, path)) = spec.get("cache") {
        for (task, node, item_path) in reader.named(entry, path, "cache") {
            if let Some(text) = reader.string(Entry { key: entry.key, value: node }, &item_path, "a stored output") {
                test.cached.push((task, text.value));
            }
        }
    }
    test.reuse = spec.get("reuse").and_then(|(entry, path)| reader.boolean(entry, path, "reuse")).unwrap_or(false);
    if let Some((entry, path)) = spec.get("reviews") {
        for (task, node, item_path) in reader.named(entry, path, "reviews") {
            let Some(fields) = reader.fields(node, &item_path, "a review decision", DECISION.fields, &[]) else {
                continue;
            };
            reader.require(&fields, "approve", "a review decision");
            let approve = reader.boolean_of(&fields, "approve").unwrap_or(false);
            test.reviews.push((task, approve, reader.text_of(&fields, "comment").map(|c| c.value)));
        }
    }
    if let Some((entry, path)) = spec.get("expect") {
        test.expect = read_expect(reader, entry.value, path, vocabulary).unwrap_or_default();
    }
}

fn read_overrides(reader: &mut Reader, node: &Node, path: &NodePath) -> Overrides {
    let mut overrides = Overrides::default();
    let Some(fields) = reader.fields(node, path, "overrides", OVERRIDES.fields, &[]) else { return overrides };
    for (field, into) in [("agents", &mut overrides.agents), ("tasks", &mut overrides.tasks)] {
        let Some((entry, path)) = fields.get(field) else { continue };
        for (name, node, item_path) in reader.named(entry, path, field) {
            if let Some(script) = read_script(reader, node, &item_path) {
                into.push((name, script));
            }
        }
    }
    if let Some((entry, path)) = fields.get("tools") {
        for (name, node, item_path) in reader.named(entry, path, "tools") {
            let Some(result) = reader.fields(node, &item_path, "a tool result", TOOL_RESULT.fields, &[]) else {
                continue;
            };
            if let Some((entry, _)) = reader.require(&result, "result", "a tool result") {
                overrides.tools.push((name, reader.json(entry.value)));
            }
        }
    }
    if let Some((entry, path)) = fields.get("planner") {
        overrides.planner = read_replies(reader, entry, path);
    }
    overrides
}

fn read_script(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<Script> {
    let fields = reader.fields(node, path, "a script", SCRIPT.fields, &[])?;
    let replies = fields.get("replies").map(|(entry, path)| read_replies(reader, entry, path)).unwrap_or_default();
    Some(Script { replies, latency: reader.duration_of(&fields, "latency") })
}

fn read_replies(reader: &mut Reader, entry: Entry<'_>, path: &NodePath) -> Vec<Reply> {
    match &entry.value.value {
        Value::Seq(items) => {
            items.iter().enumerate().filter_map(|(i, item)| read_reply(reader, item, &path.index(i))).collect()
        }
        _ => read_reply(reader, entry.value, path).into_iter().collect(),
    }
}

fn read_reply(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<Reply> {
    if let Some(text) = scalar_text(node) {
        return Some(Outcome::Output(text).into());
    }
    let fields = reader.fields(node, path, "a reply", REPLY.fields, &[])?;
    let given = reader.alternative(&fields, node, path, "reply", &REPLY)?;
    if fields.has("arguments") && given != "tool" {
        let (entry, path) = fields.get("arguments")?;
        reader.invalid(entry.key, path, "reply", "`arguments` belong to a `tool` reply");
        return None;
    }
    let tokens = match fields.get("tokens") {
        Some((entry, path)) => Some(read_usage(reader, entry.value, path)?),
        None => None,
    };
    let outcome = if given == "json" {
        let (entry, _) = fields.get("json")?;
        Outcome::Json(reader.json(entry.value))
    } else {
        let text = reader.text_of(&fields, given)?;
        match given {
            "output" => Outcome::Output(text.value),
            "fail" => Outcome::Fail(text.value),
            "transient" => Outcome::Transient(text.value),
            "clarify" => Outcome::Clarify(text.value),
            _ => {
                let arguments =
                    fields.get("arguments").map_or(serde_json::json!({}), |(entry, _)| reader.json(entry.value));
                Outcome::Tool { tool: text, arguments }
            }
        }
    };
    Some(Reply { outcome, tokens })
}

fn read_expect(reader: &mut Reader, node: &Node, path: &NodePath, vocabulary: &Vocabulary) -> Option<Expect> {
    let fields = reader.fields(node, path, "expect", EXPECT.fields, &[])?;
    let mut expect = Expect { status: word_of(reader, &fields, "status", &RUN_STATUSES), ..Expect::default() };
    if let Some((entry, path)) = fields.get("tasks") {
        for (task, node, item_path) in reader.named(entry, path, "tasks") {
            if let Some(task_expect) = read_task_expect(reader, node, &item_path, vocabulary) {
                expect.tasks.push((task, task_expect));
            }
        }
    }
    for (field, into) in [("events", &mut expect.events), ("order", &mut expect.order)] {
        let Some((entry, path)) = fields.get(field) else { continue };
        let Value::Seq(items) = &entry.value.value else {
            reader.wrong_type(entry.value, path, &format!("`{field}`"), "a list of events");
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            if let Some(event) = read_event(reader, item, &path.index(i), field == "events", vocabulary) {
                into.push(event);
            }
        }
    }
    expect.max_tokens = at_of(&fields, "max_tokens", reader.whole_of(&fields, "max_tokens"));
    expect.makespan = at_of(&fields, "makespan", reader.duration_of(&fields, "makespan"));
    if let Some((entry, path)) = fields.get("critic")
        && let Some(critic) = reader.fields(entry.value, path, "critic", CRITIC_EXPECT.fields, &[])
    {
        for (field, into) in [("reported", &mut expect.reported), ("not_reported", &mut expect.not_reported)] {
            if let Some((entry, path)) = critic.get(field) {
                *into = reader.strings(entry, path, "a finding code");
            }
        }
    }
    Some(expect)
}

fn read_task_expect(reader: &mut Reader, node: &Node, path: &NodePath, vocabulary: &Vocabulary) -> Option<TaskExpect> {
    let fields = reader.fields(node, path, "a task expectation", TASK_EXPECT.fields, &[])?;
    let statuses: Vec<&str> = vocabulary.task_statuses.iter().copied().chain([REPLACED]).collect();
    let mut expect = TaskExpect {
        status: word_of(reader, &fields, "status", &statuses),
        attempts: at_of(&fields, "attempts", reader.count_of(&fields, "attempts")),
        max_prompt_tokens: at_of(&fields, "max_prompt_tokens", reader.whole_of(&fields, "max_prompt_tokens")),
        min_prompt_tokens: at_of(&fields, "min_prompt_tokens", reader.whole_of(&fields, "min_prompt_tokens")),
        ..TaskExpect::default()
    };
    let Some((entry, path)) = fields.get("output") else { return Some(expect) };
    let output = reader.fields(entry.value, path, "an output check", OUTPUT_CHECK.fields, &[])?;
    for name in ["equals", "contains", "matches"] {
        if let Some(text) = reader.text_of(&output, name) {
            let check = match name {
                "equals" => OutputCheck::Equals(text.value),
                "contains" => OutputCheck::Contains(text.value),
                _ => OutputCheck::Matches(text.value),
            };
            expect.output.push(At::new(check, text.loc));
        }
    }
    match (reader.text_of(&output, "pointer"), output.get("value")) {
        (Some(pointer), Some((value, _))) => {
            let value = reader.json(value.value);
            expect.output.push(At::new(OutputCheck::Pointer(pointer.value, value), pointer.loc));
        }
        (None, None) => {}
        _ => reader.invalid(entry.value, path, "output check", "`pointer` and `value` go together"),
    }
    Some(expect)
}

fn read_event(
    reader: &mut Reader,
    node: &Node,
    path: &NodePath,
    may_be_absent: bool,
    vocabulary: &Vocabulary,
) -> Option<EventMatch> {
    let fields = reader.fields(node, path, "an event", EVENT_MATCH.fields, &[])?;
    reader.require(&fields, "type", "an event")?;
    let kind = word_of(reader, &fields, "type", vocabulary.events)?;
    let absent = reader.boolean_of(&fields, "absent").unwrap_or(false);
    if absent && !may_be_absent {
        reader.invalid(node, path, "event", "`absent` applies under `events`, not under `order`");
    }
    Some(EventMatch {
        kind: kind.value,
        task: reader.text_of(&fields, "task"),
        tool: reader.text_of(&fields, "tool"),
        arguments: fields.get("arguments").map(|(entry, _)| reader.json(entry.value)),
        absent,
        loc: Loc::new(node.span(), path),
    })
}

/// A field's word from a fixed list, with its location.
fn word_of(reader: &mut Reader, fields: &Fields<'_>, name: &str, words: &[&str]) -> Option<At<String>> {
    let (entry, path) = fields.get(name)?;
    let table: Vec<(&str, &str)> = words.iter().map(|w| (*w, *w)).collect();
    let word = reader.word(entry, path, name, &table, &[])?;
    Some(At::new(word.to_owned(), Loc::new(entry.value.span(), path)))
}

/// A value read from a field, with the field's location.
fn at_of<T>(fields: &Fields<'_>, name: &str, value: Option<T>) -> Option<At<T>> {
    let (entry, path) = fields.get(name)?;
    value.map(|value| At::new(value, Loc::new(entry.value.span(), path)))
}
