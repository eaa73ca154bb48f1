//! The `mock` runtime: deterministic scripted responses for tests, dry runs and examples.

use std::collections::BTreeMap;
use std::time::Duration;

use manifest::plan::MockResponse;
use tokio_util::sync::CancellationToken;

use super::{AgentRuntime, Attempt, Pending, Reply};

/// Replies from a script: by task id, one response per attempt (the last repeats); tasks
/// with no script get `default` (`echo` returns the rendered input).
#[derive(Debug, Clone)]
pub struct MockRuntime {
    latency: Option<Duration>,
    default: String,
    responses: BTreeMap<String, Vec<MockResponse>>,
}

impl MockRuntime {
    /// A mock agent.
    pub fn new(latency: Option<Duration>, default: String, responses: BTreeMap<String, Vec<MockResponse>>) -> Self {
        MockRuntime { latency, default, responses }
    }

    /// The reply to an attempt, without the latency.
    pub fn reply(&self, attempt: &Attempt) -> Reply {
        let script = self.responses.get(&attempt.task).filter(|s| !s.is_empty());
        let response = script.map(|s| &s[(attempt.attempt as usize).saturating_sub(1).min(s.len() - 1)]);
        match response {
            Some(MockResponse::Output(text)) => Reply::Output { text: text.clone(), tokens: None },
            Some(MockResponse::Fail(error)) => Reply::failed(error.clone()),
            Some(MockResponse::Clarify(question)) => Reply::Question(question.clone(), None),
            None if self.default == "echo" => Reply::Output { text: attempt.input.to_string(), tokens: None },
            None => Reply::Output { text: self.default.clone(), tokens: None },
        }
    }
}

impl AgentRuntime for MockRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let reply = self.reply(&attempt);
        let latency = self.latency;
        Box::pin(async move {
            if let Some(latency) = latency {
                tokio::select! {
                    () = tokio::time::sleep(latency) => {}
                    () = cancel.cancelled() => return Reply::refused("cancelled"),
                }
            }
            reply
        })
    }
}
