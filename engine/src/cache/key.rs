//! The cache key of a task's attempt: a hash of everything that decides its result. It is made
//! of named parts (the rendered input, the agent's model, its sampling settings, its system
//! prompt, its tools, the rest of its definition, the task's mock script, its attachments, its
//! verification and its `cache.version`), each hashed on its own, so that when a key
//! changes the parts say which of them did. Upstream changes reach a task through its rendered
//! input. Secrets never enter a part: environment variables are not read, and the names of the
//! ones that hold keys are left out too.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use manifest::plan::{Agent, Attachment, Generation, Plan, Runtime, Task, Verification};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::llm::prompt::FILE_CAP;

/// A cache key: the SHA-256 of a task attempt's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub [u8; 32]);

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

/// Bytes as lower-case hex digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 15)] as char);
    }
    text
}

impl std::str::FromStr for Key {
    type Err = String;

    /// A key from its 64 hex digits.
    fn from_str(text: &str) -> Result<Self, String> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(format!("`{text}` is not a cache key: a key has 64 hex digits"));
        }
        let mut key = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(high), Some(low)) => key[i] = (high * 16 + low) as u8,
                _ => return Err(format!("`{text}` is not a cache key: a key has 64 hex digits")),
            }
        }
        Ok(Key(key))
    }
}

/// The names of a key's parts, in the order they are hashed into it.
pub const PART_NAMES: [&str; 11] = [
    "input",
    "runtime",
    "model",
    "sampling",
    "system_prompt",
    "tools",
    "agent",
    "script",
    "attachments",
    "verification",
    "version",
];

/// Where each part is in [`PART_NAMES`].
const INPUT: usize = 0;

/// What a part's name means to a person, for "why does this task run".
pub fn describe(part: &str) -> &'static str {
    match part {
        "input" => "its rendered input",
        "runtime" => "its agent's runtime",
        "model" => "its agent's provider or model",
        "sampling" => "its agent's temperature, seed or max_tokens",
        "system_prompt" => "its agent's system prompt",
        "tools" => "the tools its agent is offered",
        "agent" => "its agent's definition",
        "script" => "its mock script",
        "attachments" => "its attachments",
        "verification" => "its verification",
        "version" => "its cache version",
        _ => "a part of its key",
    }
}

/// The digests of one attempt's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts([[u8; 32]; PART_NAMES.len()]);

impl Parts {
    /// The key the parts make.
    pub fn key(&self) -> Key {
        let mut hasher = Sha256::new();
        hasher.update(b"runner-cache-v1");
        for digest in &self.0 {
            hasher.update(digest);
        }
        Key(hasher.finalize().into())
    }

    /// Each part's digest shortened to 8 hex digits, one after another in the order of
    /// [`PART_NAMES`]: what an entry keeps to say later which parts of a key changed.
    pub fn short(&self) -> String {
        self.0.iter().map(|digest| hex(&digest[..4])).collect()
    }
}

/// The parts whose short digests differ between two [`Parts::short`] texts, in key order.
pub fn changed(before: &str, now: &str) -> Vec<&'static str> {
    let chunk = |text: &str, i: usize| text.get(i * 8..i * 8 + 8).map(str::to_owned);
    PART_NAMES.iter().enumerate().filter(|&(i, _)| chunk(before, i) != chunk(now, i)).map(|(_, name)| *name).collect()
}

/// Computes the parts of tasks' keys for one plan, remembering what does not depend on the
/// input: every task of an agent shares its agent parts, and most tasks have no part of their own.
pub struct Keyer {
    plan: Arc<Plan>,
    /// The folder attached files are read from (the plan's).
    workdir: PathBuf,
    /// The agent parts by agent name: runtime, model, sampling, system prompt, tools, the rest.
    agents: HashMap<String, [[u8; 32]; 6]>,
    /// The digest of an empty part, by position.
    empty: [[u8; 32]; PART_NAMES.len()],
}

impl Keyer {
    /// A keyer for `plan`, reading attached files under `workdir`.
    pub fn new(plan: Arc<Plan>, workdir: &Path) -> Self {
        let mut empty = [[0u8; 32]; PART_NAMES.len()];
        for (i, digest) in empty.iter_mut().enumerate() {
            *digest = digest_of(i, b"");
        }
        Keyer { plan, workdir: workdir.to_path_buf(), agents: HashMap::new(), empty }
    }

