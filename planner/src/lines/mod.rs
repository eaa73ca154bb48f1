//! Plans a line at a time: the line protocol a model writes a plan in (NDJSON, a header line
//! then one line per task, or the single object a schema-constrained server writes), cut into
//! lines by the [`Splitter`], each validated against the lines before it by the
//! [`Assembler`], and [`author_lines`], which asks a model for the lines and hands each one's
//! [`Verdict`] to the caller as it arrives, so that a run can start a task before the plan is
//! finished.
//!
//! The protocol, version [`LINE_PROTOCOL_VERSION`]: first `{"plan": {"mission": ..., "name"?:
//! ..., "strategy"?: ..., "agents"?: {NAME: AGENT}, "vars"?: {...}}}` (or a single
//! `{"questions": [...]}` line instead of a plan), then `{"task": TASK}` per task, a task as in
//! a manifest's `spec.workflow`, depending only on tasks of earlier lines.

mod assembler;
mod author;
mod problem;
mod prompt;
pub mod schema;
mod splitter;
mod verdict;

pub use assembler::Assembler;
pub use author::{LineEvent, LinesAuthored, MAX_REPAIRS, author_lines};
pub use problem::{LineError, LineProblem};
pub use prompt::LINES_PROMPT_VERSION;
pub use splitter::Splitter;
pub use verdict::Verdict;

/// The version of the line protocol; provenance records it with the prompt's version.
pub const LINE_PROTOCOL_VERSION: &str = "lines-1";

/// The longest line taken, in bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The most lines taken from one answer.
pub const MAX_LINES: usize = 1000;
