//! How forecast figures are written for people: tokens with thousands apart, durations as
//! people read them, money to four places.

use super::Forecast;

/// A count of tokens, with thousands apart.
pub fn tokens(n: u64) -> String {
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
pub fn duration(ms: u64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m {:02}s", ms / 60_000, ms % 60_000 / 1000),
        ms => format!("{}h {:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// An amount of money.
pub fn money(amount: f64, currency: &str) -> String {
    format!("{amount:.4} {currency}")
}

/// Why a forecast has no cost.
pub fn no_cost(forecast: &Forecast) -> String {
    if forecast.run.tokens.expected == 0 && forecast.run.tokens.worst == Some(0) {
        return "no task asks a model".to_owned();
    }
    if forecast.unpriced.is_empty() {
        return "the providers' prices are in different currencies".to_owned();
    }
    let names: Vec<String> = forecast.unpriced.iter().map(|p| format!("`{p}`")).collect();
    format!("no `price` for provider {} (tokens and time only)", names.join(", "))
}
