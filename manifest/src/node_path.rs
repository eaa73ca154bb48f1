//! YAML paths (`spec.workflow[1].depends_on[0]`) as ids into a table shared by every location
//! read from one document: a located value holds an id, not a string of its own, and the text
//! is built only when a diagnostic shows it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The YAML path of a node. Cheap to clone (a shared table and an index into it); shown with
/// `Display`. The default is the empty path of the document's root.
///
/// A path's last step is kept beside its parent's id rather than as a part of the table until
/// a longer path is joined to it: most located values are leaves (a task's `id`, `agent`, each
/// of its dependencies), and a plan of 100,000 tasks would otherwise add half a million parts.
pub struct NodePath {
    /// The table the id indexes; `None` for the root of no document.
    table: Option<Arc<Mutex<Table>>>,
    /// The node (see [`At`]); set once, when a child is joined to a node not yet in the table.
    at: AtomicU64,
}

/// Where a [`NodePath`] is, packed in 64 bits: a node of the table (0 is the root), and a last
/// step below it (a [`Part::step`]) or [`NO_STEP`] when the node itself is the path.
#[derive(Clone, Copy, PartialEq, Eq)]
struct At {
    id: u32,
    last: u32,
}

/// The `last` of a path that is a node of the table.
const NO_STEP: u32 = u32::MAX;

impl At {
    fn pack(self) -> u64 {
        (u64::from(self.id) << 32) | u64::from(self.last)
    }

    fn unpack(bits: u64) -> Self {
        At { id: (bits >> 32) as u32, last: bits as u32 }
    }
}

impl Default for At {
    fn default() -> Self {
        At { id: 0, last: NO_STEP }
    }
}

impl Default for NodePath {
    fn default() -> Self {
        NodePath { table: None, at: AtomicU64::new(At::default().pack()) }
    }
}

impl Clone for NodePath {
    fn clone(&self) -> Self {
        NodePath { table: self.table.clone(), at: AtomicU64::new(self.at.load(Ordering::Relaxed)) }
    }
}

/// Every path of one document: a tree of parts, each naming its parent.
#[derive(Default)]
struct Table {
    /// The parts by id; id 0 is the root.
    parts: Vec<Part>,
    /// Key names, each stored once: field names repeat in every task.
    names: Vec<Box<str>>,
    /// The id of each name in `names`.
    name_ids: HashMap<Box<str>, u32>,
}

/// One step of a path, below its parent, in 8 bytes: a large plan has millions of them.
#[derive(Clone, Copy)]
struct Part {
    parent: u32,
    /// A key's name id, or an index with [`INDEX`] set; ignored for the root (id 0).
    step: u32,
}

/// The bit that marks a part's step as an index rather than a key.
const INDEX: u32 = 1 << 31;

#[derive(Clone, Copy)]
enum Step {
    /// `.name` (no dot at the start of a path): an index into `Table::names`.
    Key(u32),
    /// `[index]`.
    Index(u32),
}

impl Part {
    fn step(self) -> Step {
        if self.step & INDEX == 0 { Step::Key(self.step) } else { Step::Index(self.step & !INDEX) }
    }
}

impl Table {
    fn new() -> Self {
        Table { parts: vec![Part { parent: 0, step: 0 }], names: Vec::new(), name_ids: HashMap::new() }
    }

