//! One answer of the model, however it arrived.

use crate::protocol::{AssistantMessage, Usage};

/// One answer of the model, streamed or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the model said.
    pub message: AssistantMessage,
    /// Why it stopped, when the server says.
    pub finish_reason: Option<String>,
    /// Tokens used, when the server reports them.
    pub usage: Option<Usage>,
    /// The model that answered, when the server says.
    pub model: Option<String>,
}
