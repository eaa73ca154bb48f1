//! `runner apply`: show a plan and the critic's review, ask for confirmation (like `terraform
//! apply`), then run it under `$RUNNER_HOME/runs/<id>/` with a live view.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use engine::{Command, Event, Handler as _, RunState, Start};
use manifest::plan::{Runtime, Strategy, TaskKind};
use manifest::{Plan, TaskGraph};

use crate::diagnostics::render_loaded;
use crate::drive::{Session, drive};
use crate::exit::{EXIT_DECLINED, EXIT_USAGE};
use crate::grouping::thousands;
use crate::home::new_run_id;
use crate::home::{records_after, refused};
use crate::live::say;
use crate::store::{Held, Run, RunStore, Runs};
use engine::cache::Reuse;

/// The arguments of `runner apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The plan file (YAML or JSON).
    plan: PathBuf,
    /// Run without asking for confirmation.
    #[arg(long, short)]
    yes: bool,
    /// Print what would run, in which order and phases; run nothing and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// A value for `{{ vars.NAME }}`: NAME=VALUE for a text, NAME:=JSON for any JSON value;
    /// repeatable.
    ///
    /// NAME=VALUE gives the text VALUE; NAME:=JSON gives the JSON value, such as a list
    /// (`--var 'topics:=["a","b"]'`), an object, a number or a boolean. When the plan declares
    /// `spec.vars`, NAME must be one of them and the value replaces its default.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, serde_json::Value)>,
    /// Schedule with this strategy instead of the plan's.
    #[arg(long, value_enum)]
    strategy: Option<StrategyArg>,
    /// The run id (default: `<plan>-<YYYYMMDD-HHMMSS>-<4 hex>`); an existing id is refused.
    #[arg(long)]
    run_id: Option<String>,
    /// Approve the calls of this tool in advance: they run without waiting for a person,
    /// whatever the tool's `approval`; repeatable.
    #[arg(long = "approve-tool", value_name = "NAME")]
    approve_tools: Vec<String>,
    /// With --store: record the run and print its id without coordinating it; a `runner
    /// worker` takes it over.
    #[arg(long)]
    detach: bool,
    /// With --store: leave every attempt to the workers instead of also running some here.
    #[arg(long)]
    no_local_work: bool,
    /// Reuse the stored output of every task whose cache key matches one, whatever its `cache`
    /// says; with `--reuse=RUN`, only outputs that run stored. The review before the run lists which tasks
    /// will be reused and why the others run.
    #[arg(long, value_name = "RUN", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    reuse: Option<String>,
    /// Set when the plan was already shown and confirmed (`runner plan --apply`).
    #[arg(skip)]
    reviewed: bool,
}

impl ApplyArgs {
    /// Applying `plan` that somebody already confirmed (`runner plan --apply`).
    pub fn confirmed(plan: PathBuf) -> Self {
        ApplyArgs {
            plan,
            yes: true,
            dry_run: false,
            vars: Vec::new(),
            strategy: None,
            run_id: None,
            approve_tools: Vec::new(),
            detach: false,
            no_local_work: false,
            reuse: None,
            reviewed: true,
        }
    }
}

/// `--strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// A task starts when its dependencies are done, longest remaining path first.
    Eager,
    /// Topological levels one after another.
    Phased,
    /// One task at a time in list order.
    Sequential,
}

impl From<StrategyArg> for Strategy {
    fn from(arg: StrategyArg) -> Self {
        match arg {
            StrategyArg::Eager => Strategy::Eager,
            StrategyArg::Phased => Strategy::Phased,
            StrategyArg::Sequential => Strategy::Sequential,
        }
    }
}

