//! Random JSON documents for the property test, rendered with random escapes and whitespace.

use std::collections::HashSet;

use proptest::prelude::*;

/// A JSON value before rendering: numbers keep their literal text, strings their
/// characters (escaped at random when rendered).
#[derive(Debug, Clone)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Number(String),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// Characters that are special to JSON or YAML, or awkward in UTF-8.
const TRICKY: &[char] = &[
    '"',
    '\\',
    '/',
    '\n',
    '\r',
    '\t',
    '\u{0}',
    '\u{8}',
    '\u{c}',
    '\u{1f}',
    '\u{7f}',
    ' ',
    ':',
    '#',
    '{',
    '}',
    '[',
    ']',
    ',',
    '&',
    '*',
    '!',
    '|',
    '>',
    '\'',
    '%',
    '@',
    '`',
    '-',
    '?',
    '~',
    'é',
    '中',
    '😀',
    '\u{85}',
    '\u{a0}',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffd}',
    '\u{10ffff}',
];

fn text() -> impl Strategy<Value = String> {
    let char = prop_oneof![
        3 => prop::sample::select(TRICKY),
        2 => prop::char::range('a', 'z'),
        1 => any::<char>(),
    ];
    prop::collection::vec(char, 0..10).prop_map(|chars| chars.into_iter().collect())
}

pub(super) fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::Int),
        (-1000i64..1000).prop_map(Json::Int),
        "-?(0|[1-9][0-9]{0,22})(\\.[0-9]{1,8})?([eE][+-]?[0-9]{1,2})?".prop_map(Json::Number),
        text().prop_map(Json::Str),
    ];
    leaf.prop_recursive(6, 96, 6, |inner| {
        prop_oneof![prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array), object(inner),]
    })
}

pub(super) fn object(values: impl Strategy<Value = Json>) -> impl Strategy<Value = Json> {
    prop::collection::vec((text(), values), 0..6).prop_map(|mut entries| {
        let mut seen = HashSet::new();
        entries.retain(|(key, _)| seen.insert(key.clone()));
        Json::Object(entries)
    })
}

/// How whitespace is laid out between tokens.
#[derive(Debug, Clone, Copy)]
pub(super) enum Layout {
    Compact,
    Spaced,
    Pretty(usize),
    Random,
}

pub(super) fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Compact), Just(Layout::Spaced), (1usize..5).prop_map(Layout::Pretty), Just(Layout::Random),]
}

/// Renders JSON text, with choices (escapes, whitespace) drawn from a seeded xorshift.
struct Render {
    out: String,
    state: u64,
    layout: Layout,
}

impl Render {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }

    /// Whitespace between two tokens; `depth` sets the pretty indentation.
    fn gap(&mut self, newline: bool, depth: usize) {
        match self.layout {
            Layout::Compact => {}
            Layout::Spaced => self.out.push(' '),
            Layout::Pretty(indent) => {
                if newline {
                    self.out.push('\n');
                    self.out.push_str(&" ".repeat(indent * depth));
                }
            }
            Layout::Random => {
                for _ in 0..self.next() % 4 {
                    let ws = [" ", "  ", "\n", "\t", "\r\n", "\n    "];
                    let pick = ws[(self.next() % ws.len() as u64) as usize];
                    self.out.push_str(pick);
                }
            }
        }
    }

    fn value(&mut self, value: &Json, depth: usize) {
        match value {
            Json::Null => self.out.push_str("null"),
            Json::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => self.out.push_str(&i.to_string()),
            Json::Number(n) => self.out.push_str(n),
            Json::Str(s) => self.string(s),
            Json::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.gap(false, depth + 1);
                        self.out.push(',');
                    }
                    self.gap(true, depth + 1);
                    self.value(item, depth + 1);
                }
                self.gap(!items.is_empty(), depth);
                self.out.push(']');
            }
            Json::Object(entries) => {
                self.out.push('{');
                for (i, (key, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        self.gap(false, depth + 1);
                        self.out.push(',');
                    }
                    self.gap(true, depth + 1);
                    self.string(key);
                    self.gap(false, depth + 1);
                    self.out.push(':');
                    self.gap(false, depth + 1);
                    self.value(item, depth + 1);
                }
                self.gap(!entries.is_empty(), depth);
                self.out.push('}');
            }
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            let short = match c {
                '"' => Some('"'),
                '\\' => Some('\\'),
                '/' => Some('/'),
                '\u{8}' => Some('b'),
                '\u{c}' => Some('f'),
                '\n' => Some('n'),
                '\r' => Some('r'),
                '\t' => Some('t'),
                _ => None,
            };
            // Characters YAML refuses raw are mostly escaped, so most documents are valid.
            let unprintable = matches!(c, '\u{7f}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}');
            let must_escape = matches!(c, '"' | '\\') || c < ' ' || (unprintable && !self.chance(8));
            if !must_escape && !self.chance(4) {
                self.out.push(c);
            } else if let Some(short) = short.filter(|_| !self.chance(3)) {
                self.out.push('\\');
                self.out.push(short);
            } else {
                let upper = self.chance(2);
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let hex = format!("\\u{unit:04x}");
                    self.out.push_str(&if upper { hex.to_uppercase().replace("\\U", "\\u") } else { hex });
                }
            }
        }
        self.out.push('"');
    }
}

pub(super) fn render(document: &Json, layout: Layout, seed: u64) -> String {
    let mut render = Render { out: String::new(), state: seed | 1, layout };
    render.gap(true, 0);
    render.value(document, 0);
    render.gap(true, 0);
    render.out
}
