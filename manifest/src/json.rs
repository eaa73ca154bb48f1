//! A fast reader for plans written as JSON, building the same spanned tree as the YAML reader.
//!
//! JSON is YAML, so every JSON plan could go through serde-saphyr; this reader exists because
//! machine-written plans are JSON and large ones parse several times faster here. It is
//! iterative (no recursion), rejects duplicate keys and nesting deeper than the YAML reader
//! allows, and gives up on anything it does not understand so the YAML reader can report it.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::source::Span;
use crate::tree::{Node, Value};

/// The deepest nesting either reader accepts.
/// Deep enough for realistic manifests (each object of a verification schema takes two levels,
/// so a schema of 21 nested objects fits) and shallow enough that the YAML reader, which
/// recurses once per level, fits in the 2 MiB stack of a spawned thread.
pub const MAX_DEPTH: usize = 48;

/// Why a text is not plain JSON; the caller falls back to the YAML reader.
#[derive(Debug)]
pub struct NotJson;

enum Frame {
    Seq { start: usize, items: Vec<Node> },
    Map { start: usize, entries: Vec<(Node, Node)>, key: Option<Node>, seen: HashSet<String> },
}

/// Maps with more entries than this check duplicate keys through a set, not a scan.
const SCAN_LIMIT: usize = 16;

/// Reads a JSON document into a spanned tree.
pub fn parse(text: &str) -> Result<Node, NotJson> {
    let mut reader = Reader { bytes: text.as_bytes(), text, pos: 0 };
    let mut stack: Vec<Frame> = Vec::new();
    reader.skip_ws();
    loop {
        // Parse one value (a scalar, or the opening of a collection).
        let value = match reader.peek() {
            Some(b'{') => {
                stack.push(Frame::Map { start: reader.pos, entries: Vec::new(), key: None, seen: HashSet::new() });
                // Counted before an empty collection closes, as the YAML reader counts it.
                if stack.len() > MAX_DEPTH {
                    return Err(NotJson);
                }
                reader.pos += 1;
                reader.skip_ws();
                if reader.peek() == Some(b'}') {
                    reader.pos += 1;
                    close(&mut stack)
                } else {
                    let key = reader.key()?;
                    set_key(&mut stack, key)?;
                    None
                }
            }
            Some(b'[') => {
                stack.push(Frame::Seq { start: reader.pos, items: Vec::new() });
                // Counted before an empty collection closes, as the YAML reader counts it.
                if stack.len() > MAX_DEPTH {
                    return Err(NotJson);
                }
                reader.pos += 1;
                reader.skip_ws();
                if reader.peek() == Some(b']') {
                    reader.pos += 1;
                    close(&mut stack)
                } else {
                    None
                }
            }
            _ => Some(reader.scalar()?),
        };
        let Some(mut node) = value else { continue };
        // Attach the finished value to its parent, closing collections as they end.
        loop {
            let Some(frame) = stack.last_mut() else {
                reader.skip_ws();
                return if reader.pos == reader.bytes.len() { Ok(node) } else { Err(NotJson) };
            };
            match frame {
                Frame::Seq { items, .. } => items.push(node),
                Frame::Map { entries, key, .. } => {
                    let key = key.take().ok_or(NotJson)?;
                    entries.push((key, node));
                }
            }
            reader.skip_ws();
            match (reader.peek(), stack.last()) {
                (Some(b','), Some(Frame::Seq { .. })) => {
                    reader.pos += 1;
                    reader.skip_ws();
                    break;
                }
                (Some(b','), Some(Frame::Map { .. })) => {
                    reader.pos += 1;
                    let key = reader.key()?;
                    set_key(&mut stack, key)?;
                    break;
                }
                (Some(b']'), Some(Frame::Seq { .. })) | (Some(b'}'), Some(Frame::Map { .. })) => {
                    reader.pos += 1;
                    node = close(&mut stack).ok_or(NotJson)?;
                }
                _ => return Err(NotJson),
            }
        }
    }
}

fn set_key(stack: &mut [Frame], new_key: Node) -> Result<(), NotJson> {
    match stack.last_mut() {
        Some(Frame::Map { entries, key, seen, .. }) => {
            let Value::Str(name) = &new_key.value else { return Err(NotJson) };
            let duplicate = if entries.len() < SCAN_LIMIT {
                entries.iter().any(|(k, _)| k.value == new_key.value)
            } else {
                if seen.is_empty() {
                    seen.extend(entries.iter().filter_map(|(k, _)| match &k.value {
                        Value::Str(s) => Some(s.to_string()),
                        _ => None,
                    }));
                }
                !seen.insert(name.to_string())
            };
            if duplicate {
                return Err(NotJson);
            }
            *key = Some(new_key);
            Ok(())
        }
        _ => Err(NotJson),
    }
}

