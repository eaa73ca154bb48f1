//! The `mock` runtime: deterministic scripted responses for tests, dry runs and examples.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use machine::event::Tokens;
use manifest::plan::{MockOutcome, MockResponse, Runtime};
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
        self.reply_to(&attempt.task, attempt.attempt, &attempt.input)
    }

    /// The reply to attempt `attempt` of `task` on `input`, without the latency. An item of a
    /// map (`ID[INDEX]`) without a script of its own follows its map's.
    fn reply_to(&self, task: &str, attempt: u32, input: &str) -> Reply {
        let script = [Some(task), manifest::template::map_of_item(task)]
            .into_iter()
            .flatten()
            .find_map(|id| self.responses.get(id).filter(|s| !s.is_empty()));
        let response = script.map(|s| &s[(attempt as usize).saturating_sub(1).min(s.len() - 1)]);
        let Some(MockResponse { outcome, tokens }) = response else {
            let text = if self.default == "echo" { input.to_owned() } else { self.default.clone() };
            return Reply::Output { text, tokens: None };
        };
        let tokens = tokens.map(|usage| Tokens { prompt: usage.prompt, completion: usage.completion });
        match outcome {
            MockOutcome::Output(text) => Reply::Output { text: text.clone(), tokens },
            MockOutcome::Fail(error) => Reply::failed(error.clone()).with_tokens(tokens),
            MockOutcome::Transient(error) => Reply::transient(error.clone()).with_tokens(tokens),
            MockOutcome::Clarify(question) => Reply::Question(question.clone(), tokens),
        }
    }
}

impl AgentRuntime for MockRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        reply_after(self.latency, self.reply(&attempt), cancel)
    }

    /// Without latency, a mock agent's reply is known at once.
    fn reply_now(&self, task: &str, attempt: u32, input: &str) -> Option<Reply> {
        self.latency.is_none().then(|| self.reply_to(task, attempt, input))
    }
}

/// A reply known in advance, given after `latency` (tokio's clock, so virtual in plan tests)
/// unless the attempt is cancelled first.
pub(crate) fn reply_after(latency: Option<Duration>, reply: Reply, cancel: CancellationToken) -> Pending {
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
