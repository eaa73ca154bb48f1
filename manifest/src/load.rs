//! Loading a plan: read, parse, normalise, validate. The only IO is reading the plan file and
//! checking that the files it attaches exist.

use std::io::Read;
use std::path::Path;

use crate::diagnostic::{Diagnostic, Problem, Severity};
use crate::graph::TaskGraph;
use crate::normalize::{form_of, normalize};
use crate::plan::Plan;
use crate::read::Reader;
use crate::source::{Loc, PLAN_BYTES_CEILING, Source, Span, plan_limit};
use crate::subplan::Included;
use crate::tree;
use crate::validate::{FileCheck, validate};

/// The result of loading a plan: the source, the plan and its graph when it could be built,
/// and every diagnostic, errors first.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The text the plan was read from.
    pub source: Source,
    /// The normalised plan, when the document had a recognisable shape.
    pub plan: Option<Plan>,
    /// The task graph, when the dependencies form a DAG.
    pub graph: Option<TaskGraph>,
    /// Everything found, in source order within each severity.
    pub diagnostics: Vec<Diagnostic>,
    /// The sub-plan files its `type: plan` tasks name, each with what was found in it (a
    /// plan read from text, or a file without sub-plans, has none).
    pub included: Vec<Included>,
}

impl Loaded {
    /// Whether the plan can run: it was read, its graph built, and nothing is an error.
    pub fn is_valid(&self) -> bool {
        self.plan.is_some() && self.graph.is_some() && !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The plan and its graph, when the plan is valid.
    pub fn valid(&self) -> Option<(&Plan, &TaskGraph)> {
        if self.is_valid() { self.plan.as_ref().zip(self.graph.as_ref()) } else { None }
    }

    /// The diagnostics that are errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    fn failed(source: Source, diagnostic: Diagnostic) -> Self {
        Loaded { source, plan: None, graph: None, diagnostics: vec![diagnostic], included: Vec::new() }
    }
}

/// Reads and loads a plan file of at most [`plan_limit`] bytes. File attachments are checked
/// relative to its folder.
pub fn load_file(path: &Path) -> Loaded {
    load_file_with_limit(path, plan_limit())
}

/// Reads and loads a plan file of at most `limit` bytes (clamped to [`PLAN_BYTES_CEILING`]);
/// a larger file is a `plan::too_large` error, found before the file is read. The sub-plan
/// files it names are loaded with it ([`crate::subplan`]).
pub fn load_file_with_limit(path: &Path, limit: u64) -> Loaded {
    let mut loaded = read_file(path, limit);
    crate::subplan::resolve(&mut loaded, path);
    loaded
}

/// Loads one plan file without its sub-plans, for the sub-plan loader.
pub(crate) fn load_file_alone(path: &Path) -> Loaded {
    read_file(path, plan_limit())
}

fn read_file(path: &Path, limit: u64) -> Loaded {
    let name = path.display().to_string();
    let text = match read_capped(path, limit.min(PLAN_BYTES_CEILING)) {
        Ok(text) => text,
        Err(Unread::NotUtf8 { offset, lossy }) => {
            let loc = Loc::new(Span::new(offset, char::REPLACEMENT_CHARACTER.len_utf8()), "");
            let diagnostic = Diagnostic::error(Problem::NotUtf8 { offset }, loc);
            return Loaded::failed(Source::new(name, lossy), diagnostic);
        }
        Err(Unread::TooLarge { size, limit }) => {
            return Loaded::failed(Source::new(name, ""), too_large(size, limit, Loc::default()).label(""));
        }
        Err(Unread::Other(problem)) => {
            return Loaded::failed(Source::new(name, ""), Diagnostic::error(problem, Loc::default()).label(""));
        }
    };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let stem = path.file_stem().map_or_else(|| "plan".to_owned(), |s| s.to_string_lossy().into_owned());
    // The source takes the text before the plan is read, so it is not held twice meanwhile.
    load_source(Source::new(name, text), &stem, &|file| base.join(file).is_file())
}

