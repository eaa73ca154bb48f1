//! Cutting a model's answer into the lines of the line protocol as it streams in.

use super::problem::LineError;
use super::{MAX_LINE_BYTES, MAX_LINES};

/// Cuts a streamed answer into logical lines, one text per header, task or questions, as soon
/// as each is complete, whatever the pieces the stream delivers.
///
/// It reads two forms alike: NDJSON (one object per line; blank lines and code-fence lines are
/// skipped) and the single object a JSON-Schema-constrained server writes,
/// `{"plan": {...}, "tasks": [{...}, ...]}`, possibly pretty-printed across lines, of which the
/// header and each element of `tasks` come out as soon as they close. Every line comes out in
/// the shape `{"plan": ...}`, `{"task": ...}` or `{"questions": ...}` (any other member of an
/// object as `{"KEY": VALUE}`). A line that breaks off (a string or an object left open at the
/// end of the physical line it started on) comes out as written, for the reader to reject.
#[derive(Debug, Default)]
pub struct Splitter {
    /// The text not yet given out (and what scanning still needs).
    text: String,
    /// The next byte of `text` to scan.
    cursor: usize,
    /// Outside an object, where the current physical line starts; inside one, where the text
    /// not yet given out starts.
    start: usize,
    /// The object being read, if any.
    object: Option<Object>,
    /// Lines given out (texts and errors).
    given: usize,
    /// Whether [`MAX_LINES`] was passed: nothing more is given out.
    full: bool,
}

/// Where the scan is in one top-level object.
#[derive(Debug)]
struct Object {
    depth: usize,
    string: bool,
    escape: bool,
    /// Whether no line end has been seen since the object opened.
    first_line: bool,
    /// The last character on the current physical line that is not white space.
    last: char,
    expect: Expect,
    /// Where the key being read starts (its opening quote).
    key_start: Option<usize>,
    /// The current member's key, as written with its quotes.
    key: String,
    /// Where the current member's value starts, and whether it is an object or a list.
    value: Option<(usize, bool)>,
    /// Whether the current member is the `tasks` list, split into one line per element.
    tasks: bool,
    /// Where the current element of `tasks` starts, and whether it is an object or a list.
    element: Option<(usize, bool)>,
    /// A member whose value has ended, given out when the next member starts or the object
    /// closes: an object of one member is then given out as written.
    done: Option<(usize, usize)>,
    /// How many lines the object has given out.
    given: usize,
}

/// What comes next in a top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Key,
    Colon,
    Value,
    InValue,
    Comma,
}

impl Object {
    fn new() -> Self {
        Object {
            depth: 1,
            string: false,
            escape: false,
            first_line: true,
            last: '{',
            expect: Expect::Key,
            key_start: None,
            key: String::new(),
            value: None,
            tasks: false,
            element: None,
            done: None,
            given: 0,
        }
    }
}

/// What scanning one character asks for.
enum Step {
    Go,
    /// Give out `text[from..to]` as a member line (`{KEY: VALUE}`) or a `tasks` element.
    Member(usize, usize),
    Element(usize, usize),
    /// Give out the whole object, up to here, as written.
    Whole(usize),
    /// The object breaks off here: give out what is left of it as written.
    Broken,
    /// A new object starts here while the current one is still open.
    Restart,
}

impl Splitter {
    /// A splitter with nothing read yet.
    pub fn new() -> Self {
        Splitter::default()
    }

