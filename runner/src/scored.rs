//! A run scored against its forecast: what `runner status`, `runner serve` and
//! `runner forecast --accuracy` show of the forecast a run recorded when it started beside what
//! it took (tokens, money at the prices it recorded, and time).

use std::fmt::Write as _;

use engine::forecast::Forecasted;
use engine::{Event, Record, RunState};
use serde::Serialize;

use crate::diagnostics::print;
use crate::format::Format;
use crate::home::{Created, fold};
use crate::store::Runs;

/// How far past its worst duration a run may end before the worst counts as exceeded: the
/// forecast's worst case bounds the attempts and their backoffs, not runner's own work between
/// them (writing the log, starting processes), which this allows for: 1 s, or 5% when more.
pub fn duration_allowance(worst_ms: u64) -> u64 {
    (worst_ms / 20).max(1_000)
}

/// A forecast figure beside what the run took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Against<T> {
    /// What the run was expected to take.
    pub expected: T,
    /// The most it could take (`None`: unbounded).
    pub worst: Option<T>,
    /// What it took (so far, for a run that has not ended).
    pub actual: T,
}

/// A run's forecast beside what it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scored {
    /// Tokens of every model request.
    pub tokens: Against<u64>,
    /// Money, when the forecast had a cost: the run's tokens at the prices its plan recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Against<f64>>,
    /// The currency of `cost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Milliseconds from the run's start to its last event.
    pub duration_ms: Against<u64>,
}

impl Scored {
    /// The score of a run from its records and their fold; `None` when it recorded no forecast.
    pub fn of(records: &[Record], state: &RunState) -> Option<Scored> {
        let first = records.first()?;
        let Event::RunCreated(created) = &first.event else { return None };
        let forecast: &Forecasted = created.forecast.as_deref()?;
        let elapsed = match (
            records.last().map(|r| engine::clock::parse_millis(&r.at)),
            engine::clock::parse_millis(&first.at),
        ) {
            (Some(Some(end)), Some(start)) => u64::try_from(end - start).unwrap_or(0),
            _ => 0,
        };
        let span = |s: &engine::forecast::Span<u64>, actual| Against { expected: s.expected, worst: s.worst, actual };
        Some(Scored {
            tokens: span(&forecast.tokens, state.tokens.prompt + state.tokens.completion),
            cost: forecast.cost.as_ref().map(|c| Against {
                expected: c.amount.expected,
                worst: c.amount.worst,
                actual: state.spent,
            }),
            currency: forecast.cost.as_ref().map(|c| c.currency.clone()),
            duration_ms: span(&forecast.duration_ms, elapsed),
        })
    }

    /// Whether the run took more than a worst case: tokens, cost, or time beyond its
    /// [`duration_allowance`].
    pub fn exceeded(&self) -> Exceeded {
        let over = |actual: f64, worst: Option<f64>, allowance: f64| worst.is_some_and(|w| actual > w + allowance);
        Exceeded {
            tokens: over(self.tokens.actual as f64, self.tokens.worst.map(|w| w as f64), 0.0),
            cost: self.cost.is_some_and(|c| over(c.actual, c.worst, 1e-9)),
            duration: self.duration_ms.worst.is_some_and(|w| self.duration_ms.actual > w + duration_allowance(w)),
        }
    }

    /// The lines `runner status` shows.
    pub fn lines(&self) -> String {
        let mut out = String::from("forecast vs actual:\n");
        let tokens = engine::forecast::shown::tokens;
        let _ = writeln!(out, "  tokens    {}", against(&self.tokens, tokens));
        if let (Some(cost), Some(currency)) = (&self.cost, &self.currency) {
            let _ = writeln!(out, "  cost      {}", against(cost, |a| engine::forecast::shown::money(a, currency)));
        }
        let _ = writeln!(out, "  duration  {}", against(&self.duration_ms, engine::forecast::shown::duration));
        out
    }
}

/// Which worst cases a run passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Exceeded {
    /// Its tokens.
    pub tokens: bool,
    /// Its cost.
    pub cost: bool,
    /// Its duration, beyond the allowance.
    pub duration: bool,
}

/// "ACTUAL (expected E, worst W)".
fn against<T: Copy>(figure: &Against<T>, show: impl Fn(T) -> String) -> String {
    let worst = figure.worst.map_or_else(|| "unbounded".to_owned(), &show);
    format!("{} actual; {} expected, {worst} at worst", show(figure.actual), show(figure.expected))
}

