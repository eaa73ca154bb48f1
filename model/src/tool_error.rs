//! Why a tool of the plan cannot be offered to an agent.

/// Why a tool of the plan cannot be offered to an agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ToolError {
    /// The plan defines no tool of that name.
    #[error("the plan defines no such tool")]
    #[diagnostic(code(tool::undefined))]
    Undefined,
    /// The tool's `command` is an empty list.
    #[error("its command is empty")]
    #[diagnostic(code(tool::empty_command))]
    EmptyCommand,
    /// The tool's `input_schema` does not compile.
    #[error("its input_schema is not a valid JSON Schema: {message}")]
    #[diagnostic(code(tool::bad_schema))]
    BadSchema {
        /// The JSON Schema compiler's message.
        message: String,
    },
}
