//! Splitting a request in plain words into ordered steps, each classified and carrying the
//! links and files it mentions. No model, no IO but the caller's `exists` check.
//!
//! The pipeline is `normalise -> blocks -> clauses -> steps`:
//!
//! 1. **Normalise** ([`normalize`]): CRLF and lone CR become LF; curly quotes become straight
//!    ones, dashes and minus signs `-`, `…` `...`; unicode spaces and control characters
//!    become spaces, zero-width characters go; runs of spaces collapse; a line keeps its
//!    indentation (tabs count as four spaces); blank lines collapse to one.
//! 2. **Blocks**: a line starting with a list marker (`-`, `*`, `+`, `•` and similar, `1.`,
//!    `1)`, `(1)`, `a)`, `(a)`, `Step 1:`, an optional `[ ]` checkbox after it) starts a list
//!    item; an indented line right after an item continues it; other lines join into
//!    paragraphs, which blank lines end. A fenced code block (```` ``` ````) is one block; a
//!    Markdown heading (`# ...`) is no step.
//! 3. **Clauses**: a list item is one step, whatever it says. A paragraph is cut after each
//!    sentence (`.`, `!`, `?` before a space or the end, except after abbreviations such as
//!    `e.g.` and `etc.`), at `;`, before a comma followed by a connector (`then`, `next`,
//!    `after that`, `afterwards`, `finally`), before `and then`, and before `and` or a comma
//!    followed by an action verb (`..., summarise it and email it`) when the clause so far
//!    has at least two words and does not open with a condition (`if`, `when`, `once`,
//!    `unless`, `after`, `before`, ...). Nothing is cut inside backticks.
//! 4. **Steps**: connectors opening a clause (`and then`, `after that`, `afterwards`, `then`,
//!    `next`, `finally`, `lastly`, `also`, `and`, `first,`, `second,`, `third,`) are
//!    stripped, and the next letter capitalised when the connector was; trailing `.`, `,`,
//!    `;`, `:` and `!` go (a `?` stays). A clause ending in `:` right before a list item
//!    introduces the list and is no step; one right before a code block takes the block in.
//!    A clause of greetings and thanks only (`Thanks!`) is no step.
//!
//! Each step is then classified by the first matching rule of [`RULES`] (see
//! [`classify`]), and given the `http(s)` links it mentions (trailing punctuation and
//! unbalanced closing brackets stripped) and the relative file paths it mentions that
//! `exists` confirms: `./x` and `../x`, and words with a `/` or a file extension.

mod attachments;
mod blocks;
mod classify;
mod clauses;
mod normalize;

use std::fmt;
use std::str::FromStr;

pub use classify::{RULES, Rule};
pub(crate) use normalize::normalize;

/// What kind of work a step is, which decides the agent (or person) that does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// An external tool or command: a shell command, a fetch, a build, a deploy.
    Tool,
    /// A question for a person: the request asks something or leaves a choice open.
    Clarification,
    /// Anything else: writing, analysis, implementation.
    Processing,
}

impl Kind {
    /// Every kind, in the order `--agent-map` documents them.
    pub const ALL: [Kind; 3] = [Kind::Tool, Kind::Clarification, Kind::Processing];

    /// The lowercase name: `tool`, `clarification` or `processing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Clarification => "clarification",
            Kind::Processing => "processing",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that names no step kind (from `--agent-map KIND=AGENT`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("`{0}` is not a step kind")]
#[diagnostic(code(planner::unknown_kind), help("the kinds are `tool`, `clarification` and `processing`"))]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL.into_iter().find(|k| k.as_str().eq_ignore_ascii_case(s.trim())).ok_or_else(|| UnknownKind(s.into()))
    }
}

/// One step of a request, in the order the request gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What to do, in the request's words, without list markers and connectors.
    pub text: String,
    /// What kind of work it is.
    pub kind: Kind,
    /// The `http(s)` links it mentions, in order, without duplicates.
    pub links: Vec<String>,
    /// The relative files it mentions that exist, as written, without duplicates.
    pub files: Vec<String>,
}

impl Step {
    /// A step from its text: classified, with its links and confirmed files.
    pub fn new(text: String, exists: &dyn Fn(&str) -> bool) -> Step {
        let kind = classify(&text);
        let links = attachments::links(&text);
        let files = attachments::files(&text, exists);
        Step { text, kind, links, files }
    }

    /// Whether the step is a question for the person: a clarification whose text ends in `?`.
    pub(crate) fn is_question(&self) -> bool {
        self.kind == Kind::Clarification && self.text.ends_with('?')
    }

    /// Whether the step opens with an action verb (after polite words such as `please`), as
    /// the complexity detector counts actions.
    pub(crate) fn opens_with_action(&self) -> bool {
        classify::opens_with_action(&self.text)
    }
}

/// Splits a request into steps (the module doc lists the rules). `exists` answers whether a
/// relative path the request mentions is a file, relative to the caller's base directory.
pub fn split(request: &str, exists: &dyn Fn(&str) -> bool) -> Vec<Step> {
    split_normalized(&normalize(request), exists)
}

/// [`split`] for text [`normalize`] has already been applied to.
pub(crate) fn split_normalized(text: &str, exists: &dyn Fn(&str) -> bool) -> Vec<Step> {
    clauses::clauses(&blocks::blocks(text)).into_iter().map(|text| Step::new(text, exists)).collect()
}

/// The kind of a step's text: the first rule of [`RULES`] that matches, else
/// [`Kind::Processing`].
pub fn classify(text: &str) -> Kind {
    classify::classify(text)
}

/// The text of a list item after its marker, or `None` when the line is not one.
pub(crate) fn list_item(line: &str) -> Option<&str> {
    blocks::list_item(line)
}

/// The number of list items in normalised text, for the complexity detector.
pub(crate) fn list_items(text: &str) -> usize {
    blocks::blocks(text).iter().filter(|b| b.kind == blocks::BlockKind::Item).count()
}

/// The words of a text, lowercased ASCII letters, digits and apostrophes; other characters
/// separate words. Returns each word with the byte offset where it starts.
pub(crate) fn words(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !is_word_byte(bytes[i]) {
            i += 1;
        }
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        while i < bytes.len() && is_word_byte(bytes[i]) {
            i += 1;
        }
        Some((start, text[start..i].to_ascii_lowercase()))
    })
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'\''
}
