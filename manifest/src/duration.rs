//! Durations written as strings: `500ms`, `30s`, `5m`, `1h`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration with millisecond precision, written `500ms`, `30s`, `5m` or `1h`.
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

    /// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h`; a fraction is allowed
    /// (`1.5s`). Returns why it is not a duration otherwise.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let scale = match unit.trim() {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "" => return Err(format!("`{text}` has no unit; write it as `{text}s` or `{text}ms`")),
            other => return Err(format!("unknown unit `{other}`; use ms, s, m or h")),
        };
        let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a number with a unit"))?;
        let millis = value * scale;
        if !millis.is_finite() || millis > 1e15 {
            return Err(format!("`{text}` is too long"));
        }
        Ok(Duration { millis: millis.round() as u64 })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.millis;
        match ms {
            0 => write!(f, "0s"),
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
        for (text, ms) in [("500ms", 500), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("1.5s", 1_500)] {
            let d = Duration::parse(text).unwrap();
            assert_eq!(d.as_millis(), ms, "{text}");
            assert_eq!(Duration::parse(&d.to_string()).unwrap(), d);
        }
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(Duration::parse("30").unwrap_err().contains("no unit"));
        assert!(Duration::parse("3d").unwrap_err().contains("unknown unit"));
        assert!(Duration::parse("fast").is_err());
        assert!(Duration::parse("1e300h").is_err());
    }
}
