//! Checking a candidate manifest: load and validate it as `runner critic` would, hold it to
//! what the template allows (and to naming no sub-plan file), and score it with the critic.

use std::fmt;

use manifest::critic::critique;
use manifest::plan::{Runtime, TaskKind};
use manifest::{Diagnostic, Plan, Problem as LoadProblem};
use serde_json::{Map, Value};

/// A candidate that can run, with its critic score.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Accepted {
    /// The manifest as pretty-printed JSON: the text that was loaded.
    pub manifest: String,
    /// The critic's overall score, 0-10.
    pub score: f64,
    /// How many tasks the plan has.
    pub tasks: usize,
}

/// Why a candidate cannot run, written for the repair prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub(crate) enum Rejected {
    /// The loader read no plan and reported no error.
    #[error("author::unreadable: the answer is not a plan manifest")]
    #[diagnostic(code(author::unreadable))]
    Unreadable,
    /// What the loader or the policy found, one problem per line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    #[diagnostic(code(author::invalid))]
    Problems(Vec<Problem>),
}

/// One thing wrong with a candidate, shown as `code: message (at path); help: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) code: String,
    pub(crate) message: String,
    /// The YAML path of the part concerned; empty for the whole plan.
    pub(crate) path: String,
    pub(crate) help: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if !self.path.is_empty() {
            write!(f, " (at {})", self.path)?;
        }
        if let Some(help) = &self.help {
            write!(f, "; help: {help}")?;
        }
        Ok(())
    }
}

impl Problem {
    /// A problem the policy found, with its path and help.
    fn policy(code: &str, message: String, path: String, help: &str) -> Self {
        Problem { code: code.to_owned(), message, path, help: Some(help.to_owned()) }
    }
}

/// Loads `object` as `candidate-{number}.json` and checks it; the error lists every problem.
pub(crate) fn check(
    object: &Map<String, Value>,
    name: &str,
    number: usize,
    template: Option<&Plan>,
) -> Result<Accepted, Rejected> {
    let manifest = serde_json::to_string_pretty(object).expect("a JSON object with string keys always encodes");
    // The authored plan may attach no files: nothing here may look at the disk, and a model
    // must not point a run at files it has never seen.
    let loaded = manifest::load_str(&format!("candidate-{number}.json"), name, &manifest, &|_| false);
    // A sub-plan is refused before anything else is said of it: the loader's own errors about
    // its fields would ask for the plan file a written plan cannot have.
    let mut problems = loaded.plan.as_ref().map(sub_plans).unwrap_or_default();
    let refused = |d: &Diagnostic| loaded.plan.as_ref().is_some_and(|plan| about_sub_plans(d, plan));
    problems.extend(loaded.errors().filter(|d| !refused(d)).map(|d| Problem {
        code: d.code(),
        message: d.to_string(),
        path: d.loc.path.to_string(),
        help: d.help.clone(),
    }));
    let plan = match (&loaded.plan, problems.is_empty()) {
        (Some(plan), true) => plan,
        (None, true) => return Err(Rejected::Unreadable),
        (_, false) => return Err(Rejected::Problems(problems)),
    };
    policy(plan, template, &mut problems);
    if !problems.is_empty() {
        return Err(Rejected::Problems(problems));
    }
    let critique = critique(plan);
    Ok(Accepted { manifest, score: critique.scores.overall, tasks: plan.tasks.len() })
}

/// The tasks that would run a plan file (`type: plan`, or `plan` or `with` on another type):
/// plan files are written by people, and the author writes one manifest and names no file.
pub(crate) fn sub_plans(plan: &Plan) -> Vec<Problem> {
    plan.tasks
        .iter()
        .filter(|task| {
            let extras = task.extras();
            task.kind == TaskKind::Plan || extras.plan.is_some() || !extras.with.is_empty()
        })
        .map(|task| {
            Problem::policy(
                "author::sub_plan",
                format!(
                    "task `{}` runs a plan file (`type: plan`, `plan`, `with`), and a written plan can name no file",
                    task.id.value
                ),
                task.id.loc.path.to_string(),
                "write the step's tasks into this plan, or make it a `type: expand` task whose agent plans the \
                 step at run time; remove `plan` and `with`",
            )
        })
        .collect()
}

