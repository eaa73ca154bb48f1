//! `RUNNER_MAX_PLAN_BYTES`: the cap on a plan's size, read once for the commands that load
//! plans and handed to the manifest crate, which never reads the environment itself.

/// The variable that sets the cap.
pub const VARIABLE: &str = "RUNNER_MAX_PLAN_BYTES";

/// The units a byte count may end with, case aside, and their sizes.
const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

/// Why `RUNNER_MAX_PLAN_BYTES` cannot be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PlanLimitError {
    /// Not a number of bytes with an optional unit.
    #[error(
        "{VARIABLE}={value:?} is not a byte count: write a whole number of bytes, optionally followed by \
         KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `{VARIABLE}=128MiB`"
    )]
    Malformed {
        /// The variable's value.
        value: String,
    },
    /// Zero, which would refuse every plan.
    #[error("{VARIABLE}={value:?} allows no plan at all: give a cap of at least one byte, e.g. `128MiB`")]
    Zero {
        /// The variable's value.
        value: String,
    },
}

/// Sets the manifest crate's cap from `RUNNER_MAX_PLAN_BYTES` when it is set and not empty,
/// warning on stderr when it asks for more than the most a plan can have.
pub fn from_env() -> Result<(), PlanLimitError> {
    let Some(value) = std::env::var_os(VARIABLE) else { return Ok(()) };
    let value = value.to_string_lossy();
    if value.trim().is_empty() {
        return Ok(());
    }
    let asked = parse(&value)?;
    let limit = manifest::set_plan_limit(asked);
    if limit < asked {
        eprintln!(
            "warning: {VARIABLE}={value} is more than any plan can have; plans are capped at {limit} bytes \
             (4 GiB less a byte: spans are 32-bit offsets)"
        );
    }
    Ok(())
}

/// A byte count: digits, then optionally a unit of [`UNITS`] (spaces allowed between). A count
/// too large for 64 bits is `u64::MAX`, which the manifest crate clamps like any count over
/// [`manifest::PLAN_BYTES_CEILING`].
pub fn parse(value: &str) -> Result<u64, PlanLimitError> {
    let malformed = || PlanLimitError::Malformed { value: value.to_owned() };
    let text = value.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(malformed());
    }
    let unit = unit.trim_start().to_ascii_lowercase();
    let scale = if unit.is_empty() {
        1
    } else {
        UNITS.iter().find(|(name, _)| *name == unit).map(|&(_, scale)| scale).ok_or_else(malformed)?
    };
    // Only digits are left, so the parse fails on overflow alone.
    let count = digits.parse::<u64>().unwrap_or(u64::MAX);
    if count == 0 {
        return Err(PlanLimitError::Zero { value: value.to_owned() });
    }
    Ok(count.saturating_mul(scale))
}

#[cfg(test)]
mod tests {
    use manifest::PLAN_BYTES_CEILING;

    use super::*;

    #[test]
    fn plain_counts_and_units_of_1000_and_1024() {
        assert_eq!(parse("1000").ok(), Some(1000));
        assert_eq!(parse(" 128MiB ").ok(), Some(128 << 20));
        assert_eq!(parse("128MB").ok(), Some(128_000_000));
        assert_eq!(parse("2 gib").ok(), Some(2 << 30));
        assert_eq!(parse("7b").ok(), Some(7));
    }

    #[test]
    fn counts_past_64_bits_saturate_for_the_clamp() {
        assert_eq!(parse("99999999999999999999999").ok(), Some(u64::MAX));
        assert_eq!(parse("20000000TiB").ok(), Some(u64::MAX));
        assert!(parse("8GiB").is_ok_and(|n| n > PLAN_BYTES_CEILING));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in ["", "MiB", "12QB", "1.5GiB", "-3", "12 M", "0x10", "1e6"] {
            assert!(matches!(parse(bad), Err(PlanLimitError::Malformed { .. })), "{bad:?}");
        }
        assert!(matches!(parse("0"), Err(PlanLimitError::Zero { .. })));
        assert!(matches!(parse("0MiB"), Err(PlanLimitError::Zero { .. })));
    }
}
