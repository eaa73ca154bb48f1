//! A fresh `RUNNER_HOME` and plan folder per test, and helpers to read what runs left behind.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// A temporary folder holding the test's plans (and what their commands write) and, under
/// `home/`, its `RUNNER_HOME`.
pub struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env { dir: tempfile::tempdir().expect("a temporary folder") }
    }

    /// The folder plans are written into.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `RUNNER_HOME` for this test.
    pub fn home(&self) -> PathBuf {
        self.dir().join("home")
    }

    /// Writes a file into the test folder and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir().join(name);
        std::fs::write(&path, text).expect("the file is written");
        path
    }

    /// `runner` with this test's `RUNNER_HOME`, run in the test folder.
    pub fn runner(&self) -> Command {
        let mut command = Command::cargo_bin("runner").expect("the runner binary is built");
        command.current_dir(self.dir()).env("RUNNER_HOME", self.home()).env("NO_COLOR", "1");
        command
    }

    /// The same as a plain `std::process::Command`, for runs the test kills.
    pub fn runner_process(&self) -> std::process::Command {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("runner"));
        command.current_dir(self.dir()).env("RUNNER_HOME", self.home()).env("NO_COLOR", "1");
        command
    }

    /// `runner apply PLAN --yes --run-id RUN` started in the background with no terminal and
    /// its output dropped, for tests that kill it.
    pub fn spawn_apply(&self, plan: &str, run: &str) -> std::process::Child {
        self.runner_process()
            .args(["apply", plan, "--yes", "--run-id", run])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("runner starts")
    }

    /// The log of a run.
    pub fn log(&self, run: &str) -> PathBuf {
        self.home().join("runs").join(run).join("events.jsonl")
    }

    /// The complete records of a run's log, straight from the file.
    pub fn records(&self, run: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.log(run)).unwrap_or_default();
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    /// The tasks with a `TaskSucceeded` in a run's log.
    pub fn succeeded(&self, run: &str) -> std::collections::BTreeSet<String> {
        self.records(run)
            .iter()
            .filter(|r| r["type"] == "TaskSucceeded")
            .map(|r| r["task"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// How many times each line was written to `side.txt` in the plan folder, where the test
    /// scripts record each run of a task.
    pub fn side_effects(&self) -> std::collections::BTreeMap<String, usize> {
        let text = std::fs::read_to_string(self.dir().join("side.txt")).unwrap_or_default();
        let mut counts = std::collections::BTreeMap::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            *counts.entry(line.to_owned()).or_insert(0) += 1;
        }
        counts
    }

    /// The event types of a run's log, in order.
    pub fn types(&self, run: &str) -> Vec<String> {
        self.records(run).iter().map(|r| r["type"].as_str().unwrap_or_default().to_owned()).collect()
    }

    /// `runner status RUN --format json`.
    pub fn status(&self, run: &str) -> Value {
        let output = self.runner().args(["status", run, "--format", "json"]).output().expect("runner runs");
        assert!(output.status.success(), "status failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("status prints JSON")
    }
}

/// A slow task for command agents: reads its input, sleeps 0.3 s, appends the input to
/// `side.txt` next to itself (synced, so [`Env::side_effects`] counts every run), prints it.
pub const SLOW_SCRIPT: &str = r#"
import os, sys, time
text = sys.stdin.read().strip()
time.sleep(0.3)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "side.txt"), "a") as side:
    side.write(text + "\n")
    side.flush()
    os.fsync(side.fileno())
print(text)
"#;

/// An enveloped plan named `name` with these agents and tasks (YAML fragments, indented as in
/// `spec`).
pub fn plan(name: &str, agents: &str, workflow: &str) -> String {
    format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: {name}}}\nspec:\n  mission: test the runner\n  agent_definitions:\n{agents}\n  workflow:\n{workflow}\n"
    )
}

/// A plan named `chain` of `n` tasks in a chain on the mock agent `w` (whose definition ends with
/// `agent`, such as `, cache: true`), each echoing its input and the one before's output.
pub fn mock_chain(n: usize, agent: &str) -> String {
    let mut text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: chain}}\nspec:\n  agent_definitions:\n    w: {{runtime: mock{agent}}}\n  workflow:\n"
    );
    for i in 0..n {
        let after = if i == 0 { String::new() } else { format!(", depends_on: [t{}]", i - 1) };
        let read = if i == 0 { String::new() } else { format!(" {{{{ tasks.t{}.output }}}}", i - 1) };
        text.push_str(&format!("    - {{id: t{i}, agent: w, input: \"step {i}{read}\"{after}}}\n"));
    }
    text
}

/// A plan that pauses for a person: `draft`, the review `approve`, then `publish`, on a mock
/// agent with a 10 ms latency.
pub fn review_plan() -> String {
    plan(
        "review",
        "    echo: {runtime: mock, latency: 10ms}",
        r#"    - {id: draft, agent: echo, input: "the draft"}
    - {id: approve, type: human_review, depends_on: [draft], prompt: "Publish {{ tasks.draft.output }}?"}
    - {id: publish, agent: echo, input: "published {{ tasks.draft.output }}", depends_on: [approve]}"#,
    )
}
