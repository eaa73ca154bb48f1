//! Context: compacting text (summaries, gate outputs, errors) within a budget.
//!
//! Text is measured with `model::tokens`; the compactors are the machine's
//! ([`machine::context`]), re-exported here: [`extract::compact`] is the deterministic
//! extractive compactor (whole units kept in order, runs of dropped units marked);
//! [`errors::compact_error`] and [`summary::merge`] apply it to error messages and to the
//! rolling context summary.

pub use machine::context::{errors, extract, summary};
