//! The `llm` runtime: OpenAI-compatible chat completions with tool calling.
//!
//! [`LlmAgents`] is built once per run from the plan: one HTTP client, and per provider one
//! [`Endpoint`] (of the `model` crate) whose limiter every agent on that provider shares. Its
//! [`runtime`](LlmAgents::runtime) gives each `llm` agent an [`LlmRuntime`], which chats with
//! the model, runs the tools it calls (argv, never a shell; arguments on stdin) and replies
//! with the final answer, a question for a person, or a classified [`LlmError`]. A task with a
//! `schema_check` sends its schema in the provider's `schema_dialect`. The API key never appears in a
//! reply.

mod agent;
mod dialect;
pub mod prompt;
pub mod tools;

pub use agent::{DEFAULT_MAX_TURNS, LlmRuntime, Misconfigured};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use manifest::Plan;
use manifest::plan::{Generation, Runtime};
use model::limiter::SharedWindow;
use model::protocol::Sampling;
use model::tokens::Tokenizer;
use model::{Endpoint, LlmError, ToolError};

use crate::runtime::AgentRuntime;
use dialect::ProviderDialect;
use tools::{Tool, Toolbox};

/// The most tokens one answer may have when neither the agent nor its provider sets
/// `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The provider an agent without one uses.
pub const DEFAULT_PROVIDER: &str = "default";

/// The `llm` runtimes of one run: endpoints, limiters and tools built once from the plan and
/// shared by every agent.
#[derive(Debug)]
pub struct LlmAgents {
    agents: BTreeMap<String, manifest::plan::Agent>,
    endpoints: BTreeMap<String, Result<Arc<Endpoint>, LlmError>>,
    models: BTreeMap<String, Option<String>>,
    generation: BTreeMap<String, Generation>,
    tokenizers: BTreeMap<String, Tokenizer>,
    dialects: BTreeMap<String, Arc<ProviderDialect>>,
    tools: BTreeMap<String, Result<Arc<Tool>, ToolError>>,
    hidden: Arc<[String]>,
    substitutions: Substitutions,
}

impl LlmAgents {
    /// The runtimes of `plan`'s agents, with API keys read from the process environment.
    pub fn new(plan: &Plan) -> Self {
        LlmAgents::with_env(plan, |name| std::env::var(name).ok())
    }

    /// The runtimes of `plan`'s agents in a cluster: API keys read from the process
    /// environment, and each provider's `requests_per_minute` counted in `window`, which the
    /// run's other processes share.
    pub fn sharing(plan: &Plan, window: Arc<dyn SharedWindow>) -> Self {
        LlmAgents::assemble(plan, |name| std::env::var(name).ok(), Some(window))
    }

    /// The runtimes of `plan`'s agents, with API keys read through `env`.
    pub fn with_env(plan: &Plan, env: impl Fn(&str) -> Option<String>) -> Self {
        LlmAgents::assemble(plan, env, None)
    }