    fn name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = index(self.names.len());
        self.names.push(name.into());
        self.name_ids.insert(name.into(), id);
        id
    }

    fn push(&mut self, parent: u32, step: u32) -> u32 {
        let id = index(self.parts.len());
        self.parts.push(Part { parent, step });
        id
    }

    /// Writes the path of `at`: its node's, then its last step.
    fn write_at(&self, at: At, out: &mut String) {
        self.write(at.id, out);
        if at.last != NO_STEP {
            self.write_step(Part { parent: at.id, step: at.last }.step(), out);
        }
    }

    /// Writes the path of `id` the way `join_key` and `join_index` used to build it, with no
    /// allocation: the parts are gathered on the stack, [`CHAIN`] at a time, since reports write
    /// hundreds of thousands of paths.
    fn write(&self, id: u32, out: &mut String) {
        let mut chain = [0u32; CHAIN];
        let mut len = 0;
        let mut at = id;
        while at != 0 && len < CHAIN {
            chain[len] = at;
            len += 1;
            at = self.parts.get(at as usize).map_or(0, |part| part.parent);
        }
        // A parent is pushed before its children, so walking up ends at the root.
        if at != 0 {
            self.write(at, out);
        }
        for &part in chain[..len].iter().rev() {
            if let Some(part) = self.parts.get(part as usize) {
                self.write_step(part.step(), out);
            }
        }
    }

    fn write_step(&self, step: Step, out: &mut String) {
        match step {
            Step::Key(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(self.names.get(name as usize).map_or("", |n| n));
            }
            Step::Index(i) => {
                out.push('[');
                out.extend(crate::decimal::digits(u64::from(i), &mut [0; 20]).iter().map(|&d| char::from(d)));
                out.push(']');
            }
        }
    }
}

/// How many steps of a path [`Table::write`] gathers at once: deeper than any plan's paths.
const CHAIN: usize = 32;

/// A table position as an id; a document has far fewer than 2^32 nodes (its size is capped).
fn index(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl NodePath {
    /// The root of a new document: every path joined from it shares one table.
    pub fn root() -> Self {
        NodePath { table: Some(Arc::new(Mutex::new(Table::new()))), ..NodePath::default() }
    }

    /// This path with `.key` appended.
    pub fn key(&self, key: &str) -> NodePath {
        self.join(|table| Step::Key(table.name(key)))
    }

    /// This path with `[index]` appended.
    pub fn index(&self, index: usize) -> NodePath {
        self.join(|_| Step::Index(u32::try_from(index).unwrap_or(u32::MAX)))
    }

    /// The path one step below this one. This path's own node goes into the table first, if it
    /// is not there yet (and this path then points at it); the new path's step does not.
    fn join(&self, step: impl FnOnce(&mut Table) -> Step) -> NodePath {
        let table = self.table.clone().unwrap_or_else(|| Arc::new(Mutex::new(Table::new())));
        let at = {
            let mut locked = table.lock().unwrap_or_else(PoisonError::into_inner);
            let mut parent = At::unpack(self.at.load(Ordering::Relaxed));
            if parent.last != NO_STEP {
                parent = At { id: locked.push(parent.id, parent.last), last: NO_STEP };
                self.at.store(parent.pack(), Ordering::Relaxed);
            }
            let last = match step(&mut locked) {
                Step::Key(name) => name & !INDEX,
                // One below the largest, which would read as `NO_STEP`; no document has so many items.
                Step::Index(i) => i.min(!INDEX - 1) | INDEX,
            };
            At { id: parent.id, last }
        };
        NodePath { table: Some(table), at: AtomicU64::new(at.pack()) }
    }

    /// Gives back the room the document's table grew into: the table lives as long as the
    /// locations of the plan read from it, for a whole run.
    pub(crate) fn shrink_table(&self) {
        if let Some(table) = &self.table {
            let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
            table.parts.shrink_to_fit();
            table.names.shrink_to_fit();
        }
    }

    /// The path as text, such as `spec.workflow[1].depends_on[0]`.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.write_into(&mut out);
        out
    }

    /// Writes the path into `out` in place of what it held: for writing many paths with one
    /// buffer.
    pub fn write_into(&self, out: &mut String) {
        out.clear();
        if let Some(table) = &self.table {
            table.lock().unwrap_or_else(PoisonError::into_inner).write_at(self.at(), out);
        }
    }

    /// Whether this is the root (shown as the empty string).
    pub fn is_empty(&self) -> bool {
        self.at() == At::default()
    }

    fn at(&self) -> At {
        At::unpack(self.at.load(Ordering::Relaxed))
    }
}