    /// The plan it keys the tasks of.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// The parts of an attempt of task `i` of the plan on `input`.
    pub fn parts(&mut self, i: usize, input: &str) -> Parts {
        let plan = Arc::clone(&self.plan);
        let task = &plan.tasks[i];
        let mut parts = self.empty;
        // A gate condenses what it is given under its cap: the same text as a task is other work.
        parts[INPUT] = match (task.kind, task.extras().max_output_tokens) {
            (manifest::plan::TaskKind::Task, None) => digest_of(INPUT, input.as_bytes()),
            (kind, cap) => digest_of(INPUT, format!("{input}\n{}:{cap:?}", kind.as_str()).as_bytes()),
        };
        if let Some(agent_name) = &task.agent {
            let name = agent_name.value.as_str();
            if let Some(agent) = plan.agents.get(name) {
                let agent_parts = match self.agents.get(name) {
                    Some(parts) => *parts,
                    None => *self.agents.entry(name.to_owned()).or_insert(agent_parts(&plan, agent)),
                };
                parts[1..7].copy_from_slice(&agent_parts);
                if let Runtime::Mock { responses, .. } = &agent.runtime
                    && let Some(script) = responses.get(task.id.value.as_str())
                {
                    parts[7] = digest_of(7, json!(script).to_string().as_bytes());
                }
            }
        }
        let extras = task.extras();
        if !extras.attachments.is_empty() {
            parts[8] = digest_of(8, &self.attachments(task));
        }
        if let Some(verification) = &extras.verification {
            parts[9] = digest_of(9, self.verification(verification).as_bytes());
        }
        let own = extras.cache.as_ref().map(|c| &c.value);
        let agent = task.agent.as_ref().and_then(|a| plan.agents.get(a.value.as_str()));
        if let Some(version) = own.or_else(|| agent.and_then(|a| a.cache.as_ref())).and_then(|c| c.version.as_deref()) {
            parts[10] = digest_of(10, version.as_bytes());
        }
        Parts(parts)
    }

    /// The attachments as the agent is given them: links, and each file's name, size and the
    /// digest of the part of it a prompt holds (a file that cannot be read is keyed as such, and
    /// the attempt fails on it when it runs).
    fn attachments(&self, task: &Task) -> Vec<u8> {
        let mut text = Vec::new();
        for attachment in &task.extras().attachments {
            match &attachment.value {
                Attachment::Link(url) => text.extend_from_slice(format!("link {url}\n").as_bytes()),
                Attachment::File(name) => {
                    let content = std::fs::File::open(self.workdir.join(name)).and_then(|file| {
                        let size = file.metadata()?.len();
                        let mut bytes = Vec::new();
                        file.take(FILE_CAP).read_to_end(&mut bytes)?;
                        Ok((size, Sha256::digest(&bytes)))
                    });
                    match content {
                        Ok((size, digest)) => {
                            text.extend_from_slice(format!("file {name} {size} ").as_bytes());
                            text.extend_from_slice(&digest);
                            text.push(b'\n');
                        }
                        Err(error) => text.extend_from_slice(format!("file {name} unreadable {error}\n").as_bytes()),
                    }
                }
            }
        }
        text
    }

    /// A verification as it applies: with an llm reviewer's agent definition.
    fn verification(&self, verification: &Verification) -> String {
        let reviewer = match verification {
            Verification::LlmReviewer { agent, .. } => {
                self.plan.agents.get(agent.value.as_str()).map(|a| definition(&self.plan, a))
            }
            _ => None,
        };
        json!({"check": verification, "reviewer": reviewer}).to_string()
    }
}

/// The digest of part `i` with this content.
fn digest_of(i: usize, content: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(PART_NAMES[i].as_bytes());
    hasher.update([0]);
    hasher.update(content);
    hasher.finalize().into()
}

/// An agent's parts, runtime to the rest of its definition (positions 1 to 6).
fn agent_parts(plan: &Plan, agent: &Agent) -> [[u8; 32]; 6] {
    let fields = definition(plan, agent);
    let part =
        |i: usize, name: &str| digest_of(i, fields.get(name).map(|v| v.to_string()).unwrap_or_default().as_bytes());
    [
        part(1, "runtime"),
        part(2, "model"),
        part(3, "sampling"),
        part(4, "system_prompt"),
        part(5, "tools"),
        part(6, "agent"),
    ]
}

