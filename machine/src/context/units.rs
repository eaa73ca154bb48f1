//! Cutting text into units (lines, or sentences of long prose lines) and scoring how
//! informative each one is.

use std::collections::HashSet;

/// What separated a unit from the one before it in the original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sep {
    /// The first unit.
    Start,
    /// A later sentence of the same line.
    Space,
    /// A line break.
    Line,
    /// One or more blank lines.
    Blank,
}

impl Sep {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Sep::Start => "",
            Sep::Space => " ",
            Sep::Line => "\n",
            Sep::Blank => "\n\n",
        }
    }
}

/// A slice of the original text that is kept or dropped whole.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    /// Byte range in the original text; never starts or ends inside a word.
    pub start: usize,
    pub end: usize,
    pub sep: Sep,
    /// One sentence of a prose line split into sentences.
    pub sentence: bool,
    /// The heading or label line this unit sits under, kept whenever this unit is.
    pub parent: Option<usize>,
    pub score: i32,
}

/// Lines longer than this (bytes) that are not code are split into sentences.
const LONG_LINE: usize = 200;

/// Cuts `text` into units: one per non-blank line, or one per sentence for long prose lines
/// when `sentences` is set. Blank lines become separators, trailing whitespace is dropped.
pub(crate) fn split(text: &str, sentences: bool) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut blank = false;
    let mut in_fence = false;
    // Open markdown headings by level, and the current `label:` line of this block.
    let mut headings: Vec<(usize, usize)> = Vec::new();
    let mut label: Option<usize> = None;
    let mut seen: HashSet<&str> = HashSet::new();
    let mut offset = 0;
    for raw in text.split('\n') {
        let start = offset;
        offset += raw.len() + 1;
        let line = raw.trim_end();
        if line.trim_start().is_empty() {
            blank = true;
            label = None;
            continue;
        }
        let sep = match (units.is_empty(), blank) {
            (true, _) => Sep::Start,
            (false, true) => Sep::Blank,
            (false, false) => Sep::Line,
        };
        blank = false;
        let body = line.trim_start();
        let fence = body.starts_with("```") || body.starts_with("~~~");
        let code = in_fence || fence;
        if fence {
            in_fence = !in_fence;
        }
        let level = if code { None } else { heading_level(body) };
        let index = units.len();
        let parent = match level {
            Some(level) => {
                headings.retain(|&(l, _)| l < level);
                headings.last().map(|&(_, i)| i)
            }
            None => label.or_else(|| headings.last().map(|&(_, i)| i)),
        };
        let end = start + line.len();
        let duplicate = !seen.insert(body);
        let split_here = sentences && !code && line.len() > LONG_LINE && !line.starts_with([' ', '\t']);
        if split_here {
            let mut first = true;
            for (s, e) in sentence_ranges(line) {
                let piece = &text[start + s..start + e];
                units.push(Unit {
                    start: start + s,
                    end: start + e,
                    sep: if first { sep } else { Sep::Space },
                    sentence: true,
                    parent,
                    score: score(piece, None, duplicate),
                });
                first = false;
            }
        } else {
            units.push(Unit { start, end, sep, sentence: false, parent, score: score(line, level, duplicate) });
        }
        if let Some(level) = level {
            headings.push((level, index));
            label = None;
        } else if !code && body.ends_with(':') && body.len() <= 120 && units.len() == index + 1 {
            label = Some(index);
        }
    }
    // A line split into one sentence is just a line.
    for i in 0..units.len() {
        let alone = units.get(i + 1).is_none_or(|next| next.sep != Sep::Space) && units[i].sep != Sep::Space;
        if alone {
            units[i].sentence = false;
        }
    }
    units
}

/// The level of a markdown ATX heading (`## Title` is 2).
fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some(hashes)
}

/// Sentence ranges within `line` (byte offsets), each trimmed; together they cover every
/// word of the line. A sentence ends at `.`, `!` or `?` (plus closing quotes or brackets)
/// followed by whitespace and a capital, digit or opening bracket or quote.
fn sentence_ranges(line: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if matches!(c, '.' | '!' | '?') {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j].1, '"' | '\'' | ')' | ']' | '”' | '’' | '.' | '!' | '?') {
                j += 1;
            }
            let end = chars.get(j).map_or(line.len(), |&(at, _)| at);
            let mut k = j;
            while k < chars.len() && chars[k].1.is_whitespace() {
                k += 1;
            }
            let opens = chars.get(k).is_some_and(|&(_, n)| {
                n.is_uppercase() || n.is_ascii_digit() || matches!(n, '"' | '(' | '[' | '“' | '`')
            });
            if k > j && opens && !abbreviation(&line[start..at]) {
                ranges.push((start, end));
                start = chars[k].0;
                i = k;
                continue;
            }
        }
        i += 1;
    }
    let tail = line[start..].trim_end();
    if !tail.is_empty() {
        ranges.push((start, start + tail.len()));
    }
    ranges
}

/// Whether the word before a `.` looks like an abbreviation (`Dr`, `e.g`, `U.S`).
fn abbreviation(before: &str) -> bool {
    let word = before.rsplit(char::is_whitespace).next().unwrap_or("");
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    word.contains('.') || (letters <= 2 && word.chars().next().is_some_and(char::is_uppercase))
}

const ERROR_WORDS: [&str; 20] = [
    "error",
    "exception",
    "panic",
    "fail",
    "fatal",
    "traceback",
    "caused by",
    "denied",
    "refused",
    "timeout",
    "timed out",
    "not found",
    "invalid",
    "cannot",
    "can't",
    "unable",
    "missing",
    "warning",
    "abort",
    "assert",
];

