//! Context: compacting text (summaries, gate outputs, errors) within a budget.
//!
//! [`extract::compact`] is the deterministic extractive compactor (whole units kept in order,
//! runs of dropped units marked), measured with a [`crate::tokens::Meter`];
//! [`errors::compact_error`] and [`summary::merge`] apply it to error messages and to the
//! rolling context summary.

pub mod errors;
pub mod extract;
pub mod summary;
mod units;
