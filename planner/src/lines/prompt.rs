//! The prompt that asks for a plan a line at a time, versioned by [`LINES_PROMPT_VERSION`]:
//! the whole-plan author's rules, template and optional parts ([`Parts`]), asking for the line
//! protocol instead of one manifest; the user message (with the lines already written, to go
//! on from); and the repair message for one line.

use manifest::Plan;
use serde_json::{Map, Value, json};

use super::LINE_PROTOCOL_VERSION;
use super::problem::LineProblem;
use crate::author::prompt::{
    Parts, RESEARCH_EXAMPLE, SEQUENTIAL_EXAMPLE, TASK_RULES, describe, dynamic, for_authors, without_descriptions,
};

/// The version of the prompt below; change it whenever its text changes.
pub const LINES_PROMPT_VERSION: &str = "author-lines-1";

/// How the answer is asked for: NDJSON lines, or the one object a schema constrains the
/// server to (`{"plan": {...}, "tasks": [...]}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Lines,
    Object,
}

/// The system message with the optional `parts`.
pub(crate) fn system(name: &str, template: Option<&Plan>, parts: Parts, form: Form) -> String {
    let answer = match form {
        Form::Lines => format!(
            "## Answer: JSON lines (protocol {LINE_PROTOCOL_VERSION})\n\
             Answer with JSON objects, one per line and nothing else: no prose, no code fence, no list around them.\n\
             - The first line is the header: {{\"plan\": {{\"mission\": \"...\", \"strategy\": \"...\", \"agents\": \
             {{...}}, \"vars\": {{...}}}}}} (only `mission` is required).\n\
             - Then one line per task: {{\"task\": {{\"id\": \"...\", \"agent\": \"...\", \"input\": \"...\", \
             \"depends_on\": [...]}}}}, with any field a task of a manifest's `workflow` has.\n\
             - A task may depend only on tasks of earlier lines: write the tasks in the order they can run.\n\
             - Or, only when the request is too ambiguous to plan at all, the single line \
             {{\"questions\": [\"...\"]}} with at most three short questions."
        ),
        Form::Object => format!(
            "## Answer: one JSON object (protocol {LINE_PROTOCOL_VERSION})\n\
             Answer with exactly one JSON object and nothing else: {{\"plan\": {{\"mission\": \"...\", \"strategy\": \
             \"...\", \"agents\": {{...}}, \"vars\": {{...}}}}, \"tasks\": [{{\"id\": \"...\", \"agent\": \"...\", \
             \"input\": \"...\", \"depends_on\": [...]}}, ...]}} (only `mission` is required in `plan`).\n\
             - Each task has any field a task of a manifest's `workflow` has.\n\
             - A task may depend only on tasks before it in the list: write them in the order they can run.\n\
             - Or, only when the request is too ambiguous to plan at all, {{\"questions\": [\"...\"]}} with at most \
             three short questions."
        ),
    };
    let mut optional = String::new();
    if parts != Parts::Essentials {
        let mut schema = for_authors(manifest::schema::manifest_schema());
        if parts == Parts::BareSchema {
            schema = without_descriptions(&schema);
        }
        let schema = serde_json::to_string(&schema).unwrap_or_default();
        optional.push_str(&format!(
            "\n\n## JSON Schema of a manifest: a task is a `Task` (an item of `workflow`), the header's `agents` \
             are `agent_definitions`\n{schema}"
        ));
    }
    if parts == Parts::All {
        optional.push_str(&format!(
            "\n\n## Example: research with a parallel group and a synthesis gate\n{}",
            example(RESEARCH_EXAMPLE, form)
        ));
    }
    if matches!(parts, Parts::All | Parts::OneExample) {
        optional.push_str(&format!("\n\n## Example: a sequential plan\n{}", example(SEQUENTIAL_EXAMPLE, form)));
    }
    let available = match template {
        Some(plan) => format!(
            "## Available agents, tools and providers\n\
             Name these agents in a task's `agent` as they are; do not copy their definitions. In the header's \
             `agents` you may add `runtime: mock` agents for steps no available agent fits, and `llm` agents with \
             their own system_prompt on an available provider. Never define providers, tools or command agents.\n{}",
            describe(plan)
        ),
        None => "## Agents\nNo agents are available yet. Define one placeholder agent per role in the header's \
                 `agents` with `\"runtime\": \"mock\"`, named for the role (researcher, writer, reviewer...); real \
                 agents will be bound to them later. Define no providers, tools, llm agents or command agents."
            .to_owned(),
    };
    format!(
        "You are the plan author of `runner`, a DAG workflow engine for multi-agent work (prompt \
         {LINES_PROMPT_VERSION}).\nTurn the user's request into a runner plan, written a task at a time.\n\n\
         {answer}\n\n\
         ## Rules\n\
         - The plan is named \"{name}\"; `mission` restates the request in one or two sentences.\n\
         {TASK_RULES}\
         - Task ids are unique snake_case; attach no files.\n\
         - Prefer few tasks: as many as the request needs, no more.\n\n\
         {dynamic}\n\n\
         {available}{optional}",
        dynamic = dynamic()
    )
}

