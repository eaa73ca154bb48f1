//! Running a plan.
//!
//! [`RunState`] is the pure, event-sourced state machine of the `machine` crate ([`Command`]s
//! in, [`Event`]s out, state rebuilt by [`Handler::fold`]), counting tokens with tiktoken
//! ([`model::tokens::Tiktoken`]). The driver, agent runtimes and event store that do the IO
//! around it live here.

mod attempt;
pub mod cache;
pub mod clock;
pub mod cluster;
pub mod context;
pub mod driver;
pub mod forecast;
mod guarded;
pub mod journal;
pub mod llm;
mod process;
mod replan;
pub mod runtime;
pub mod script;
pub mod spans;
pub mod store;
mod summarizer;
pub mod survivors;
pub mod verify;

pub use attempt::Job;
pub use guarded::panic_message;
pub use machine::{
    Command, EngineError, Event, Handler, Origin, Outcome, PlanHash, Recall, Recalled, Record, Reuse, RunStatus, Saved,
    Scope, Start, TaskState, TaskStatus, Tokens, child, conversation, event, template,
};

/// The run state machine as the engine runs it: the machine's [`machine::RunState`] counting
/// tokens with tiktoken. Every fold of a log in the engine and the CLI names this type, so they
/// all count the same way.
pub type RunState = machine::RunState<model::tokens::Tiktoken>;