/// An agent's definition as it applies, by part: its provider's settings and tools resolved, and
/// with nothing that does not change a result (timeouts, limits, trust) or that names a secret.
fn definition(plan: &Plan, agent: &Agent) -> serde_json::Map<String, serde_json::Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("runtime".into(), json!(agent.runtime.name()));
    match &agent.runtime {
        Runtime::Llm { provider, model, tools, max_turns, tool_choice, generation, .. } => {
            let provider = plan.providers.get(provider.as_ref().map_or("default", |p| p.value.as_str()));
            let model = model.clone().or_else(|| provider.and_then(|p| p.model.clone()));
            fields.insert(
                "model".into(),
                json!({
                    "kind": provider.map(|p| p.kind.as_str()),
                    "base_url": provider.map(|p| p.base_url.as_str()),
                    "schema_dialect": provider.map(|p| p.schema_dialect().as_str()),
                    "model": model,
                }),
            );
            let Generation { max_tokens, temperature, seed } =
                generation.or(provider.map(|p| p.generation).unwrap_or_default());
            fields
                .insert("sampling".into(), json!({"max_tokens": max_tokens, "temperature": temperature, "seed": seed}));
            fields.insert("system_prompt".into(), json!(agent.system_prompt));
            let offered: BTreeMap<&str, Option<&manifest::plan::Tool>> =
                tools.iter().map(|t| (t.value.as_str(), plan.tools.get(t.value.as_str()))).collect();
            fields.insert("tools".into(), json!(offered));
            fields.insert("agent".into(), json!({"max_turns": max_turns, "tool_choice": tool_choice}));
        }
        Runtime::Command { command, max_output_bytes } => {
            fields.insert("agent".into(), json!({"command": command, "max_output_bytes": max_output_bytes}));
        }
        Runtime::Http { url, headers_env, max_output_bytes, .. } => {
            let headers: Vec<&String> = headers_env.keys().collect();
            fields.insert(
                "agent".into(),
                json!({"url": url.value, "headers": headers, "max_output_bytes": max_output_bytes}),
            );
        }
        Runtime::Mock { default, .. } => {
            fields.insert("agent".into(), json!({"default": default}));
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(yaml: &str) -> Plan {
        match manifest::load_str("p.yaml", "p", yaml, &|_| true) {
            manifest::Loaded { plan: Some(plan), diagnostics, .. }
                if diagnostics.iter().all(|d| d.severity != manifest::Severity::Error) =>
            {
                plan
            }
            other => panic!("the test plan does not load: {:?}", other.diagnostics),
        }
    }

    const PLAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: k}\nspec:\n  providers:\n    default: {base_url: 'http://127.0.0.1:1/v1', model: m, api_key_env: KEY_A}\n  agent_definitions:\n    w: {system_prompt: Be brief., temperature: 0, seed: 1}\n  workflow:\n    - {id: a, agent: w, input: x}\n";

    fn key_of(yaml: &str, input: &str) -> (Key, String) {
        let mut keyer = Keyer::new(Arc::new(plan(yaml)), Path::new("."));
        let parts = keyer.parts(0, input);
        (parts.key(), parts.short())
    }

    #[test]
    fn each_part_changes_the_key_and_is_named_as_the_one_that_changed() {
        let (base, base_parts) = key_of(PLAN, "x");
        assert_eq!(key_of(PLAN, "x").0, base, "the same plan and input give the same key");
        let cases = [
            (PLAN.to_owned(), "y", "input"),
            (PLAN.replace("model: m", "model: m2"), "x", "model"),
            (PLAN.replace("127.0.0.1:1", "127.0.0.1:2"), "x", "model"),
            (PLAN.replace("temperature: 0", "temperature: 0.5"), "x", "sampling"),
            (PLAN.replace("seed: 1", "seed: 2"), "x", "sampling"),
            (PLAN.replace("Be brief.", "Be long."), "x", "system_prompt"),
            (PLAN.replace("seed: 1}", "seed: 1, max_turns: 3}"), "x", "agent"),
            (
                PLAN.replace("input: x}", "input: x, verification: {type: command, command: [cat]}}"),
                "x",
                "verification",
            ),
            (PLAN.replace("input: x}", "input: x, cache: {version: 2}}"), "x", "version"),
            (PLAN.replace("input: x}", "input: x, attachments: [{link: 'https://example.com'}]}"), "x", "attachments"),
        ];
        for (yaml, input, part) in cases {
            let (key, parts) = key_of(&yaml, input);
            assert_ne!(key, base, "changing the {part} changes the key");
            assert_eq!(changed(&base_parts, &parts), [part], "only the {part} changed");
        }
    }

    #[test]
    fn what_does_not_change_a_result_leaves_the_key_alone() {
        let (base, _) = key_of(PLAN, "x");
        for yaml in [
            PLAN.replace("KEY_A", "KEY_B"),
            PLAN.replace("seed: 1}", "seed: 1, timeout: 5s, reliability_weight: 0.5}"),
            PLAN.replace("input: x}", "input: x, critical: true, on_failure: {action: retry, max_attempts: 2}}"),
        ] {
            assert_eq!(key_of(&yaml, "x").0, base, "{yaml}");
        }
    }

    #[test]
    fn a_key_prints_and_parses_back() {
        let (key, _) = key_of(PLAN, "x");
        assert_eq!(key.to_string().parse::<Key>(), Ok(key));
        assert!("abc".parse::<Key>().is_err());
        assert!("zz".repeat(32).parse::<Key>().is_err());
    }
}
