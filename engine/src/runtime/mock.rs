//! The `mock` runtime: deterministic scripted responses for tests, dry runs and examples.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use manifest::plan::{MockResponse, Runtime};
use tokio_util::sync::CancellationToken;

use super::registry::Setup;
use super::{AgentRuntime, Attempt, Pending, Refusing, Reply};

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

    /// The runtime of a `mock` agent.
    pub fn from_agent(setup: &Setup<'_>) -> Arc<dyn AgentRuntime> {
        match &setup.agent.runtime {
            Runtime::Mock { latency, default, responses } => {
                Arc::new(MockRuntime::new(latency.map(|l| l.to_std()), default.clone(), responses.clone()))
            }
            _ => Arc::new(Refusing(format!("agent `{}` is not a `mock` agent", setup.name))),
        }
    }

    /// How long each reply takes.
    pub fn latency(&self) -> Option<Duration> {
        self.latency
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
