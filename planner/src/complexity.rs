//! Whether a request is one simple step, run directly as a single task, or needs a plan.
//!
//! A request needs planning ([`Complexity::Planned`]) when any of these holds; each that
//! holds gives a reason:
//!
//! - **a list**: two or more list items (`- a`, `1. b`, ...);
//! - **several actions**: two or more [action verbs](ACTION_VERBS) where an action starts,
//!   at the start of a sentence, line or clause (after `,` `;` `:`) or after a word that
//!   leads into one (`and`, `then`, `also`, `plus`, `next`, `finally`, `afterwards`,
//!   `after that`, `to`, `please`, `you`, `let's`): "fetch, summarise and email";
//! - **a conjunction joining actions**: `and`, `then`, `also`, `plus`, `next`, `finally`,
//!   `afterwards`, `after that` or `;` directly before an action verb that follows another;
//! - **a reference back**: `it`, `them`, `its`, `those`, `the result(s)`, `the output(s)`,
//!   or `that`/`this` before punctuation, in a later clause than the first action ("download
//!   the report, then summarise it"). A reference in the only clause ("fix it") points at
//!   the conversation, not at an earlier step, and does not count;
//! - **several sentences with actions**: two or more sentences or lines with an action verb
//!   where an action starts.
//!
//! Otherwise the request is [`Complexity::Simple`], with the reason "one action: VERB" or
//! "no action verb". Code in backticks, links and Markdown headings are not read.

use crate::steps::{list_item, list_items, normalize};

/// The verdict: run the request as it is, or plan it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Complexity {
    /// One step: run directly as a single task.
    Simple,
    /// Several steps, or steps that depend on each other: worth a plan.
    Planned,
}

impl Complexity {
    /// `simple` or `planned`.
    pub fn as_str(self) -> &'static str {
        match self {
            Complexity::Simple => "simple",
            Complexity::Planned => "planned",
        }
    }
}

/// A verdict and why, in short human-readable reasons such as
/// "3 action verbs: fetch, summarise, email".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The verdict.
    pub complexity: Complexity,
    /// Why, one short sentence each; never empty.
    pub reasons: Vec<String>,
}

/// Verbs that start an action, sorted (both spellings where British and American differ).
pub const ACTION_VERBS: &[&str] = &[
    "add",
    "analyse",
    "analyze",
    "announce",
    "answer",
    "apply",
    "approve",
    "archive",
    "ask",
    "assess",
    "backup",
    "benchmark",
    "book",
    "browse",
    "build",
    "buy",
    "calculate",
    "call",
    "cancel",
    "change",
    "check",
    "clean",
    "clone",
    "collect",
    "combine",
    "commit",
    "compare",
    "compile",
    "compute",
    "configure",
    "convert",
    "copy",
    "count",
    "crawl",
    "create",
    "crop",
    "curl",
    "debug",
    "decrypt",
    "delete",
    "deploy",
    "describe",
    "design",
    "document",
    "download",
    "draft",
    "draw",
    "edit",
    "email",
    "encrypt",
    "evaluate",
    "execute",
    "explain",
    "export",
    "extract",
    "fetch",
    "file",
    "filter",
    "find",
    "fix",
    "format",
    "gather",
    "generate",
    "get",
    "give",
    "grep",
    "implement",
    "import",
    "improve",
    "index",
    "inspect",
    "install",
    "investigate",
    "invite",
    "invoke",
    "launch",
    "lint",
    "list",
    "load",
    "mail",
    "make",
    "measure",
    "merge",
    "migrate",
    "monitor",
    "move",
    "notify",
    "open",
    "optimise",
    "optimize",
    "order",
    "organise",
    "organize",
    "outline",
    "parse",
    "ping",
    "plan",
    "plot",
    "post",
    "prepare",
    "print",
    "publish",
    "push",
    "query",
    "read",
    "record",
    "refactor",
    "release",
    "remind",
    "remove",
    "rename",
    "replace",
    "reply",
    "report",
    "rerun",
    "research",
    "reset",
    "resize",
    "respond",
    "restart",
    "restore",
    "retry",
    "review",
    "rewrite",
    "run",
    "save",
    "scan",
    "schedule",
    "scrape",
    "search",
    "send",
    "set",
    "share",
    "ship",
    "show",
    "sign",
    "sort",
    "split",
    "start",
    "stop",
    "store",
    "submit",
    "summarise",
    "summarize",
    "tag",
    "tell",
    "test",
    "train",
    "transcribe",
    "translate",
    "uninstall",
    "update",
    "upgrade",
    "upload",
    "use",
    "validate",
    "verify",
    "visit",
    "visualise",
    "visualize",
    "write",
];