/// Reads a `--var` value: `NAME=VALUE` gives the text VALUE, `NAME:=JSON` the JSON value.
fn parse_var(text: &str) -> Result<(String, serde_json::Value), VarError> {
    let no_name = || VarError::NoName { text: text.to_owned() };
    let (left, value) = text.split_once('=').ok_or_else(no_name)?;
    let (name, json) = match left.strip_suffix(':') {
        Some(name) => (name.trim(), true),
        None => (left.trim(), false),
    };
    if name.is_empty() {
        return Err(no_name());
    }
    if !json {
        return Ok((name.to_owned(), serde_json::Value::String(value.to_owned())));
    }
    match serde_json::from_str(value) {
        Ok(value) => Ok((name.to_owned(), value)),
        Err(error) => Err(VarError::Json { name: name.to_owned(), value: value.to_owned(), reason: error.to_string() }),
    }
}

/// A `--var` value that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
enum VarError {
    /// No name before `=`.
    #[error("`{text}` is not NAME=VALUE")]
    #[diagnostic(code(cli::var))]
    NoName {
        /// The value given.
        text: String,
    },
    /// `NAME:=` followed by something that is not JSON.
    #[error("the value of `{name}` after `:=` is not JSON (`{value}`: {reason}); write `{name}=VALUE` for a text")]
    #[diagnostic(code(cli::var_json))]
    Json {
        /// The variable's name.
        name: String,
        /// The text after `:=`.
        value: String,
        /// What the JSON parser found.
        reason: String,
    },
}

