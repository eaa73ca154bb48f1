//! The normalised plan: one typed shape, whatever form the manifest was written in.
//!
//! One file per concept: the agents and their runtimes (`agent.rs`), tasks (`task.rs`, their
//! fields declared once with the manifest's), failure policies, verification and control
//! logic; every type is reached as `manifest::plan::X`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::source::Loc;

mod agent;
mod cache;
mod control;
mod failure;
mod for_each;
pub(crate) mod task;
mod vars;
mod verification;

pub use agent::{
    Agent, Approval, DEFAULT_MAX_OUTPUT_BYTES, Generation, MockOutcome, MockResponse, Price, Provider, Runtime,
    SchemaDialect, Tool, ToolChoice, Usage,
};
pub use cache::Cache;
pub use control::{Budget, ControlLogic, GroupLimit, Strategy};
pub use failure::{Action, FailurePolicy, RetryOn};
pub use for_each::ForEach;
pub use task::{Attachment, Extras, ExtrasBox, Read, Task, TaskKind, With};
pub use vars::UndeclaredVar;
pub use verification::Verification;

/// A value and where it was written. Serialises as the bare value; the location is only
/// meaningful next to the source it came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct At<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    #[serde(skip)]
    pub loc: Loc,
}

impl<T> At<T> {
    /// A value at a location.
    pub fn new(value: T, loc: Loc) -> Self {
        At { value, loc }
    }
}

/// The form a manifest was written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// `apiVersion: runner/v1`, `kind: Plan`, `metadata`, `spec`.
    #[default]
    Enveloped,
    /// The seed schema at top level, as LLMs write it.
    Bare,
}

/// A whole plan, normalised: gates from `control_logic` are tasks, gate inputs are
/// dependencies, sequential plans are chains and every default is filled in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `metadata.name`, or the file's stem for the bare form.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The form it was written in.
    pub form: Form,
    /// What the plan is for; templates read it as `{{ mission }}`.
    pub mission: Option<String>,
    /// The author's own analysis, which the critic checks.
    pub mission_analysis: Option<MissionAnalysis>,
    /// The variables the plan takes (`spec.vars`), with their defaults; `--var` overrides them.
    /// `None` when the plan declares none: then any `vars.NAME` may be read, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vars: Option<Vars>,
    /// LLM endpoints by name.
    pub providers: BTreeMap<String, Provider>,
    /// Tools callable by llm agents, by name.
    pub tools: BTreeMap<String, Tool>,
    /// Agents by name.
    pub agents: BTreeMap<String, Agent>,
    /// The tasks, in workflow order.
    pub tasks: Vec<Task>,
    /// Scheduling, budgets and replanning.
    pub control: ControlLogic,
    /// The plans its `type: plan` tasks run, by the path their `plan:` gives, loaded with it
    /// (so a run records them whole in `RunCreated` and never reads the files again).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subplans: BTreeMap<String, Arc<Plan>>,
}

/// Variable values by name: a plan's declared defaults, and a run's values for `{{ vars.NAME }}`.
pub type Vars = BTreeMap<String, serde_json::Value>;

/// The author's analysis of the mission.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MissionAnalysis {
    /// `trivial`, `low`, `medium` or `high`.
    pub estimated_complexity: Option<Complexity>,
    /// The chain of task ids the author expects to take longest.
    pub critical_path: Vec<At<String>>,
    /// Capabilities the mission needs.
    pub required_capabilities: Vec<String>,
}

/// The author's estimate of a mission's difficulty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// One obvious step.
    Trivial,
    /// A few steps.
    Low,
    /// Several steps with some parallel work.
    Medium,
    /// Many steps, branching and review.
    High,
}

/// The name of the agent a task without one uses.
pub const DEFAULT_AGENT: &str = "default";

impl Plan {
    /// This plan with other tasks, everything else copied: what a run's plan becomes when the
    /// tasks change, without copying the tasks it had.
    pub fn with_tasks(&self, tasks: Vec<Task>) -> Plan {
        // Every field is named, so a new one cannot be left out.
        Plan {
            name: self.name.clone(),
            description: self.description.clone(),
            labels: self.labels.clone(),
            form: self.form,
            mission: self.mission.clone(),
            mission_analysis: self.mission_analysis.clone(),
            vars: self.vars.clone(),
            providers: self.providers.clone(),
            tools: self.tools.clone(),
            agents: self.agents.clone(),
            tasks,
            control: self.control.clone(),
            subplans: self.subplans.clone(),
        }
    }

    /// The environment variables that hold secrets (the providers' API keys, `http` agents'
    /// keys and headers): hidden from every program a run starts.
    pub fn secret_variables(&self) -> Vec<String> {
        let providers = self.providers.values().filter_map(|p| p.api_key_env.as_ref());
        let agents = self.agents.values().flat_map(|a| a.runtime.secret_variables());
        providers.chain(agents).map(|v| v.value.clone()).collect()
    }

    /// The agent a task runs on: its own, or the `default` agent.
    pub fn agent_of<'a>(&'a self, task: &'a Task) -> Option<&'a str> {
        match (&task.agent, task.kind) {
            (Some(agent), _) => Some(&agent.value),
            (None, TaskKind::Task) => Some(DEFAULT_AGENT),
            (None, _) => None,
        }
    }

    /// The provider an llm agent asks: its own, or the `default` provider.
    pub fn provider_of(&self, agent: &str) -> Option<&str> {
        match &self.agents.get(agent)?.runtime {
            Runtime::Llm { provider, .. } => Some(provider.as_ref().map_or(DEFAULT_AGENT, |p| p.value.as_str())),
            _ => None,
        }
    }

    /// The currency of the providers' prices (the first provider's with one, by name).
    pub fn currency(&self) -> Option<&str> {
        self.providers.values().find_map(|p| p.price.as_ref()).map(|p| p.currency.as_str())
    }

    /// The price of the tokens agent `agent` uses, when it asks a provider that has one.
    pub fn price_of(&self, agent: &str) -> Option<&Price> {
        self.providers.get(self.provider_of(agent)?)?.price.as_ref()
    }
}