/// Words after which an action may start.
const LEADS: &[&str] = &["to", "please", "you", "let's", "kindly", "just", "now", "first", "i'll", "we"];

/// Words that join one action to the next (they lead into one too).
const JOINERS: &[&str] = &["and", "then", "also", "plus", "next", "finally", "afterwards", "lastly"];

/// Words that refer back to what an earlier step produced.
const BACK_REFERENCES: &[&str] = &["it", "them", "its", "those"];

/// Nouns that, after `the`, name an earlier step's product.
const PRODUCTS: &[&str] = &["result", "results", "output", "outputs"];

/// Whether a lowercase word is one of [`ACTION_VERBS`].
pub(crate) fn is_action_verb(word: &str) -> bool {
    ACTION_VERBS.binary_search(&word).is_ok()
}

/// Assesses a request (the module doc lists the rules).
pub fn assess(request: &str) -> Assessment {
    assess_normalized(&normalize(request))
}

/// [`assess`] for text `steps::normalize` has already been applied to.
pub(crate) fn assess_normalized(text: &str) -> Assessment {
    if text.is_empty() {
        return Assessment { complexity: Complexity::Simple, reasons: vec!["empty request".into()] };
    }
    let mut reasons = Vec::new();
    let items = list_items(text);
    if items >= 2 {
        reasons.push(format!("a list of {items} items"));
    }
    let scan = Scan::of(text);
    if scan.actions.len() >= 2 {
        let shown: Vec<&str> = scan.actions.iter().take(6).map(String::as_str).collect();
        let more = if scan.actions.len() > shown.len() { ", ..." } else { "" };
        reasons.push(format!("{} action verbs: {}{more}", scan.actions.len(), shown.join(", ")));
    }
    if let Some(joiner) = &scan.joiner {
        reasons.push(format!("`{joiner}` joins two actions"));
    }
    if let Some(reference) = &scan.back_reference {
        reasons.push(format!("refers back to an earlier step: `{reference}`"));
    }
    if scan.sentences_with_actions >= 2 {
        reasons.push(format!("{} sentences with actions", scan.sentences_with_actions));
    }
    if !reasons.is_empty() {
        return Assessment { complexity: Complexity::Planned, reasons };
    }
    let reason = match scan.actions.first() {
        Some(verb) => format!("one action: {verb}"),
        None => "no action verb".into(),
    };
    Assessment { complexity: Complexity::Simple, reasons: vec![reason] }
}

/// What one pass over the words finds.
#[derive(Default)]
struct Scan {
    actions: Vec<String>,
    joiner: Option<String>,
    back_reference: Option<String>,
    sentences_with_actions: usize,
}

/// A word or a punctuation mark that ends a clause (`\n` ends a line).
enum Token<'a> {
    Word(&'a str),
    Mark(u8),
}