/// Whether the loader's error `d` is about a sub-plan's fields, which [`sub_plans`] refuses
/// whole: `plan` or `with` on a task of another type, a `type: plan` task without `plan`, or
/// its agent.
pub(crate) fn about_sub_plans(d: &Diagnostic, plan: &Plan) -> bool {
    match &d.problem {
        LoadProblem::WrongTaskType { field, .. } => field == "plan" || field == "with",
        LoadProblem::MissingField { field, .. } => field == "plan",
        LoadProblem::InvalidValue { what, .. } if what == "agent" => plan.tasks.iter().any(|task| {
            task.kind == TaskKind::Plan && task.agent.as_ref().is_some_and(|agent| agent.loc.span == d.loc.span)
        }),
        _ => false,
    }
}

/// What an authored plan may define: with a template, only its providers and tools, and
/// command agents that run one of its agents' commands; without one, mock agents only. A
/// model must not be able to point a run at a new endpoint or a new program.
pub(crate) fn policy(plan: &Plan, template: Option<&Plan>, problems: &mut Vec<Problem>) {
    let empty = Plan::default();
    let allowed = template.unwrap_or(&empty);
    for (name, provider) in &plan.providers {
        let same = allowed.providers.get(name).is_some_and(|known| {
            known.base_url == provider.base_url
                && known.api_key_env.as_ref().map(|v| &v.value) == provider.api_key_env.as_ref().map(|v| &v.value)
        });
        if !same {
            problems.push(Problem::policy(
                "author::unknown_provider",
                format!("provider `{name}` is not one of the available providers, or differs from it"),
                format!("spec.providers.{name}"),
                "copy an available provider unchanged, or leave it out",
            ));
        }
    }
    for (name, tool) in &plan.tools {
        if allowed.tools.get(name).is_none_or(|known| known.command != tool.command) {
            problems.push(Problem::policy(
                "author::unknown_tool",
                format!("tool `{name}` is not one of the available tools, or runs a different command"),
                format!("spec.tools.{name}"),
                "copy an available tool unchanged, or leave it out",
            ));
        }
    }
    for (name, agent) in &plan.agents {
        match &agent.runtime {
            Runtime::Command { command, .. } => {
                let known = allowed
                    .agents
                    .values()
                    .any(|a| matches!(&a.runtime, Runtime::Command { command: c, .. } if c == command));
                if !known {
                    problems.push(Problem::policy(
                        "author::unknown_command",
                        format!("agent `{name}` runs a command no available agent runs"),
                        format!("spec.agent_definitions.{name}.command"),
                        "use an available agent, or a mock agent",
                    ));
                }
            }
            Runtime::Llm { .. } if template.is_none() => problems.push(Problem::policy(
                "author::no_provider",
                format!("agent `{name}` is an llm agent but no provider is available"),
                format!("spec.agent_definitions.{name}.runtime"),
                "use `runtime: mock` placeholder agents",
            )),
            // A model may not invent a URL to send task inputs to, nor which secrets go with them:
            // only an available agent's.
            Runtime::Http { .. } => {
                let secrets = |runtime: &Runtime| {
                    let Runtime::Http { url, api_key_env, headers_env, .. } = runtime else { return None };
                    let headers: Vec<(String, String)> =
                        headers_env.iter().map(|(h, v)| (h.clone(), v.value.clone())).collect();
                    Some((url.value.clone(), api_key_env.as_ref().map(|v| v.value.clone()), headers))
                };
                let mine = secrets(&agent.runtime);
                if !allowed.agents.values().any(|a| secrets(&a.runtime) == mine) {
                    problems.push(Problem::policy(
                        "author::unknown_url",
                        format!("agent `{name}` posts to a URL, or with secrets, no available agent does"),
                        format!("spec.agent_definitions.{name}.url"),
                        "use an available agent, or a mock agent",
                    ));
                }
            }
            Runtime::Llm { .. } | Runtime::Mock { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn examples_are_valid_and_score_well() {
        for example in [super::super::prompt::RESEARCH_EXAMPLE, super::super::prompt::SEQUENTIAL_EXAMPLE] {
            let accepted = check(&object(example), "example", 1, None).unwrap();
            assert!(accepted.score >= 8.0, "{} scores {}", example, accepted.score);
        }
    }

    #[test]
    fn dynamic_examples_load_with_their_fields() {
        use super::super::prompt::{EXPAND_EXAMPLE, MAP_EXAMPLE, VARS_EXAMPLE, WHEN_EXAMPLE};
        let upstream = r#"{"id": "triage", "agent": "researcher", "input": "Web page or document?"},
            {"id": "search", "agent": "researcher", "input": "Search; answer {\"results\": [{\"url\": \"...\"}]}"}"#;
        let workflow: Value =
            serde_json::from_str(&format!("[{upstream}, {WHEN_EXAMPLE}, {MAP_EXAMPLE}, {EXPAND_EXAMPLE}]")).unwrap();
        let manifest = serde_json::json!({
            "apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "example"},
            "spec": {
                "mission": "Brief tea buyers.",
                "vars": serde_json::from_str::<Value>(VARS_EXAMPLE).unwrap(),
                "agent_definitions": {
                    "researcher": {"runtime": "mock"}, "editor": {"runtime": "mock"}, "planner": {"runtime": "mock"}
                },
                "workflow": workflow,
            }
        });
        let accepted = check(manifest.as_object().unwrap(), "example", 1, None).unwrap();
        let plan = manifest::load_str("example.json", "example", &accepted.manifest, &|_| false).plan.unwrap();
        let extras = |id: &str| plan.tasks.iter().find(|t| t.id.value.as_str() == id).unwrap().extras();
        assert!(extras("fetch_page").when.is_some());
        assert!(extras("read_source").for_each.as_ref().is_some_and(|f| f.value.expr().is_some()));
        assert_eq!(extras("read_source").max_items.as_ref().map(|max| max.value), Some(10));
        assert!(plan.vars.as_ref().is_some_and(|vars| vars.contains_key("audience")));
        let investigate = plan.tasks.iter().find(|t| t.id.value.as_str() == "investigate").unwrap();
        assert_eq!(investigate.kind, manifest::plan::TaskKind::Expand);
        assert_eq!(extras("investigate").max_tasks.as_ref().map(|max| max.value), Some(6));
    }

    #[test]
    fn invented_command_is_refused() {
        let text = r#"{"apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "x"}, "spec": {
            "agent_definitions": {"shell": {"runtime": "command", "command": ["rm", "-rf", "/"]}},
            "workflow": [{"id": "a", "agent": "shell", "input": "go"}]}}"#;
        let problems = check(&object(text), "x", 1, None).unwrap_err().to_string();
        assert!(problems.contains("author::unknown_command"), "{problems}");
    }

    #[test]
    fn an_http_agent_must_be_the_templates_own() {
        let plan = |url: &str, key: &str| {
            format!(
                r#"{{"apiVersion": "runner/v1", "kind": "Plan", "metadata": {{"name": "x"}}, "spec": {{
                "agent_definitions": {{"svc": {{"runtime": "http", "url": "{url}", "api_key_env": "{key}"}}}},
                "workflow": [{{"id": "a", "agent": "svc", "input": "go"}}]}}}}"#
            )
        };
        let template = manifest::load_str("t.json", "t", &plan("https://ok.example/s", "SVC_KEY"), &|_| false)
            .plan
            .expect("the template loads");
        assert!(check(&object(&plan("https://ok.example/s", "SVC_KEY")), "x", 1, Some(&template)).is_ok());
        for (url, key) in [("https://evil.example/s", "SVC_KEY"), ("https://ok.example/s", "OTHER_SECRET")] {
            let problems = check(&object(&plan(url, key)), "x", 1, Some(&template)).unwrap_err().to_string();
            assert!(problems.contains("author::unknown_url"), "{url} {key}: {problems}");
        }
    }
}
