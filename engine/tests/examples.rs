//! The example plans run for real through the driver, in the `examples/` folder as their
//! working directory, the way `runner apply` runs them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engine::driver::Driver;
use engine::store::{JsonlStore, MemoryStore};
use engine::{Command, Event, Handler, Outcome, RunState, RunStatus, Start};
use tokio_util::sync::CancellationToken;

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

#[tokio::test(flavor = "multi_thread")]
async fn repo_report_measures_every_crate_and_its_log_folds_to_the_same_state() {
    let plan = load("repo-report.yaml");
    let folder = std::env::temp_dir().join(format!("runner-examples-test-{}", std::process::id()));
    let path = folder.join("runs/repo-report/events.jsonl");
    let _ = std::fs::remove_dir_all(&folder);
    let store = JsonlStore::create(&path).expect("a new log");
    let driver = Driver::new("repo-report".into(), store, &[], examples());
    let state = driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("driven");

    let failures: Vec<String> = state.tasks.iter().filter_map(|t| t.error.clone()).collect();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{failures:?}");
    let report = output(&state, "report");
    for krate in ["manifest", "engine", "runner", "benches"] {
        assert!(report.contains(&format!("| {krate} |")), "{krate} is missing from:\n{report}");
    }
    assert!(report.contains("state.rs"), "the largest engine file is named:\n{report}");

    let loaded = JsonlStore::load(&path).expect("the log reads back");
    assert_eq!(loaded.warning, None);
    let events: Vec<Event> = loaded.records.into_iter().map(|r| r.event).collect();
    assert_eq!(RunState::fold(&events), state);
    let _ = std::fs::remove_dir_all(&folder);
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_example_succeeds_after_its_retry() {
    let plan = load("offline.yaml");
    let store = MemoryStore::new();
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
