//! The command line: arguments and dispatch to one module per subcommand.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit code for an invalid plan or a usage error.
pub const EXIT_USAGE: u8 = 2;

/// Validate, critique, draw and run LLM multi-agent plans.
#[derive(Debug, Parser)]
#[command(name = "runner", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a plan and report every error with its location; exit 2 when it has errors.
    Validate {
        /// The plan file (YAML or JSON).
        plan: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Review a plan before running it: findings with locations, scores 0-10 and metrics.
    Critic {
        /// The plan file (YAML or JSON).
        plan: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = CriticFormat::Human)]
        format: CriticFormat,
        /// Exit 1 when the overall score is below this.
        #[arg(long, default_value_t = 0.0)]
        min_score: f64,
    },
    /// Draw a plan's task graph with its phases, parallel groups, gates and reviews.
    Graph {
        /// The plan file (YAML or JSON).
        plan: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
    },
    /// Print the JSON Schema of the manifest, for editors (yaml-language-server).
    Schema,
}

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

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Validate { plan, format } => crate::validate::run(&plan, format),
        Command::Critic { plan, format, min_score } => crate::critic::run(&plan, format, min_score),
        Command::Graph { plan, format } => crate::graph::run(&plan, format),
        Command::Schema => crate::schema::run(),
    }
}