const FILLER: [&str; 14] = [
    "ok",
    "okay",
    "sure",
    "let me",
    "i will",
    "i'll",
    "i think",
    "as mentioned",
    "note that",
    "basically",
    "hmm",
    "well,",
    "here is",
    "here's",
];

/// How informative a unit is: names, numbers, paths, URLs, headings, labels, `key: value`
/// pairs and error words raise it; filler, bare punctuation and repeats lower it.
pub(crate) fn score(text: &str, heading: Option<usize>, duplicate: bool) -> i32 {
    let body = text.trim();
    if body.is_empty() {
        return -100;
    }
    let lower = body.to_lowercase();
    let mut score = 1;
    // Headings are mostly kept as parents of kept lines, so their own bonus is modest.
    if heading.is_some() {
        score += 4;
    } else if body.ends_with(':') {
        score += 2;
    }
    if key_value(body) {
        score += 2;
    }
    let mut numbers = 0;
    let mut names = 0;
    let mut path = false;
    let mut located = false;
    for (n, word) in body.split_whitespace().enumerate() {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '/' && c != '\\');
        if bare.chars().any(|c| c.is_ascii_digit()) {
            numbers += 1;
        }
        if n > 0 && bare.chars().next().is_some_and(char::is_uppercase) {
            names += 1;
        }
        path |= looks_like_path(bare);
        located |= has_line_number(word);
    }
    if heading.is_none() {
        score += numbers.min(3) + names.min(3);
    }
    if body.contains("://") || path {
        score += 3;
    }
    if located || lower.contains(", line ") {
        score += 3;
    }
    if ERROR_WORDS.iter().any(|w| lower.contains(w)) {
        score += 5;
    }
    if !body.chars().any(char::is_alphanumeric) {
        score -= 4;
    } else if body.chars().count() < 4 {
        score -= 2;
    }
    if FILLER.iter().any(|f| lower.starts_with(f) && lower[f.len()..].starts_with(|c: char| !c.is_alphanumeric()))
        || FILLER.contains(&lower.trim_end_matches(['.', '!']))
    {
        score -= 2;
    }
    if duplicate {
        score -= 6;
    }
    score
}

/// `key: value` or `key = value` with a short identifier-like key.
fn key_value(line: &str) -> bool {
    let line = line.trim_start_matches(['-', '*', ' ']);
    let Some(at) = line.find([':', '=']) else { return false };
    let key = line[..at].trim_end();
    let value = &line[at + 1..];
    !key.is_empty()
        && key.len() <= 40
        && key.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
        && !value.starts_with("//")
        && value.starts_with([' ', '\t'])
        && !value.trim().is_empty()
}

/// A word that names a file: contains a `/` or `\` between other characters, or ends in a
/// short alphabetic extension (`main.rs`, `config.yaml`).
pub(crate) fn looks_like_path(word: &str) -> bool {
    let word = strip_location(word);
    let mut inner = word.chars();
    inner.next();
    inner.next_back();
    if inner.as_str().contains(['/', '\\']) && word.chars().any(char::is_alphanumeric) {
        return true;
    }
    match word.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphabetic())
                && ext.chars().any(|c| c.is_ascii_lowercase())
                && stem.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '\\'))
        }
        None => false,
    }
}

/// `foo.rs:12` or `foo.js:1:2` → `foo.rs`.
fn strip_location(word: &str) -> &str {
    let mut word = word;
    while let Some((head, tail)) = word.rsplit_once(':') {
        if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) {
            word = head;
        } else {
            break;
        }
    }
    word
}

/// Whether `word` is a path followed by a line number: `src/main.rs:12`, `(x.js:1:2)`.
pub(crate) fn has_line_number(word: &str) -> bool {
    let word = word.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | ',' | '\'' | '"' | '<' | '>'));
    let stripped = strip_location(word);
    stripped.len() < word.len() && looks_like_path(stripped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(text: &'a str, units: &[Unit]) -> Vec<&'a str> {
        units.iter().map(|u| &text[u.start..u.end]).collect()
    }

    #[test]
    fn lines_are_units_and_blank_lines_separate() {
        let text = "# Title\n\nfirst line  \n  second\n\n\nthird";
        let units = split(text, true);
        assert_eq!(texts(text, &units), ["# Title", "first line", "  second", "third"]);
        let seps: Vec<Sep> = units.iter().map(|u| u.sep).collect();
        assert_eq!(seps, [Sep::Start, Sep::Blank, Sep::Line, Sep::Blank]);
        assert_eq!(units[1].parent, Some(0));
    }

    #[test]
    fn long_prose_lines_split_into_sentences() {
        let text = format!(
            "The parser failed on line 12. {} Dr. Smith said it was fine. See https://example.com now.",
            "It was a long day and nothing else happened at all, really, nothing at all. ".repeat(3)
        );
        let units = split(&text, true);
        let pieces = texts(&text, &units);
        assert_eq!(pieces[0], "The parser failed on line 12.");
        assert!(pieces.contains(&"Dr. Smith said it was fine."));
        assert!(units.iter().all(|u| u.sentence));
        assert_eq!(units[1].sep, Sep::Space);
    }

    #[test]
    fn informative_lines_outscore_filler() {
        let informative = score("error: cannot open src/main.rs:12 (Permission denied)", None, false);
        let filler = score("ok, let me think.", None, false);
        let rule = score("-----", None, false);
        assert!(informative > filler && filler > rule, "{informative} {filler} {rule}");
        assert!(score("same", None, true) < score("same", None, false));
    }

    #[test]
    fn recognises_paths_and_locations() {
        assert!(has_line_number("src/main.rs:12"));
        assert!(has_line_number("(/app/index.js:1:2)"));
        assert!(!has_line_number("localhost:8080"));
        assert!(looks_like_path("config.yaml"));
        assert!(!looks_like_path("3.14"));
    }
}
