//! Reading typed values out of the spanned tree, reporting every problem with its location.
//!
//! The two forms differ only here: the bare seed form accepts the aliases LLMs write (each
//! noted as `info`) and ignores unknown fields with a warning; the enveloped form accepts
//! canonical names only and makes anything unknown an error at the offending key.

use crate::diagnostic::{Diagnostic, Problem};
use crate::duration::Duration;
pub(crate) use crate::fields::Field;
use crate::fields::{Named, Section, Shape};
use crate::node_path::NodePath;
use crate::plain_yaml::Deferred;
use crate::plan::{At, Form};
use crate::source::Loc;
use crate::text::Text;
use crate::tree::{Node, Value};

/// A field only the reader knows, read under `aliases` too in the bare form: for mappings the
/// schema does not describe, such as the wrapper of a planner's replacement.
pub(crate) const fn aliased(name: &'static str, aliases: &'static [&'static str]) -> Field {
    Field::new(name, Shape::Json, "").aliases(aliases)
}

/// A construct from another planner that has no equivalent here, and what to use instead.
pub(crate) struct Foreign {
    pub name: &'static str,
    pub what: &'static str,
    pub instead: &'static str,
}

/// A key and value found in a mapping, with the path of the value.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'n> {
    pub key: &'n Node,
    pub value: &'n Node,
}

/// The recognised fields of one mapping.
pub(crate) struct Fields<'n> {
    found: Vec<(&'static Field, Entry<'n>, NodePath)>,
    /// Where the mapping is.
    pub loc: Loc,
    /// Where a missing field is reported: the mapping's name when it has one.
    owner: Option<Loc>,
}

impl<'n> Fields<'n> {
    /// The entry of a canonical field and its path.
    pub fn get(&self, name: &str) -> Option<(Entry<'n>, &NodePath)> {
        self.found.iter().find(|(f, ..)| f.name == name).map(|(_, e, p)| (*e, p))
    }

    /// Reports missing fields at `owner` (the key that names the mapping) instead of at the
    /// mapping's first key.
    pub fn owned_by(mut self, owner: &Loc) -> Self {
        self.owner = Some(owner.clone());
        self
    }

    /// The description, entry and path of a canonical field that is present.
    fn find(&self, name: &str) -> Option<(&'static Field, Entry<'n>, &NodePath)> {
        self.found.iter().find(|(f, ..)| f.name == name).map(|(f, e, p)| (*f, *e, p))
    }

    /// The fields present that do not apply when the mapping's deciding field is `value`
    /// (an `llm` agent's `command`, say), in the order they were written.
    pub fn not_for<'a>(
        &'a self,
        value: &'a str,
    ) -> impl Iterator<Item = (&'static Field, Entry<'n>, &'a NodePath)> + 'a {
        self.found
            .iter()
            .filter(move |(f, ..)| !f.only_for.is_empty() && !f.only_for.contains(&value))
            .map(|(f, e, p)| (*f, *e, p))
    }

    /// Whether the field is present.
    pub fn has(&self, name: &str) -> bool {
        self.found.iter().any(|(f, ..)| f.name == name)
    }
}

/// Collects diagnostics while values are read.
pub(crate) struct Reader {
    pub diagnostics: Vec<Diagnostic>,
    pub form: Form,
    /// The text the tree was read from, for the spelling of keys that are not strings.
    text: std::sync::Arc<str>,
    /// The workflow items the tree was read without, read from `text` by [`Reader::whole`].
    pub deferred: Deferred,
}

impl Reader {
    pub fn new(form: Form, text: std::sync::Arc<str>) -> Self {
        Reader { diagnostics: Vec::new(), form, text, deferred: Deferred::default() }
    }

    /// `node` itself, or the workflow item it stands for, read now (see [`Deferred`]).
    pub fn whole(&self, node: Node) -> Node {
        self.deferred.whole(&self.text, node)
    }

    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn bare(&self) -> bool {
        self.form == Form::Bare
    }

    /// Reports that `node` is not of the expected kind.
    pub fn wrong_type(&mut self, node: &Node, path: &NodePath, what: &str, expected: &str) {
        self.push(Diagnostic::error(
            Problem::WrongType { what: what.into(), expected: expected.into(), found: node.value.kind() },
            Loc::new(node.span(), path),
        ));
    }

