//! The `llm` runtime: OpenAI-compatible chat completions with tool calling.
//!
//! [`LlmAgents`] is built once per run from the plan: one HTTP client, and per provider one
//! [`Endpoint`](client::Endpoint) whose limiter every agent on that provider shares. Its
//! [`runtime`](LlmAgents::runtime) gives each `llm` agent an [`LlmRuntime`], which chats with
//! the model, runs the tools it calls (argv, never a shell; arguments on stdin) and replies
//! with the final answer, a question for a person, or a classified [`LlmError`]. The API key
//! never appears in a reply.

mod agent;
pub mod catalog;
pub mod client;
mod error;
pub mod limiter;
pub mod prompt;
pub mod protocol;
pub mod redact;
pub mod tools;

pub use agent::{DEFAULT_MAX_TURNS, LlmRuntime, Misconfigured};
pub use error::LlmError;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use manifest::Plan;
use manifest::plan::Runtime;

use crate::runtime::AgentRuntime;
use client::Endpoint;
use limiter::Limiter;
use tools::{Tool, Toolbox};

/// How long one request may take when the provider sets no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The provider an agent without one uses.
pub const DEFAULT_PROVIDER: &str = "default";

/// The `llm` runtimes of one run: endpoints, limiters and tools built once from the plan and
/// shared by every agent.
#[derive(Debug)]
pub struct LlmAgents {
    agents: BTreeMap<String, manifest::plan::Agent>,
    endpoints: BTreeMap<String, Result<Arc<Endpoint>, LlmError>>,
    models: BTreeMap<String, Option<String>>,
    tools: BTreeMap<String, Result<Arc<Tool>, String>>,
    hidden: Arc<[String]>,
}

impl LlmAgents {
    /// The runtimes of `plan`'s agents, with API keys read from the process environment.
    pub fn new(plan: &Plan) -> Self {
        LlmAgents::with_env(plan, |name| std::env::var(name).ok())
    }

    /// The runtimes of `plan`'s agents, with API keys read through `env`.
    pub fn with_env(plan: &Plan, env: impl Fn(&str) -> Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| LlmError::Client(error.to_string()));
        let endpoints = plan
            .providers
            .iter()
            .map(|(name, provider)| {
                let endpoint = http.clone().and_then(|http| {
                    let key = match &provider.api_key_env {
                        Some(variable) => match env(&variable.value) {
                            Some(key) => Some(key),
                            None => {
                                return Err(LlmError::MissingKey {
                                    provider: name.clone(),
                                    variable: variable.value.clone(),
                                });
                            }
                        },
                        None => None,
                    };
                    Ok(Arc::new(Endpoint::new(
                        name,
                        &provider.base_url,
                        key,
                        provider.timeout.map_or(DEFAULT_TIMEOUT, |t| t.to_std()),
                        Limiter::new(provider.max_concurrency, provider.requests_per_minute),
                        http,
                    )))
                });
                (name.clone(), endpoint)
            })
            .collect();
        let tools = plan.tools.iter().map(|(name, tool)| (name.clone(), Tool::new(name, tool).map(Arc::new))).collect();
        let hidden = plan.secret_variables().into();
        let models = plan.providers.iter().map(|(name, p)| (name.clone(), p.model.clone())).collect();
        LlmAgents { agents: plan.agents.clone(), endpoints, models, tools, hidden }
    }

    /// The runtime of the `llm` agent `agent`. A misconfigured agent (unknown provider or tool,
    /// unset API key variable, no model) gets a runtime that refuses every attempt and says why.
    pub fn runtime(&self, agent: &str) -> Arc<dyn AgentRuntime> {
        match self.build(agent) {
            Ok(runtime) => Arc::new(runtime),
            Err(error) => Arc::new(Misconfigured(error)),
        }
    }

    fn build(&self, name: &str) -> Result<LlmRuntime, LlmError> {
        let not_llm = || LlmError::NotLlm { agent: name.to_owned() };
        let agent = self.agents.get(name).ok_or_else(not_llm)?;
        let Runtime::Llm { provider, model, tools, max_turns } = &agent.runtime else { return Err(not_llm()) };
        let provider = provider.as_ref().map_or(DEFAULT_PROVIDER, |p| p.value.as_str());
        let endpoint = match self.endpoints.get(provider) {
            Some(Ok(endpoint)) => Arc::clone(endpoint),
            Some(Err(error)) => return Err(error.clone()),
            None => {
                return Err(LlmError::UnknownProvider { agent: name.to_owned(), provider: provider.to_owned() });
            }
        };
        let model = model
            .clone()
            .or_else(|| self.provider_model(provider))
            .ok_or_else(|| LlmError::NoModel { agent: name.to_owned(), provider: provider.to_owned() })?;
        let mut offered = Vec::with_capacity(tools.len());
        for tool in tools {
            let tool = &tool.value;
            match self.tools.get(tool) {
                Some(Ok(found)) => offered.push(Arc::clone(found)),
                Some(Err(reason)) => {
                    return Err(LlmError::ToolConfig {
                        agent: name.to_owned(),
                        tool: tool.clone(),
                        reason: reason.clone(),
                    });
                }
                None => {
                    return Err(LlmError::ToolConfig {
                        agent: name.to_owned(),
                        tool: tool.clone(),
                        reason: "the plan defines no such tool".to_owned(),
                    });
                }
            }
        }
        Ok(LlmRuntime::new(
            endpoint,
            model,
            agent.system_prompt.clone(),
            Toolbox::new(offered, Arc::clone(&self.hidden)),
            max_turns.unwrap_or(DEFAULT_MAX_TURNS),
        ))
    }

    fn provider_model(&self, provider: &str) -> Option<String> {
        self.models.get(provider).cloned().flatten()
    }
}
