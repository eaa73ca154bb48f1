//! Diagnostics: every problem the loader and validator can report, each with a stable code.

use std::fmt;

use crate::rendered::Rendered;
use crate::source::{Loc, Source, Span};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The plan cannot run.
    Error,
    /// The plan can run, but something in it is probably not what the author meant.
    Warning,
    /// A note, such as a field name that was read under its canonical name.
    Info,
}

impl Severity {
    /// The lower-case name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// Every problem a manifest can have. The `code` of each variant is stable: tools match on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    #[error("cannot read the plan: {reason}")]
    #[diagnostic(code(plan::io))]
    Io {
        /// The operating system's reason.
        reason: String,
    },
    /// The file is larger than the loader accepts.
    #[error("the plan is {size} bytes; plans are limited to {limit} bytes")]
    #[diagnostic(code(plan::too_large))]
    TooLarge {
        /// The file's size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the plan is not UTF-8 text (invalid byte at offset {offset})")]
    #[diagnostic(code(plan::not_utf8))]
    NotUtf8 {
        /// The offset of the first invalid byte.
        offset: usize,
    },
    /// The YAML reader rejected the text.
    #[error("invalid YAML: {message}")]
    #[diagnostic(code(plan::yaml_syntax))]
    YamlSyntax {
        /// The reader's explanation.
        message: String,
    },
    /// A plan written as JSON (its first character is `{`) is not valid JSON.
    #[error("invalid JSON: {message}")]
    #[diagnostic(code(plan::json_syntax))]
    JsonSyntax {
        /// The reader's explanation.
        message: String,
    },
    /// The text is over one of the reader's limits (nesting, aliases, size), which keep a
    /// hostile file from exhausting memory or the stack.
    #[error("the plan {what}")]
    #[diagnostic(code(plan::over_limit))]
    OverLimit {
        /// Which limit, with its value: "nests deeper than 64 levels".
        what: String,
    },
    /// A value has the wrong type.
    #[error("{what} must be {expected}, found {found}")]
    #[diagnostic(code(plan::wrong_type))]
    WrongType {
        /// The field or item.
        what: String,
        /// The expected kind.
        expected: String,
        /// The kind found.
        found: &'static str,
    },
    /// A field that this place does not have.
    #[error("unknown field `{field}` in {context}")]
    #[diagnostic(code(plan::unknown_field))]
    UnknownField {
        /// The field as written.
        field: String,
        /// Where it was found (`a task`, `spec`, ...).
        context: String,
    },
    /// A required field is absent.
    #[error("{context} has no `{field}`")]
    #[diagnostic(code(plan::missing_field))]
    MissingField {
        /// The missing field.
        field: String,
        /// Where it is missing.
        context: String,
    },
    /// A value of the right type that is not allowed.
    #[error("invalid {what}: {reason}")]
    #[diagnostic(code(plan::invalid_value))]
    InvalidValue {
        /// The field or item.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// `apiVersion` or `kind` is not one this loader reads.
    #[error("unsupported {field} `{found}`; this runner reads `{expected}`")]
    #[diagnostic(code(plan::unsupported_version))]
    UnsupportedVersion {
        /// `apiVersion` or `kind`.
        field: &'static str,
        /// The value found.
        found: String,
        /// The value expected.
        expected: &'static str,
    },
    /// Two tasks share an id.
    #[error("duplicate task id `{id}`")]
    #[diagnostic(code(plan::duplicate_task))]
    DuplicateTask {
        /// The id.
        id: String,
    },
    /// A dependency names no task.
    #[error("task `{task}` depends on unknown task `{dependency}`")]
    #[diagnostic(code(plan::unknown_dependency))]
    UnknownDependency {
        /// The dependent task.
        task: String,
        /// The missing task.
        dependency: String,
    },
    /// A task depends on itself.
    #[error("task `{task}` depends on itself")]
    #[diagnostic(code(plan::self_dependency))]
    SelfDependency {
        /// The task.
        task: String,
    },
    /// Tasks depend on each other in a circle.
    #[error("dependency cycle between {}", members.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "))]
    #[diagnostic(code(plan::cycle))]
    Cycle {
        /// Every task in the strongly connected component, in workflow order.
        members: Vec<String>,
    },
    /// A synthesis gate reads a task that does not exist.
    #[error("synthesis gate `{gate}` reads unknown task `{input}`")]
    #[diagnostic(code(plan::unknown_gate_input))]
    UnknownGateInput {
        /// The gate.
        gate: String,
        /// The missing task.
        input: String,
    },
    /// A reference to an agent that is not defined.
    #[error("{owner} uses unknown agent `{agent}`")]
    #[diagnostic(code(plan::unknown_agent))]
    UnknownAgent {
        /// Who refers to it (`task `x``, `control_logic.planner`).
        owner: String,
        /// The agent name.
        agent: String,
    },
    /// A reference to a tool that is not defined.
    #[error("agent `{agent}` uses unknown tool `{tool}`")]
    #[diagnostic(code(plan::unknown_tool))]
    UnknownTool {
        /// The agent.
        agent: String,
        /// The tool name.
        tool: String,
    },
    /// A reference to a provider that is not defined.
    #[error("agent `{agent}` uses unknown provider `{provider}`")]
    #[diagnostic(code(plan::unknown_provider))]
    UnknownProvider {
        /// The agent.
        agent: String,
        /// The provider name.
        provider: String,
    },
    /// A template does not parse.
    #[error("template error in {owner}: {detail}")]
    #[diagnostic(code(plan::template_syntax))]
    TemplateSyntax {
        /// Whose template.
        owner: String,
        /// The template engine's explanation.
        detail: String,
    },
    /// A template reads a variable that will not exist when it is rendered.
    #[error("{owner} reads `{variable}`, which is not defined")]
    #[diagnostic(code(plan::template_unknown_variable))]
    TemplateUnknownVariable {
        /// Whose template.
        owner: String,
        /// The variable.
        variable: String,
    },
    /// A template reads the output of a task that does not run before it.
    #[error("task `{task}` reads `tasks.{read}`, but `{read}` is not upstream of `{task}`")]
    #[diagnostic(code(plan::template_not_ancestor))]
    TemplateNotAncestor {
        /// The reading task.
        task: String,
        /// The task it reads.
        read: String,
    },
    /// `skip` would let a critical task be skipped.
    #[error("critical task `{task}` can be skipped")]
    #[diagnostic(code(plan::skip_on_critical))]
    SkipOnCritical {
        /// The task.
        task: String,
    },
    /// `replan` with no planner agent to ask.
    #[error("task `{task}` replans on failure, but `control_logic.planner` names no agent")]
    #[diagnostic(code(plan::replan_without_planner))]
    ReplanWithoutPlanner {
        /// The task.
        task: String,
    },
    /// A verification or tool schema that is not a valid JSON Schema.
    #[error("invalid JSON Schema in {owner}: {detail}")]
    #[diagnostic(code(plan::invalid_schema))]
    InvalidSchema {
        /// Whose schema.
        owner: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A `file` attachment that does not exist.
    #[error("task `{task}` attaches `{file}`, which does not exist")]
    #[diagnostic(code(plan::missing_attachment))]
    MissingAttachment {
        /// The task.
        task: String,
        /// The file as written.
        file: String,
    },
    /// A workflow with no tasks.
    #[error("the workflow has no tasks")]
    #[diagnostic(code(plan::empty_workflow))]
    EmptyWorkflow,
    /// An `api_key_env` that holds what looks like a key rather than a variable name.
    #[error("provider `{provider}` has a literal API key in `api_key_env`")]
    #[diagnostic(code(plan::literal_api_key))]
    LiteralApiKey {
        /// The provider.
        provider: String,
    },
    /// An `http` agent's `api_key_env` or `headers_env` value that is not a variable name, or
    /// credentials written into its `url`.
    #[error("agent `{agent}` has a literal secret in `{field}`")]
    #[diagnostic(code(plan::literal_secret))]
    LiteralSecret {
        /// The agent.
        agent: String,
        /// `api_key_env`, `headers_env` or `url`.
        field: String,
    },
    /// A field or value from the bare seed form read under its canonical name.
    #[error("`{written}` read as `{canonical}`")]
    #[diagnostic(code(plan::alias))]
    Alias {
        /// What the plan says.
        written: String,
        /// What it means here.
        canonical: String,
    },
    /// A bare-form task that reads no upstream output gets its dependencies' outputs.
    #[error("task `{task}` reads no upstream output, so its dependencies' outputs are appended to its input")]
    #[diagnostic(code(plan::implicit_inputs))]
    ImplicitInputs {
        /// The task.
        task: String,
    },
    /// Something from another planner that has no equivalent here.
    #[error("{what} is not supported and is ignored")]
    #[diagnostic(code(plan::unsupported))]
    Unsupported {
        /// The construct.
        what: String,
    },
    /// A planner's replacement for failed tasks holds no workflow that can be read.
    #[error("the planner's answer is not a JSON workflow: {message}")]
    #[diagnostic(code(plan::replacement_not_json))]
    ReplacementNotJson {
        /// Why it could not be read.
        message: String,
    },
}

/// A problem at a place in a manifest, with an optional fix and extra labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// What is wrong; its variant gives the stable code.
    pub problem: Problem,
    /// How serious it is.
    pub severity: Severity,
    /// The key or value it is about.
    pub loc: Loc,
    /// The text under the primary label.
    pub label: String,
    /// What to do about it.
    pub help: Option<String>,
    /// Further places that explain it (each edge of a cycle, say).
    pub related: Vec<(Span, String)>,
}

impl Diagnostic {
    /// An error at `loc`.
    pub fn error(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Error, loc)
    }

    /// A warning at `loc`.
    pub fn warning(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Warning, loc)
    }

