//! An attempt whose work panics fails, instead of never answering: a panicking attempt sends
//! no command, and the run would wait for it for ever.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use machine::event::ErrorClass;

use crate::Command;

/// The work of attempt `attempt` of `task`, with a panic in it made that attempt's permanent
/// failure.
pub(crate) struct Guarded<F> {
    work: Pin<Box<F>>,
    task: String,
    attempt: u32,
}

impl<F: Future<Output = Vec<Command>>> Guarded<F> {
    /// Guards `work`, the attempt `attempt` of `task`.
    pub(crate) fn new(task: String, attempt: u32, work: F) -> Self {
        Guarded { work: Box::pin(work), task, attempt }
    }
}

impl<F: Future<Output = Vec<Command>>> Future for Guarded<F> {
    type Output = Vec<Command>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<Command>> {
        let this = &mut *self;
        match catch_unwind(AssertUnwindSafe(|| this.work.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let error = format!("the attempt failed inside runner (a bug): {}", panic_message(panic.as_ref()));
                tracing::error!(task = %this.task, attempt = this.attempt, %error);
                let (task, attempt) = (std::mem::take(&mut this.task), this.attempt);
                Poll::Ready(vec![Command::Failed {
                    task,
                    attempt,
                    error,
                    class: ErrorClass::Permanent,
                    tokens: None,
                    jitter: 0.0,
                }])
            }
        }
    }
}

/// What a panic said: its message when it was a string, else that it said nothing readable.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}
