//! From a request in plain words to a runner manifest: the deterministic planner, the
//! complexity detector, and an LLM plan author that repairs, falls back and picks the best
//! candidate.

pub mod author;
pub mod complexity;
pub mod deterministic;
pub mod steps;
pub mod yaml;