    /// A note at `loc`.
    pub fn info(problem: Problem, loc: Loc) -> Self {
        Self::new(problem, Severity::Info, loc)
    }

    fn new(problem: Problem, severity: Severity, loc: Loc) -> Self {
        Diagnostic { problem, severity, loc, label: "here".into(), help: None, related: Vec::new() }
    }

    /// Sets the primary label's text.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the help line.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the help line when there is one.
    pub fn maybe_help(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    /// Adds a secondary label.
    pub fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    /// The stable code, such as `plan::cycle`.
    pub fn code(&self) -> String {
        miette::Diagnostic::code(&self.problem).map(|c| c.to_string()).unwrap_or_default()
    }

    /// Whether the diagnostic makes the plan unrunnable.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Attaches the source so miette can draw snippets.
    pub fn with_source(&self, source: &Source) -> Rendered {
        Rendered::new(source, self.code(), self.severity, self.to_string(), self.help.clone())
            .label(self.loc.span, self.label.clone())
            .related(&self.related)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.problem.fmt(f)
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(word, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// "did you mean `x`?" for the closest candidate, if any is close.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Levenshtein distance over characters, with one row of memory.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_a_typo_but_not_a_stranger() {
        let ids = ["search", "summarise", "write"];
        assert_eq!(closest("serach", ids), Some("search"));
        assert_eq!(closest("summarize", ids), Some("summarise"));
        assert_eq!(closest("deploy", ids), None);
    }

    #[test]
    fn codes_are_namespaced_and_stable() {
        let d = Diagnostic::error(Problem::EmptyWorkflow, Loc::default());
        assert_eq!(d.code(), "plan::empty_workflow");
    }
}