/// One past run in the accuracy report.
#[derive(Debug, Serialize)]
struct RunScore {
    run: String,
    plan: String,
    status: &'static str,
    #[serde(flatten)]
    scored: Scored,
    exceeded: Exceeded,
}

/// How far expected was from actual over the runs, for one figure.
#[derive(Debug, Default, Serialize)]
struct Error {
    /// Runs with this figure.
    runs: usize,
    /// The mean of |expected - actual| / actual, as a fraction (runs whose actual is 0 left
    /// out).
    mean_error: f64,
    /// The largest of them.
    largest_error: f64,
    /// Runs whose actual figure passed the worst case.
    worst_exceeded: usize,
}

impl Error {
    /// Adds one run's figure.
    fn add(&mut self, expected: f64, actual: f64, exceeded: bool) {
        self.runs += 1;
        self.worst_exceeded += usize::from(exceeded);
        if actual > 0.0 {
            let error = (expected - actual).abs() / actual;
            self.mean_error += error;
            self.largest_error = self.largest_error.max(error);
        }
    }
}

/// The accuracy report.
#[derive(Debug, Serialize)]
struct Accuracy {
    runs: Vec<RunScore>,
    tokens: Error,
    cost: Error,
    duration: Error,
}

/// `runner forecast --accuracy`: every finished run that recorded a forecast, scored; exit 1
/// when any worst case was exceeded (it never should be), 0 otherwise.
pub fn accuracy(runs: &Runs, format: Format) -> anyhow::Result<u8> {
    let mut report =
        Accuracy { runs: Vec::new(), tokens: Error::default(), cost: Error::default(), duration: Error::default() };
    for run in crate::past::newest(runs, usize::MAX, false)? {
        let Ok((records, _)) = run.load() else { continue };
        let state = fold(&records);
        if !state.status.is_final() {
            continue;
        }
        let (Some(scored), Some(created)) = (Scored::of(&records, &state), Created::of(&records)) else { continue };
        let exceeded = scored.exceeded();
        report.tokens.add(scored.tokens.expected as f64, scored.tokens.actual as f64, exceeded.tokens);
        if let Some(cost) = &scored.cost {
            report.cost.add(cost.expected, cost.actual, exceeded.cost);
        }
        let duration = &scored.duration_ms;
        report.duration.add(duration.expected as f64, duration.actual as f64, exceeded.duration);
        report.runs.push(RunScore {
            run: run.id().to_owned(),
            plan: created.plan.name,
            status: state.status.as_str(),
            scored,
            exceeded,
        });
    }
    for error in [&mut report.tokens, &mut report.cost, &mut report.duration] {
        error.mean_error /= error.runs.max(1) as f64;
    }
    match format {
        Format::Json => print(&format!("{}\n", serde_json::to_string_pretty(&report)?))?,
        Format::Human => print(&human(&report))?,
    }
    let exceeded = report.tokens.worst_exceeded + report.cost.worst_exceeded + report.duration.worst_exceeded;
    Ok(u8::from(exceeded > 0))
}

/// The accuracy report for people: a line per run, then a line per figure.
fn human(report: &Accuracy) -> String {
    if report.runs.is_empty() {
        return "no finished run recorded a forecast (`runner apply` records one)\n".to_owned();
    }
    let mut out = String::new();
    let width = report.runs.iter().map(|r| r.run.len()).max().unwrap_or(3).max(3);
    let _ = writeln!(
        out,
        "{:<width$}  {:<9}  {:>21}  {:>21}",
        "run", "status", "tokens actual/expect", "duration actual/expect"
    );
    for r in &report.runs {
        let tokens = format!("{}/{}", r.scored.tokens.actual, r.scored.tokens.expected);
        let d = &r.scored.duration_ms;
        let duration = format!(
            "{}/{}",
            engine::forecast::shown::duration(d.actual),
            engine::forecast::shown::duration(d.expected)
        );
        let flag = if r.exceeded == Exceeded::default() { "" } else { "  WORST EXCEEDED" };
        let _ = writeln!(out, "{:<width$}  {:<9}  {tokens:>21}  {duration:>21}{flag}", r.run, r.status);
    }
    out.push('\n');
    for (name, error) in [("tokens", &report.tokens), ("cost", &report.cost), ("duration", &report.duration)] {
        if error.runs == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "{name:<8}  expected was off by {:.0}% on average (at most {:.0}%) over {} run(s); worst case exceeded in {}",
            error.mean_error * 100.0,
            error.largest_error * 100.0,
            error.runs,
            error.worst_exceeded
        );
    }
    out
}
