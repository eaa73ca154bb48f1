//! Failure policies: what a task does when an attempt fails.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// What a task does when an attempt fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run again with backoff, then apply `then`.
    Retry,
    /// Mark it skipped; dependents still run.
    Skip,
    /// Ask the planner agent for a replacement.
    Replan,
    /// Cancel what runs and fail the run.
    #[default]
    Fail,
}

impl Action {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Skip => "skip",
            Action::Replan => "replan",
            Action::Fail => "fail",
        }
    }
}

/// A failure policy with every default filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailurePolicy {
    /// The first thing to do.
    pub action: Action,
    /// Total attempts when the action is `retry` (the first attempt included).
    pub max_attempts: u32,
    /// The delay before the second attempt.
    pub backoff: Duration,
    /// The factor each further delay grows by.
    pub factor: u32,
    /// The longest delay.
    pub max_backoff: Duration,
    /// What to do when retries run out: `skip`, `replan` or `fail`.
    pub then: Action,
    /// Which failures are retried; the others go straight to `then`.
    #[serde(default)]
    pub retry_on: RetryOn,
}

/// Which failures a `retry` policy retries, like Argo's `retryPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// Every failure a retry could fix.
    #[default]
    Any,
    /// Only timeouts and failures of the service rather than the work: 408, 429, 5xx,
    /// connection errors, broken streams.
    Transient,
}

impl RetryOn {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryOn::Any => "any",
            RetryOn::Transient => "transient",
        }
    }
}

impl Default for FailurePolicy {
    fn default() -> Self {
        FailurePolicy::of(Action::Fail)
    }
}

impl FailurePolicy {
    /// The policy for a bare word, with the documented retry defaults.
    pub fn of(action: Action) -> Self {
        FailurePolicy {
            action,
            max_attempts: if action == Action::Retry { 3 } else { 1 },
            backoff: Duration::from_millis(1000),
            factor: 2,
            max_backoff: Duration::from_millis(60_000),
            then: Action::Fail,
            retry_on: RetryOn::Any,
        }
    }

    /// Whether anything but a plain `fail` happens on failure.
    pub fn has_fallback(&self) -> bool {
        self.action != Action::Fail
    }

    /// Whether the task can end up skipped.
    pub fn can_skip(&self) -> bool {
        self.action == Action::Skip || (self.action == Action::Retry && self.then == Action::Skip)
    }

    /// Whether the task can end up replanned.
    pub fn can_replan(&self) -> bool {
        self.action == Action::Replan || (self.action == Action::Retry && self.then == Action::Replan)
    }
}