/// Loads, reviews, confirms and runs a plan; returns the run's exit code.
pub fn run(runs: &Runs, args: &ApplyArgs) -> anyhow::Result<u8> {
    if (args.detach || args.no_local_work) && matches!(runs, Runs::Home) {
        eprintln!(
            "error: --detach and --no-local-work need the runs in PostgreSQL (--store postgres://... or RUNNER_STORE): \
             only workers reach a run there"
        );
        return Ok(EXIT_USAGE);
    }
    if let Some(run_id) = &args.run_id {
        runs.check_id(run_id)?;
    }
    let mut loaded = manifest::load_file(&args.plan);
    let Some((plan, graph)) = loaded.valid() else {
        eprint!("{}", render_loaded(&loaded, crate::diagnostics::color_stderr()));
        eprintln!("{}", crate::validate::summary(&loaded));
        return Ok(crate::validate::exit_code(&loaded, &args.plan));
    };
    let vars = match plan.run_vars(args.vars.iter().cloned()) {
        Ok(vars) => vars,
        Err(error) => {
            eprintln!("error: --var {}: {error}; nothing ran\n  help: {}", error.name, error.help());
            if let Some(code) = miette::Diagnostic::code(&error) {
                eprint!("{}", crate::explain::hint(&code.to_string()));
            }
            return Ok(EXIT_USAGE);
        }
    };
    let unset = unset_keys(plan, key_is_set);
    if !unset.is_empty() && !args.dry_run {
        for line in &unset {
            eprintln!("error: {line}");
        }
        eprintln!("nothing ran and no run was created: set the variable(s) and apply again");
        return Ok(EXIT_USAGE);
    }
    if let Some(unknown) = args.approve_tools.iter().find(|name| !plan.tools.contains_key(name.as_str())) {
        let known: Vec<&str> = plan.tools.keys().map(String::as_str).collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        eprintln!("error: --approve-tool {unknown}: the plan defines no such tool (its tools: {known})");
        return Ok(EXIT_USAGE);
    }
    let strategy = args.strategy.map_or(plan.control.strategy, Strategy::from);
    let reuse = Reuse { all: args.reuse.is_some(), run: args.reuse.clone().filter(|run| !run.is_empty()) };
    let source = absolute(&args.plan);
    let workdir = source.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let cache = crate::cache::open_for(runs);
    let uses_cache =
        reuse.all || (0..plan.tasks.len()).any(|i| engine::cache::setting(plan, i).is_some_and(|c| c.enabled));
    // Forecast with the run's variables, not the declared defaults the critic uses.
    let forecast = engine::forecast::forecast_with(plan, graph, &vars, &crate::past::history(runs));
    let critique = crate::critic::review_with(&loaded, Some(&forecast));
    let color = crate::diagnostics::color_stdout();
    if args.dry_run {
        say(&schedule(plan, graph, strategy));
        say(&review(&loaded, &critique, &forecast, color, &args.plan));
        if let Some(cache) = cache.as_ref().filter(|_| uses_cache) {
            let cache = cache.lock().map_err(|_| anyhow::anyhow!("the task cache's lock was poisoned"))?;
            let (plan, graph) = (Arc::new(plan.clone()), Arc::new(graph.clone()));
            say(&crate::cache::review(&plan, &engine::cache::resolve(&plan, &graph, &vars, &workdir, &*cache, &reuse)));
        }
        for line in &unset {
            eprintln!("warning: {line}; `apply` refuses to start until it is set");
        }
        say("dry run: nothing ran and nothing was written");
        return Ok(0);
    }
    if !args.reviewed {
        say(&overview(plan, graph, strategy));
        say(&review(&loaded, &critique, &forecast, color, &args.plan));
    }
    if crate::critic::has_errors(&critique) {
        eprintln!("error: the plan cannot keep its `control_logic.budget` (see above); nothing was recorded");
        return Ok(EXIT_USAGE);
    }
    let run_id = args.run_id.clone().unwrap_or_else(|| new_run_id(&plan.name));
    drop(critique);
    // The run owns the plan and graph from here; the source text and the diagnostics are not
    // needed again, so they leave memory before the run's state is built.
    let (Some(plan), Some(graph)) = (loaded.plan.take(), loaded.graph.take()) else {
        unreachable!("a valid plan has a plan and a graph");
    };
    drop(loaded);
    let (plan, graph) = (Arc::new(plan), Arc::new(graph));
    let mut recalled = Vec::new();
    if let Some(cache) = cache.as_ref().filter(|_| uses_cache) {
        let cache = cache.lock().map_err(|_| anyhow::anyhow!("the task cache's lock was poisoned"))?;
        let resolution = engine::cache::resolve(&plan, &graph, &vars, &workdir, &*cache, &reuse);
        say(&crate::cache::review(&plan, &resolution));
        recalled = resolution.recalled(&plan);
    }
    if !args.yes && !confirm()? {
        return Ok(EXIT_DECLINED);
    }
    let (run, lock, store) = runs.create(&run_id, &plan.name)?;
    let (span, trace) = crate::telemetry::run_span(&run_id, &plan.name, None);
    let start = Start {
        plan,
        vars,
        strategy: args.strategy.map(Strategy::from),
        source: Some(source.display().to_string()),
        graph: Some(graph),
        trace,
        approved_tools: args.approve_tools.clone(),
        recalled,
        cache_reuse: reuse,
        forecast: Some(Box::new(forecast.run)),
        ..Start::default()
    };
    if args.detach {
        return detach(&run, lock, &store, start);
    }
    say(&format!("run `{run_id}`: {}", run.place()));
    let local_work = !args.no_local_work;
    drive(
        Session { span, local_work, cache, ..Session::new(run, lock, workdir, store, Vec::new()) },
        Command::Start(start),
    )
}

/// Records the run's `RunCreated` only, lets go of its lease and prints the run id: the first
/// worker that finds the run without a coordinator takes it over and dispatches its tasks.
fn detach(run: &Run, lock: Held, store: &RunStore, start: Start) -> anyhow::Result<u8> {
    let mut state = RunState::new();
    let mut events = state.process(Command::Start(start)).map_err(|e| refused(run.id(), &e))?;
    // Dispatches are the coordinator's to record, when it starts the attempts.
    events.retain(|event| matches!(event, Event::RunCreated(_) | Event::TaskReused { .. }));
    let records = records_after(&[], run.id(), events);
    engine::store::EventStore::summarize(store, engine::store::Summary::of(&state));
    run.append(store, records)?;
    lock.release();
    eprintln!("run `{}` submitted: a `runner worker --store URL` coordinates it", run.id());
    say(run.id());
    Ok(0)
}