fn close(stack: &mut Vec<Frame>) -> Option<Node> {
    Some(match stack.pop()? {
        Frame::Seq { start, items } => Node::new(Value::Seq(items.into_boxed_slice()), Span::new(start, 1)),
        Frame::Map { start, entries, .. } => Node::new(Value::Map(entries.into_boxed_slice()), Span::new(start, 1)),
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Reads `"key"` and the `:` after it.
    fn key(&mut self) -> Result<Node, NotJson> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(NotJson);
        }
        let key = self.scalar()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(NotJson);
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    fn scalar(&mut self) -> Result<Node, NotJson> {
        let start = self.pos;
        let value = match self.peek().ok_or(NotJson)? {
            b'"' => Value::Str(self.string()?.into()),
            b't' => self.word("true", Value::Bool(true))?,
            b'f' => self.word("false", Value::Bool(false))?,
            b'n' => self.word("null", Value::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(NotJson),
        };
        Ok(Node::new(value, Span::new(start, self.pos - start)))
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, NotJson> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(NotJson)
        }
    }

    fn number(&mut self) -> Result<Value, NotJson> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        // JSON forbids leading zeros; YAML would read them differently, so leave those to it.
        let int_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 || (int_digits > 1 && self.bytes[int_start] == b'0') {
            return Err(NotJson);
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(NotJson);
            }
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(NotJson);
            }
            float = true;
        }
        let token = &self.text[start..self.pos];
        if !float && let Ok(int) = token.parse::<i64>() {
            return Ok(Value::Int(int));
        }
        let number: f64 = token.parse().map_err(|_| NotJson)?;
        if !number.is_finite() {
            return Err(NotJson);
        }
        Ok(Value::Float(number))
    }

    /// Skips a run of ASCII digits and says how many there were.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A string's text, borrowed from the document when it has no escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, NotJson> {
        self.pos += 1;
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == b'"' || b == b'\\' || b < 0x20 || self.unprintable(b) {
                break;
            }
            self.pos += 1;
        }
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
        }
        self.pos = start;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 || self.unprintable(b) {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek().ok_or(NotJson)? {
                b'"' => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = self.peek().ok_or(NotJson)?;
                    self.pos += 1;
                    match escaped {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(NotJson),
                    }
                }
                _ => return Err(NotJson),
            }
        }
    }

    /// Whether the character starting with byte `b` is one YAML refuses in a document (DEL,
    /// the C1 controls but NEL, U+FFFE and U+FFFF) though JSON allows it; the YAML reader
    /// reports those, so both readers agree.
    fn unprintable(&self, b: u8) -> bool {
        match b {
            0x7F => true,
            0xC2 => {
                matches!(self.bytes.get(self.pos + 1), Some(&next) if (0x80..=0x9F).contains(&next) && next != 0x85)
            }
            0xEF => matches!(self.bytes.get(self.pos + 1..self.pos + 3), Some([0xBF, 0xBE | 0xBF])),
            _ => false,
        }
    }

    fn hex4(&mut self) -> Result<u32, NotJson> {
        let hex = self.text.get(self.pos..self.pos + 4).ok_or(NotJson)?;
        // `from_str_radix` alone would also take a sign (`\u+123`), which JSON does not.
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(NotJson);
        }
        let code = u32::from_str_radix(hex, 16).map_err(|_| NotJson)?;
        self.pos += 4;
        Ok(code)
    }

    fn unicode_escape(&mut self) -> Result<char, NotJson> {
        let high = self.hex4()?;
        if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.pos..].starts_with(b"\\u") {
                return Err(NotJson);
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(NotJson);
            }
            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or(NotJson)
        } else {
            char::from_u32(high).ok_or(NotJson)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::tree::{self, parse_yaml};

    /// A JSON value before rendering: numbers keep their literal text, strings their
    /// characters (escaped at random when rendered).
    #[derive(Debug, Clone)]
    enum Json {
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

    fn json() -> impl Strategy<Value = Json> {
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

    fn object(values: impl Strategy<Value = Json>) -> impl Strategy<Value = Json> {
        prop::collection::vec((text(), values), 0..6).prop_map(|mut entries| {
            let mut seen = HashSet::new();
            entries.retain(|(key, _)| seen.insert(key.clone()));
            Json::Object(entries)
        })
    }

    /// How whitespace is laid out between tokens.
    #[derive(Debug, Clone, Copy)]
    enum Layout {
        Compact,
        Spaced,
        Pretty(usize),
        Random,
    }

    fn layout() -> impl Strategy<Value = Layout> {
        prop_oneof![
            Just(Layout::Compact),
            Just(Layout::Spaced),
            (1usize..5).prop_map(Layout::Pretty),
            Just(Layout::Random),
        ]
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

    fn render(document: &Json, layout: Layout, seed: u64) -> String {
        let mut render = Render { out: String::new(), state: seed | 1, layout };
        render.gap(true, 0);
        render.value(document, 0);
        render.gap(true, 0);
        render.out
    }

    /// The path and both sides of the first place two trees differ, floats compared by bits.
    fn first_difference(a: &Node, b: &Node, path: &str) -> Option<String> {
        let differ = |what: &str| Some(format!("at `{path}`: {what}: json {a:?} vs yaml {b:?}"));
        if a.span() != b.span() {
            return Some(format!("at `{path}`: span json {:?} vs yaml {:?}", a.span(), b.span()));
        }
        match (&a.value, &b.value) {
            (Value::Float(x), Value::Float(y)) if x.to_bits() != y.to_bits() => differ("float"),
            (Value::Seq(xs), Value::Seq(ys)) => {
                if xs.len() != ys.len() {
                    return differ("length");
                }
                xs.iter().zip(ys).enumerate().find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]")))
            }
            (Value::Map(xs), Value::Map(ys)) => {
                if xs.len() != ys.len() {
                    return differ("length");
                }
                xs.iter().zip(ys).enumerate().find_map(|(i, ((kx, vx), (ky, vy)))| {
                    first_difference(kx, ky, &format!("{path}.key{i}"))
                        .or_else(|| first_difference(vx, vy, &format!("{path}.value{i}")))
                })
            }
            (Value::Seq(_) | Value::Map(_), _) | (_, Value::Seq(_) | Value::Map(_)) => differ("kind"),
            (x, y) if x != y => differ("value"),
            _ => None,
        }
    }

    fn assert_same_tree(text: &str) {
        let json = parse(text).unwrap_or_else(|_| panic!("the JSON reader refused {text:?}"));
        let yaml = parse_yaml(text).unwrap_or_else(|e| panic!("the YAML reader refused {text:?}: {}", e.message));
        if let Some(difference) = first_difference(&json, &yaml, "") {
            panic!("the readers differ {difference}\nin {text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn json_reader_builds_the_yaml_readers_tree(
            document in object(json()),
            layout in layout(),
            seed in any::<u64>(),
        ) {
            let text = render(&document, layout, seed);
            match (parse(&text), parse_yaml(&text)) {
                (Ok(json), Ok(yaml)) => {
                    let difference = first_difference(&json, &yaml, "");
                    prop_assert!(difference.is_none(), "the readers differ {}\nin {:?}", difference.unwrap_or_default(), text);
                }
                // Only a raw character YAML refuses makes valid JSON unreadable; both must refuse it.
                (Err(_), Err(_)) => {}
                (Ok(_), Err(error)) => prop_assert!(false, "only the YAML reader refused {:?}: {}", text, error.message),
                (Err(_), Ok(_)) => prop_assert!(false, "only the JSON reader refused {:?}", text),
            }
        }
    }

    #[test]
    fn number_forms_read_alike() {
        for number in [
            "0",
            "-0",
            "7",
            "-7",
            "0.5",
            "-0.0",
            "1.5e3",
            "1E-3",
            "2e+2",
            "0e0",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551616",
            "123456789012345678901234567890",
            "1e99",
            "1.7976931348623157e308",
        ] {
            assert_same_tree(&format!("{{\"n\": {number}}}"));
        }
    }

    #[test]
    fn surrogate_pairs_and_escapes_read_alike() {
        assert_same_tree(r#"{"s": "\ud83d\ude00 \u00e9 \/ \b\f\n\r\t \" \\ \u0000"}"#);
    }

    /// Runs `test` on a thread with the 2 MiB stack Rust gives spawned threads (tokio's workers
    /// too): serde-saphyr recurses once per nesting level, and the limit must fit there even in
    /// an unoptimised build.
    fn on_a_small_stack(test: impl FnOnce() + Send + 'static) {
        let thread = std::thread::Builder::new().stack_size(2 << 20).spawn(test).expect("spawn");
        if let Err(panic) = thread.join() {
            std::panic::resume_unwind(panic);
        }
    }

    #[test]
    fn nesting_at_the_limit_reads_alike_and_one_deeper_is_refused_by_both() {
        on_a_small_stack(|| {
            let nested = |depth: usize, inner: &str| {
                format!("{{\"a\": {}{inner}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1))
            };
            // The innermost value, and how many levels it adds itself.
            for (inner, levels) in [("", 0), ("1", 0), ("{}", 1), ("{\"b\": []}", 2)] {
                assert_same_tree(&nested(MAX_DEPTH - levels, inner));
                let deeper = nested(MAX_DEPTH + 1 - levels, inner);
                assert!(parse(&deeper).is_err(), "{deeper}");
                assert!(parse_yaml(&deeper).is_err(), "{deeper}");
            }
        });
    }

    #[test]
    fn duplicate_keys_are_left_to_the_yaml_reader() {
        for text in [r#"{"a": 1, "a": 2}"#, r#"{"a": {"b": 1, "c": 2, "b": 3}}"#, r#"{"x": [{"k": 1, "k": 1}]}"#] {
            assert!(parse(text).is_err(), "{text}");
            let error = tree::parse(text).expect_err(text);
            assert!(error.message.contains("duplicate"), "{}", error.message);
        }
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        on_a_small_stack(|| {
            let deep = format!("{}1{}", "{\"a\": ".repeat(MAX_DEPTH + 1), "}".repeat(MAX_DEPTH + 1));
            assert!(parse(&deep).is_err());
            let error = tree::parse(&deep).expect_err("too deep");
            assert_eq!(error.kind, tree::SyntaxKind::Limit(tree::Limit::Depth), "{}", error.message);
            // A planner's answer is reported with this message: words, not Rust debug text.
            assert!(error.message.contains("nests deeper than") && !error.message.contains('{'), "{}", error.message);
            let deep_list = format!("{{\"a\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
            assert!(parse(&deep_list).is_err());
            assert!(tree::parse(&deep_list).is_err());
        });
    }

    #[test]
    fn leading_zeros_are_not_json() {
        for number in ["01", "-01", "00", "007.5", "00e1"] {
            assert!(parse(&format!("{{\"n\": {number}}}")).is_err(), "{number}");
        }
        for number in ["0", "-0", "0.5", "0e1", "10"] {
            assert!(parse(&format!("{{\"n\": {number}}}")).is_ok(), "{number}");
        }
    }

    #[test]
    fn malformed_numbers_are_not_json() {
        for number in ["-", "1.", ".5", "-.5", "1e", "1e+", "1.e5", "+1", "1-2", "1e400", "--1", "0x10"] {
            assert!(parse(&format!("{{\"n\": {number}}}")).is_err(), "{number}");
        }
    }

    #[test]
    fn lone_surrogates_and_bad_escapes_are_not_json() {
        for escape in [r"\ud800", r"\udc00", r"\ud800\u0041", r"\ud800x", r"\udbff\ud800", r"\u12", r"\u+123", r"\x41"]
        {
            assert!(parse(&format!("{{\"s\": \"{escape}\"}}")).is_err(), "{escape}");
        }
    }

    #[test]
    fn characters_yaml_refuses_are_left_to_the_yaml_reader() {
        for c in ['\u{7f}', '\u{80}', '\u{84}', '\u{86}', '\u{9f}', '\u{fffe}', '\u{ffff}'] {
            let text = format!("{{\"s\": \"a{c}b\"}}");
            assert!(parse(&text).is_err(), "{c:?}");
            assert!(parse_yaml(&text).is_err(), "{c:?}");
        }
        assert_same_tree("{\"s\": \"\u{85}\u{a0}\u{fffd}\u{feff}\u{10ffff}\\u007f\\ufffe\"}");
    }

    #[test]
    fn trailing_garbage_is_not_json() {
        for text in
            [r#"{"a": 1} x"#, r#"{"a": 1}}"#, r#"{"a": 1},"#, r#"{"a": 1} {"b": 2}"#, r#"{"a": 1,}"#, r#"{"a" 1}"#]
        {
            assert!(parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_duplicate_among_twenty_thousand_keys_is_found() {
        let mut keys: Vec<String> = (0..20_000).map(|i| format!("\"key{i}\": {i}")).collect();
        let unique = format!("{{{}}}", keys.join(","));
        let Ok(Node { value: Value::Map(entries), .. }) = parse(&unique) else { panic!("20k unique keys refused") };
        assert_eq!(entries.len(), 20_000);
        keys.push("\"key10000\": 0".to_owned());
        assert!(parse(&format!("{{{}}}", keys.join(","))).is_err());
        keys.pop();
        keys[19_999] = "\"key3\": 0".to_owned();
        assert!(parse(&format!("{{{}}}", keys.join(","))).is_err());
    }
}
