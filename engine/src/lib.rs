//! Running a plan.
//!
//! [`RunState`] is the pure, event-sourced state machine: [`Command`]s in, [`Event`]s out,
//! state rebuilt by [`Handler::fold`]. The driver, agent runtimes and event store that do the
//! IO around it live beside it.

mod attempt;
pub mod clock;
mod command;
pub mod context;
pub mod driver;
mod error;
pub mod event;
mod handler;
pub mod llm;
mod process;
mod replan;
pub mod runtime;
mod state;
pub mod store;
mod summarizer;
pub mod survivors;
pub mod template;
pub mod verify;

pub use attempt::Job;
pub use command::{Command, Start};
pub use error::EngineError;
pub use event::{Event, Outcome, Record, Scope, Tokens};
pub use handler::Handler;
pub use state::{RunState, RunStatus, TaskState, TaskStatus};
