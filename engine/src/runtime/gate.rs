//! The built-in synthesis gate, for gates with no agent: it passes its rendered inputs on, and
//! the attempt holds them to the gate's cap with the extractive compactor.

use tokio_util::sync::CancellationToken;

use super::{AgentRuntime, Attempt, Pending, Reply};

/// Passes a gate's rendered input through; the cap is applied after it (see `attempt`).
#[derive(Debug, Clone, Copy)]
pub struct GateRuntime;

impl AgentRuntime for GateRuntime {
    fn run(&self, attempt: Attempt, _: CancellationToken) -> Pending {
        Box::pin(std::future::ready(Reply::Output { text: attempt.input.to_string(), tokens: None }))
    }
}
