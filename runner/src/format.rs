//! The output formats a command can be asked for.

use clap::ValueEnum;

/// How diagnostics are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Source snippets with labels, for people.
    Human,
    /// One JSON document, for tools.
    Json,
}

/// How the critic's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CriticFormat {
    /// Source snippets, a score table and the metrics, for people.
    Human,
    /// One JSON document, for tools.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// A Markdown review comment.
    Markdown,
}

/// How a graph is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// A Mermaid flowchart (GitHub renders it in Markdown).
    Mermaid,
    /// Graphviz DOT.
    Dot,
}