/// An example manifest in the form asked for: its header (mission, strategy, agents) and tasks.
fn example(manifest: &str, form: Form) -> String {
    let manifest: Value = serde_json::from_str(manifest).unwrap_or_default();
    let spec = &manifest["spec"];
    let mut header = Map::new();
    header.insert("mission".into(), spec["mission"].clone());
    if let Some(strategy) = spec["control_logic"].get("strategy") {
        header.insert("strategy".into(), strategy.clone());
    }
    header.insert("agents".into(), spec["agent_definitions"].clone());
    let tasks = spec["workflow"].as_array().cloned().unwrap_or_default();
    match form {
        Form::Lines => std::iter::once(json!({"plan": header}))
            .chain(tasks.into_iter().map(|task| json!({"task": task})))
            .map(|line| line.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        Form::Object => json!({"plan": header, "tasks": tasks}).to_string(),
    }
}

/// The user message: the request, and the lines already written when going on from them.
pub(crate) fn user(text: &str, prefix: &[String]) -> String {
    let request = format!("Request: {}", text.trim());
    if prefix.is_empty() {
        return request;
    }
    format!(
        "{request}\n\nThese lines of the plan are already written and kept:\n{}\n\nWrite only the lines that follow \
         them, one JSON object per line: the tasks still missing, none of these again.",
        prefix.join("\n")
    )
}

/// The repair message for one rejected line: the problem, the line, and the lines accepted so
/// far for context.
pub(crate) fn repair(problem: &LineProblem, text: &str, accepted: &[String]) -> String {
    let context = if accepted.is_empty() { "(none)".to_owned() } else { accepted.join("\n") };
    format!(
        "Line {} of your plan cannot be used: {}: {}\nThe line:\n{text}\n\nThe lines accepted so far:\n{context}\n\n\
         Answer with the one corrected line only, as one JSON object on one line, and nothing else.",
        problem.line, problem.code, problem.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::assembler::HEADER_FIELDS;
    use crate::lines::{Assembler, Splitter, Verdict};

    #[test]
    fn every_prompt_names_each_header_field_and_the_order_rule() {
        for form in [Form::Lines, Form::Object] {
            for parts in Parts::LARGEST_FIRST {
                let prompt = system("brief", None, parts, form);
                assert!(prompt.contains(LINES_PROMPT_VERSION) && prompt.contains(LINE_PROTOCOL_VERSION));
                for field in HEADER_FIELDS.iter().filter(|field| **field != "name") {
                    assert!(prompt.contains(&format!("\"{field}\"")), "{form:?} {parts:?} does not show `{field}`");
                }
                assert!(prompt.contains("may depend only on tasks"), "{form:?} {parts:?}");
            }
        }
    }

    #[test]
    fn the_examples_are_lines_the_assembler_takes_whole() {
        for form in [Form::Lines, Form::Object] {
            for manifest in [RESEARCH_EXAMPLE, SEQUENTIAL_EXAMPLE] {
                let mut splitter = Splitter::new();
                let mut lines = splitter.push(&example(manifest, form));
                lines.extend(splitter.finish());
                let mut assembler = Assembler::new("example", None);
                for (n, line) in lines.into_iter().enumerate() {
                    let verdict = assembler.take(n + 1, &line.expect("a line"));
                    assert!(!matches!(verdict, Verdict::Rejected(_)), "{form:?}: {verdict:?}");
                }
                let workflow = serde_json::from_str::<Value>(manifest).expect("JSON")["spec"]["workflow"].clone();
                assert_eq!(assembler.tasks(), workflow.as_array().map_or(0, Vec::len));
            }
        }
    }

    #[test]
    fn going_on_quotes_the_lines_written_and_a_repair_its_line_and_problem() {
        assert_eq!(user(" tea ", &[]), "Request: tea");
        let prefix = ["{\"plan\": {\"mission\": \"m\"}}".to_owned()];
        assert!(user("tea", &prefix).contains("already written and kept:\n{\"plan\": {\"mission\": \"m\"}}\n"));
        let problem =
            LineProblem { line: 4, task: None, code: "author::line_parse".to_owned(), message: "bad".to_owned() };
        let text = repair(&problem, "{oops", &prefix);
        assert!(
            text.starts_with("Line 4 of your plan cannot be used: author::line_parse: bad\nThe line:\n{oops\n"),
            "{text}"
        );
    }
}
