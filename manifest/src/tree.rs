//! The YAML document as a tree of nodes, each with the byte span it came from.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

use crate::diagnostic::Diagnostic;
use crate::plain_yaml::Deferred;
use crate::problem::Problem;
use crate::source::{Loc, Span};
use crate::text::Text;

/// One YAML node and where it sits in the source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// What the node holds.
    pub value: Value,
    /// Where the node's bytes are in the source; see [`Node::span`].
    span: Span,
}

impl Node {
    /// A node of `value` over `span`.
    pub fn new(value: Value, span: Span) -> Self {
        Node { value, span }
    }

    /// The node's bytes in the source (for collections, where the node starts).
    pub fn span(&self) -> Span {
        self.span
    }

    /// Moves the node `by` bytes later in the text.
    pub(crate) fn shift(&mut self, by: usize) {
        self.span = Span::new(self.span.offset() + by, self.span.len());
    }
}

/// The value of a node; mappings keep their keys as nodes so keys have spans too.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer scalar.
    Int(i64),
    /// A floating point scalar.
    Float(f64),
    /// A string scalar.
    Str(Text),
    /// A sequence.
    Seq(Box<[Node]>),
    /// A mapping, in source order.
    Map(Box<[(Node, Node)]>),
}

// The whole tree of a large plan is held while it is normalised: a node is kept at 32 bytes
// (a 24-byte value and its 8-byte span), collections hold exactly their items, and short strings are
// inline, so a task's mapping costs a few hundred bytes rather than a kilobyte.
const _: () = assert!(std::mem::size_of::<Node>() == 32);

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        let span = spanned.referenced.span();
        let offset = span.byte_offset().unwrap_or(0) as usize;
        let len = span.byte_len().unwrap_or(0) as usize;
        Ok(Node::new(spanned.value, Span::new(offset, len)))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(Text::from(v)))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(Text::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items.into_boxed_slice()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Value::Map(entries.into_boxed_slice()))
    }
}

/// A document that could not be read, with where the reader stopped.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    /// What went wrong, without the reader's own source snippet.
    pub message: String,
    /// Where the reader stopped.
    pub span: Span,
    /// Which reader refused the text, or which limit it hit.
    pub kind: SyntaxKind,
}

impl SyntaxError {
    /// The error as the loaders report it: located where the reader stopped, with no path.
    pub(crate) fn diagnostic(self) -> Diagnostic {
        let loc = Loc::new(self.span, "");
        match self.kind {
            SyntaxKind::Yaml => Diagnostic::error(Problem::YamlSyntax { message: self.message }, loc),
            SyntaxKind::Json => Diagnostic::error(Problem::JsonSyntax { message: self.message }, loc),
            SyntaxKind::Limit(limit) => {
                Diagnostic::error(Problem::OverLimit { what: limit.what() }, loc).help(limit.help())
            }
        }
    }
}

/// Why a document could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntaxKind {
    /// The text is not YAML.
    Yaml,
    /// The text starts like JSON (`{`) and is not JSON.
    Json,
    /// The text is over one of the reader's limits.
    Limit(Limit),
}

/// The reader's budgets, as a plan's author can act on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Nesting deeper than [`crate::json::MAX_DEPTH`].
    Depth,
    /// Aliases that expand to too much.
    Aliases,
    /// Too many nodes or bytes of scalars in all.
    Size,
}

/// The alias budget: aliases in a document, and events replayed through them.
const MAX_ALIASES: usize = 10_000;
const MAX_REPLAYED: usize = 100_000;
/// The size budget, in nodes.
const MAX_NODES: usize = 20_000_000;

impl Limit {
    /// What the plan does that is over the limit, after "the plan ".
    pub fn what(self) -> String {
        match self {
            Limit::Depth => format!("nests deeper than {} levels, the reader's limit", crate::json::MAX_DEPTH),
            Limit::Aliases => format!(
                "expands its aliases (`*name`) past the reader's limit of {MAX_ALIASES} aliases and \
                 {MAX_REPLAYED} nodes replayed through them"
            ),
            Limit::Size => format!("has more than {MAX_NODES} nodes, the reader's limit"),
        }
    }

    /// How to bring the plan under the limit.
    pub fn help(self) -> &'static str {
        match self {
            Limit::Depth => {
                "flatten the deepest part: a deeply nested `schema` can name its inner objects under \
                 `$defs` and point at them with `$ref`"
            }
            Limit::Aliases => "write the repeated part out, or reuse fewer and smaller anchors (`&name`)",
            Limit::Size => "split the plan into smaller plans",
        }
    }
}

/// Reads a YAML (or JSON) document into a spanned tree, within fixed resource budgets:
/// nesting depth, node and event counts, and alias expansion are all capped, so alias bombs
/// and deep nesting end in an error rather than in exhausted memory or stack. A text that
/// starts with `{` and is neither JSON nor YAML is reported as invalid JSON.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let json = text.trim_start().starts_with('{');
    if json && let Ok(node) = crate::json::parse(text) {
        return Ok(node);
    }
    parse_yaml(text)
        .map_err(|error| if json && error.kind == SyntaxKind::Yaml { json_error(text, error) } else { error })
}

