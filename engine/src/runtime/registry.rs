//! The runtimes an agent can name, by name. Adding a runtime is one file with a
//! [`Constructor`] and one line in [`Registry::builtin`].

use std::collections::HashMap;
use std::sync::Arc;

use manifest::plan::Agent;

use super::{AgentRuntime, Children, CommandRuntime, HttpRuntime, MockRuntime, Refusing};

/// What a runtime is built from: one agent's definition and the run-wide settings.
pub struct Setup<'a> {
    /// The agent's name.
    pub name: &'a str,
    /// The agent's definition; its `runtime` names the runtime being built.
    pub agent: &'a Agent,
    /// The environment variables holding secrets, hidden from every program the run starts.
    pub hidden: &'a Arc<[String]>,
    /// Makes the runtime of an `llm` agent by name (shared across the plan's llm agents).
    pub llm: &'a dyn Fn(&str) -> Arc<dyn AgentRuntime>,
    /// The plan the agent belongs to (its providers, for limits a runtime keeps).
    pub plan: &'a manifest::Plan,
}

/// Builds the runtime of one agent. It gets only agents whose `runtime` has the name it was
/// registered under. It may hold what it needs (the cluster's queue, for a remote runtime).
pub type Constructor = Arc<dyn Fn(&Setup<'_>) -> Arc<dyn AgentRuntime> + Send + Sync>;

/// Runtime constructors by the name an agent's `runtime` field gives, and where sub-plan and
/// `expand` tasks keep their child runs.
#[derive(Clone)]
pub struct Registry {
    constructors: HashMap<&'static str, Constructor>,
    children: Option<Arc<dyn Children>>,
}

impl Registry {
    /// The runtimes runner ships: `llm`, `command`, `mock` and `http`.
    pub fn builtin() -> Self {
        Registry { constructors: HashMap::new(), children: None }
            .with("llm", |setup| (setup.llm)(setup.name))
            .with("command", CommandRuntime::from_agent)
            .with("mock", MockRuntime::from_agent)
            .with("http", HttpRuntime::from_agent)
    }

    /// This registry with `constructor` answering for `name` (replacing any before it).
    pub fn with(
        mut self,
        name: &'static str,
        constructor: impl Fn(&Setup<'_>) -> Arc<dyn AgentRuntime> + Send + Sync + 'static,
    ) -> Self {
        self.constructors.insert(name, Arc::new(constructor));
        self
    }

    /// This registry with child runs kept in `children`: without them, `type: plan` and
    /// `type: expand` tasks refuse every attempt.
    pub fn with_children(mut self, children: Arc<dyn Children>) -> Self {
        self.children = Some(children);
        self
    }

    /// Where child runs are kept, when the caller said.
    pub fn children(&self) -> Option<&Arc<dyn Children>> {
        self.children.as_ref()
    }

    /// The runtime of one agent; an agent whose runtime has no constructor gets one that
    /// refuses every attempt and says so.
    pub fn build(&self, setup: &Setup<'_>) -> Arc<dyn AgentRuntime> {
        let name = setup.agent.runtime.name();
        match self.constructors.get(name) {
            Some(constructor) => constructor(setup),
            None => Arc::new(Refusing(format!("no `{name}` runtime is registered for agent `{}`", setup.name))),
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Agents, Attempt, Reply};
    use tokio_util::sync::CancellationToken;

    fn plan() -> manifest::Plan {
        let text = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions:\n    \
                    echo: {runtime: mock}\n  workflow:\n    - {id: t, agent: echo, input: hello}\n";
        manifest::load_str("t.yaml", "t", text, &|_| true).plan.expect("the plan loads")
    }

    fn no_llm(name: &str) -> Arc<dyn AgentRuntime> {
        Arc::new(Refusing(format!("no llm for {name}")))
    }

    async fn reply(agents: &Agents) -> Reply {
        let attempt = Attempt::new("t", 1, "hello", std::env::temp_dir());
        agents.runtime(0).run(attempt, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn agents_get_the_runtime_registered_under_their_runtimes_name() {
        let plan = plan();
        let builtin = Agents::for_plan(&plan, &Registry::builtin(), &no_llm);
        assert_eq!(reply(&builtin).await, Reply::Output { text: "hello".into(), tokens: None });
        let replaced =
            Registry::builtin().with("mock", |setup| Arc::new(Refusing(format!("stand-in for {}", setup.name))));
        let agents = Agents::for_plan(&plan, &replaced, &no_llm);
        assert_eq!(reply(&agents).await, Reply::refused("stand-in for echo"));
    }

    #[tokio::test]
    async fn an_agent_whose_runtime_is_not_registered_refuses_saying_so() {
        let empty = Registry { constructors: HashMap::new(), children: None };
        let agents = Agents::for_plan(&plan(), &empty, &no_llm);
        assert_eq!(reply(&agents).await, Reply::refused("no `mock` runtime is registered for agent `echo`"));
    }
}