/// The critic's review as `apply` shows it: grouped as in `runner critic`, which it points at
/// when findings were left out.
fn review(
    loaded: &manifest::Loaded,
    critique: &manifest::critic::Review<'_>,
    forecast: &engine::forecast::Forecast,
    color: bool,
    path: &Path,
) -> String {
    let crate::critic::HumanReview { mut text, hidden, findings } =
        crate::critic::human_review(loaded, critique, Some(forecast), color);
    if hidden > 0 {
        let _ = writeln!(text, "`runner critic {}` lists all {findings} findings", path.display());
    }
    text
}

/// Refuses to go on when an API key variable that the plan's `llm` or `http` agents need is unset, naming
/// each one: for `resume` and `retry`, which would otherwise record attempts that cannot work.
pub(crate) fn refuse_unset_keys(plan: &Plan) -> anyhow::Result<()> {
    let unset = unset_keys(plan, key_is_set);
    if !unset.is_empty() {
        anyhow::bail!("{}\nnothing was recorded: set the variable(s) and try again", unset.join("\n"));
    }
    Ok(())
}

/// Whether the environment variable `name` holds a key: set, and not empty or blank, which a
/// server would refuse only after the run had started.
fn key_is_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|value| !value.trim().is_empty())
}

/// The API key variables that the plan's `llm` agents need and `is_set` says are unset, one
/// line each, naming the provider and the agents that need it; then those of `http` agents.
fn unset_keys(plan: &Plan, is_set: impl Fn(&str) -> bool) -> Vec<String> {
    let mut needs: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (name, agent) in &plan.agents {
        let Runtime::Llm { provider, .. } = &agent.runtime else { continue };
        let provider = provider.as_ref().map_or(engine::llm::DEFAULT_PROVIDER, |p| p.value.as_str());
        let Some(variable) = plan.providers.get(provider).and_then(|p| p.api_key_env.as_ref()) else { continue };
        if !is_set(&variable.value) {
            needs.entry((variable.value.as_str(), provider)).or_default().push(name);
        }
    }
    let mut lines: Vec<String> = needs
        .into_iter()
        .map(|((variable, provider), agents)| {
            let agents: Vec<String> = agents.iter().map(|a| format!("`{a}`")).collect();
            format!(
                "the environment variable `{variable}` is not set or is empty: it holds the API key of provider `{provider}`, \
                 which agent(s) {} use",
                agents.join(", ")
            )
        })
        .collect();
    for (name, agent) in plan.agents.iter().filter(|(_, a)| matches!(a.runtime, Runtime::Http { .. })) {
        for variable in agent.runtime.secret_variables().into_iter().filter(|v| !is_set(&v.value)) {
            let variable = &variable.value;
            lines.push(format!(
                "the environment variable `{variable}` is not set or is empty: it holds a secret the http agent `{name}` sends"
            ));
        }
    }
    lines
}

/// The plan file as an absolute path (symlinks resolved when possible).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_path_buf())
}

/// Asks `Proceed? [y/N]` on a terminal; without one, declines and says why.
fn confirm() -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        eprintln!("declined: stdin is not a terminal, so nobody can confirm; pass --yes to run without asking");
        return Ok(false);
    }
    eprint!("Proceed? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if !yes {
        eprintln!("declined: nothing ran");
    }
    Ok(yes)
}

/// The phases `apply`'s overview lists before it says how many more there are.
const OVERVIEW_PHASES: usize = 20;
/// The tasks of a phase the overview names before it says how many more there are.
const OVERVIEW_TASKS: usize = 12;

/// The plan in brief: its phases with task ids, and the strategy.
fn overview(plan: &Plan, graph: &TaskGraph, strategy: Strategy) -> String {
    let phases = graph.phases();
    let mut out = format!(
        "plan `{}`: {} tasks in {} phases, strategy {}\n",
        plan.name,
        plan.tasks.len(),
        phases.len(),
        strategy.as_str()
    );
    for (n, phase) in phases.iter().enumerate().take(OVERVIEW_PHASES) {
        let ids: Vec<&str> = phase.iter().take(OVERVIEW_TASKS).map(|&i| plan.tasks[i].id.value.as_str()).collect();
        let _ = write!(out, "  phase {}: {}", n + 1, ids.join(", "));
        if phase.len() > ids.len() {
            let _ = write!(out, " … and {} more", thousands(phase.len() - ids.len()));
        }
        out.push('\n');
    }
    if phases.len() > OVERVIEW_PHASES {
        let _ = writeln!(out, "  … and {} more phases", thousands(phases.len() - OVERVIEW_PHASES));
    }
    out
}

