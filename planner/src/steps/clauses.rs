//! Blocks into the texts of steps: sentences and clauses cut at connectors, connectors and
//! trailing punctuation stripped.

use super::blocks::{Block, BlockKind};
use crate::complexity::is_action_verb;

/// Words that open a clause and only say it comes next; stripped from the step's text. The
/// flag says the word counts only when a comma follows it (`First, ...`).
const CONNECTORS: &[(&str, bool)] = &[
    ("and then", false),
    ("and finally", false),
    ("after that", false),
    ("after this", false),
    ("afterwards", false),
    ("afterward", false),
    ("then", false),
    ("next", false),
    ("finally", false),
    ("lastly", false),
    ("also", false),
    ("and", false),
    ("firstly", true),
    ("first", true),
    ("secondly", true),
    ("second", true),
    ("thirdly", true),
    ("third", true),
];

/// Connectors that, after a comma, start a new step: `..., then summarise it`.
const CUT_AFTER_COMMA: &[&str] = &["and then", "and finally", "then", "next", "after that", "afterwards", "finally"];

/// Words that open a condition: a clause starting with one is not cut before a verb
/// (`If the build fails, fix it`).
const SUBORDINATORS: &[&str] = &[
    "if",
    "when",
    "whenever",
    "once",
    "unless",
    "after",
    "before",
    "while",
    "until",
    "because",
    "since",
    "as soon as",
];

/// Words that only greet or thank; a clause of nothing else is no step.
const COURTESY: &[&str] = &[
    "thanks", "thank", "you", "thx", "ty", "cheers", "please", "hi", "hello", "hey", "regards", "best", "much", "a",
    "lot", "in", "advance", "so",
];

/// Words whose `.` does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "jr", "sr", "st", "no", "fig", "cf", "approx", "al",
    "eg", "ie", "resp", "incl", "min", "max", "est",
];

/// The text of every step in the blocks, in order.
pub(crate) fn clauses(blocks: &[Block]) -> Vec<String> {
    let mut out = Vec::new();
    // Whether the last clause pushed ended with `:` (it takes a code block that follows in).
    let mut colon = false;
    for (i, block) in blocks.iter().enumerate() {
        let next = blocks.get(i + 1).map(|b| b.kind);
        let mut pieces = match block.kind {
            BlockKind::Heading => continue,
            BlockKind::Code => {
                match out.last_mut().filter(|_| colon) {
                    Some(last) => {
                        let last: &mut String = last;
                        last.push_str(":\n");
                        last.push_str(&block.text);
                    }
                    None => out.push(block.text.clone()),
                }
                colon = false;
                continue;
            }
            BlockKind::Item => vec![block.text.as_str()],
            BlockKind::Paragraph => cut(&block.text),
        };
        // A clause that ends in `:` right before a list introduces the list.
        if next == Some(BlockKind::Item) && pieces.last().is_some_and(|p| p.ends_with(':')) {
            pieces.pop();
        }
        colon = false;
        for piece in pieces {
            if let Some(text) = clean(piece) {
                colon = piece.ends_with(':');
                out.push(text);
            }
        }
    }
    out
}

