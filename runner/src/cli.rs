//! The command line: arguments and dispatch to one module per subcommand.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::format::{CriticFormat, Format, GraphFormat};
use crate::telemetry::LogFormat;

/// Validate, critique, draw and run LLM multi-agent plans.
#[derive(Debug, Parser)]
#[command(name = "runner", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How diagnostics on stderr are written; `RUST_LOG` picks which (e.g. `RUST_LOG=info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Where runs live: a PostgreSQL URL (`postgres://USER@HOST:PORT/DATABASE`) shared by
    /// several machines; default `RUNNER_STORE`, else the run folders under RUNNER_HOME.
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
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
        /// Forecast from the documented defaults alone, not from what earlier runs observed.
        #[arg(long)]
        no_history: bool,
        /// Apply the mechanical fixes (a typo to its suggestion, a redundant dependency removed,
        /// a retry for a critical task) to the file in place, then report what is left.
        #[arg(long)]
        fix: bool,
        /// With `--fix`: print the fixes as a unified diff and leave the file as it is.
        #[arg(long, requires = "fix")]
        diff: bool,
    },
    /// Forecast a plan's tokens, money and time, task by task; with `--accuracy`, score the
    /// past runs against the forecasts they recorded.
    Forecast(crate::forecast::ForecastArgs),
    /// Draw a plan's task graph with its phases, parallel groups, gates and reviews.
    Graph {
        /// The plan file (YAML or JSON), or a run id: that run's current plan, replanned tasks included.
        plan: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
    },
    /// Serve the critic to an editor: a language server on stdin and stdout (diagnostics as you
    /// type, hover, completion, go to definition, references, rename, outline, quick fixes).
    Lsp,
    /// Explain a diagnostic code: what it means, an example and the fix; with no code, list them all.
    Explain {
        /// The code, such as `plan::cycle`.
        code: Option<String>,
    },
    /// Print the JSON Schema of the manifest, for editors (yaml-language-server).
    Schema {
        /// Print the schema of plan tests (`kind: PlanTest`) instead.
        #[arg(long)]
        test: bool,
    },
    /// Run plan tests (`*.test.yaml`) in virtual time: scripted agents, expectations, a summary.
    Test(crate::test::TestArgs),
    /// Show a plan and its review, ask for confirmation, then run it with a live view.
    Apply(crate::apply::ApplyArgs),
    /// Turn a request in plain words into a manifest, by rules or by a model.
    Plan(crate::plan::PlanArgs),
    /// Plan and run at once: a model writes the plan a line at a time and each task starts as
    /// soon as its line arrives and its dependencies have succeeded.
    Do(crate::growing::DoArgs),
    /// Show each model's record at writing plans (from `$RUNNER_HOME/models.json`); with a
    /// plan, its providers' models, context windows and prices instead.
    Models {
        /// A plan whose providers to list.
        plan: Option<PathBuf>,
    },
    /// Ask a server what it serves and whether tool calls and JSON mode work there.
    Probe(crate::probe::ProbeArgs),
    /// List the runs under RUNNER_HOME (or in the --store database), newest first.
    Runs,
    /// Show where a run stands: its status and each task's.
    Status {
        /// The run id.
        run: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Print a run's events, one readable line each.
    Logs {
        /// The run id.
        run: String,
        /// Keep printing new events until the run ends or pauses.
        #[arg(long, short)]
        follow: bool,
    },
    /// Print a task's full output, raw; by default the output of each final task (the tasks
    /// nothing depends on), headed by its id when there are several.
    Output {
        /// The run id.
        run: String,
        /// The task (default: the final tasks).
        task: Option<String>,
    },
    /// Print a run's raw event records, one JSON object per line.
    Events {
        /// The run id.
        run: String,
    },
    /// Continue a paused or interrupted run; finished tasks never run again.
    Resume {
        /// The run id.
        run: String,
        /// Hand the run to the workers instead of driving it here (runs in PostgreSQL only).
        #[arg(long)]
        detach: bool,
    },
    /// Cancel a run, whether a process drives it or it is paused or interrupted.
    Cancel {
        /// The run id.
        run: String,
    },
    /// Start a new run of a run's plan that reuses its successful outputs.
    Retry {
        /// The run to retry.
        run: String,
        /// Run this task and everything downstream of it again (default: every task that did
        /// not succeed).
        #[arg(long, value_name = "TASK")]
        from: Option<String>,
        /// The id of the new run (default: `<plan>-<YYYYMMDD-HHMMSS>-<4 hex>`).
        #[arg(long)]
        run_id: Option<String>,
    },
    /// List, show, prune or clear the task cache: outputs of successful attempts, stored under
    /// a key that hashes everything that decides a task's result.
    Cache {
        /// What to do.
        #[command(subcommand)]
        command: crate::cache::CacheCommand,
    },
    /// Serve a live web view of the runs, with replay, plan previews and actions.
    Serve(crate::serve::ServeArgs),
    /// Carry out the attempts that coordinators queue in PostgreSQL, and coordinate the runs
    /// nobody drives, until SIGINT or SIGTERM.
    Worker(crate::worker::WorkerArgs),
    /// Answer the question a task of a paused run asks.
    Answer {
        /// The run id.
        run: String,
        /// The task that asks.
        task: String,
        /// The answer.
        text: String,
    },
    /// Approve a human review of a paused run.
    Approve {
        /// The run id.
        run: String,
        /// The review task.
        task: String,
        /// A comment recorded with the decision (it becomes the review's output).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Reject a human review of a paused run; its `on_failure` policy applies.
    Reject {
        /// The run id.
        run: String,
        /// The review task.
        task: String,
        /// Why.
        #[arg(long)]
        comment: Option<String>,
    },
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    if cli.command.loads_plans() {
        crate::plan_limit::from_env()?;
    }
    let store = cli.store.as_deref();
    let runs = || crate::store::Runs::choose(store);
    match cli.command {
        Command::Validate { plan, format } => crate::validate::run(&plan, format),
        Command::Critic { plan, fix: true, diff, .. } => crate::fix::run(&plan, diff),
        Command::Critic { plan, format, min_score, no_history, .. } => {
            let history = if no_history {
                Default::default()
            } else {
                runs().map(|r| crate::past::history(&r)).unwrap_or_default()
            };
            crate::critic::run(&plan, format, min_score, &history)
        }
        Command::Forecast(args) => crate::forecast::run(&runs()?, &args),
        Command::Graph { plan, format } => crate::graph::run(&plan, format),
        Command::Schema { test } => crate::schema::run(test),
        Command::Lsp => crate::lsp::run(),
        Command::Explain { code } => crate::explain::run(code.as_deref()),
        Command::Test(args) => crate::test::run(&args),
        Command::Apply(args) => crate::apply::run(&runs()?, &args),
        Command::Plan(args) => crate::plan::run(&args, store),
        Command::Do(args) => crate::growing::run(&runs()?, &args),
        Command::Models { plan } => crate::models::run(plan.as_deref()),
        Command::Probe(args) => crate::probe::run(&args),
        Command::Runs => crate::runs::run(&runs()?),
        Command::Status { run, format } => crate::status::run(&runs()?, &run, format),
        Command::Logs { run, follow } => crate::logs::logs(&runs()?, &run, follow),
        Command::Output { run, task } => crate::output::run(&runs()?, &run, task.as_deref()),
        Command::Events { run } => crate::logs::events(&runs()?, &run),
        Command::Resume { run, detach: false } => crate::resume::run(&runs()?, &run),
        Command::Resume { run, detach: true } => crate::resume::detach(&runs()?, &run),
        Command::Cancel { run } => crate::cancel::run(&runs()?, &run),
        Command::Retry { run, from, run_id } => crate::retry::run(&runs()?, &run, from.as_deref(), run_id.as_deref()),
        Command::Cache { command } => crate::cache::run(&runs()?, &command),
        Command::Serve(args) => crate::serve::run(&runs()?, &args),
        Command::Worker(args) => crate::worker::run(&runs()?, &args),
        Command::Answer { run, task, text } => crate::decide::answer(&runs()?, &run, &task, &text),
        Command::Approve { run, task, comment } => crate::decide::decide(&runs()?, &run, &task, true, comment),
        Command::Reject { run, task, comment } => crate::decide::decide(&runs()?, &run, &task, false, comment),
    }
}

impl Command {
    /// Whether the command reads a plan file or splices a replan, so `RUNNER_MAX_PLAN_BYTES`
    /// applies to it.
    fn loads_plans(&self) -> bool {
        matches!(
            self,
            Command::Validate { .. }
                | Command::Critic { .. }
                | Command::Lsp
                | Command::Forecast(_)
                | Command::Graph { .. }
                | Command::Test(_)
                | Command::Apply(_)
                | Command::Plan(_)
                | Command::Do(_)
                | Command::Resume { .. }
                | Command::Retry { .. }
                | Command::Worker(_)
        )
    }
}
