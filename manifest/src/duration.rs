//! Durations written as strings: `500ms`, `30s`, `5m`, `1h`, `7d`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration with millisecond precision, written `500ms`, `30s`, `5m`, `1h` or `7d`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    millis: u64,
}

impl Duration {
    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Duration { millis }
    }

    /// The duration in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// The standard library's duration.
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.millis)
    }

    /// Parses `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`; a fraction is allowed
    /// (`1.5s`). Returns why it is not a duration otherwise.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let text = text.trim();
        let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let scale = match unit.trim() {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            "" => return Err(DurationError::NoUnit { text: text.to_owned() }),
            other => return Err(DurationError::UnknownUnit { unit: other.to_owned() }),
        };
        let value: f64 = number.parse().map_err(|_| DurationError::NotANumber { text: text.to_owned() })?;
        let millis = value * scale;
        if !millis.is_finite() || millis > 1e15 {
            return Err(DurationError::TooLong { text: text.to_owned() });
        }
        Ok(Duration { millis: millis.round() as u64 })
    }
}

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// A number without a unit, such as `30`.
    #[error("`{text}` has no unit; write it as `{text}s` or `{text}ms`")]
    NoUnit {
        /// The text as written.
        text: String,
    },
    /// A unit other than `ms`, `s`, `m`, `h` or `d`.
    #[error("unknown unit `{unit}`; use ms, s, m, h or d")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// A known unit after something that is not a number, such as `1.2.3s`.
    #[error("`{text}` is not a number with a unit")]
    NotANumber {
        /// The text as written.
        text: String,
    },
    /// More than about 30,000 years.
    #[error("`{text}` is too long")]
    TooLong {
        /// The text as written.
        text: String,
    },
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.millis;
        match ms {
            0 => write!(f, "0s"),
            _ if ms.is_multiple_of(86_400_000) => write!(f, "{}d", ms / 86_400_000),
            _ if ms.is_multiple_of(3_600_000) => write!(f, "{}h", ms / 3_600_000),
            _ if ms.is_multiple_of(60_000) => write!(f, "{}m", ms / 60_000),
            _ if ms.is_multiple_of(1_000) => write!(f, "{}s", ms / 1_000),
            _ => write!(f, "{ms}ms"),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Duration::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_prints_it_back() {
        for (text, ms) in
            [("500ms", 500), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("7d", 604_800_000), ("1.5s", 1_500)]
        {
            let d = Duration::parse(text).unwrap();
            assert_eq!(d.as_millis(), ms, "{text}");
            assert_eq!(Duration::parse(&d.to_string()).unwrap(), d);
        }
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert_eq!(Duration::parse("30"), Err(DurationError::NoUnit { text: "30".into() }));
        assert_eq!(Duration::parse("3w"), Err(DurationError::UnknownUnit { unit: "w".into() }));
        assert_eq!(Duration::parse("fast"), Err(DurationError::UnknownUnit { unit: "fast".into() }));
        assert_eq!(Duration::parse("1e300h"), Err(DurationError::UnknownUnit { unit: "e300h".into() }));
        assert_eq!(Duration::parse("1.2.3s"), Err(DurationError::NotANumber { text: "1.2.3s".into() }));
        assert_eq!(Duration::parse("9999999999999h"), Err(DurationError::TooLong { text: "9999999999999h".into() }));
        assert_eq!(
            Duration::parse("30").map_err(|error| error.to_string()),
            Err("`30` has no unit; write it as `30s` or `30ms`".to_owned())
        );
    }
}