    /// Reads a mapping's fields, reporting unknown ones, aliases and foreign constructs.
    pub fn fields<'n>(
        &mut self,
        node: &'n Node,
        path: &NodePath,
        context: &str,
        known: &'static [Field],
        foreign: &[Foreign],
    ) -> Option<Fields<'n>> {
        let Value::Map(entries) = &node.value else {
            self.wrong_type(node, path, context, "a mapping");
            return None;
        };
        let mut fields =
            Fields { found: Vec::with_capacity(entries.len()), loc: Loc::new(node.span(), path), owner: None };
        for (key, value) in entries {
            let Some(name) = key_text(key) else {
                self.wrong_type(key, path, "a key", "a string");
                continue;
            };
            let name: &str = &name;
            let entry = Entry { key, value };
            let entry_path = path.key(name);
            // Built only when a diagnostic needs it: most keys are fine.
            let key_loc = || Loc::new(key.span(), entry_path.clone());
            let exact = known.iter().find(|f| f.name == name && (f.bare_only.is_none() || self.bare()));
            // Aliases are looked up only for a name that is not a field's own: most keys are.
            let alias = || known.iter().find(|f| f.aliases.contains(&name));
            let canonical = match exact.ok_or_else(alias) {
                Ok(f) => f,
                Err(Some(f)) if self.bare() => {
                    self.push(Diagnostic::info(
                        Problem::Alias { written: name.into(), canonical: f.name.into() },
                        key_loc(),
                    ));
                    f
                }
                Err(alias) => {
                    if self.bare()
                        && let Some(foreign) = foreign.iter().find(|f| f.name == name)
                    {
                        self.push(
                            Diagnostic::warning(Problem::Unsupported { what: foreign.what.into() }, key_loc())
                                .help(foreign.instead),
                        );
                        continue;
                    }
                    self.unknown_field(name, key_loc(), context, known, alias);
                    continue;
                }
            };
            if fields.has(canonical.name) {
                let problem = Problem::InvalidValue {
                    what: format!("field `{name}`"),
                    reason: format!("`{}` is already given in this {context}", canonical.name),
                };
                self.push(Diagnostic::error(problem, key_loc()).label("second definition"));
                continue;
            }
            fields.found.push((canonical, entry, entry_path));
        }
        Some(fields)
    }

    fn unknown_field(&mut self, name: &str, loc: Loc, context: &str, known: &[Field], alias: Option<&Field>) {
        let bare_only = known.iter().find(|f| f.name == name || f.aliases.contains(&name)).and_then(|f| f.bare_only);
        let span = loc.span;
        let problem = Problem::UnknownField { field: name.into(), context: context.into() };
        let diagnostic = if self.bare() {
            Diagnostic::warning(problem, loc).label("ignored")
        } else {
            Diagnostic::error(problem, loc)
        };
        let diagnostic = match (bare_only, alias) {
            (Some(instead), _) => diagnostic.help(format!("`{name}` is read only in the bare seed form; {instead}")),
            (None, Some(f)) => {
                diagnostic.help(format!("`{name}` is read only in the bare seed form; here write `{}`", f.name))
            }
            (None, None) => {
                let bare = self.bare();
                let names = known.iter().filter(|f| f.bare_only.is_none() || bare).map(|f| f.name);
                diagnostic.suggest(&self.text, span, name, names)
            }
        };
        self.push(diagnostic);
    }

    /// A required field: reports it missing at the mapping.
    pub fn require<'a, 'n>(
        &mut self,
        fields: &'a Fields<'n>,
        name: &str,
        context: &str,
    ) -> Option<(Entry<'n>, &'a NodePath)> {
        let found = fields.get(name);
        if found.is_none() {
            self.push(Diagnostic::error(
                Problem::MissingField { field: name.into(), context: context.into() },
                fields.owner.clone().unwrap_or_else(|| fields.loc.clone()),
            ));
        }
        found
    }

    /// A field's string (a `String`, or a [`Text`] for ids and names), named in messages by
    /// its name.
    pub fn text_of<T: From<Text>>(&mut self, fields: &Fields<'_>, name: &str) -> Option<At<T>> {
        let (field, entry, path) = fields.find(name)?;
        self.string(entry, path, field.name)
    }

    /// A field's whole number, within the bounds its description gives.
    pub fn whole_of(&mut self, fields: &Fields<'_>, name: &str) -> Option<u64> {
        let (field, entry, path) = fields.find(name)?;
        let (min, max) = field.shape.whole_bounds();
        self.integer(entry, path, field.name, min, max)
    }

    /// A field's count (a whole number that fits a `u32`), within the bounds its description
    /// gives.
    pub fn count_of(&mut self, fields: &Fields<'_>, name: &str) -> Option<u32> {
        self.whole_of(fields, name).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// A field's number, within the bounds its description gives.
    pub fn number_of(&mut self, fields: &Fields<'_>, name: &str) -> Option<f64> {
        let (field, entry, path) = fields.find(name)?;
        let (min, max) = field.shape.bounds();
        self.number(entry, path, field.name, min, max)
    }

    /// A field's duration.
    pub fn duration_of(&mut self, fields: &Fields<'_>, name: &str) -> Option<Duration> {
        let (field, entry, path) = fields.find(name)?;
        self.duration(entry, path, field.name)
    }

    /// A field's boolean.
    pub fn boolean_of(&mut self, fields: &Fields<'_>, name: &str) -> Option<bool> {
        let (field, entry, path) = fields.find(name)?;
        self.boolean(entry, path, field.name)
    }

    /// A string; numbers are read as their text, since YAML authors write `model: 3`.
    pub fn string<T: From<Text>>(&mut self, entry: Entry<'_>, path: &NodePath, what: &str) -> Option<At<T>> {
        match scalar(entry.value) {
            Some(text) => Some(At::new(T::from(text), Loc::new(entry.value.span(), path))),
            None => {
                self.wrong_type(entry.value, path, what, "a string");
                None
            }
        }
    }

    /// A list of strings; the bare form also takes a single string.
    pub fn strings<T: From<Text>>(&mut self, entry: Entry<'_>, path: &NodePath, what: &str) -> Vec<At<T>> {
        match &entry.value.value {
            Value::Seq(items) => {
                // Sized once: most lists hold one or two ids, and a grown vector would keep room
                // for four in every task of a large plan.
                let mut strings = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let item_path = path.index(i);
                    strings.extend(self.string(Entry { key: entry.key, value: item }, &item_path, what));
                }
                strings
            }
            Value::Null if self.bare() => Vec::new(),
            Value::Str(_) | Value::Int(_) if self.bare() => self.string(entry, path, what).into_iter().collect(),
            _ => {
                // `what` names one item; the message is about the whole field.
                let field = scalar_text(entry.key)
                    .filter(|_| !std::ptr::eq(entry.key, entry.value))
                    .map_or_else(|| what.to_owned(), |key| format!("`{key}`"));
                self.wrong_type(entry.value, path, &field, "a list of strings");
                Vec::new()
            }
        }
    }

    /// A non-empty argv.
    pub fn argv(&mut self, entry: Entry<'_>, path: &NodePath, what: &str) -> Option<Vec<String>> {
        if !matches!(entry.value.value, Value::Seq(_)) {
            self.wrong_type(entry.value, path, what, "a list of strings (an argv, never a shell string)");
            return None;
        }
        let argv: Vec<String> = self.strings(entry, path, what).into_iter().map(|a| a.value).collect();
        if argv.is_empty() {
            self.invalid(entry.value, path, what, "the command is empty; give the program and its arguments");
            return None;
        }
        Some(argv)
    }

    /// A boolean; the bare form also takes `"true"` and `"false"`.
    pub fn boolean(&mut self, entry: Entry<'_>, path: &NodePath, what: &str) -> Option<bool> {
        match &entry.value.value {
            Value::Bool(b) => Some(*b),
            Value::Str(s) if self.bare() && (s == "true" || s == "false") => Some(s == "true"),
            _ => {
                self.wrong_type(entry.value, path, what, "true or false");
                None
            }
        }
    }

    /// A whole number in `min..=max`.
    pub fn integer(&mut self, entry: Entry<'_>, path: &NodePath, what: &str, min: u64, max: u64) -> Option<u64> {
        match &entry.value.value {
            Value::Int(n) if *n >= 0 && (min..=max).contains(&(*n as u64)) => Some(*n as u64),
            Value::Int(n) => {
                self.invalid(entry.value, path, what, &format!("{n} is outside {min}..={max}"));
                None
            }
            _ => {
                self.wrong_type(entry.value, path, what, "a whole number");
                None
            }
        }
    }

    /// A number in `min..=max`.
    pub fn number(&mut self, entry: Entry<'_>, path: &NodePath, what: &str, min: f64, max: f64) -> Option<f64> {
        let value = match &entry.value.value {
            Value::Int(n) => *n as f64,
            Value::Float(x) => *x,
            _ => {
                self.wrong_type(entry.value, path, what, "a number");
                return None;
            }
        };
        if !(min..=max).contains(&value) {
            self.invalid(entry.value, path, what, &format!("{value} is outside {min}..={max}"));
            return None;
        }
        Some(value)
    }

    /// A duration string such as `30s`.
    pub fn duration(&mut self, entry: Entry<'_>, path: &NodePath, what: &str) -> Option<Duration> {
        let Value::Str(text) = &entry.value.value else {
            self.wrong_type(entry.value, path, what, "a duration such as `30s` or `500ms`");
            return None;
        };
        Duration::parse(text).map_err(|reason| self.invalid(entry.value, path, what, &reason.to_string())).ok()
    }

    /// Reports an invalid value.
    pub fn invalid(&mut self, node: &Node, path: &NodePath, what: &str, reason: &str) {
        self.push(Diagnostic::error(
            Problem::InvalidValue { what: what.into(), reason: reason.into() },
            Loc::new(node.span(), path),
        ));
    }

    /// The one field of `section`'s alternatives that `fields` gives; none or several is an
    /// error at the mapping that names them all.
    pub fn alternative(
        &mut self,
        fields: &Fields<'_>,
        node: &Node,
        path: &NodePath,
        what: &str,
        section: &Section,
    ) -> Option<&'static str> {
        let given: Vec<&'static str> = section.alternatives().filter(|name| fields.has(name)).collect();
        if let [one] = given[..] {
            return Some(one);
        }
        let names: Vec<String> = section.alternatives().map(|name| format!("`{name}`")).collect();
        let listed = match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        self.invalid(node, path, what, &format!("give exactly one of {listed}"));
        None
    }

    /// One of a fixed set of words, with bare-form synonyms noted as aliases.
    pub fn word<T: Copy>(
        &mut self,
        entry: Entry<'_>,
        path: &NodePath,
        what: &str,
        words: &[(&str, T)],
        synonyms: &[(&str, &str)],
    ) -> Option<T> {
        self.word_or(entry, path, what, words, synonyms, None)
    }

    /// Like [`Reader::word`], but in the bare form an unknown word is read as `fallback` with
    /// a warning, as the seed planner did.
    pub fn word_or<T: Copy>(
        &mut self,
        entry: Entry<'_>,
        path: &NodePath,
        what: &str,
        words: &[(&str, T)],
        synonyms: &[(&str, &str)],
        fallback: Option<(&str, T)>,
    ) -> Option<T> {
        let text = self.string::<Text>(entry, path, what)?;
        let loc = text.loc.clone();
        let mut word = text.value.as_str();
        if self.bare()
            && let Some((_, canonical)) = synonyms.iter().find(|(s, _)| *s == word)
        {
            self.push(Diagnostic::info(
                Problem::Alias { written: word.into(), canonical: (*canonical).into() },
                loc.clone(),
            ));
            word = canonical;
        }
        if let Some((_, value)) = words.iter().find(|(w, _)| *w == word) {
            return Some(*value);
        }
        let names: Vec<&str> = words.iter().map(|(w, _)| *w).collect();
        let span = loc.span;
        let one_of = format!("use one of: {}", names.join(", "));
        if let Some((fallback_word, fallback)) = fallback.filter(|_| self.bare()) {
            let problem = Problem::Unsupported { what: format!("{what} `{word}`") };
            let diagnostic = Diagnostic::warning(problem, loc).label(format!("read as `{fallback_word}`")).help(one_of);
            self.push(diagnostic.suggest(&self.text, span, word, names.iter().copied()));
            return Some(fallback);
        }
        let problem =
            Problem::InvalidValue { what: what.into(), reason: format!("`{word}` is not one of {}", names.join(", ")) };
        let diagnostic = Diagnostic::error(problem, loc).label("unknown value").help(one_of);
        self.push(diagnostic.suggest(&self.text, span, word, names.iter().copied()));
        None
    }

    /// Any value as JSON (schemas).
    pub fn json(&mut self, node: &Node) -> serde_json::Value {
        to_json(node, &self.text)
    }

    /// Reads each value of a mapping of named items.
    pub fn named<'n>(
        &mut self,
        entry: Entry<'n>,
        path: &NodePath,
        what: &str,
    ) -> Vec<(At<String>, &'n Node, NodePath)> {
        match &entry.value.value {
            Value::Map(entries) => entries
                .iter()
                .filter_map(|(key, value)| {
                    let Some(name) = scalar_text(key) else {
                        self.wrong_type(key, path, "a name", "a string");
                        return None;
                    };
                    let item_path = path.key(&name);
                    Some((At::new(name, Loc::new(key.span(), item_path.clone())), value, item_path))
                })
                .collect(),
            Value::Null => Vec::new(),
            _ => {
                self.wrong_type(entry.value, path, what, "a mapping of names to definitions");
                Vec::new()
            }
        }
    }
}

