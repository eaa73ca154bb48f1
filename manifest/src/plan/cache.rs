//! `cache`: when a task's output may be taken from an earlier run whose attempt had the same
//! key (the same rendered input, agent, attachments and verification) instead of running again.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// A task's or an agent's `cache`: `true`, `false`, or the settings of a cache that is on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// Whether stored outputs are used without `--reuse` (`cache: true` or a mapping).
    pub enabled: bool,
    /// How long a stored output stays usable; for as long as it is kept when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// A word that is part of the key: changing it makes every stored output unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the outputs of an agent that may call destructive tools are stored too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destructive: bool,
}

impl Cache {
    /// The setting of a task on `agent`: the task's own where it has one, else the agent's.
    pub fn of<'a>(task: Option<&'a Cache>, agent: Option<&'a Cache>) -> Option<&'a Cache> {
        task.or(agent)
    }
}
