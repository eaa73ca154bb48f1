//! The forecast where people decide: what `runner critic` and `apply`'s confirmation show of
//! `engine::forecast` (tokens, money and time, expected and at worst).

use engine::forecast::{Forecast, Span};
use manifest::Loaded;
use std::fmt::Write as _;

/// The forecast of a valid plan, with its declared variables' defaults; `None` for a plan with
/// errors.
pub fn of(loaded: &Loaded) -> Option<Forecast> {
    let (plan, graph) = loaded.valid()?;
    let vars = plan.run_vars(std::iter::empty()).unwrap_or_default();
    Some(engine::forecast::forecast(plan, graph, &vars))
}

/// A count of tokens, with thousands apart.
fn tokens(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in milliseconds, as people read one.
fn duration(ms: u64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m {:02}s", ms / 60_000, ms % 60_000 / 1000),
        ms => format!("{}h {:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// An amount of money.
fn money(amount: f64, currency: &str) -> String {
    format!("{amount:.4} {currency}")
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
    let _ = writeln!(out, "  tokens              {}", span(&forecast.tokens, tokens));
    match &forecast.cost {
        Some(cost) => {
            let _ = writeln!(out, "  cost                {}", span(&cost.amount, |a| money(a, &cost.currency)));
        }
        None => {
            let _ = writeln!(out, "  cost                not stated: {}", no_cost(forecast));
        }
    }
    let _ = writeln!(out, "  duration            {}", span(&forecast.duration_ms, duration));
    for why in &forecast.unbounded {
        let _ = writeln!(out, "  unbounded: {why}");
    }
    out
}

/// Why a forecast has no cost.
fn no_cost(forecast: &Forecast) -> String {
    if forecast.tokens.expected == 0 && forecast.tokens.worst == Some(0) {
        return "no task asks a model".to_owned();
    }
    if forecast.unpriced.is_empty() {
        return "the providers' prices are in different currencies".to_owned();
    }
    let names: Vec<String> = forecast.unpriced.iter().map(|p| format!("`{p}`")).collect();
    format!("no `price` for provider {} (tokens and time only)", names.join(", "))
}

/// The forecast as a markdown table, for the critic's markdown report.
pub fn markdown(forecast: &Forecast) -> String {
    let mut out = String::from("\n| Forecast | Expected | Worst |\n| --- | ---: | ---: |\n");
    let worst = |w: Option<String>| w.unwrap_or_else(|| "unbounded".to_owned());
    let t = &forecast.tokens;
    let _ = writeln!(out, "| tokens | {} | {} |", tokens(t.expected), worst(t.worst.map(tokens)));
    if let Some(cost) = &forecast.cost {
        let c = &cost.amount;
        let show = |a: f64| money(a, &cost.currency);
        let _ = writeln!(out, "| cost | {} | {} |", show(c.expected), worst(c.worst.map(show)));
    }
    let d = &forecast.duration_ms;
    let _ = writeln!(out, "| duration | {} | {} |", duration(d.expected), worst(d.worst.map(duration)));
    if forecast.cost.is_none() {
        let _ = writeln!(out, "\nCost not stated: {}.", no_cost(forecast));
    }
    out
}