/// Cuts a paragraph into sentences and clauses, each trimmed.
fn cut(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut push = |from: usize, to: usize| {
        let piece = text[from..to].trim();
        if !piece.is_empty() {
            pieces.push(piece);
        }
    };
    let mut start = 0;
    let mut tick = false;
    let mut i = 0;
    let conditional = |from: usize| SUBORDINATORS.iter().any(|s| starts_with_word(text[from..].trim_start(), s));
    while i < bytes.len() {
        match bytes[i] {
            b'`' => tick = !tick,
            _ if tick => {}
            c @ (b'.' | b'!' | b'?') => {
                let mut end = i;
                while end < bytes.len() && matches!(bytes[end], b'.' | b'!' | b'?') {
                    end += 1;
                }
                let run = end - i;
                while end < bytes.len() && matches!(bytes[end], b'"' | b'\'' | b')') {
                    end += 1;
                }
                let boundary = end == bytes.len() || bytes[end] == b' ';
                let abbreviation = c == b'.' && run == 1 && is_abbreviation(&text[start..i]);
                if boundary && !abbreviation {
                    push(start, end);
                    start = end;
                }
                i = end;
                continue;
            }
            b';' => {
                push(start, i);
                start = i + 1;
            }
            b',' => {
                let rest = &text[i + 1..];
                if CUT_AFTER_COMMA.iter().any(|c| starts_with_word(rest.trim_start(), c))
                    || (verb_follows(rest) && word_count(&text[start..i]) >= 2 && !conditional(start))
                {
                    push(start, i);
                    start = i + 1;
                }
            }
            b' ' => {
                let rest = &text[i + 1..];
                if starts_with_word(rest, "and then")
                    || (starts_with_word(rest, "and")
                        && verb_follows(&rest[3..])
                        && word_count(&text[start..i]) >= 2
                        && !conditional(start))
                {
                    push(start, i);
                    start = i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    push(start, bytes.len());
    pieces
}

/// Whether the text ends with a word whose `.` does not end a sentence: one of
/// [`ABBREVIATIONS`], or dotted letters such as `e.g` and `U.S`.
fn is_abbreviation(before: &str) -> bool {
    let word = before.rsplit(' ').next().unwrap_or_default().trim_start_matches(['(', '"', '\'']);
    if word.contains('.') {
        return word
            .split('.')
            .all(|part| (1..=2).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_alphabetic()));
    }
    ABBREVIATIONS.iter().any(|a| a.eq_ignore_ascii_case(word))
}

/// Whether an action verb opens the text, after an optional `and`.
fn verb_follows(rest: &str) -> bool {
    let rest = rest.trim_start();
    let rest = if starts_with_word(rest, "and") { rest[3..].trim_start() } else { rest };
    let end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    let after = rest[end..].chars().next();
    end > 0 && !matches!(after, Some('-' | '_' | '\'' | '/' | '.')) && is_action_verb(&rest[..end].to_ascii_lowercase())
}

/// Whether `text` starts with `phrase` (ignoring ASCII case) followed by a space, a comma or
/// the end.
pub(crate) fn starts_with_word(text: &str, phrase: &str) -> bool {
    text.get(..phrase.len()).is_some_and(|head| head.eq_ignore_ascii_case(phrase))
        && matches!(text.as_bytes().get(phrase.len()), None | Some(b' ' | b','))
}

fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// A clause as a step's text: opening connectors and trailing punctuation stripped; `None`
/// when nothing is left.
fn clean(piece: &str) -> Option<String> {
    let mut text = piece.trim().trim_end_matches(['.', ',', ';', ':', '!', ' ']);
    let mut capital = None;
    'strip: loop {
        for (connector, needs_comma) in CONNECTORS {
            if starts_with_word(text, connector) {
                let rest = &text[connector.len()..];
                if *needs_comma && !rest.starts_with(',') {
                    continue;
                }
                capital.get_or_insert(text.starts_with(|c: char| c.is_ascii_uppercase()));
                text = rest.trim_start_matches([',', ' ']);
                continue 'strip;
            }
        }
        break;
    }
    let text = text.trim_end_matches(['.', ',', ';', ':', '!', ' ']);
    if text
        .split(|c: char| !c.is_ascii_alphabetic())
        .all(|w| w.is_empty() || COURTESY.iter().any(|c| c.eq_ignore_ascii_case(w)))
        && text.chars().any(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    if text.is_empty() {
        return None;
    }
    let mut out = text.to_owned();
    if capital == Some(true)
        && let Some(first) = out.get_mut(..1)
    {
        first.make_ascii_uppercase();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_cut_at_sentences_and_connectors() {
        assert_eq!(
            cut("Fetch it, e.g. from `a. b`; then go. Next, read https://x.y/z. Done? Yes and then no"),
            ["Fetch it, e.g. from `a. b`", "then go.", "Next, read https://x.y/z.", "Done?", "Yes", "and then no"]
        );
        assert_eq!(
            cut("Fetch the news, summarise it and email it"),
            ["Fetch the news", "summarise it", "and email it"]
        );
        assert_eq!(cut("Build and test the project"), ["Build and test the project"]);
    }

    #[test]
    fn connectors_and_trailing_punctuation_go() {
        assert_eq!(clean("Then write unit tests.").as_deref(), Some("Write unit tests"));
        assert_eq!(clean("and then npm install;").as_deref(), Some("npm install"));
        assert_eq!(clean("First, pick one?").as_deref(), Some("Pick one?"));
        assert_eq!(clean("First impressions count").as_deref(), Some("First impressions count"));
        assert_eq!(clean("Then.").as_deref(), None);
    }
}
