//! `runner test`: runs plan tests (`*.test.yaml`) in virtual time, in parallel, and reports a
//! line per scenario and a summary. Exit 0 when all pass, 1 when any fails, 2 when a scenario
//! file is invalid.

mod cached;
mod children;
mod execute;
mod expect;
mod report;
mod scenario;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};

pub use execute::{Ran, run as run_scenario};
pub use expect::{Failure, check};
pub use scenario::{Invalid, Planning, Scenario, prepare};

use crate::exit::EXIT_USAGE;
use crate::plan::{ModelOrder, PlanArgs};

/// The arguments of `runner test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Scenario files or folders to search for `*.test.yaml` (default: the current folder).
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TestFormat::Human)]
    format: TestFormat,
    /// Run only the scenarios whose name contains this.
    #[arg(long, value_name = "NAME")]
    filter: Option<String>,
    /// Keep each scenario's run under RUNNER_HOME (`runner logs` reads it); by default nothing is written.
    #[arg(long)]
    keep: bool,
    /// Plan `request:` scenarios with a model instead of the deterministic planner: the base
    /// URL of an OpenAI-compatible server.
    #[arg(long, value_name = "URL")]
    provider: Option<String>,
    /// The model that plans, as `runner plan --model`; repeatable (tried in order).
    #[arg(long = "model", value_name = "MODEL", requires = "provider")]
    models: Vec<String>,
    /// The environment variable that holds the provider's API key.
    #[arg(long, value_name = "VARIABLE", requires = "provider")]
    api_key_env: Option<String>,
}

impl TestArgs {
    /// How `request:` scenarios are planned: `runner plan`'s defaults, with the models in the
    /// order given (a test should not depend on the models' records).
    fn planning(&self) -> anyhow::Result<Planning> {
        let Some(provider) = &self.provider else { return Ok(Planning { model: None, keep: self.keep }) };
        if !provider.starts_with("http://") && !provider.starts_with("https://") {
            anyhow::bail!(
                "--provider takes the base URL of an OpenAI-compatible server, such as http://127.0.0.1:8080/v1"
            );
        }
        if self.models.is_empty() {
            anyhow::bail!("name the model that plans with --model");
        }
        let model = PlanArgs {
            text: None,
            output: None,
            name: None,
            template: None,
            agent_map: Vec::new(),
            provider: Some(provider.clone()),
            models: self.models.clone(),
            api_key_env: self.api_key_env.clone(),
            candidates: 1,
            stream: false,
            lines: false,
            schema_dialect: None,
            temperature: crate::plan::DEFAULT_TEMPERATURE,
            timeout: None,
            context_window: None,
            model_order: ModelOrder::Given,
            apply: false,
            yes: false,
            show: None,
        };
        Ok(Planning { model: Some(model), keep: self.keep })
    }
}

/// How `runner test` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// A line per scenario, failures explained, and a summary.
    Human,
    /// One JSON document.
    Json,
    /// JUnit XML, a testcase per scenario, for CI systems.
    Junit,
}

/// What came of one scenario file.
pub enum Verdict {
    /// It ran: its name, its failed expectations, its makespan, and its kept run id.
    Ran {
        /// The scenario.
        name: String,
        /// The file.
        path: PathBuf,
        /// Expectations not met; none when it passed.
        failures: Vec<Failure>,
        /// Virtual time taken.
        makespan: std::time::Duration,
        /// The run kept under RUNNER_HOME, with `--keep`.
        kept: Option<String>,
    },
    /// It could not run.
    Invalid(Invalid),
    /// Running it failed (the engine refused the run).
    Error {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Runs the scenarios under the given paths; returns the exit code.
pub fn run(args: &TestArgs) -> anyhow::Result<u8> {
    let planning = match args.planning() {
        Ok(planning) => planning,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(EXIT_USAGE);
        }
    };
    let roots = if args.paths.is_empty() { vec![PathBuf::from(".")] } else { args.paths.clone() };
    let mut files = Vec::new();
    for root in &roots {
        if !root.exists() {
            eprintln!("error: {} does not exist", root.display());
            return Ok(EXIT_USAGE);
        }
        find(root, &mut files);
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        eprintln!("warning: no *.test.yaml under {}", roots.join(", "));
    }
    let color = args.format == TestFormat::Human && crate::diagnostics::color_stdout();
    let verdicts = run_all(&files, args.filter.as_deref(), &planning, color);
    let text = match args.format {
        TestFormat::Human => report::human(&verdicts),
        TestFormat::Json => report::json(&verdicts)?,
        TestFormat::Junit => report::junit(&verdicts),
    };
    crate::diagnostics::print(&text)?;
    Ok(exit_code(&verdicts))
}

/// 2 when a scenario file is invalid, else 1 when a scenario failed, else 0.
fn exit_code(verdicts: &[Verdict]) -> u8 {
    let invalid = verdicts.iter().any(|v| matches!(v, Verdict::Invalid(_)));
    let failed = verdicts.iter().any(|v| match v {
        Verdict::Ran { failures, .. } => !failures.is_empty(),
        Verdict::Error { .. } => true,
        Verdict::Invalid(_) => false,
    });
    if invalid { EXIT_USAGE } else { u8::from(failed) }
}

/// Every `*.test.yaml` under `root` (or `root` itself when it is a file).
fn find(root: &Path, files: &mut Vec<PathBuf>) {
    if root.is_file() {
        files.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() && !name.starts_with('.') && name != "target" {
            find(&path, files);
        } else if name.ends_with(".test.yaml") || name.ends_with(".test.yml") {
            files.push(path);
        }
    }
}

/// Prepares and runs every scenario, on as many threads as there are cores; verdicts come back
/// in file order.
fn run_all(files: &[PathBuf], filter: Option<&str>, planning: &Planning, color: bool) -> Vec<Verdict> {
    let workers = std::thread::available_parallelism().map_or(2, usize::from).min(files.len().max(1));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (next, results) = (Arc::clone(&next), &results);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(path) = files.get(i) else { break };
                    if let Some(verdict) = guarded(path, || one(path, filter, planning, color)) {
                        results.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((i, verdict));
                    }
                }
            });
        }
    });
    let mut verdicts = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    verdicts.sort_by_key(|(i, _)| *i);
    verdicts.into_iter().map(|(_, v)| v).collect()
}

