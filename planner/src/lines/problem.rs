//! What is wrong with one line of a plan: a [`LineError`] with a stable `author::line_*` code,
//! and the [`LineProblem`] that places it at a line and a task.

use std::fmt;

use serde::Serialize;

/// Why a line of the line protocol was not taken, with a stable code. The messages are written
/// for the model to read in a repair request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum LineError {
    /// The line is not a JSON object.
    #[error("the line is not a JSON object: {reason}")]
    #[diagnostic(code(author::line_parse), help("write each line as one JSON object, on one line"))]
    Parse {
        /// What the JSON reader said.
        reason: String,
    },
    /// The object is not one of the three kinds of line.
    #[error("a line is `{{\"plan\": {{...}}}}`, `{{\"task\": {{...}}}}` or `{{\"questions\": [...]}}`, not {found}")]
    #[diagnostic(code(author::line_kind))]
    Kind {
        /// What it is instead, such as `an object with keys id, agent`.
        found: String,
    },
    /// A line out of place: a task before the header, a second header, questions after the
    /// header.
    #[error("{what}")]
    #[diagnostic(code(author::line_order), help("write the header first, then one task per line"))]
    Order {
        /// What is out of place.
        what: String,
    },
    /// The header holds a field it may not, or lacks `mission`.
    #[error("the header {what}")]
    #[diagnostic(code(author::line_header))]
    Header {
        /// What is wrong with it.
        what: String,
    },
    /// A task line's object has no usable `id`.
    #[error("the task {what}")]
    #[diagnostic(code(author::line_task_id), help("give every task an `id` in snake_case"))]
    TaskId {
        /// What is wrong with it.
        what: String,
    },
    /// An earlier line has a task with the same id.
    #[error("task `{id}` is already defined on line {line}")]
    #[diagnostic(code(author::line_duplicate), help("give the task an id no earlier line uses"))]
    Duplicate {
        /// The id.
        id: String,
        /// The earlier line.
        line: usize,
    },
    /// The task's agent is neither the template's nor the header's.
    #[error("task `{id}` names agent `{agent}`, which is not defined; the agents are: {known}")]
    #[diagnostic(code(author::line_agent))]
    Agent {
        /// The task.
        id: String,
        /// The agent named.
        agent: String,
        /// The agents there are, comma-separated.
        known: String,
    },
    /// `depends_on` names a task that no earlier line defines.
    #[error(
        "task `{id}` depends on `{on}`, which no earlier line defines; a task may depend only on tasks of earlier lines"
    )]
    #[diagnostic(code(author::line_dependency))]
    Dependency {
        /// The task.
        id: String,
        /// The dependency.
        on: String,
    },
    /// `depends_on` names a task whose line was rejected.
    #[error("task `{id}` depends on `{on}`, whose line {line} was rejected, so it cannot run either")]
    #[diagnostic(code(author::line_upstream_dropped))]
    UpstreamDropped {
        /// The task.
        id: String,
        /// The dependency.
        on: String,
        /// The dependency's line.
        line: usize,
    },
    /// With blocking on, a task that may call a destructive tool with no human review upstream.
    #[error(
        "task `{id}` may call destructive tool `{tool}` with no human review before it, and a running plan cannot add one later"
    )]
    #[diagnostic(
        code(author::line_blocked),
        help("put a `type: human_review` task on an earlier line and depend on it")
    )]
    Blocked {
        /// The task.
        id: String,
        /// The tool.
        tool: String,
    },
    /// A person declined the task when asked to confirm it (`runner do --confirm-each`).
    #[error("declined at the --confirm-each prompt")]
    #[diagnostic(code(author::line_declined))]
    Declined,
    /// A line longer than [`super::MAX_LINE_BYTES`].
    #[error("the line is {bytes} bytes long, over the limit of {limit}")]
    #[diagnostic(code(author::line_too_long))]
    TooLong {
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// More lines than [`super::MAX_LINES`]; the rest of the answer is ignored.
    #[error("the answer has more than {limit} lines; the rest is ignored")]
    #[diagnostic(code(author::line_limit))]
    TooMany {
        /// The limit.
        limit: usize,
    },
}

impl LineError {
    /// The stable code, such as `author::line_dependency`.
    pub fn code(&self) -> String {
        miette::Diagnostic::code(self).map(|code| code.to_string()).unwrap_or_default()
    }
}

/// A line that was not taken: where it is, which task it was, the stable code and why.
/// Displayed as ``line 4 (task `fetch`): author::line_dependency: ...``.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineProblem {
    /// The line's number, from 1, counting the lines of earlier answers it continues.
    pub line: usize,
    /// The task's id, when the line is a task with an id.
    pub task: Option<String>,
    /// The stable code, such as `author::line_dependency`, or the loader's code for an error
    /// the loader found in the task.
    pub code: String,
    /// What is wrong.
    pub message: String,
}

impl LineProblem {
    /// The problem `error` on line `line`.
    pub fn new(line: usize, task: Option<String>, error: &LineError) -> Self {
        LineProblem { line, task, code: error.code(), message: error.to_string() }
    }
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(task) = &self.task {
            write!(f, " (task `{task}`)")?;
        }
        write!(f, ": {}: {}", self.code, self.message)
    }
}

impl std::error::Error for LineProblem {}