    /// Reads the next piece of the answer and gives out the lines it completes, in order; a
    /// line over [`MAX_LINE_BYTES`], or past [`MAX_LINES`], is an error in its place.
    pub fn push(&mut self, piece: &str) -> Vec<Result<String, LineError>> {
        let mut out = Vec::new();
        self.text.push_str(piece);
        while let Some(c) = self.text[self.cursor..].chars().next() {
            let i = self.cursor;
            self.cursor += c.len_utf8();
            let Some(mut object) = self.object.take() else {
                self.outside(c, i, &mut out);
                continue;
            };
            match scan(&mut object, &self.text, c, i) {
                Step::Go => {}
                Step::Member(from, to) => {
                    let line = format!("{{{}: {}}}", object.key, self.text[from..to].trim());
                    self.give(line, &mut out);
                    self.start = to;
                }
                Step::Element(from, to) => {
                    let line = format!("{{\"task\": {}}}", self.text[from..to].trim());
                    self.give(line, &mut out);
                    self.start = to;
                }
                Step::Whole(to) => {
                    let line = self.text[self.start..to].trim().to_owned();
                    self.give(line, &mut out);
                    self.start = to;
                }
                Step::Broken => {
                    let line = self.unclosed(&object, i);
                    if !line.is_empty() {
                        self.give(line, &mut out);
                    }
                    self.start = self.cursor;
                    continue;
                }
                Step::Restart => {
                    if object.done.is_some() {
                        let line = self.unclosed(&object, i);
                        self.give(line, &mut out);
                    }
                    self.start = i;
                    self.object = Some(Object::new());
                    continue;
                }
            }
            if object.depth == 0 {
                self.start = self.cursor;
            } else {
                self.object = Some(object);
            }
        }
        self.forget();
        out
    }

    /// The last line when the answer ends: what is left unfinished (an object cut off, or a
    /// last line with no line end), as written.
    pub fn finish(mut self) -> Option<Result<String, LineError>> {
        let rest = match &self.object {
            Some(object) => self.unclosed(object, self.text.len()),
            None => self.text[self.start..].trim_matches(blank).to_owned(),
        };
        let only_closers = rest.chars().all(|c| matches!(c, ']' | '}' | ',') || c.is_whitespace());
        if only_closers || is_fence(&rest) {
            return None;
        }
        let mut out = Vec::new();
        self.give(rest, &mut out);
        out.pop()
    }

    /// What an object left open at `end` gives out: its last member whole when its value
    /// ended (`{"task": {...}` with the last brace missing), else the text as written.
    fn unclosed(&self, object: &Object, end: usize) -> String {
        match object.done {
            Some((from, to)) => format!("{{{}: {}}}", object.key, self.text[from..to].trim()),
            None => self.text[self.start..end].trim_matches(blank).to_owned(),
        }
    }

    /// One character outside any object: a line end gives out the physical line (unless it is
    /// blank or a fence), and `{` as a line's first character opens an object.
    fn outside(&mut self, c: char, i: usize, out: &mut Vec<Result<String, LineError>>) {
        if c == '\n' {
            let line = self.text[self.start..i].trim_matches(blank).to_owned();
            if !line.is_empty() && !is_fence(&line) {
                self.give(line, out);
            }
            self.start = self.cursor;
        } else if c == '{' && self.text[self.start..i].trim_matches(blank).is_empty() {
            self.start = i;
            self.object = Some(Object::new());
        }
    }

    /// Gives out a line, or the error that takes its place.
    fn give(&mut self, line: String, out: &mut Vec<Result<String, LineError>>) {
        if self.full {
            return;
        }
        if self.given == MAX_LINES {
            self.full = true;
            out.push(Err(LineError::TooMany { limit: MAX_LINES }));
            return;
        }
        self.given += 1;
        if line.len() > MAX_LINE_BYTES {
            out.push(Err(LineError::TooLong { bytes: line.len(), limit: MAX_LINE_BYTES }));
        } else {
            out.push(Ok(line));
        }
    }

    /// Drops the text already given out, keeping every position that is still needed.
    fn forget(&mut self) {
        let cut = self.start;
        if cut == 0 {
            return;
        }
        self.text.drain(..cut);
        self.cursor -= cut;
        self.start = 0;
        if let Some(object) = &mut self.object {
            for at in [object.value.as_mut().map(|v| &mut v.0), object.element.as_mut().map(|e| &mut e.0)]
                .into_iter()
                .flatten()
            {
                *at -= cut;
            }
            if let Some(at) = &mut object.key_start {
                *at -= cut;
            }
            if let Some((from, to)) = &mut object.done {
                *from -= cut;
                *to -= cut;
            }
        }
    }
}

