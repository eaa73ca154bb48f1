//! Completion: the field names valid where the cursor is, agent names, task ids in
//! `depends_on` and after `tasks.` in a template, and the words a field takes.

use lsp_types::{CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, TextEdit};

use super::analysis::Names;
use super::document::{Document, Encoding};
use super::place::{At, place};

/// The keys whose value names a task.
const TASK_LISTS: [&str; 6] = ["depends_on", "requires", "after", "dependencies", "inputs", "critical_path"];

/// The keys whose value names an agent.
const AGENT_KEYS: [&str; 5] = ["agent", "worker", "assigned_to", "planner", "compactor"];

/// The completions at byte `offset`.
pub fn complete(document: &Document, names: &Names, offset: usize, encoding: Encoding) -> Vec<CompletionItem> {
    let place = place(&document.text, offset);
    let start = offset - place.prefix.len().min(offset);
    let range = document.range(manifest::Span::new(start, offset - start), encoding);
    let item = |label: &str, kind, detail: Option<String>, doc: Option<&str>, insert: String| CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail,
        documentation: doc.map(|d| Documentation::String(d.to_owned())),
        text_edit: Some(CompletionTextEdit::Edit(TextEdit { range, new_text: insert })),
        ..Default::default()
    };
    let keys: Vec<&str> = place.path.iter().map(String::as_str).collect();
    match &place.at {
        At::TemplateTask => tasks(names, &item),
        At::Value(key) | At::Entry(key) if TASK_LISTS.contains(&key.as_str()) => tasks(names, &item),
        At::Value(key) if AGENT_KEYS.contains(&key.as_str()) => agents(names, &item),
        At::Value(key) | At::Entry(key) => {
            let mut path = keys.clone();
            path.push(key);
            let words = manifest::field_at(&path).map(|f| f.words).unwrap_or_default();
            if words.is_empty() && matches!(place.at, At::Entry(_)) {
                // A list of mappings (the workflow, say): the first key of an entry.
                return fields(&path, &item);
            }
            words.iter().map(|w| item(w, CompletionItemKind::ENUM_MEMBER, None, None, (*w).to_owned())).collect()
        }
        At::Key => fields(&keys, &item),
    }
}

fn fields(path: &[&str], item: &Item<'_>) -> Vec<CompletionItem> {
    manifest::fields_at(path)
        .into_iter()
        .map(|f| item(f.name, CompletionItemKind::FIELD, None, Some(f.doc), format!("{}: ", f.name)))
        .collect()
}

type Item<'a> = dyn Fn(&str, CompletionItemKind, Option<String>, Option<&str>, String) -> CompletionItem + 'a;

fn tasks(names: &Names, item: &Item<'_>) -> Vec<CompletionItem> {
    let detail = |agent: &Option<String>| agent.as_ref().map(|a| format!("agent {a}"));
    names
        .tasks
        .iter()
        .map(|(id, agent)| item(id, CompletionItemKind::REFERENCE, detail(agent), None, id.clone()))
        .collect()
}

fn agents(names: &Names, item: &Item<'_>) -> Vec<CompletionItem> {
    let runtime = |r: &str| Some(r.to_owned());
    names.agents.iter().map(|(name, r)| item(name, CompletionItemKind::CLASS, runtime(r), None, name.clone())).collect()
}
