//! The classification rules: a small table, first match wins.

use super::Kind;
use super::clauses::starts_with_word;
use crate::complexity::is_action_verb;

/// One classification rule: the kind it gives and, in words, what it looks for.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The kind a matching step gets.
    pub kind: Kind,
    /// What the rule looks for, as the docs say it.
    pub when: &'static str,
    test: fn(&Features) -> bool,
}

/// The rules, in the order they are tried; a step no rule matches is
/// [`Kind::Processing`]. Code in backticks and links do not count as prose: a `?` in a URL
/// asks nothing.
pub const RULES: &[Rule] = &[
    Rule { kind: Kind::Clarification, when: "asks a question: a `?` in its prose", test: asks },
    Rule {
        kind: Kind::Clarification,
        when: "leaves a choice open: `or` between alternatives, `either`, `which` first, `ask`/`clarify` \
               first, TBD, unsure, not sure, unclear, undecided, don't know",
        test: leaves_open,
    },
    Rule {
        kind: Kind::Tool,
        when: "is a command: code in backticks, a `$ ` prompt, a program first (`npm`, `cargo`, `git`, \
               `docker`, `ls`, ...), `./script` first, `--flags`, ` | ` or `&&`, curl/wget/grep anywhere",
        test: is_command,
    },
    Rule {
        kind: Kind::Tool,
        when: "starts with a tool verb: run, execute, call, invoke, fetch, download, install, build, \
               compile, test, deploy, launch, ping, scrape, crawl, clone, upload, query, search",
        test: starts_with_tool_verb,
    },
    Rule {
        kind: Kind::Tool,
        when: "fetches a link: a URL and read, fetch, download, get, open, visit, browse, scrape, crawl, \
               clone, pull, load or check",
        test: fetches_link,
    },
];

const TOOL_VERBS: &[&str] = &[
    "run", "execute", "exec", "call", "invoke", "fetch", "curl", "wget", "grep", "download", "install", "build",
    "compile", "test", "deploy", "launch", "ping", "scrape", "crawl", "clone", "upload", "query", "search",
];

const PROGRAMS: &[&str] = &[
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "cargo",
    "rustc",
    "rustup",
    "git",
    "docker",
    "kubectl",
    "helm",
    "terraform",
    "pip",
    "pip3",
    "python",
    "python3",
    "node",
    "deno",
    "bash",
    "sh",
    "zsh",
    "ssh",
    "scp",
    "rsync",
    "ls",
    "cd",
    "grep",
    "curl",
    "wget",
    "sed",
    "awk",
    "jq",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "chmod",
    "chown",
    "tar",
    "unzip",
    "psql",
    "mysql",
    "sqlite3",
    "aws",
    "gcloud",
    "gh",
    "brew",
    "apt",
    "systemctl",
    "journalctl",
    "ffmpeg",
    "pytest",
];

const RETRIEVE_VERBS: &[&str] = &[
    "read", "fetch", "download", "get", "open", "visit", "browse", "scrape", "crawl", "clone", "pull", "load", "check",
];

/// Phrases that leave a decision to a person.
const UNDECIDED: &[&str] = &[
    "tbd",
    "tbc",
    "to be decided",
    "to be determined",
    "unsure",
    "not sure",
    "unclear",
    "undecided",
    "don't know",
    "do not know",
    "either",
];

/// Words after `or` that compare amounts rather than offer alternatives (`one or more`).
const NOT_ALTERNATIVES: &[&str] = &[
    "more", "less", "so", "fewer", "later", "earlier", "greater", "higher", "lower", "not", "newer", "older", "equal",
];

/// Words before the verb of a request that say nothing about the work.
const POLITE: &[&str] = &["please", "kindly", "now", "just"];

/// What the rules look at, computed once per step.
struct Features<'a> {
    text: &'a str,
    /// The text without code spans and links, lowercased.
    prose: String,
    /// The words of the prose.
    words: Vec<String>,
    /// The first word of the prose after polite words.
    first: Option<usize>,
    has_link: bool,
}

impl Features<'_> {
    fn first(&self) -> &str {
        self.first.map_or("", |i| self.words[i].as_str())
    }

    fn has_word(&self, list: &[&str]) -> bool {
        self.words.iter().any(|w| list.contains(&w.as_str()))
    }

    fn has_phrase(&self, phrase: &str) -> bool {
        let mut from = 0;
        while let Some(at) = self.prose[from..].find(phrase) {
            let start = from + at;
            let end = start + phrase.len();
            let bounded = |i: Option<u8>| i.is_none_or(|b| !b.is_ascii_alphanumeric());
            if bounded(start.checked_sub(1).map(|i| self.prose.as_bytes()[i]))
                && bounded(self.prose.as_bytes().get(end).copied())
            {
                return true;
            }
            from = end;
        }
        false
    }
}

pub(super) fn classify(text: &str) -> Kind {
    let features = features(text);
    RULES.iter().find(|rule| (rule.test)(&features)).map_or(Kind::Processing, |rule| rule.kind)
}

/// Whether the first word of a text's prose, after polite words, is an action verb.
pub(super) fn opens_with_action(text: &str) -> bool {
    is_action_verb(features(text).first())
}

fn features(text: &str) -> Features<'_> {
    let mut prose = String::with_capacity(text.len());
    let mut has_link = false;
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            prose.push(' ');
            continue;
        }
        for token in part.split(' ') {
            if token.contains("://") {
                // The link is no prose, but a `?` or `.` after it is.
                has_link = true;
                prose.push_str(&token[token.trim_end_matches(['.', ',', ';', ':', '!', '?']).len()..]);
                prose.push(' ');
            } else {
                prose.push_str(&token.to_ascii_lowercase());
                prose.push(' ');
            }
        }
    }
    let words: Vec<String> = super::words(&prose).map(|(_, w)| w).collect();
    let first = words.iter().position(|w| !POLITE.contains(&w.as_str()));
    Features { text, prose, words, first, has_link }
}

fn asks(f: &Features) -> bool {
    f.prose.contains('?')
}

fn leaves_open(f: &Features) -> bool {
    matches!(f.first(), "which" | "ask" | "clarify")
        || UNDECIDED.iter().any(|p| f.has_phrase(p))
        || f.words.windows(2).any(|w| w[0] == "or" && !NOT_ALTERNATIVES.contains(&w[1].as_str()))
}

fn is_command(f: &Features) -> bool {
    let text = f.text.trim_start();
    text.contains('`')
        || text.starts_with("$ ")
        || text.starts_with("./")
        || PROGRAMS.iter().any(|p| starts_with_word(text, p))
        || f.has_word(&["curl", "wget", "grep"])
        || f.text.contains(" | ")
        || f.text.contains("&&")
        || f.text
            .split(' ')
            .any(|t| t.strip_prefix("--").is_some_and(|flag| flag.starts_with(|c: char| c.is_ascii_lowercase())))
}

fn starts_with_tool_verb(f: &Features) -> bool {
    TOOL_VERBS.contains(&f.first())
}

fn fetches_link(f: &Features) -> bool {
    f.has_link && f.has_word(RETRIEVE_VERBS)
}
