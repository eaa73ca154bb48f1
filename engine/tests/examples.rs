//! The example plans run for real through the driver, in the `examples/` folder as their
//! working directory, the way `runner apply` runs them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engine::driver::Driver;
use engine::store::JsonlStore;
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus, Start};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn load(name: &str) -> Arc<manifest::Plan> {
    let loaded = manifest::load_file(&examples().join(name));
    let errors: Vec<String> = loaded.errors().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

fn output<'a>(state: &'a RunState, task: &str) -> &'a str {
    let i = state.index_of(task).expect("the task exists");
    state.tasks[i].output.as_deref().unwrap_or_default()
}

/// The crate's Rust file with the most lines (the first by path among equals), under the
/// folders `crate_stats.py` measures, relative to `krate`.
fn largest_file(krate: &Path) -> String {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for folder in ["src", "tests", "benches", "examples"] {
        walk(&krate.join(folder), &mut files);
    }
    let lines = |path: &PathBuf| std::fs::read_to_string(path).map_or(0, |text| text.lines().count());
    let mut ranked: Vec<(usize, String)> = files
        .iter()
        .map(|path| (lines(path), path.strip_prefix(krate).unwrap_or(path).display().to_string()))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    ranked.into_iter().next().map(|(_, path)| path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn repo_report_measures_every_crate_and_its_log_folds_to_the_same_state() {
    let plan = load("repo-report.yaml");
    let folder = std::env::temp_dir().join(format!("runner-examples-test-{}", std::process::id()));
    let path = folder.join("runs/repo-report/events.jsonl");
    let _ = std::fs::remove_dir_all(&folder);
    let store = JsonlStore::create(&path).expect("a new log");
    let driver = Driver::new("repo-report".into(), store, &[], examples());
    let state = driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("driven");

    let failures: Vec<String> = state.tasks.iter().filter_map(|t| t.error().map(str::to_owned)).collect();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{failures:?}");
    let report = output(&state, "report");
    for krate in ["manifest", "engine", "runner", "benches"] {
        assert!(report.contains(&format!("| {krate} |")), "{krate} is missing from:\n{report}");
    }
    let largest = largest_file(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(report.contains(&format!("{largest} (")), "the largest engine file, {largest}, is named:\n{report}");

    let loaded = JsonlStore::load(&path).expect("the log reads back");
    assert_eq!(loaded.warning, None);
    let events: Vec<Event> = loaded.records.into_iter().map(|r| r.event).collect();
    assert_eq!(RunState::fold(&events), state);
    let _ = std::fs::remove_dir_all(&folder);
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_example_succeeds_after_its_retry() {
    let plan = load("offline.yaml");
    let store = TestStore::new("offline");
    let driver = Driver::new("offline".into(), store.clone(), &[], examples());
    let state = driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("driven");

    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert!(output(&state, "report").starts_with("Text statistics for: Report the size"));
    assert!(output(&state, "vocabulary").lines().any(|word| word == "gate"));
    let retried = store
        .records()
        .iter()
        .any(|r| matches!(&r.event, Event::RetryScheduled { task, .. } if task == "fetch_glossary"));
    assert!(retried, "fetch_glossary fails once and is retried");
}