impl Scan {
    fn of(text: &str) -> Scan {
        let mut scan = Scan::default();
        let mut at_start = true;
        let mut joiner: Option<String> = None;
        let mut clause = 0usize;
        let mut first_action_clause: Option<usize> = None;
        let mut sentence_has_action = false;
        let mut previous = String::new();
        let mut demonstrative: Option<String> = None;
        let lowered: String = without_code(text)
            .to_ascii_lowercase()
            .split('\n')
            .filter(|line| !is_heading(line))
            .map(|line| list_item(line.trim_start()).unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n");
        for token in tokens(&lowered) {
            let word = match token {
                Token::Mark(mark) => {
                    if let Some(word) = demonstrative.take() {
                        scan.back_reference.get_or_insert(word);
                    }
                    if matches!(mark, b'.' | b'!' | b'?' | b'\n') {
                        scan.sentences_with_actions += usize::from(sentence_has_action);
                        sentence_has_action = false;
                    }
                    at_start = true;
                    clause += 1;
                    joiner = (mark == b';').then(|| ";".to_owned());
                    previous.clear();
                    continue;
                }
                Token::Word(word) => word,
            };
            demonstrative = None;
            let later_clause = first_action_clause.is_some_and(|c| c < clause);
            if previous == "after" && matches!(word, "that" | "this") {
                at_start = true;
                clause += 1;
                joiner = Some(format!("after {word}"));
            } else if at_start && is_action_verb(word) {
                if scan.actions.is_empty() {
                    first_action_clause = Some(clause);
                } else if let Some(j) = joiner.take() {
                    scan.joiner.get_or_insert(j);
                }
                scan.actions.push(word.to_owned());
                sentence_has_action = true;
                at_start = false;
            } else if JOINERS.contains(&word) {
                at_start = true;
                clause += 1;
                joiner = Some(word.to_owned());
            } else if LEADS.contains(&word) {
                at_start = true;
            } else {
                if later_clause && scan.back_reference.is_none() {
                    if BACK_REFERENCES.contains(&word) {
                        scan.back_reference = Some(word.to_owned());
                    } else if previous == "the" && PRODUCTS.contains(&word) {
                        scan.back_reference = Some(format!("the {word}"));
                    } else if matches!(word, "that" | "this") {
                        demonstrative = Some(word.to_owned());
                    }
                }
                at_start = false;
                joiner = None;
            }
            word.clone_into(&mut previous);
        }
        if let Some(word) = demonstrative {
            scan.back_reference.get_or_insert(word);
        }
        scan.sentences_with_actions += usize::from(sentence_has_action);
        scan
    }
}

/// Whether a line is a Markdown heading (`# Plan`): structure, not an action.
fn is_heading(line: &str) -> bool {
    let line = line.trim_start();
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with(' ')
}

/// The text with code spans (between backticks) blanked out.
fn without_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split('`').enumerate() {
        out.push_str(if i % 2 == 1 { " " } else { part });
    }
    out
}

/// The words and clause marks of lowercased text, links skipped. A `.`, `!` or `?` is a mark
/// only at the end of a word (`e.g`, `3.5` and `a.txt` have none); `,`, `;` and `:` always.
fn tokens(text: &str) -> impl Iterator<Item = Token<'_>> {
    text.split('\n').flat_map(|line| {
        line.split(' ')
            .map(|part| {
                // A link is not read, but the punctuation after it still ends a clause.
                if part.contains("://") {
                    &part[part.trim_end_matches(['.', ',', ';', ':', '!', '?']).len()..]
                } else {
                    part
                }
            })
            .flat_map(|part| {
                let bytes = part.as_bytes();
                let mut i = 0;
                std::iter::from_fn(move || {
                    while i < bytes.len() {
                        let b = bytes[i];
                        if b.is_ascii_alphanumeric() || b == b'\'' {
                            let start = i;
                            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'\'') {
                                i += 1;
                            }
                            let word = part[start..i].trim_matches('\'');
                            if !word.is_empty() {
                                return Some(Token::Word(word));
                            }
                            continue;
                        }
                        i += 1;
                        let ends_word = bytes.get(i).is_none_or(|n| !n.is_ascii_alphanumeric());
                        match b {
                            b',' | b';' | b':' => return Some(Token::Mark(b)),
                            b'.' | b'!' | b'?' if ends_word => return Some(Token::Mark(b)),
                            _ => {}
                        }
                    }
                    None
                })
            })
            .chain(std::iter::once(Token::Mark(b'\n')))
    })
}

#[cfg(test)]
mod tests {
    use super::ACTION_VERBS;

    #[test]
    fn verbs_are_sorted_for_binary_search() {
        assert!(ACTION_VERBS.windows(2).all(|w| w[0] < w[1]));
    }
}