impl fmt::Display for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text(), f)
    }
}

impl PartialEq for NodePath {
    fn eq(&self, other: &Self) -> bool {
        let same_table = match (&self.table, &other.table) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        (same_table && self.at() == other.at()) || self.text() == other.text()
    }
}

impl Eq for NodePath {}

impl PartialEq<str> for NodePath {
    fn eq(&self, other: &str) -> bool {
        self.text() == other
    }
}

impl PartialEq<&str> for NodePath {
    fn eq(&self, other: &&str) -> bool {
        self.text() == *other
    }
}

impl From<&str> for NodePath {
    /// A path given whole, such as the root of a replacement (`replacement`): one key.
    fn from(text: &str) -> Self {
        if text.is_empty() { NodePath::default() } else { NodePath::root().key(text) }
    }
}

impl From<String> for NodePath {
    fn from(text: String) -> Self {
        NodePath::from(text.as_str())
    }
}

impl From<&NodePath> for NodePath {
    fn from(path: &NodePath) -> Self {
        path.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_yaml_paths() {
        let root = NodePath::root();
        let task = root.key("spec").key("workflow").index(1);
        assert_eq!(task.to_string(), "spec.workflow[1]");
        assert_eq!(task.key("depends_on").index(0).to_string(), "spec.workflow[1].depends_on[0]");
        assert_eq!(root.index(2).key("id").to_string(), "[2].id");
        assert_eq!(root.to_string(), "");
        assert!(root.is_empty() && NodePath::default().is_empty() && !task.is_empty());
    }

    #[test]
    fn deep_paths_are_written_whole() {
        let mut path = NodePath::root();
        let mut expected = String::new();
        for depth in 0..(3 * CHAIN + 5) {
            path = if depth % 2 == 0 { path.key("a") } else { path.index(depth) };
            expected +=
                &if depth % 2 == 0 { format!("{}a", if depth == 0 { "" } else { "." }) } else { format!("[{depth}]") };
        }
        assert_eq!(path.text(), expected);
        let mut reused = "left over".to_owned();
        path.write_into(&mut reused);
        assert_eq!(reused, expected);
    }

    #[test]
    fn a_leaf_adds_no_part_to_the_table_until_a_path_is_joined_below_it() {
        let parts = |path: &NodePath| path.table.as_ref().map_or(0, |t| t.lock().expect("not poisoned").parts.len());
        let workflow = NodePath::root().key("spec").key("workflow");
        let mut leaves = Vec::new();
        for i in 0..3 {
            let task = workflow.index(i);
            let before = task.clone();
            for key in ["id", "agent", "input"] {
                leaves.push((task.key(key), format!("spec.workflow[{i}].{key}")));
            }
            let deps = task.key("depends_on");
            leaves.push((deps.index(0), format!("spec.workflow[{i}].depends_on[0]")));
            leaves.push((deps, format!("spec.workflow[{i}].depends_on")));
            leaves.push((before, format!("spec.workflow[{i}]")));
        }
        // The root, `spec`, `workflow`, and each task and its `depends_on`: the leaves have none.
        assert_eq!(parts(&workflow), 3 + 2 * 3);
        for (path, text) in &leaves {
            assert_eq!(&path.text(), text);
        }
        let (a, b) = (&leaves[5].0, &leaves[11].0);
        assert_eq!(a, &NodePath::root().key("spec").key("workflow").index(0));
        assert_ne!(a, b);
    }

    #[test]
    fn paths_are_equal_when_they_read_the_same() {
        let a = NodePath::root().key("tasks").index(0);
        let b = NodePath::from("tasks").index(0);
        assert_eq!(a, b);
        assert_ne!(a, a.key("id"));
        assert_eq!(NodePath::from(""), NodePath::default());
    }
}