/// [`parse`], with the items of a plain YAML document's workflow left to be read one at a time
/// (see [`Deferred`]); other documents are read whole.
pub(crate) fn parse_deferring(text: &str) -> Result<(Node, Deferred), SyntaxError> {
    if !text.trim_start().starts_with('{')
        && let Some(parsed) = crate::plain_yaml::parse_deferring(text)
    {
        return Ok(parsed);
    }
    parse(text).map(|root| (root, Deferred::default()))
}

/// The JSON reader's account of a text that starts like JSON, located where serde_json stopped;
/// the YAML reader's message when serde_json accepts it (duplicate keys).
fn json_error(text: &str, yaml: SyntaxError) -> SyntaxError {
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Err(error) => {
            let offset = offset_of(text, error.line() as u64, error.column() as u64).unwrap_or(yaml.span.offset());
            let message = error.to_string();
            let message = message.rfind(" at line ").map_or(message.as_str(), |at| &message[..at]).to_owned();
            SyntaxError { message, span: Span::new(offset, 0), kind: SyntaxKind::Json }
        }
        Ok(_) => SyntaxError { kind: SyntaxKind::Json, ..yaml },
    }
}

/// Reads a document with the YAML reader only, within the budgets [`parse`] describes: plain
/// documents straight from the text, then those without anchors, tags or merges from the
/// parser's events, the rest (and every error) through serde-saphyr.
pub(crate) fn parse_yaml(text: &str) -> Result<Node, SyntaxError> {
    crate::plain_yaml::parse(text).or_else(|| crate::yaml::parse(text)).map_or_else(|| parse_yaml_serde(text), Ok)
}

/// Reads a document through serde-saphyr, the reference for the tree, the messages and the
/// budgets.
pub(crate) fn parse_yaml_serde(text: &str) -> Result<Node, SyntaxError> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = crate::json::MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_events = 2 * MAX_NODES;
    // Plans have little use for aliases; these bounds make an alias bomb fail in milliseconds.
    budget.max_aliases = MAX_ALIASES;
    budget.max_recorded_anchor_events = MAX_REPLAYED;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED;
    let node: Option<Node> = serde_saphyr::from_str_with_options(text, options).map_err(|error| {
        // Scanner errors carry a line and column but no byte offset.
        let offset = error.location().and_then(|at| {
            at.span().byte_offset().map(|offset| offset as usize).or_else(|| offset_of(text, at.line(), at.column()))
        });
        let message = clean_message(&error.to_string());
        let (message, kind) = match limit_of(&error, &message) {
            // Said in words: the reader's own text is Rust debug output (`Depth { depth: 49 }`).
            Some(limit) => (format!("the document {}", limit.what()), SyntaxKind::Limit(limit)),
            None => (message, SyntaxKind::Yaml),
        };
        SyntaxError { message, span: Span::new(offset.unwrap_or(0), 0), kind }
    })?;
    Ok(node.unwrap_or(Node::new(Value::Null, Span::default())))
}

/// The limit a YAML reader's error reports, if it is a limit (also behind the wrappers that
/// add an alias's or a snippet's location).
fn limit_of(error: &serde_saphyr::Error, message: &str) -> Option<Limit> {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach;
    let mut error = error;
    while let Error::AliasError { error: inner, .. } | Error::WithSnippet { error: inner, .. } = error {
        error = inner;
    }
    match error {
        Error::Budget { breach, .. } => Some(match breach {
            BudgetBreach::Depth { .. } => Limit::Depth,
            BudgetBreach::Aliases { .. }
            | BudgetBreach::Anchors { .. }
            | BudgetBreach::AliasAnchorRatio { .. }
            | BudgetBreach::RecordedAnchorEvents { .. }
            | BudgetBreach::RecordedAnchorBytes { .. } => Limit::Aliases,
            _ => Limit::Size,
        }),
        Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. } => Some(Limit::Aliases),
        // The scanner's own guard against unclosed brackets nested thousands deep.
        _ if message.contains("recursion limit") => Some(Limit::Depth),
        _ => None,
    }
}

/// The byte offset of a 1-based line and character column, clamped to the line's end;
/// `None` for an unknown (zero) line or one past the end of the text.
fn offset_of(text: &str, line: u64, column: u64) -> Option<usize> {
    let line = usize::try_from(line).ok()?.checked_sub(1)?;
    let column = usize::try_from(column).unwrap_or(usize::MAX).saturating_sub(1);
    let start = if line == 0 { 0 } else { text.match_indices('\n').nth(line - 1)?.0 + 1 };
    let rest = &text[start..];
    let line_text = &rest[..rest.find('\n').unwrap_or(rest.len())];
    Some(start + line_text.char_indices().nth(column).map_or(line_text.len(), |(i, _)| i))
}

/// Drops the `error: line N column M:` prefix the YAML reader puts on its messages; the
/// diagnostic shows the position itself.
fn clean_message(message: &str) -> String {
    let message = message.trim().strip_prefix("error: ").unwrap_or(message.trim());
    let message = match message.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map_or(message, |(_, tail)| tail),
        None => message,
    };
    let message = message.lines().next().unwrap_or(message);
    match message.rfind(" at line ") {
        Some(at) if message[at + 9..].starts_with(|c: char| c.is_ascii_digit()) => message[..at].to_owned(),
        _ => message.to_owned(),
    }
}

impl Value {
    /// A short name of the kind of value, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}