/// Scans one character of an object.
fn scan(o: &mut Object, text: &str, c: char, i: usize) -> Step {
    let end = i + c.len_utf8();
    if o.string {
        if !c.is_whitespace() {
            o.last = c;
        }
        if o.escape {
            o.escape = false;
        } else if c == '\\' {
            o.escape = true;
        } else if c == '"' {
            o.string = false;
            if let Some(from) = o.key_start.take() {
                o.key = text[from..end].to_owned();
                o.expect = Expect::Colon;
            }
        } else if c == '\n' {
            // JSON strings hold no raw line end: the line broke off inside a string.
            return Step::Broken;
        }
        return Step::Go;
    }
    if c == '\n' {
        let open_end = matches!(o.last, '{' | '[' | ',' | ':');
        // An object that started on this line and does not end it the way a pretty-printer
        // would is a line broken off.
        if o.first_line && !open_end {
            return Step::Broken;
        }
        o.first_line = false;
        return Step::Go;
    }
    if c.is_whitespace() {
        return Step::Go;
    }
    o.last = c;
    if o.depth == 1 {
        return top_level(o, c, i);
    }
    if o.depth == 2 && o.tasks && o.element.is_none() && !matches!(c, ',' | ']') {
        o.element = Some((i, matches!(c, '{' | '[')));
    }
    match c {
        '"' => o.string = true,
        '{' | '[' => o.depth += 1,
        '}' | ']' => {
            o.depth -= 1;
            if o.depth == 1 {
                // The member's value closes; for `tasks`, a scalar last element ends with it.
                let value = o.value.take();
                o.expect = Expect::Comma;
                if o.tasks {
                    o.tasks = false;
                    if let Some((from, false)) = o.element.take() {
                        o.given += 1;
                        return Step::Element(from, i);
                    }
                    return Step::Go;
                }
                if let Some((from, _)) = value {
                    o.done = Some((from, end));
                }
            } else if o.depth == 2
                && o.tasks
                && let Some((from, true)) = o.element
            {
                o.element = None;
                o.given += 1;
                return Step::Element(from, end);
            }
        }
        ',' if o.depth == 2 && o.tasks => {
            if let Some((from, false)) = o.element.take() {
                o.given += 1;
                return Step::Element(from, i);
            }
        }
        _ => {}
    }
    Step::Go
}

/// Scans one character at the top level of an object: keys, colons, commas, the start of a
/// value and the object's end.
fn top_level(o: &mut Object, c: char, i: usize) -> Step {
    match (o.expect, c) {
        (Expect::Key, '"') => {
            o.key_start = Some(i);
            o.string = true;
        }
        (Expect::Colon, ':') => o.expect = Expect::Value,
        (Expect::Value, _) => {
            o.expect = Expect::InValue;
            o.tasks = o.key == "\"tasks\"" && c == '[';
            // The `tasks` list is given out element by element, never whole.
            o.value = (!o.tasks).then_some((i, matches!(c, '{' | '[')));
            match c {
                '"' => o.string = true,
                '{' | '[' => o.depth += 1,
                _ => {}
            }
        }
        (Expect::InValue | Expect::Comma | Expect::Key, '}') => {
            if let Some((from, false)) = o.value.take() {
                o.done = Some((from, i));
            }
            o.depth = 0;
            return match o.done.take() {
                Some(_) if o.given == 0 => Step::Whole(i + 1),
                Some((from, to)) => Step::Member(from, to),
                None => Step::Go,
            };
        }
        (Expect::InValue | Expect::Comma, ',') => {
            o.expect = Expect::Key;
            if let Some((from, false)) = o.value.take() {
                o.done = Some((from, i));
            }
            if let Some((from, to)) = o.done.take() {
                o.given += 1;
                return Step::Member(from, to);
            }
        }
        // An object opening where a key or a comma belongs: the last one was never closed.
        (Expect::Key | Expect::Comma, '{') => return Step::Restart,
        _ => {}
    }
    Step::Go
}

/// Whether a line is a code fence (```` ``` ```` or ```` ```json ````).
fn is_fence(line: &str) -> bool {
    line.starts_with("```")
}

/// White space and the byte-order mark.
fn blank(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}