/// The words of a named set with the value each stands for: the normalised enums spell their
/// variants as the manifest does, so serde maps one to the other.
pub(crate) fn words_of<T: serde::de::DeserializeOwned>(named: &Named) -> Vec<(&'static str, T)> {
    let value = |word: &str| serde_json::from_value(serde_json::Value::from(word)).ok();
    named.words().iter().filter_map(|word| value(word).map(|t| (*word, t))).collect()
}

/// The text of a mapping key, borrowed when it is a string.
fn key_text(node: &Node) -> Option<std::borrow::Cow<'_, str>> {
    match &node.value {
        Value::Str(s) => Some(std::borrow::Cow::Borrowed(s.as_str())),
        Value::Int(_) | Value::Float(_) => scalar_text(node).map(std::borrow::Cow::Owned),
        _ => None,
    }
}

/// A scalar's text, as [`scalar_text`] gives it, with a short string kept inline.
fn scalar(node: &Node) -> Option<Text> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        Value::Int(n) => Some(Text::from(n.to_string())),
        Value::Float(x) => Some(Text::from(x.to_string())),
        _ => None,
    }
}

/// A scalar's text: a string as written, a number as Rust writes it; `None` for anything else.
pub(crate) fn scalar_text(node: &Node) -> Option<String> {
    scalar(node).map(String::from)
}

/// A tree read from `text` as JSON. Mapping keys are their text as written: a key that YAML
/// reads as a boolean or null (`on`, `n`, `yes`, `~`) keeps its spelling.
fn to_json(node: &Node, text: &str) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(n) => J::from(*n),
        Value::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.to_string()),
        Value::Seq(items) => J::Array(items.iter().map(|item| to_json(item, text)).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = scalar_text(k).unwrap_or_else(|| {
                        text.get(k.span().offset()..k.span().offset() + k.span().len()).unwrap_or_default().to_owned()
                    });
                    (key, to_json(v, text))
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{Form, Reader};

    #[test]
    fn keys_that_yaml_reads_as_booleans_or_null_keep_their_spelling_in_json() {
        let text = "properties: {on: {type: string}, n: 1, yes: true, ~: 0, 'off': x, 2: two}\n";
        let root = crate::tree::parse(text).expect("the text is YAML");
        let json = Reader::new(Form::Enveloped, text.into()).json(&root);
        let expected = serde_json::json!({
            "properties": {"on": {"type": "string"}, "n": 1, "yes": true, "~": 0, "off": "x", "2": "two"}
        });
        assert_eq!(json, expected);
    }
}
