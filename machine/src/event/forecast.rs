//! What a run was forecast to take when it started: recorded in its `RunCreated`, so the run
//! can be scored against it whatever happens to the plan file afterwards.

use serde::{Deserialize, Serialize};

/// A figure as expected, and at worst (`None`: unbounded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Span<T> {
    /// What a run is expected to take.
    pub expected: T,
    /// The most a run within the plan's limits can take.
    pub worst: Option<T>,
}

/// Money, in one currency.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// The expected and the worst amount.
    #[serde(flatten)]
    pub amount: Span<f64>,
    /// Three capital letters, such as `USD`.
    pub currency: String,
}

/// A run's forecast figures: tokens, money and time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Forecasted {
    /// Tokens of every model request: tasks, reviewers, the planner and the compactor.
    pub tokens: Span<u64>,
    /// What they cost; `None` when no task asks a model, a provider in use has no price or
    /// prices are in different currencies.
    pub cost: Option<Cost>,
    /// The run's duration in milliseconds: the makespan under its strategy and limits.
    pub duration_ms: Span<u64>,
}
