//! Context: counting tokens and compacting text (summaries, gate outputs, errors) within a budget.
//!
//! [`tokens::count`] measures text with a real tokenizer; [`extract::compact`] is the
//! deterministic extractive compactor (whole units kept in order, runs of dropped units
//! marked); [`errors::compact_error`] and [`summary::merge`] apply it to error messages and
//! to the rolling context summary.

pub mod errors;
pub mod extract;
pub mod summary;
pub mod tokens;
mod units;
