//! The run state machine of runner, pure: [`Command`]s in, [`Event`]s out, state rebuilt by
//! [`Handler::fold`], plus what it needs to decide (template rendering, the extractive text
//! compactors).
//!
//! This crate does no IO: no clocks, files, network, processes or randomness, and no tokio;
//! its dependency list holds only pure crates, and CI fails when `cargo tree -p machine -e
//! normal` shows tokio, reqwest or tiktoken. Token counting comes in through
//! [`tokens::TokenCounter`]. The `engine` crate drives it.

pub mod child;
mod command;
pub mod context;
pub mod conversation;
mod error;
pub mod event;
mod handler;
mod plan_hash;
mod recall;
mod run_status;
mod state;
pub mod summary_mode;
mod task;
pub mod template;
pub mod tokens;

pub use command::{Command, Recalled, Start};
pub use error::EngineError;
pub use event::{Event, Origin, Outcome, Record, Scope, Tokens};
pub use handler::Handler;
pub use plan_hash::PlanHash;
pub use recall::{Recall, Reuse};
pub use run_status::RunStatus;
pub use state::{RunState, Saved};
pub use task::{TaskState, TaskStatus};
