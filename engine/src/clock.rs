//! Time for records: RFC 3339 in UTC with milliseconds, from the wall clock or, for plan tests,
//! from tokio's (virtual) clock counted from a fixed epoch. Only the driver reads the clock; the
//! state machine never does.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as `2026-11-22T12:45:03.123Z`.
pub fn now() -> String {
    format_millis(now_millis())
}

/// Milliseconds since the Unix epoch, now.
fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as i64
}

/// Where a driver's record times come from.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    /// The system's wall clock.
    #[default]
    Wall,
    /// Tokio's clock (virtual when the runtime's time is paused), as milliseconds since `start`
    /// added to `epoch_ms`: the same run gives the same times, whenever it runs.
    Virtual {
        /// The Unix time, in milliseconds, that `start` stands for.
        epoch_ms: i64,
        /// The instant the run's time counts from.
        start: tokio::time::Instant,
    },
}

impl Clock {
    /// A clock that follows tokio's time from now, which it calls `epoch_ms`.
    pub fn virtual_from(epoch_ms: i64) -> Self {
        Clock::Virtual { epoch_ms, start: tokio::time::Instant::now() }
    }

    /// Milliseconds since the Unix epoch, by this clock.
    pub fn millis(&self) -> i64 {
        match self {
            Clock::Wall => now_millis(),
            Clock::Virtual { epoch_ms, start } => {
                epoch_ms.saturating_add(i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX))
            }
        }
    }
}

/// The last time given out, kept while the clock stays in the same millisecond: a driver
/// commits many small batches a millisecond, and formatting the time costs more than the rest
/// of numbering one.
#[derive(Debug, Default)]
pub struct Stamp {
    clock: Clock,
    millis: i64,
    text: Option<Arc<str>>,
}

impl Stamp {
    /// Stamps from `clock`.
    pub fn new(clock: Clock) -> Self {
        Stamp { clock, millis: 0, text: None }
    }

    /// Now, as [`now`] gives it (or the stamp's virtual clock), shared with earlier calls in the
    /// same millisecond.
    pub fn now(&mut self) -> Arc<str> {
        let millis = self.clock.millis();
        match &self.text {
            Some(text) if self.millis == millis => Arc::clone(text),
            _ => {
                let text: Arc<str> = format_millis(millis).into();
                self.millis = millis;
                self.text = Some(Arc::clone(&text));
                text
            }
        }
    }
}

/// Milliseconds since the Unix epoch as RFC 3339 in UTC.
pub fn format_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, ms) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// Milliseconds since the Unix epoch of a time as [`format_millis`] writes it (RFC 3339 in UTC,
/// milliseconds optional); `None` for any other text.
pub fn parse_millis(text: &str) -> Option<i64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (clock, ms) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = clock.splitn(3, ':').map(str::parse::<i64>);
    let (h, m, s) = (clock.next()?.ok()?, clock.next()?.ok()?, clock.next()?.ok()?);
    let ms: i64 = format!("{ms:0<3}").get(..3)?.parse().ok()?;
    let valid = (1..=12).contains(&month) && (1..=31).contains(&day) && h < 24 && m < 60 && s < 61;
    valid.then(|| days_from_civil(year, month, day) * 86_400_000 + ((h * 60 + m) * 60 + s) * 1000 + ms)
}

/// The day count from 1970-01-01 of a proleptic Gregorian date (the inverse of
/// [`civil_from_days`]).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::{format_millis, parse_millis};

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_millis(1_795_351_503_456), "2026-11-22T12:45:03.456Z");
    }

    #[test]
    fn reads_back_what_it_writes() {
        for millis in [0, 951_782_400_123, 1_795_351_503_456, -86_400_001, 4_102_444_800_999] {
            assert_eq!(parse_millis(&format_millis(millis)), Some(millis), "{}", format_millis(millis));
        }
        assert_eq!(parse_millis("2026-11-22T12:45:03Z"), Some(1_795_351_503_000));
        for bad in ["", "2026-11-22", "2026-13-01T00:00:00Z", "2026-11-22T12:45:03.456", "x-1-1T0:0:0Z"] {
            assert_eq!(parse_millis(bad), None, "{bad}");
        }
    }
}