/// What would run, in which order and phases; nothing here needs an output.
fn schedule(plan: &Plan, graph: &TaskGraph, strategy: Strategy) -> String {
    let limit = plan.control.max_concurrency.map_or_else(|| "unlimited".to_owned(), |m| m.to_string());
    let mut out = format!(
        "dry run of plan `{}`: {} tasks in {} phases, strategy {}, max concurrency {limit}\n",
        plan.name,
        plan.tasks.len(),
        graph.phases().len(),
        strategy.as_str()
    );
    match strategy {
        Strategy::Eager => {
            out.push_str("a task starts as soon as its dependencies are done; among ready tasks, the longest remaining critical path first\n");
            for (n, phase) in graph.phases().iter().enumerate() {
                let _ = writeln!(out, "phase {}:", n + 1);
                let mut order = phase.clone();
                order.sort_by_key(|&i| (Reverse(graph.height(i)), i));
                for i in order {
                    let _ = writeln!(out, "  {}  critical path {}", describe(plan, i), graph.height(i));
                }
            }
        }
        Strategy::Phased => {
            out.push_str("phases run one after another; in a phase, a parallel group runs together and other tasks one at a time\n");
            for (n, phase) in graph.phases().iter().enumerate() {
                let _ = writeln!(out, "phase {}:", n + 1);
                let mut done = vec![false; plan.tasks.len()];
                let mut step = 0;
                for &i in phase {
                    if done[i] {
                        continue;
                    }
                    step += 1;
                    let unit: Vec<usize> = match &plan.tasks[i].extras().parallel_group {
                        Some(group) => phase
                            .iter()
                            .copied()
                            .filter(|&j| {
                                plan.tasks[j].extras().parallel_group.as_ref().is_some_and(|g| g.value == group.value)
                            })
                            .collect(),
                        None => vec![i],
                    };
                    let tasks: Vec<String> = unit.iter().map(|&j| describe(plan, j)).collect();
                    for &j in &unit {
                        done[j] = true;
                    }
                    let together = if unit.len() > 1 { " together" } else { "" };
                    let _ = writeln!(out, "  {step}.{together} {}", tasks.join("; "));
                }
            }
        }
        Strategy::Sequential => {
            out.push_str("one task at a time, in list order:\n");
            for i in 0..plan.tasks.len() {
                let _ = writeln!(out, "  {}. {}  (phase {})", i + 1, describe(plan, i), graph.level(i) + 1);
            }
        }
    }
    out
}

/// A task, what carries it out, and its group.
fn describe(plan: &Plan, i: usize) -> String {
    let task = &plan.tasks[i];
    let who = match (task.kind, plan.agent_of(task)) {
        (TaskKind::HumanReview, _) => "human review".to_owned(),
        (TaskKind::SynthesisGate, Some(agent)) => format!("gate, agent {agent}"),
        (TaskKind::SynthesisGate, None) => "gate, built-in".to_owned(),
        (TaskKind::Task, Some(agent)) => format!("agent {agent}"),
        (TaskKind::Task, None) => "no agent".to_owned(),
        (TaskKind::Plan, _) => format!("sub-plan {}", task.extras().plan.as_ref().map_or("", |p| p.value.as_str())),
        (TaskKind::Expand, agent) => format!("expand, agent {}", agent.unwrap_or_default()),
    };
    let group = task.extras().parallel_group.as_ref().map(|g| format!(", group {}", g.value)).unwrap_or_default();
    let critical = if task.critical { ", critical" } else { "" };
    format!("{} ({who}{group}{critical})", task.id.value)
}
