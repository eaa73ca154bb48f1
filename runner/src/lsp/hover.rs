//! Hover: what a task id, an agent name or a field is, and the `runner explain` entry of each
//! diagnostic at the cursor.

use std::fmt::Write as _;

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};
use manifest::Plan;
use manifest::plan::{Runtime, Task};

use super::analysis::{Analysis, Kind};
use super::document::{Document, Encoding};

/// The most characters of a task's input a hover shows.
const EXCERPT: usize = 240;

/// The hover at byte `offset`; `None` where there is nothing to say.
pub fn hover(document: &Document, analysis: &Analysis, offset: usize, encoding: Encoding) -> Option<Hover> {
    let mut text = String::new();
    let mut range = None;
    if let Some(symbol) = analysis.symbol_at(offset)
        && let Some(plan) = &analysis.loaded.plan
    {
        range = Some(document.range(symbol.span, encoding));
        match symbol.kind {
            Kind::Task => task(plan, &symbol.name, &mut text),
            Kind::Agent => agent(plan, &symbol.name, &mut text),
        }
    } else if let Some(path) = super::place::key_at(&document.text, offset) {
        let keys: Vec<&str> = path.iter().map(String::as_str).collect();
        if let Some(field) = manifest::field_at(&keys) {
            let _ = write!(text, "**`{}`**: {}", field.name, field.doc);
            if !field.words.is_empty() {
                let words: Vec<String> = field.words.iter().map(|w| format!("`{w}`")).collect();
                let _ = write!(text, "\n\nOne of: {}", words.join(", "));
            }
        }
    }
    explain(analysis, offset, &mut text);
    (!text.is_empty()).then_some(Hover {
        contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: text }),
        range,
    })
}

/// A task: its kind, agent, dependencies and the start of its input.
fn task(plan: &Plan, id: &str, out: &mut String) {
    let Some(task) = plan.tasks.iter().find(|t| t.id.value == id) else {
        let _ = write!(out, "no task has the id `{id}`");
        return;
    };
    let _ = write!(out, "**task `{id}`** ({})", task.kind.as_str());
    if let Some(agent) = &task.agent {
        let _ = write!(out, "\n\nagent `{}`", agent.value);
        if let Some(runs) = plan.agents.get(agent.value.as_str()) {
            let _ = write!(out, ": {}", runtime(&runs.runtime));
        }
    }
    let _ = write!(out, "\n\n{}", dependencies(task));
    if let Some(input) = &task.input {
        let excerpt: String = input.value.chars().take(EXCERPT).collect();
        let more = if input.value.chars().count() > EXCERPT { "…" } else { "" };
        let _ = write!(out, "\n\n```text\n{excerpt}{more}\n```");
    }
}

fn dependencies(task: &Task) -> String {
    if task.depends_on.is_empty() {
        return "depends on nothing".into();
    }
    let names: Vec<String> = task.depends_on.iter().map(|d| format!("`{}`", d.value)).collect();
    format!("depends on {}", names.join(", "))
}

/// An agent: its runtime and model, and how many tasks it does.
fn agent(plan: &Plan, name: &str, out: &mut String) {
    let Some(agent) = plan.agents.get(name) else {
        let _ = write!(out, "no agent is named `{name}`");
        return;
    };
    let tasks = plan.tasks.iter().filter(|t| t.agent.as_ref().is_some_and(|a| a.value == name)).count();
    let plural = if tasks == 1 { "" } else { "s" };
    let _ = write!(out, "**agent `{name}`**: {}\n\ndoes {tasks} task{plural}", runtime(&agent.runtime));
}

/// A runtime in a few words: `llm`, with its model and provider, or the program it runs.
fn runtime(runtime: &Runtime) -> String {
    match runtime {
        Runtime::Llm { provider, model, .. } => {
            let model = model.as_deref().map_or_else(|| "the provider's model".to_owned(), |m| format!("model `{m}`"));
            let provider = provider.as_ref().map_or("default", |p| p.value.as_str());
            format!("`llm`, {model} on provider `{provider}`")
        }
        Runtime::Command { command, .. } => format!("`command` `{}`", command.join(" ")),
        other => format!("`{}`", other.name()),
    }
}

/// The `runner explain` summary of every diagnostic and finding whose range holds `offset`.
fn explain(analysis: &Analysis, offset: usize, out: &mut String) {
    let holds = |span: manifest::Span| span.offset() <= offset && offset <= span.offset() + span.len();
    let mut codes: Vec<String> =
        analysis.loaded.diagnostics.iter().filter(|d| holds(d.loc.span)).map(|d| d.code()).collect();
    codes.extend(analysis.findings.iter().filter(|f| holds(f.loc.span)).map(|f| f.lint.code_str().to_owned()));
    codes.dedup();
    if codes.is_empty() {
        return;
    }
    let entries = crate::explain::entries();
    for code in codes {
        if !out.is_empty() {
            out.push_str("\n\n---\n\n");
        }
        let summary = entries.iter().find(|e| e.code == code).map_or("", |e| e.summary);
        let _ = write!(out, "**{code}**: {summary}\n\n`runner explain {code}`");
    }
}
