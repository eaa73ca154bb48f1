//! Verification of a task's output: JSON Schema checks, commands and reviewer agents.
