//! A task's JSON: every field at the level of the task, in the order of the manifest's
//! fields, a field at its default left out. The extras a task keeps behind a box are written
//! and read as if they were its own fields, so the JSON is the same whether they are boxed.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{At, Attachment, Extras, FailurePolicy, Task, TaskKind, Verification};
use crate::duration::Duration;
use crate::text::Text;

/// A task as it is written: borrowed from the task and its extras.
#[derive(Serialize)]
#[serde(rename = "Task")]
struct Written<'a> {
    id: &'a At<Text>,
    #[serde(skip_serializing_if = "is_default")]
    kind: TaskKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a At<Text>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a At<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a At<String>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    depends_on: &'a [At<Text>],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    inputs: &'a [At<Text>],
    #[serde(skip_serializing_if = "Option::is_none")]
    chained_after: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_group: Option<&'a At<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verification: Option<&'a Verification>,
    #[serde(skip_serializing_if = "is_default_policy")]
    on_failure: &'a At<FailurePolicy>,
    #[serde(skip_serializing_if = "is_default")]
    critical: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<Duration>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [At<Attachment>],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
}

/// A task as it is read: every field but the id may be left out.
#[derive(Deserialize)]
#[serde(rename = "Task")]
struct Read {
    id: At<Text>,
    #[serde(default)]
    kind: TaskKind,
    #[serde(default)]
    agent: Option<At<Text>>,
    #[serde(default)]
    input: Option<At<String>>,
    #[serde(default)]
    prompt: Option<At<String>>,
    #[serde(default)]
    depends_on: Vec<At<Text>>,
    #[serde(default)]
    inputs: Vec<At<Text>>,
    #[serde(default)]
    chained_after: Option<String>,
    #[serde(default)]
    parallel_group: Option<At<String>>,
    #[serde(default)]
    verification: Option<Verification>,
    #[serde(default)]
    on_failure: At<FailurePolicy>,
    #[serde(default)]
    critical: bool,
    #[serde(default)]
    timeout: Option<Duration>,
    #[serde(default)]
    attachments: Vec<At<Attachment>>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
}

impl Serialize for Task {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let extras = self.extras();
        Written {
            id: &self.id,
            kind: self.kind,
            agent: self.agent.as_ref(),
            input: self.input.as_ref(),
            prompt: extras.prompt.as_ref(),
            depends_on: &self.depends_on,
            inputs: &extras.inputs,
            chained_after: self.chained_after.as_deref(),
            parallel_group: extras.parallel_group.as_ref(),
            verification: extras.verification.as_ref(),
            on_failure: &self.on_failure,
            critical: self.critical,
            timeout: extras.timeout,
            attachments: &extras.attachments,
            max_output_tokens: extras.max_output_tokens,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Task {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = Read::deserialize(deserializer)?;
        let extras = Extras {
            prompt: read.prompt,
            inputs: read.inputs,
            parallel_group: read.parallel_group,
            verification: read.verification,
            timeout: read.timeout,
            attachments: read.attachments,
            max_output_tokens: read.max_output_tokens,
        };
        let mut task = Task {
            id: read.id,
            kind: read.kind,
            agent: read.agent,
            input: read.input,
            depends_on: read.depends_on,
            on_failure: read.on_failure,
            critical: read.critical,
            chained_after: read.chained_after.map(String::into_boxed_str),
            ..Task::default()
        };
        task.set_extras(extras);
        Ok(task)
    }
}

/// Whether a field holds its type's default, so the JSON leaves it out.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Whether a task's failure policy is the default one (its location aside).
fn is_default_policy(policy: &&At<FailurePolicy>) -> bool {
    policy.value == FailurePolicy::default()
}
