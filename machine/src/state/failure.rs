//! Failed attempts and what follows them: a retry after a jittered backoff, a replan, a
//! skip, or the end of the run.

use manifest::plan::Action;

use super::RunState;
use crate::event::{ErrorClass, Event, Outcome, SkipCause, Tokens};
use crate::tokens::TokenCounter;

/// A failed attempt, as `fail_attempt` takes it.
pub(super) struct Failure {
    pub(super) error: String,
    pub(super) class: ErrorClass,
    /// Tokens the attempt used before it failed.
    pub(super) tokens: Option<Tokens>,
    /// The share of the backoff's second half cut from the wait before a retry, in `[0, 1)`,
    /// drawn by the driver so that this module stays free of randomness.
    pub(super) jitter: f64,
}

impl Failure {
    /// A failure that used no tokens, retried (if it is) without jitter.
    pub(super) fn new(error: String, class: ErrorClass) -> Self {
        Failure { error, class, tokens: None, jitter: 0.0 }
    }
}

impl<C: TokenCounter> RunState<C> {
    /// What the failure of attempt `attempt` of task `i` leads to: a retry after a jittered
    /// backoff when its policy covers the failure's class and attempts are left, else the fallback.
    pub(super) fn fail_attempt(&mut self, i: usize, attempt: u32, failure: Failure, out: &mut Vec<Event>) {
        let Failure { error, class, tokens, jitter } = failure;
        let task = self.id(i).to_owned();
        let policy = self.plan.tasks[i].on_failure.value;
        let retryable = class.retryable(policy.retry_on);
        let dispatched_seq = self.tasks[i].dispatched_seq();
        let failed = Event::TaskFailed {
            task: task.clone(),
            attempt,
            dispatched_seq,
            error: error.clone(),
            class,
            retryable,
            tokens,
        };
        self.emit(failed, out);
        let failures = self.tasks[i].failures;
        let next = if policy.action == Action::Retry && retryable && failures < policy.max_attempts {
            let exponent = failures.saturating_sub(1).min(30);
            let delay = policy.backoff.as_millis().saturating_mul(u64::from(policy.factor).saturating_pow(exponent));
            let backoff_ms = delay.min(policy.max_backoff.as_millis());
            // "Equal jitter": between half and all of the backoff.
            let cut = ((backoff_ms / 2) as f64 * jitter.clamp(0.0, 1.0)) as u64;
            let delay_ms = backoff_ms - cut.min(backoff_ms / 2);
            self.emit(
                Event::RetryScheduled { task, attempt: attempt + 1, delay_ms, backoff_ms: Some(backoff_ms) },
                out,
            );
            return;
        } else if policy.action == Action::Retry {
            policy.then
        } else {
            policy.action
        };
        match next {
            Action::Replan => self.request_replan(i, error, out),
            action => self.give_up(i, action, &error, out),
        }
    }

    /// Skips a failed task when `action` is `skip` and it is not critical; otherwise fails the run.
    pub(super) fn give_up(&mut self, i: usize, action: Action, error: &str, out: &mut Vec<Event>) {
        let task = self.id(i).to_owned();
        if action == Action::Skip && !self.plan.tasks[i].critical {
            self.emit(Event::TaskSkipped { task, reason: format!("failed: {error}"), cause: SkipCause::Failure }, out);
        } else {
            let critical = if self.plan.tasks[i].critical { "critical " } else { "" };
            self.finish(Outcome::Failed, format!("{critical}task `{task}` failed: {error}"), out);
        }
    }

    /// Asks the planner for a replacement of failed task `i`, when there is a planner and
    /// replans are left; otherwise the task fails for good (`then` follows only `retry`).
    pub(super) fn request_replan(&mut self, i: usize, error: String, out: &mut Vec<Event>) {
        let control = &self.plan.control;
        let refusal = if control.planner.is_none() {
            Some("its policy is to replan, but `control_logic.planner` names no planner agent".to_owned())
        } else if self.replans.saturating_add(u32::try_from(self.replanning.len()).unwrap_or(u32::MAX))
            >= control.max_replans
        {
            // A replan under way counts: two tasks failing together must not both pass the limit.
            let under_way = match self.replanning.len() {
                0 => String::new(),
                1 => ", and 1 replan is under way".to_owned(),
                n => format!(", and {n} replans are under way"),
            };
            Some(format!("the run has already replanned {} times{under_way} (max_replans)", self.replans))
        } else {
            None
        };
        match refusal {
            Some(refusal) => self.give_up(i, Action::Fail, &format!("{error}; {refusal}"), out),
            None => {
                let task = self.id(i).to_owned();
                self.emit(Event::ReplanRequested { task, reason: error }, out);
            }
        }
    }

    pub(super) fn finish(&mut self, outcome: Outcome, summary: String, out: &mut Vec<Event>) {
        self.stop_attempts("cancelled: the run failed", out);
        self.emit(Event::RunCompleted { status: outcome, summary }, out);
    }

    /// Records the end of every attempt still in flight, so the log never leaves a task
    /// running in a run that is over.
    pub(super) fn stop_attempts(&mut self, reason: &str, out: &mut Vec<Event>) {
        if self.tally.running == 0 {
            return;
        }
        let in_flight: Vec<usize> = (0..self.tasks.len()).filter(|&i| self.tasks[i].in_flight).collect();
        for i in in_flight {
            let (task, attempt) = (self.id(i).to_owned(), self.tasks[i].attempts);
            let event = Event::TaskFailed {
                task,
                attempt,
                dispatched_seq: self.tasks[i].dispatched_seq(),
                error: reason.to_owned(),
                class: ErrorClass::Cancelled,
                retryable: false,
                tokens: None,
            };
            self.emit(event, out);
        }
    }
}
