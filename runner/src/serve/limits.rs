//! How long a client may take and how many may be connected at once: fixed defaults that
//! `RUNNER_SERVE_HEADER_TIMEOUT_MS`, `RUNNER_SERVE_BODY_TIMEOUT_MS` and
//! `RUNNER_SERVE_MAX_CONNECTIONS` change, read once at startup.

use std::time::Duration;

use super::error::ServeError;

/// The variable that sets [`Limits::header`], in milliseconds.
const HEADER_VARIABLE: &str = "RUNNER_SERVE_HEADER_TIMEOUT_MS";
/// The variable that sets [`Limits::body`], in milliseconds.
const BODY_VARIABLE: &str = "RUNNER_SERVE_BODY_TIMEOUT_MS";
/// The variable that sets [`Limits::connections`].
const CONNECTIONS_VARIABLE: &str = "RUNNER_SERVE_MAX_CONNECTIONS";

/// The time a client has to send a request's headers, or the next request on a kept-alive
/// connection.
const HEADER: Duration = Duration::from_secs(10);
/// The time a client has to send a whole request body once its headers are in.
const BODY: Duration = Duration::from_secs(30);
/// The connections served at once; more wait until one closes.
const CONNECTIONS: usize = 256;

/// The server's limits on slow and numerous clients.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The deadline for a request's headers, from the moment the server starts reading them.
    pub header: Duration,
    /// The deadline for a request's whole body, from the moment its headers are accepted.
    pub body: Duration,
    /// The most connections open at once.
    pub connections: usize,
}

impl Limits {
    /// The defaults, changed by the variables that are set and not empty.
    pub fn from_env() -> Result<Limits, ServeError> {
        Ok(Limits {
            header: milliseconds(HEADER_VARIABLE)?.unwrap_or(HEADER),
            body: milliseconds(BODY_VARIABLE)?.unwrap_or(BODY),
            connections: count(CONNECTIONS_VARIABLE)?.unwrap_or(CONNECTIONS),
        })
    }
}

/// A duration in whole milliseconds, at least one and at most `u32::MAX` (about 49 days,
/// which keeps every deadline within the clock's range).
fn milliseconds(variable: &'static str) -> Result<Option<Duration>, ServeError> {
    let wanted = "a whole number of milliseconds above 0, e.g. 10000";
    Ok(setting::<u32>(variable, wanted)?.map(|ms| Duration::from_millis(u64::from(ms))))
}

/// A number of connections, at least one; more than a semaphore can count is that many.
fn count(variable: &'static str) -> Result<Option<usize>, ServeError> {
    let wanted = "a whole number of connections above 0, e.g. 256";
    Ok(setting::<usize>(variable, wanted)?.map(|n| n.min(tokio::sync::Semaphore::MAX_PERMITS)))
}

/// The variable read as [`positive`], `None` when it is unset or empty.
fn setting<N>(variable: &'static str, wanted: &'static str) -> Result<Option<N>, ServeError>
where
    N: std::str::FromStr + PartialOrd + From<u8>,
{
    let Some(value) = std::env::var_os(variable) else { return Ok(None) };
    let value = value.to_string_lossy();
    if value.trim().is_empty() {
        return Ok(None);
    }
    positive(&value).map(Some).ok_or_else(|| ServeError::Setting { variable, value: value.into_owned(), wanted })
}

/// A number above zero written in digits only (no sign, no unit), spaces around it aside.
fn positive<N>(value: &str) -> Option<N>
where
    N: std::str::FromStr + PartialOrd + From<u8>,
{
    let text = value.trim();
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse::<N>().ok()).flatten().filter(|number| *number > N::from(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_is_a_plain_number_above_zero() {
        assert_eq!(positive::<u32>(" 200 "), Some(200));
        assert_eq!(positive::<usize>("256"), Some(256));
        for bad in ["0", "", "+5", "-1", "10s", "1.5", "4294967296"] {
            assert_eq!(positive::<u32>(bad), None, "{bad:?}");
        }
    }
}
