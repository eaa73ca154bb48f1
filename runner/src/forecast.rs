//! The forecast where people decide: what `runner critic`, `apply`'s confirmation and
//! `runner forecast` show of `engine::forecast` (tokens, money and time, expected and at worst),
//! and the critic's findings on a plan's budget.

use std::path::PathBuf;

use engine::forecast::{Forecast, History, Span};
use serde::Serialize;

use crate::diagnostics::print;
use crate::format::Format;
use crate::store::Runs;
use engine::forecast::shown::{duration, money, no_cost, tokens};
use manifest::Loaded;
use std::fmt::Write as _;

/// `runner forecast`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ForecastArgs {
    /// The plan file (YAML or JSON); not given with `--accuracy`.
    #[arg(required_unless_present = "accuracy", conflicts_with = "accuracy")]
    plan: Option<PathBuf>,
    /// Score the finished runs that recorded a forecast: how far expected was from actual, and
    /// how often a worst case was exceeded (exit 1 if ever).
    #[arg(long)]
    accuracy: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Forecast from the documented defaults alone, not from what earlier runs observed.
    #[arg(long)]
    no_history: bool,
}

/// The JSON document `runner forecast PLAN --format json` prints: the run's forecast and each
/// task's.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    forecast: &'a Forecast,
    tasks: &'a [engine::forecast::TaskForecast],
}

/// `runner forecast`: a plan's forecast task by task, or with `--accuracy` the past runs scored.
pub fn run(runs: &Runs, args: &ForecastArgs) -> anyhow::Result<u8> {
    let Some(path) = args.plan.as_deref().filter(|_| !args.accuracy) else {
        return crate::scored::accuracy(runs, args.format);
    };
    let loaded = manifest::load_file(path);
    let history = if args.no_history { History::default() } else { crate::past::history(runs) };
    let Some(forecast) = of(&loaded, &history) else {
        print(&format!("{}\n", crate::diagnostics::render_loaded(&loaded, crate::diagnostics::color_stdout())))?;
        return Ok(crate::validate::exit_code(&loaded, path));
    };
    match args.format {
        Format::Json => {
            let document = Document { forecast: &forecast, tasks: &forecast.tasks };
            print(&format!("{}\n", serde_json::to_string_pretty(&document)?))?;
        }
        Format::Human => print(&format!("{}\n{}", human(&forecast), task_table(&forecast)))?,
    }
    Ok(0)
}

/// Each task's figures, a line each.
fn task_table(forecast: &Forecast) -> String {
    let width = forecast.tasks.iter().map(|t| t.task.len()).max().unwrap_or(4).max(4);
    let worst = |w: Option<String>| w.unwrap_or_else(|| "unbounded".to_owned());
    let mut out =
        format!("{:<width$}  {:>9}  {:>11}  {:>10}  {:>10}\n", "task", "tokens", "worst", "duration", "worst");
    for t in &forecast.tasks {
        let _ = writeln!(
            out,
            "{:<width$}  {:>9}  {:>11}  {:>10}  {:>10}",
            t.task,
            tokens(t.tokens.expected),
            worst(t.tokens.worst.map(tokens)),
            duration(t.duration_ms.expected),
            worst(t.duration_ms.worst.map(duration)),
        );
    }
    out
}

/// The forecast of a valid plan, with its declared variables' defaults and what `history`
/// observed; `None` for a plan with errors.
pub fn of(loaded: &Loaded, history: &History) -> Option<Forecast> {
    let (plan, graph) = loaded.valid()?;
    let vars = plan.run_vars(std::iter::empty()).unwrap_or_default();
    Some(engine::forecast::forecast_with(plan, graph, &vars, history))
}

/// "EXPECTED (worst WORST)", or "(worst: unbounded)".
fn span<T: Copy>(span: &Span<T>, show: impl Fn(T) -> String) -> String {
    match span.worst {
        Some(worst) => format!("{} expected, {} at worst", show(span.expected), show(worst)),
        None => format!("{} expected, unbounded at worst", show(span.expected)),
    }
}

/// The forecast's lines in the critic's human report and `apply`'s confirmation.
pub fn human(forecast: &Forecast) -> String {
    let mut out = String::from("forecast:\n");
    let _ = writeln!(out, "  tokens              {}", span(&forecast.run.tokens, tokens));
    match &forecast.run.cost {
        Some(cost) => {
            let _ = writeln!(out, "  cost                {}", span(&cost.amount, |a| money(a, &cost.currency)));
        }
        None => {
            let _ = writeln!(out, "  cost                not stated: {}", no_cost(forecast));
        }
    }
    let _ = writeln!(out, "  duration            {}", span(&forecast.run.duration_ms, duration));
    if forecast.history_runs > 0 {
        let _ = writeln!(
            out,
            "  expected figures learn from the {} latest run(s) of the same agents",
            forecast.history_runs
        );
    }
    for why in &forecast.unbounded {
        let _ = writeln!(out, "  unbounded: {why}");
    }
    out
}

/// The forecast as a markdown table, for the critic's markdown report.
pub fn markdown(forecast: &Forecast) -> String {
    let mut out = String::from("\n| Forecast | Expected | Worst |\n| --- | ---: | ---: |\n");
    let worst = |w: Option<String>| w.unwrap_or_else(|| "unbounded".to_owned());
    let t = &forecast.run.tokens;
    let _ = writeln!(out, "| tokens | {} | {} |", tokens(t.expected), worst(t.worst.map(tokens)));
    if let Some(cost) = &forecast.run.cost {
        let c = &cost.amount;
        let show = |a: f64| money(a, &cost.currency);
        let _ = writeln!(out, "| cost | {} | {} |", show(c.expected), worst(c.worst.map(show)));
    }
    let d = &forecast.run.duration_ms;
    let _ = writeln!(out, "| duration | {} | {} |", duration(d.expected), worst(d.worst.map(duration)));
    if forecast.run.cost.is_none() {
        let _ = writeln!(out, "\nCost not stated: {}.", no_cost(forecast));
    }
    out
}
