//! The field tables read by place: what a manifest may hold at a path of mapping keys, for an
//! editor's hover and completion. List positions are not part of a path: the fields of every
//! task are those at `spec.workflow`.

use super::{ENVELOPE, Field, Kind, SPEC, Section, Shape};

/// A field as the tables describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDoc {
    /// Its canonical name.
    pub name: &'static str,
    /// What it means.
    pub doc: &'static str,
    /// The words its value may be, when it is one of a set (an action, a runtime, a strategy).
    pub words: Vec<&'static str>,
}

impl FieldDoc {
    fn of(field: &'static Field) -> Self {
        let mut words = Vec::new();
        collect_words(&field.shape, &mut words);
        FieldDoc { name: field.name, doc: field.doc, words }
    }
}

/// The field that the last key of `path` names (`["spec", "workflow", "depends_on"]`), read
/// under its canonical name or an alias; `None` for a key no table has there. A document with
/// no `spec` is in the bare form, whose keys are the spec's.
pub fn field_at(path: &[&str]) -> Option<FieldDoc> {
    let (last, parent) = path.split_last()?;
    sections_at(parent).into_iter().flat_map(|s| s.fields).find(|f| names(f, last)).map(FieldDoc::of)
}

/// The fields a mapping at `path` may have, in the order the tables list them; none where no
/// mapping of known fields is (under a map of names, such as `agent_definitions` itself).
pub fn fields_at(path: &[&str]) -> Vec<FieldDoc> {
    let mut seen = Vec::new();
    sections_at(path)
        .into_iter()
        .flat_map(|s| s.fields)
        .filter(|f| f.bare_only.is_none())
        .filter(|f| {
            let new = !seen.contains(&f.name);
            seen.push(f.name);
            new
        })
        .map(FieldDoc::of)
        .collect()
}

fn names(field: &Field, key: &str) -> bool {
    field.name == key || field.aliases.contains(&key)
}

/// The mappings of known fields that may stand at `path`.
fn sections_at(path: &[&str]) -> Vec<&'static Section> {
    let bare = path.first().is_some_and(|first| !ENVELOPE.fields.iter().any(|f| f.name == *first));
    let mut at: Vec<At> = vec![At::Section(if bare { &SPEC } else { &ENVELOPE })];
    for key in path {
        let mut next = Vec::new();
        for place in at {
            match place {
                At::Section(section) => {
                    if let Some(field) = section.fields.iter().find(|f| names(f, key)) {
                        expand(&field.shape, &mut next);
                    }
                }
                At::Names(shape) => expand(shape, &mut next),
            }
        }
        at = next;
    }
    at.into_iter()
        .filter_map(|place| match place {
            At::Section(section) => Some(section),
            At::Names(_) => None,
        })
        .collect()
}

/// A place a path can reach: a mapping of known fields, or a map whose next key is any name.
#[derive(Clone, Copy)]
enum At {
    Section(&'static Section),
    Names(&'static Shape),
}

/// The places a value of `shape` opens: through lists, named shapes and alternatives.
fn expand(shape: &'static Shape, out: &mut Vec<At>) {
    match shape {
        Shape::List(inner) | Shape::NonEmptyList(inner) => expand(inner, out),
        Shape::Map(inner) => out.push(At::Names(inner)),
        Shape::Named(named) => match &named.kind {
            Kind::Mapping(section) => out.push(At::Section(section)),
            Kind::AnyOf(shapes) => shapes.iter().for_each(|s| expand(s, out)),
            Kind::Alias(inner) => expand(inner, out),
            Kind::Words(_) => {}
        },
        _ => {}
    }
}

/// The words a value of `shape` may be.
fn collect_words(shape: &'static Shape, out: &mut Vec<&'static str>) {
    match shape {
        Shape::Choice(words) => out.extend(words.iter()),
        Shape::Const(word) => out.push(word),
        Shape::Bool => out.extend(["true", "false"]),
        Shape::List(inner) | Shape::NonEmptyList(inner) => collect_words(inner, out),
        Shape::Named(named) => match &named.kind {
            Kind::Words(words) => out.extend(words.iter()),
            Kind::AnyOf(shapes) => shapes.iter().for_each(|s| collect_words(s, out)),
            Kind::Alias(inner) => collect_words(inner, out),
            Kind::Mapping(_) => {}
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_field_is_found_under_the_workflow_and_its_aliases() {
        let depends = field_at(&["spec", "workflow", "depends_on"]).expect("a task field");
        assert_eq!(depends.name, "depends_on");
        assert!(depends.doc.contains("must finish first"), "{}", depends.doc);
        let bare = field_at(&["tasks", "requires"]).expect("the bare form's alias");
        assert_eq!(bare.name, "depends_on");
        assert_eq!(field_at(&["spec", "workflow", "no_such_field"]), None);
    }

    #[test]
    fn words_come_from_the_field_s_shape() {
        let kind = field_at(&["spec", "workflow", "type"]).expect("the task's type");
        assert!(kind.words.contains(&"synthesis_gate") && kind.words.contains(&"human_review"), "{:?}", kind.words);
        let action = field_at(&["spec", "workflow", "on_failure", "action"]).expect("a policy's action");
        assert!(action.words.contains(&"retry"), "{:?}", action.words);
        let runtime = field_at(&["spec", "agent_definitions", "writer", "runtime"]).expect("an agent's runtime");
        assert!(runtime.words.contains(&"llm"), "{:?}", runtime.words);
    }

    #[test]
    fn the_fields_of_a_mapping_are_listed_once_each() {
        let task: Vec<_> = fields_at(&["spec", "workflow"]).into_iter().map(|f| f.name).collect();
        assert!(task.contains(&"id") && task.contains(&"agent") && task.contains(&"on_failure"), "{task:?}");
        let top: Vec<_> = fields_at(&[]).into_iter().map(|f| f.name).collect();
        assert_eq!(top, ["apiVersion", "kind", "metadata", "spec"]);
        assert!(fields_at(&["spec", "agent_definitions"]).is_empty(), "agent names are free");
    }
}
