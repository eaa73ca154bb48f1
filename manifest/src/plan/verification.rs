//! Verification: how a task's output is checked before it counts as a success.

use serde::{Deserialize, Serialize};

use super::At;

/// How a task's output is checked before it counts as a success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Verification {
    /// The output must be JSON valid against a schema.
    SchemaCheck {
        /// The JSON Schema.
        schema: At<serde_json::Value>,
    },
    /// A reviewer agent answers `{"pass": bool, "reason": str}`.
    LlmReviewer {
        /// The reviewer agent.
        agent: At<String>,
        /// What the reviewer checks.
        criteria: Option<String>,
    },
    /// A command reads the output on stdin; exit 0 passes.
    Command {
        /// The argv.
        command: Vec<String>,
    },
}
