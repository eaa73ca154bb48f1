//! Leaving a workflow's items out of the tree, and reading each again when the normaliser comes
//! to it.

use super::Reader;
use crate::fields::WORKFLOW_KEYS;
use crate::tree::{Node, Value};

/// The items of a workflow left out of the tree by [`parse_deferring`](super::parse_deferring):
/// each stands there as a null node over the item's span, and [`Deferred::whole`] reads it again
/// when the normaliser comes to it. A plan of 100,000 tasks then never holds the tree of its whole
/// workflow beside its tasks (the tree is several times the size of the text).
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    /// Every item left out, in the order of the text (so by `span`).
    pub(super) items: Vec<Later>,
}

/// Where an item left out starts, and the reader's state there.
#[derive(Debug, Clone, Copy)]
pub(super) struct Later {
    /// Where the item's node starts: its placeholder's span.
    pub(super) span: u32,
    pub(super) pos: u32,
    pub(super) col: u32,
    pub(super) depth: u32,
}

/// Where a block mapping is, as far as finding a workflow goes: only the mappings the
/// normaliser reads a workflow from may have their workflow's items deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// The document's root (a bare plan's workflow is here).
    Root,
    /// The root's `spec`, or a nested `plan` under the root or the spec.
    Spec,
    /// Anywhere else.
    Other,
}

impl Place {
    /// The place of the mapping that is the value of `key` in a mapping at this place.
    pub(super) fn below(self, key: &Node) -> Place {
        let Value::Str(name) = &key.value else { return Place::Other };
        match (self, name.as_str()) {
            (Place::Root, "spec" | "plan") | (Place::Spec, "plan") => Place::Spec,
            _ => Place::Other,
        }
    }

    /// Whether the block sequence under `key` in a mapping at this place is a workflow.
    pub(super) fn holds_workflow(self, key: &Node) -> bool {
        self != Place::Other && matches!(&key.value, Value::Str(name) if WORKFLOW_KEYS.contains(&name.as_str()))
    }
}

impl Deferred {
    /// `node` itself, or, when it stands for an item left out, that item read again from `text`.
    pub(crate) fn whole(&self, text: &str, node: Node) -> Node {
        if !matches!(node.value, Value::Null) || self.items.is_empty() {
            return node;
        }
        let Some(later) = u32::try_from(node.span().offset())
            .ok()
            .and_then(|at| self.items.binary_search_by_key(&at, |later| later.span).ok())
            .map(|i| self.items[i])
        else {
            return node;
        };
        let mut reader = Reader::at(text, later.pos as usize, later.col as usize);
        reader
            .block_node(later.depth as usize, Place::Other)
            .expect("an item that was read whole from this text when it was left out reads the same again")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plain_yaml::{parse, parse_deferring};

    /// The items of the sequence at `path` (keys, then an index), when the tree holds one there.
    fn items<'n>(root: &'n Node, path: &[&str]) -> &'n [Node] {
        let mut node = root;
        for step in path {
            node = match &node.value {
                Value::Map(entries) => {
                    &entries.iter().find(|(k, _)| matches!(&k.value, Value::Str(s) if s == step)).expect(step).1
                }
                Value::Seq(items) => &items[step.parse::<usize>().expect("an index")],
                _ => panic!("no {step} in {node:?}"),
            };
        }
        let Value::Seq(items) = &node.value else { panic!("not a sequence at {path:?}: {node:?}") };
        items
    }

    #[test]
    fn only_a_workflows_items_are_deferred_and_each_reads_again_as_it_was() {
        // Each text, where its workflow is, and where sequences that must stay whole are.
        type Paths = &'static [&'static [&'static str]];
        let cases: [(&str, &[&str], Paths); 5] = [
            (
                "apiVersion: runner/v1\nspec:\n  agent_definitions:\n    w:\n      tasks:\n      - not a workflow\n  workflow:\n  \
                 - {id: a, agent: w}\n  -\n    id: b\n    depends_on:\n    - a\n  - phase: p\n    tasks:\n      - id: c\n",
                &["spec", "workflow"],
                &[&["spec", "agent_definitions", "w", "tasks"]],
            ),
            (
                "workflow:\n  - id: a\n  - id: b\nmetadata:\n  steps:\n    - x\n",
                &["workflow"],
                &[&["metadata", "steps"]],
            ),
            ("steps:\n- a plain step\n- ~\n", &["steps"], &[]),
            ("spec:\n  plan:\n    tasks:\n      - id: a\n", &["spec", "plan", "tasks"], &[]),
            (
                "plan:\n  phases:\n    - id: a\nother:\n  tasks:\n    - id: b\n",
                &["plan", "phases"],
                &[&["other", "tasks"]],
            ),
        ];
        for (text, deferred_at, whole_at) in cases {
            let whole = parse(text).expect("plain");
            let (root, deferred) = parse_deferring(text).expect("plain");
            let left = items(&root, deferred_at);
            assert!(left.iter().all(|item| matches!(item.value, Value::Null)), "{text:?}: {left:?}");
            for (item, expected) in left.iter().zip(items(&whole, deferred_at)) {
                assert_eq!(&deferred.whole(text, item.clone()), expected, "{text:?}");
            }
            for path in whole_at {
                assert_eq!(items(&root, path), items(&whole, path), "{text:?} at {path:?}");
            }
        }
        // A flow-style workflow is read whole.
        let (root, deferred) = parse_deferring("workflow: [{id: a}]\n").expect("plain");
        assert_eq!(root, parse("workflow: [{id: a}]\n").expect("plain"));
        assert!(deferred.items.is_empty());
    }
}