/// Loads a plan from text: `name` is shown in diagnostics, `stem` names a bare-form plan, and
/// `files` answers whether an attached file exists. A text over [`plan_limit`] bytes is a
/// `plan::too_large` error, as a file would be. Sub-plans are not loaded: a plan read from text
/// names no folder for them ([`crate::subplan::resolve`] loads them from one).
pub fn load_str(name: &str, stem: &str, text: &str, files: FileCheck<'_>) -> Loaded {
    let limit = plan_limit();
    if text.len() as u64 > limit {
        return Loaded::failed(Source::new(name, ""), too_large(text.len() as u64, limit, Loc::default()).label(""));
    }
    load_source(Source::new(name, text), stem, files)
}

fn load_source(source: Source, stem: &str, files: FileCheck<'_>) -> Loaded {
    let text = std::sync::Arc::clone(&source.text);
    let text: &str = &text;
    let (mut root, deferred) = match tree::parse_deferring(text) {
        Ok(parsed) => parsed,
        Err(error) => {
            let diagnostic = error.diagnostic();
            return Loaded::failed(source, diagnostic);
        }
    };
    let mut reader = Reader::new(form_of(&root), std::sync::Arc::clone(&source.text));
    reader.deferred = deferred;
    let mut plan = normalize(&mut root, stem, &mut reader);
    // The plan owns what it read; the tree would only add to the peak while the graph is built.
    drop(root);
    let mut diagnostics = reader.diagnostics;
    let graph = plan.as_mut().and_then(|plan| validate(plan, text, files, &mut diagnostics));
    diagnostics.sort_by_key(|d| (severity_rank(d.severity), d.loc.span.offset()));
    let secrets: Vec<_> = diagnostics
        .iter()
        .filter(|d| matches!(d.problem, Problem::LiteralApiKey { .. } | Problem::LiteralSecret { .. }))
        .map(|d| d.loc.span)
        .collect();
    let source = if secrets.is_empty() { source } else { Source::new(source.name, mask(text, &secrets)) };
    Loaded { source, plan, graph, diagnostics, included: Vec::new() }
}

/// The text with every byte of the given spans replaced by `*`, so a literal API key never
/// reaches a rendered snippet; spans and line numbers stay valid.
fn mask(text: &str, spans: &[crate::source::Span]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for span in spans {
        let end = (span.offset() + span.len()).min(bytes.len());
        for byte in &mut bytes[span.offset().min(end)..end] {
            if !byte.is_ascii_whitespace() {
                *byte = b'*';
            }
        }
    }
    // Whole characters were replaced (spans cover whole scalars), so this is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The `plan::too_large` error of a text of `size` bytes over `limit`; at the ceiling, whose
/// help says the cap cannot be raised further.
pub(crate) fn too_large(size: u64, limit: u64, loc: Loc) -> Diagnostic {
    let diagnostic = Diagnostic::error(Problem::TooLarge { size, limit }, loc);
    if limit < PLAN_BYTES_CEILING {
        return diagnostic;
    }
    diagnostic.help(format!(
        "{PLAN_BYTES_CEILING} bytes (4 GiB) is the most any plan can have, however high \
         RUNNER_MAX_PLAN_BYTES is set (spans are 32-bit offsets): split the plan"
    ))
}

fn severity_rank(severity: Severity) -> u8 {
    match severity {
        Severity::Error => 0,
        Severity::Warning => 1,
        Severity::Info => 2,
    }
}

/// Why a plan file could not be read as text.
enum Unread {
    /// Not UTF-8: the first bad byte, and the text with bad bytes replaced, to show where it is
    /// (the text before the byte is intact, so the offset holds in it).
    NotUtf8 { offset: usize, lossy: String },
    /// Over the cap: the file's size (or what was read of it) and the cap.
    TooLarge { size: u64, limit: u64 },
    /// Anything else.
    Other(Problem),
}

/// Reads at most `limit` bytes; larger files and non-UTF-8 text are problems, not panics.
fn read_capped(path: &Path, limit: u64) -> Result<String, Unread> {
    let io = |error: std::io::Error| Unread::Other(Problem::Io { reason: error.to_string() });
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(Unread::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // A file that grew since its size was read is still cut at one byte past the cap.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(Unread::TooLarge { size: bytes.len() as u64, limit });
    }
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|error| Unread::NotUtf8 {
        offset: error.utf8_error().valid_up_to(),
        lossy: String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}
