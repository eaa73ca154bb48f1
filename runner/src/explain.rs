//! `runner explain`: what a diagnostic code means, an example that raises it and how to fix
//! it, from the entries in `docs/explain/` (embedded in the binary).

use std::fmt::Write;

use manifest::edit_distance;

use crate::diagnostics::print;
use crate::exit::EXIT_USAGE;

/// The explanation files, one per family of codes, as written in `docs/explain/`.
pub const FAMILIES: [(&str, &str); 16] = [
    ("plan", include_str!("../../docs/explain/plan.md")),
    ("test", include_str!("../../docs/explain/test.md")),
    ("critic", include_str!("../../docs/explain/critic.md")),
    ("answer", include_str!("../../docs/explain/answer.md")),
    ("template", include_str!("../../docs/explain/template.md")),
    ("engine", include_str!("../../docs/explain/engine.md")),
    ("store", include_str!("../../docs/explain/store.md")),
    ("llm", include_str!("../../docs/explain/llm.md")),
    ("tool", include_str!("../../docs/explain/tool.md")),
    ("http", include_str!("../../docs/explain/http.md")),
    ("verify", include_str!("../../docs/explain/verify.md")),
    ("planner", include_str!("../../docs/explain/planner.md")),
    ("author", include_str!("../../docs/explain/author.md")),
    ("cli", include_str!("../../docs/explain/cli.md")),
    ("serve", include_str!("../../docs/explain/serve.md")),
    ("cache", include_str!("../../docs/explain/cache.md")),
];

/// One code's entry: its heading, the one-line summary (the first paragraph) and the whole
/// markdown text under the heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The code, such as `plan::cycle`.
    pub code: &'static str,
    /// The entry's first paragraph, on one line.
    pub summary: &'static str,
    /// The markdown under the `## code` heading, up to the next entry.
    pub body: &'static str,
}

/// Every entry of every family, in the order the files list them.
pub fn entries() -> Vec<Entry> {
    FAMILIES.iter().flat_map(|(_, text)| parse(text)).collect()
}

/// The entries of one file: each starts at a `## code` heading and runs to the next one; the
/// text before the first heading is the file's introduction and belongs to no entry.
pub fn parse(text: &'static str) -> Vec<Entry> {
    let mut starts: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("## ") {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts.push(text.len());
    starts
        .windows(2)
        .map(|pair| {
            let section = &text[pair[0]..pair[1]];
            let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
            let code = heading.trim_start_matches("## ").trim().trim_matches('`');
            let body = body.trim();
            let summary = body.split("\n\n").next().unwrap_or("").trim();
            Entry { code, summary, body }
        })
        .collect()
}

/// Prints one code's entry, or with no code the list of codes and their summaries; an unknown
/// code is a usage error with the closest code suggested.
pub fn run(code: Option<&str>) -> anyhow::Result<u8> {
    let entries = entries();
    let Some(code) = code else {
        print(&listing(&entries))?;
        return Ok(0);
    };
    let code = code.trim().trim_matches('`');
    match entries.iter().find(|entry| entry.code == code) {
        Some(entry) => {
            print(&for_terminal(entry))?;
            Ok(0)
        }
        None => {
            let mut message = format!("error: no diagnostic code `{code}`");
            if let Some(close) = closest(code, &entries) {
                let _ = write!(message, "; did you mean `{close}`?");
            }
            eprintln!("{message}\n`runner explain` lists every code");
            Ok(EXIT_USAGE)
        }
    }
}

/// Every code with its summary, one line each, grouped by family.
fn listing(entries: &[Entry]) -> String {
    let width = entries.iter().map(|entry| entry.code.len()).max().unwrap_or(0);
    let mut out = String::new();
    for entry in entries {
        let _ = writeln!(out, "{:<width$}  {}", entry.code, one_line(entry.summary));
    }
    let _ = writeln!(out, "\n{} codes; `runner explain CODE` explains one", entries.len());
    out
}

/// An entry as plain text: the code, the prose as written, `### Heading` as `Heading:`, and
/// fenced blocks indented by four spaces without their fences.
fn for_terminal(entry: &Entry) -> String {
    let mut out = format!("{}\n\n", entry.code);
    let mut fenced = false;
    for line in entry.body.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            let _ = writeln!(out, "    {line}");
        } else if let Some(heading) = line.strip_prefix("### ") {
            let _ = writeln!(out, "{heading}:");
        } else {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// A paragraph's lines joined by spaces.
fn one_line(paragraph: &str) -> String {
    paragraph.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The code closest to what was asked, by edit distance to the whole code or to its name
/// after `::`, when it is close enough to be a likely typo.
fn closest(asked: &str, entries: &[Entry]) -> Option<&'static str> {
    let limit = (asked.chars().count() / 3).max(2);
    entries
        .iter()
        .map(|entry| {
            let name = entry.code.rsplit("::").next().unwrap_or(entry.code);
            (edit_distance(asked, entry.code).min(edit_distance(asked, name)), entry.code)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, code)| code)
}

/// The line that ends every human diagnostic: where to read more about its code.
pub fn hint(code: &str) -> String {
    format!("  help: run `runner explain {code}` for more\n")
}

/// The code of the first coded error in a chain that stopped a command, for the hint after it.
pub fn code_of(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        let diagnostic: &dyn miette::Diagnostic = if let Some(e) = cause.downcast_ref::<engine::store::StoreError>() {
            e
        } else if let Some(e) = cause.downcast_ref::<engine::driver::DriverError>() {
            e
        } else if let Some(e) = cause.downcast_ref::<engine::EngineError>() {
            e
        } else if let Some(e) = cause.downcast_ref::<crate::serve::ServeError>() {
            e
        } else if let Some(e) = cause.downcast_ref::<crate::home::LogError>() {
            &e.0
        } else {
            return None;
        };
        diagnostic.code().map(|code| code.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_splits_at_headings_and_takes_the_first_paragraph_as_summary() {
        let text = "# Family\n\nintro\n\n## `a::one`\n\nFirst line\ncontinued.\n\nMore.\n\n## a::two\n\nSecond.\n";
        let entries = parse(text);
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].code, entries[0].summary), ("a::one", "First line\ncontinued."));
        assert_eq!(entries[0].body, "First line\ncontinued.\n\nMore.");
        assert_eq!((entries[1].code, entries[1].body), ("a::two", "Second."));
        assert_eq!(one_line(entries[0].summary), "First line continued.");
    }

    #[test]
    fn terminal_text_drops_fences_and_indents_code() {
        let entry = Entry { code: "a::b", summary: "S.", body: "S.\n\n### Example\n\n```yaml\nx: 1\n```\n" };
        assert_eq!(for_terminal(&entry), "a::b\n\nS.\n\nExample:\n\n    x: 1\n");
    }

    #[test]
    fn closest_suggests_a_typo_or_a_name_without_its_family() {
        let entries = entries();
        assert_eq!(closest("plan::cycel", &entries), Some("plan::cycle"));
        assert_eq!(closest("llm::idel", &entries), Some("llm::idle"));
        assert_eq!(closest("unused_agnt", &entries), Some("critic::unused_agent"));
        assert_eq!(closest("completely::different", &entries), None);
    }
}
