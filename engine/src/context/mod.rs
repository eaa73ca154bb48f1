//! Context: counting tokens and compacting text (summaries, gate outputs, errors) within a budget.
//!
//! [`tokens::count`] measures text with a real tokenizer; the compactors are the machine's
//! ([`machine::context`]), re-exported here: [`extract::compact`] is the deterministic
//! extractive compactor (whole units kept in order, runs of dropped units marked);
//! [`errors::compact_error`] and [`summary::merge`] apply it to error messages and to the
//! rolling context summary.

pub use machine::context::{errors, extract, summary};
pub mod tokens;
