//! Generated plans for the benchmarks: [`layered_plan`] writes a large, valid, enveloped
//! manifest in YAML or JSON ([`Format`]), deterministically, so runs are comparable. The benches
//! of whole commands find the binary with [`runner`] and start a server with [`Server`].

use std::fmt::Write;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The runner binary the benches of whole commands run: `RUNNER_BIN`, else the workspace's
/// release build.
///
/// # Panics
/// When there is no binary there: the bench cannot run.
pub fn runner() -> PathBuf {
    let path = std::env::var_os("RUNNER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/runner"));
    assert!(path.is_file(), "no runner binary at {}: run `cargo build --release -p runner` first", path.display());
    path
}

/// A `runner serve --store URL` on a free loopback port, asked over HTTP; stopped on drop.
pub struct Server {
    child: Child,
    address: String,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Server {
    /// Starts one on the database at `url`.
    ///
    /// # Panics
    /// When the server does not start or prints no address: the bench cannot run.
    pub fn start(url: &str) -> Server {
        let mut child = Command::new(runner())
            .args(["serve", "--addr", "127.0.0.1:0", "--store", url])
            .env_remove("RUNNER_SERVE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("runner serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout is piped")).read_line(&mut line).expect("it prints its URL");
        let address = line.split_whitespace().find(|w| w.starts_with("http://")).expect("a URL").trim_end_matches('/');
        let address = address.split('/').take(3).collect::<Vec<_>>().join("/");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        Server { child, address, runtime, client: reqwest::Client::new() }
    }

    /// `GET path` (e.g. `/api/runs`), whole; the length of the body.
    ///
    /// # Panics
    /// When the server does not answer with a success.
    pub fn get(&self, path: &str) -> usize {
        self.runtime.block_on(async {
            let reply = self.client.get(format!("{}{path}", self.address)).send().await.expect("the server answers");
            assert!(reply.status().is_success(), "{path}: {}", reply.status());
            reply.bytes().await.expect("the body").len()
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text format of a generated plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Block YAML, as people write it.
    Yaml,
    /// Pretty-printed JSON, as tools write it.
    Json,
}

/// Tasks per layer; each task depends only on tasks of the layer before it.
pub const LAYER: usize = 100;

/// A small xorshift64 generator: deterministic, so every run benchmarks the same inputs.
pub struct XorShift(pub u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// One generated task, before it is written out.
struct Task {
    id: String,
    agent: &'static str,
    input: String,
    depends_on: Vec<String>,
    parallel_group: Option<String>,
    on_failure: Option<OnFailure>,
}

enum OnFailure {
    Skip,
    Retry,
}

fn generate(count: usize) -> Vec<Task> {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let id = |i: usize| format!("l{}_t{}", i / LAYER, i % LAYER);
    (0..count)
        .map(|i| {
            let layer = i / LAYER;
            let mut depends_on = Vec::new();
            if layer > 0 {
                let previous = (layer - 1) * LAYER;
                let wanted = 2 + rng.below(2);
                while depends_on.len() < wanted {
                    let parent = id(previous + rng.below(LAYER));
                    if !depends_on.contains(&parent) {
                        depends_on.push(parent);
                    }
                }
            }
            let input = match depends_on.first() {
                Some(parent) if i % 10 != 9 => format!("Refine the findings of {{{{ tasks.{parent}.output }}}}"),
                _ => format!("Research question {i}"),
            };
            let on_failure = match i % 6 {
                0 => Some(OnFailure::Retry),
                3 => Some(OnFailure::Skip),
                _ => None,
            };
            Task {
                id: id(i),
                agent: if i % 2 == 0 { "researcher" } else { "writer" },
                input,
                depends_on,
                parallel_group: (i % 5 == 0).then(|| format!("group{}", layer % 4)),
                on_failure,
            }
        })
        .collect()
}

/// An enveloped plan (`apiVersion: runner/v1`, `kind: Plan`) with two mock agents and
/// `tasks` tasks in layers of [`LAYER`]: each task after the first layer depends on 2 or 3
/// tasks of the layer before, and most read one parent's output through a template; some
/// are in a parallel group and some have an `on_failure` policy.
pub fn layered_plan(tasks: usize, format: Format) -> String {
    let mut out = String::with_capacity(tasks * 260);
    let tasks = generate(tasks);
    // Writing into a String cannot fail, so the results of `write!` are ignored.
    match format {
        Format::Yaml => {
            out.push_str("apiVersion: runner/v1\nkind: Plan\nmetadata:\n  name: layered\nspec:\n");
            out.push_str("  agent_definitions:\n");
            for agent in ["researcher", "writer"] {
                let _ = write!(out, "    {agent}:\n      runtime: mock\n      latency: 1ms\n");
            }
            out.push_str("  workflow:\n");
            for task in &tasks {
                let _ = write!(
                    out,
                    "    - id: {}\n      agent: {}\n      input: \"{}\"\n",
                    task.id, task.agent, task.input
                );
                if !task.depends_on.is_empty() {
                    let _ = writeln!(out, "      depends_on: [{}]", task.depends_on.join(", "));
                }
                if let Some(group) = &task.parallel_group {
                    let _ = writeln!(out, "      parallel_group: {group}");
                }
                match task.on_failure {
                    Some(OnFailure::Retry) => out.push_str(
                        "      on_failure:\n        action: retry\n        max_attempts: 3\n        backoff: 1s\n",
                    ),
                    Some(OnFailure::Skip) => out.push_str("      on_failure:\n        action: skip\n"),
                    None => {}
                }
            }
        }
        Format::Json => {
            out.push_str("{\n  \"apiVersion\": \"runner/v1\",\n  \"kind\": \"Plan\",\n");
            out.push_str("  \"metadata\": {\n    \"name\": \"layered\"\n  },\n  \"spec\": {\n");
            out.push_str("    \"agent_definitions\": {\n");
            for (i, agent) in ["researcher", "writer"].iter().enumerate() {
                let comma = if i == 0 { "," } else { "" };
                let _ = writeln!(out, "      \"{agent}\": {{\"runtime\": \"mock\", \"latency\": \"1ms\"}}{comma}");
            }
            out.push_str("    },\n    \"workflow\": [\n");
            for (i, task) in tasks.iter().enumerate() {
                let _ = write!(
                    out,
                    "      {{\n        \"id\": \"{}\",\n        \"agent\": \"{}\",\n        \"input\": \"{}\"",
                    task.id, task.agent, task.input
                );
                if !task.depends_on.is_empty() {
                    let quoted: Vec<String> = task.depends_on.iter().map(|d| format!("\"{d}\"")).collect();
                    let _ = write!(out, ",\n        \"depends_on\": [{}]", quoted.join(", "));
                }
                if let Some(group) = &task.parallel_group {
                    let _ = write!(out, ",\n        \"parallel_group\": \"{group}\"");
                }
                match task.on_failure {
                    Some(OnFailure::Retry) => out.push_str(
                        ",\n        \"on_failure\": {\"action\": \"retry\", \"max_attempts\": 3, \"backoff\": \"1s\"}",
                    ),
                    Some(OnFailure::Skip) => out.push_str(",\n        \"on_failure\": {\"action\": \"skip\"}"),
                    None => {}
                }
                out.push_str(if i + 1 == tasks.len() { "\n      }\n" } else { "\n      },\n" });
            }
            out.push_str("    ]\n  }\n}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(format: Format, tasks: usize) -> manifest::Loaded {
        let text = layered_plan(tasks, format);
        manifest::load_str("layered", "layered", &text, &|_| true)
    }

    #[test]
    fn generated_plans_validate_cleanly_in_both_formats() {
        for format in [Format::Yaml, Format::Json] {
            let loaded = load(format, 1_000);
            assert!(loaded.is_valid(), "{format:?}: {:#?}", loaded.errors().take(5).collect::<Vec<_>>());
            let (plan, graph) = loaded.valid().expect("valid");
            assert_eq!(plan.tasks.len(), 1_000);
            assert_eq!(graph.phases().len(), 10);
            assert_eq!(graph.critical_path().len(), 10);
        }
    }

    #[test]
    fn json_and_yaml_plans_are_equal() {
        let yaml = load(Format::Yaml, 1_000).plan.expect("a YAML plan");
        let json = load(Format::Json, 1_000).plan.expect("a JSON plan");
        // Spans differ between the two texts; everything else must not.
        let strip = |plan: &manifest::Plan| {
            let text = format!("{plan:?}");
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find("Span {") {
                out.push_str(&rest[..at]);
                rest = rest[at..].split_once('}').map_or("", |(_, tail)| tail);
            }
            out.push_str(rest);
            out
        };
        assert_eq!(strip(&yaml), strip(&json));
        assert_eq!(yaml.tasks.len(), json.tasks.len());
    }

    #[test]
    fn generation_is_deterministic_and_layered() {
        assert_eq!(layered_plan(300, Format::Yaml), layered_plan(300, Format::Yaml));
        let tasks = generate(300);
        assert!(tasks[..LAYER].iter().all(|t| t.depends_on.is_empty()));
        assert!(tasks[LAYER..].iter().all(|t| (2..=3).contains(&t.depends_on.len())));
        assert!(tasks[LAYER..].iter().filter(|t| t.input.contains("{{ tasks.")).count() >= 180);
    }
}