/// The verdict `run` gives on the scenario at `path`, with a panic reported as that scenario's
/// error, so the others still run and the report is complete.
fn guarded(path: &Path, run: impl FnOnce() -> Option<Verdict>) -> Option<Verdict> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let why = engine::panic_message(panic.as_ref());
        Some(Verdict::Error { path: path.to_path_buf(), message: format!("runner panicked while running it: {why}") })
    })
}

/// The verdict on one scenario file; `None` when the filter leaves it out.
fn one(path: &Path, filter: Option<&str>, planning: &Planning, color: bool) -> Option<Verdict> {
    let scenario = match prepare(path, color, planning, filter) {
        Ok(scenario) => scenario?,
        Err(invalid) => return Some(Verdict::Invalid(invalid)),
    };
    let error = |error: anyhow::Error| Verdict::Error { path: path.to_path_buf(), message: format!("{error:#}") };
    let ran = match run_scenario(&scenario) {
        Ok(ran) => ran,
        Err(e) => return Some(error(e)),
    };
    let kept = match planning.keep.then(|| keep_run(&scenario, &ran)).transpose() {
        Ok(kept) => kept,
        Err(e) => return Some(error(e)),
    };
    let failures = check(&scenario, &ran);
    Some(Verdict::Ran {
        name: scenario.test.name.clone(),
        path: path.to_path_buf(),
        failures,
        makespan: ran.makespan,
        kept,
    })
}

/// Writes a scenario's records as a run under RUNNER_HOME, and its child runs as runs named
/// after it (`ID.TASK`, as a run's children are); returns its id.
fn keep_run(scenario: &Scenario, ran: &Ran) -> anyhow::Result<String> {
    let name = format!("test-{}", scenario.test.name);
    // Run ids end in four random hex digits; many scenarios kept in one second may draw the
    // same one, so a taken id is drawn again.
    let mut id = crate::home::new_run_id(&name);
    for _ in 0..16 {
        if !crate::home::runs_dir().join(&id).exists() {
            break;
        }
        id = crate::home::new_run_id(&name);
    }
    write_run(&id, ran.records.clone(), |_| None)?;
    // A child's id, and the ids its `RunCreated` names, begin with the scenario's run id.
    let renamed = |child: &str| child.strip_prefix(&scenario.test.name).map(|rest| format!("{id}{rest}"));
    for (child, records) in ran.children.all() {
        let Some(child) = renamed(&child) else { continue };
        write_run(&child, records, renamed)?;
    }
    Ok(id)
}

/// Writes `records` as run `id` under RUNNER_HOME, with the runs its `RunCreated` names
/// (parent and retried run) renamed by `renamed`.
fn write_run(id: &str, records: Vec<engine::Record>, renamed: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
    let (_run, _lock, store) = crate::home::RunDir::create(id)?;
    let run_id: Arc<str> = id.into();
    let records = records
        .into_iter()
        .map(|mut record| {
            if let engine::Event::RunCreated(created) = &mut record.event {
                if let Some(parent) = &mut created.parent {
                    parent.run = renamed(&parent.run).unwrap_or_else(|| parent.run.clone());
                }
                if let Some(retried) = &mut created.retry_of {
                    *retried = renamed(retried).unwrap_or_else(|| retried.clone());
                }
            }
            engine::Record { run_id: Arc::clone(&run_id), ..record }
        })
        .collect();
    crate::home::append(&store, records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_that_panics_is_reported_as_its_error() {
        let verdict = guarded(Path::new("boom.test.yaml"), || panic!("the scenario broke"));
        let Some(Verdict::Error { path, message }) = verdict else { panic!("not an error verdict") };
        assert_eq!(path, Path::new("boom.test.yaml"));
        assert_eq!(message, "runner panicked while running it: the scenario broke");
        let formatted = guarded(Path::new("b.test.yaml"), || panic!("task {} broke", 7));
        assert!(matches!(formatted, Some(Verdict::Error { message, .. }) if message.ends_with("task 7 broke")));
    }
}
