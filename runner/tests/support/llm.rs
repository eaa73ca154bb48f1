//! Helpers for tests of plans with `llm` agents against a [`testkit::FakeOpenAi`]: plans with a
//! provider pointing at the fake server, the runner spawned with the API key set, and readers
//! for the requests the server recorded.

#![allow(dead_code)]

use serde_json::Value;

use crate::support::Env;

/// The environment variable the test plans name in `api_key_env`.
pub const KEY_VAR: &str = "RUNNER_TEST_LLM_KEY";
/// The API key the runner is spawned with, unless a test sets another.
pub const KEY: &str = "sk-test-default-key";

/// An enveloped plan named `name` with one provider `fake` at `base_url` (model `fake-model`,
/// key from [`KEY_VAR`]), these agents and tasks (YAML fragments indented as in `spec`), and,
/// unless empty, this `control_logic` body (indented by four spaces).
pub fn llm_plan(name: &str, base_url: &str, agents: &str, workflow: &str, control: &str) -> String {
    let mut text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: {name}}}\nspec:\n  mission: test the llm runtime\n  \
         providers:\n    fake: {{kind: openai, base_url: \"{base_url}\", api_key_env: {KEY_VAR}, model: fake-model}}\n  \
         agent_definitions:\n{agents}\n  workflow:\n{workflow}\n"
    );
    if !control.trim().is_empty() {
        text.push_str("  control_logic:\n");
        text.push_str(control);
        text.push('\n');
    }
    text
}

/// An agent line for [`llm_plan`]: an `llm` agent on provider `fake` whose system prompt is
/// `ROLE <name>`, so a responder can tell agents apart with [`role`].
pub fn llm_agent(name: &str) -> String {
    format!("    {name}: {{runtime: llm, provider: fake, system_prompt: \"ROLE {name}\", max_turns: 3}}")
}

/// What one command printed and how it ended.
#[derive(Debug, Clone)]
pub struct Out {
    /// The args it ran with.
    pub args: Vec<String>,
    /// The exit code.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Stdout and stderr together, for messages and searches.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`runner {}` exited {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `runner ARGS` on a pseudo-terminal (util-linux `script`) with this test's
/// `RUNNER_HOME` and these environment variables, typing `input`.
pub fn on_terminal(env: &Env, args: &[&str], vars: &[(&str, &str)], input: &str) -> Out {
    use std::io::Write as _;
    // `script` takes one command line; the arguments are fixed test strings, quoted.
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))).collect();
    let line = format!("'{}' {}", assert_cmd::cargo::cargo_bin("runner").display(), quoted.join(" "));
    let mut child = std::process::Command::new("script")
        .current_dir(env.dir())
        .env("RUNNER_HOME", env.home())
        .env("NO_COLOR", "1")
        .envs(vars.iter().copied())
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("typed");
    let output = child.wait_with_output().expect("script ends");
    Out {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `runner ARGS` with this test's `RUNNER_HOME` and the API key variable set to `key`.
pub fn runner_with_key(env: &Env, key: &str, args: &[&str]) -> Out {
    let output = env.runner().env(KEY_VAR, key).args(args).output().expect("runner runs");
    Out {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `runner ARGS` with the default [`KEY`].
pub fn runner(env: &Env, args: &[&str]) -> Out {
    runner_with_key(env, KEY, args)
}

/// The system prompt of a request, or "".
pub fn role(body: &Value) -> String {
    message(body, "system")
}

/// The first user message of a request, or "".
pub fn user(body: &Value) -> String {
    message(body, "user")
}

fn message(body: &Value, role: &str) -> String {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().find(|m| m["role"] == role))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Whether a request's system prompt names agent `name` (as [`llm_agent`] writes it).
pub fn is_agent(body: &Value, name: &str) -> bool {
    role(body).trim() == format!("ROLE {name}")
}

/// The names of the tools a request offers.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The records of one event type in a run's log.
pub fn events_of(env: &Env, run: &str, kind: &str) -> Vec<Value> {
    env.records(run).into_iter().filter(|r| r["type"] == kind).collect()
}

/// Every file under `root`, recursively.
pub fn files_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}