    fn assemble(plan: &Plan, env: impl Fn(&str) -> Option<String>, window: Option<Arc<dyn SharedWindow>>) -> Self {
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
                        Some(variable) => match env(&variable.value).filter(|key| !key.trim().is_empty()) {
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
                    let endpoint = Endpoint::new(name, provider, key, http);
                    Ok(Arc::new(match &window {
                        Some(window) => endpoint.sharing(Arc::clone(window)),
                        None => endpoint,
                    }))
                });
                (name.clone(), endpoint)
            })
            .collect();
        let tools = plan.tools.iter().map(|(name, tool)| (name.clone(), Tool::new(name, tool).map(Arc::new))).collect();
        let hidden = plan.secret_variables().into();
        let models = plan.providers.iter().map(|(name, p)| (name.clone(), p.model.clone())).collect();
        let generation = plan.providers.iter().map(|(name, p)| (name.clone(), p.generation)).collect();
        let tokenizers = plan
            .providers
            .iter()
            .map(|(name, p)| (name.clone(), Tokenizer::named(p.tokenizer.as_deref()).unwrap_or_default()))
            .collect();
        let dialects = plan
            .providers
            .iter()
            .map(|(name, p)| (name.clone(), Arc::new(ProviderDialect::new(name, p.schema_dialect()))))
            .collect();
        LlmAgents {
            agents: plan.agents.clone(),
            endpoints,
            models,
            generation,
            tokenizers,
            dialects,
            tools,
            hidden,
            substitutions: Substitutions::default(),
        }
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
        let Runtime::Llm { provider, model, tools, max_turns, tool_choice, generation, .. } = &agent.runtime else {
            return Err(not_llm());
        };
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
                        reason: ToolError::Undefined,
                    });
                }
            }
        }
        let dialect = self
            .dialects
            .get(provider)
            .cloned()
            .ok_or_else(|| LlmError::UnknownProvider { agent: name.to_owned(), provider: provider.to_owned() })?;
        let generation = generation.or(self.generation.get(provider).copied().unwrap_or_default());
        let sampling = Sampling {
            temperature: generation.temperature.map(|t| t as f32),
            max_tokens: Some(generation.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
            seed: generation.seed,
        };
        Ok(LlmRuntime {
            endpoint,
            model,
            system_prompt: agent.system_prompt.clone(),
            toolbox: Toolbox::new(offered, Arc::clone(&self.hidden)),
            max_turns: max_turns.unwrap_or(DEFAULT_MAX_TURNS).max(1),
            tool_choice: tool_choice.unwrap_or_default(),
            sampling,
            substitutions: self.substitutions.clone(),
            tokenizer: self.tokenizers.get(provider).copied().unwrap_or_default(),
            dialect,
        })
    }

    /// The substitutions warned about so far: provider, model asked for, model that answered.
    pub fn substitutions(&self) -> Vec<(String, String, String)> {
        self.substitutions.0.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    fn provider_model(&self, provider: &str) -> Option<String> {
        self.models.get(provider).cloned().flatten()
    }
}

/// The models servers answered with in place of the one asked for, each warned about once
/// per run on stderr.
#[derive(Debug, Clone, Default)]
pub struct Substitutions(Arc<Mutex<BTreeSet<(String, String, String)>>>);

impl Substitutions {
    /// Notes that `provider` answered a request for `requested` with `answered`; warns the
    /// first time. A dated or tagged name of the model asked for (`gpt-4o-2024-08-06` for
    /// `gpt-4o`, `qwen3:latest` for `qwen3`) is the same model; `gpt-4o-mini` is not.
    pub fn notice(&self, provider: &str, requested: &str, answered: &str) {
        if answered.trim().is_empty()
            || answered == requested
            || answered.strip_prefix(requested).is_some_and(|rest| {
                rest.starts_with([':', '@'])
                    || rest.strip_prefix('-').is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
            })
        {
            return;
        }
        let key = (provider.to_owned(), requested.to_owned(), answered.to_owned());
        if self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(key) {
            let answered = answered.escape_debug();
            tracing::warn!(
                "provider `{provider}` answered a request for model `{requested}` with model `{answered}`; \
                 check that the server serves `{requested}` (the provider's or agent's `model`)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_another_model_is_a_substitution_and_each_is_kept_once() {
        let seen = Substitutions::default();
        for (requested, answered) in [
            ("gpt-4o", "gpt-4o"),
            ("gpt-4o", "gpt-4o-2024-08-06"),
            ("qwen3", "qwen3:latest"),
            ("m", ""),
            ("qwen3:8b", "smollm2"),
            ("qwen3:8b", "smollm2"),
            ("gpt-4o", "gpt-4o-mini"),
        ] {
            seen.notice("p", requested, answered);
        }
        let kept: Vec<(String, String, String)> = seen.0.lock().expect("not poisoned").iter().cloned().collect();
        let pair = |r: &str, a: &str| ("p".to_owned(), r.to_owned(), a.to_owned());
        assert_eq!(kept, [pair("gpt-4o", "gpt-4o-mini"), pair("qwen3:8b", "smollm2")]);
    }
}
