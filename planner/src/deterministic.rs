//! deterministic
