//! The processes of command agents: a timeout, a cancel or a halt kills the agent's whole
//! process group (not only the program runner started), every program carries its attempt's
//! mark, the marked survivors of a dead runner are found and ended, and a program whose folder
//! is gone says so.
//!
//! Real processes; every wait is bounded and none is asserted as a duration.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::driver::Driver;
use engine::{Command, Event, Outcome, RunState, RunStatus, Start};
use testkit::process::gone;
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

/// Starts a grandchild that writes its pid to `grandchild.pid` and would write `late` to
/// `late.txt` much later; the agent itself waits for it, as `(sleep 4; echo late >> f)` does.
const AGENT: &str =
    "sh -c 'echo $$ > grandchild.tmp; mv grandchild.tmp grandchild.pid; sleep 30; echo late >> late.txt'
echo ok
";

/// A bound on waits for processes: liveness, not speed.
const PATIENCE: Duration = Duration::from_secs(20);

/// A one-task plan whose task `t` runs `agent` (`slow`, the script above, or `env`, which prints
/// its mark).
fn plan(agent: &str, task_extra: &str) -> Arc<manifest::Plan> {
    let yaml = format!(
        r#"
apiVersion: runner/v1
kind: Plan
metadata: {{name: processes}}
spec:
  mission: test
  agent_definitions:
    slow: {{runtime: command, command: [sh, agent.sh]}}
    env: {{runtime: command, command: [printenv, RUNNER_ATTEMPT]}}
  workflow:
    - {{id: t, agent: {agent}, input: x{task_extra}}}
"#
    );
    let loaded = manifest::load_str("test.yaml", "test", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp folder");
    std::fs::write(dir.path().join("agent.sh"), AGENT).expect("the agent script is written");
    dir
}

/// Waits until `pid` is gone; false if it is still there after [`PATIENCE`].
fn ends(pid: i32) -> bool {
    testkit::process::ends_within(pid, PATIENCE)
}

/// The pid in `name` once the file exists.
async fn pid_in(dir: &Path, name: &str) -> i32 {
    let path = dir.join(name);
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            return text.trim().parse().expect("the pid file holds a pid");
        }
        assert!(started.elapsed() < PATIENCE, "{} was not written", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn driver(dir: &Path, store: &TestStore) -> Driver<TestStore> {
    Driver::new("run".into(), store.clone(), &[], dir.to_path_buf())
}

#[tokio::test]
async fn a_timed_out_attempt_leaves_no_grandchild_behind() {
    let dir = folder();
    let store = TestStore::new("run");
    let start = Command::Start(Start::plan(plan("slow", ", timeout: 2s")));
    let state = driver(dir.path(), &store).run(start, CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    let error = state.tasks[0].error().unwrap_or_default().to_owned();
    assert!(error.contains("timed out"), "{error}");
    // The grandchild started before the limit passed (it writes its pid at once).
    let grandchild = pid_in(dir.path(), "grandchild.pid").await;
    assert!(ends(grandchild), "the grandchild {grandchild} still runs after the attempt timed out");
    assert!(!dir.path().join("late.txt").exists());
}

/// Runs the slow plan until its grandchild is up, fires `stop`, and returns the state the
/// driver ended with and the grandchild's pid.
async fn stop_midway(
    driver: Driver<TestStore>,
    dir: &Path,
    cancel: CancellationToken,
    stop: CancellationToken,
) -> (RunState, i32) {
    let start = Command::Start(Start::plan(plan("slow", "")));
    let run = tokio::spawn(driver.run(start, cancel));
    let grandchild = pid_in(dir, "grandchild.pid").await;
    stop.cancel();
    let state = tokio::time::timeout(PATIENCE, run).await.expect("the run stops").expect("the run does not panic");
    (state.expect("the run is driven"), grandchild)
}

#[tokio::test]
async fn a_cancel_kills_the_whole_process_group() {
    let dir = folder();
    let store = TestStore::new("run");
    let cancel = CancellationToken::new();
    let (state, grandchild) = stop_midway(driver(dir.path(), &store), dir.path(), cancel.clone(), cancel).await;
    assert_eq!(state.status, RunStatus::Cancelled);
    assert!(ends(grandchild), "the grandchild {grandchild} still runs after the cancel");
}

#[tokio::test]
async fn a_halt_kills_the_group_and_records_nothing() {
    let dir = folder();
    let store = TestStore::new("run");
    let halt = CancellationToken::new();
    let driver = driver(dir.path(), &store).halt_on(halt.clone());
    let (state, grandchild) = stop_midway(driver, dir.path(), CancellationToken::new(), halt).await;
    assert_eq!(state.status, RunStatus::Running);
    assert!(ends(grandchild), "the grandchild {grandchild} still runs after the halt");
    let recorded: Vec<Event> = store.records().into_iter().map(|r| r.event).collect();
    assert!(matches!(recorded.last(), Some(Event::TaskDispatched { .. })), "{recorded:?}");
}

#[tokio::test]
async fn every_program_carries_its_attempts_mark() {
    let dir = folder();
    let store = TestStore::new("run");
    let start = Command::Start(Start::plan(plan("env", "")));
    let driver = driver(dir.path(), &store).mark_processes("/somewhere/runs/r1");
    let state = driver.run(start, CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.tasks[0].output.as_deref(), Some("/somewhere/runs/r1/t/1"));
}

/// Starts `sh` marked with `mark`, in a group of its own, with a child that drops the mark;
/// returns the process and the child's pid.
fn marked_process(dir: &Path, mark: &str, name: &str) -> (std::process::Child, i32) {
    use std::os::unix::process::CommandExt;
    let script = format!(
        "env -u RUNNER_ATTEMPT sh -c 'echo $$ > {name}.tmp; mv {name}.tmp {name}.pid; exec sleep 30' & exec sleep 30"
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir)
        .env("RUNNER_ATTEMPT", mark)
        .process_group(0)
        .spawn()
        .expect("sh starts");
    let path: PathBuf = dir.join(format!("{name}.pid"));
    let started = Instant::now();
    let unmarked = loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            break text.trim().parse().expect("a pid");
        }
        assert!(started.elapsed() < PATIENCE, "{} was not written", path.display());
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, unmarked)
}

#[test]
fn survivors_of_a_run_and_their_groups_are_ended_and_no_other_run_is_touched() {
    let dir = folder();
    let run = dir.path().join("runs").join("r1").display().to_string();
    let (mut ours, our_unmarked) = marked_process(dir.path(), &format!("{run}/t/1"), "ours");
    // Another run whose folder name merely starts the same way.
    let (mut other, other_unmarked) = marked_process(dir.path(), &format!("{run}0/t/1"), "other");
    let found = engine::survivors::find(&run);
    assert_eq!(found.iter().map(|s| s.pid).collect::<Vec<_>>(), vec![ours.id() as i32], "{found:?}");
    assert_eq!(found[0].attempt, format!("{run}/t/1"));

    let ended = engine::survivors::end(&run, PATIENCE).expect("the survivors end");
    assert_eq!(ended.len(), 1);
    let status = ours.wait().expect("the survivor is reaped");
    assert!(!status.success());
    assert!(ends(our_unmarked), "the survivor's unmarked child {our_unmarked} still runs");
    assert!(engine::survivors::find(&run).is_empty());

    assert!(!gone(other.id() as i32) && !gone(other_unmarked), "another run's processes were killed");
    let _ = std::process::Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", other.id())]).status();
    let _ = other.wait();
}

#[tokio::test]
async fn a_missing_folder_is_named_when_a_program_cannot_start_in_it() {
    use engine::runtime::{AgentRuntime, Attempt, CommandRuntime, Reply};
    let dir = folder();
    let missing = dir.path().join("deleted");
    let runtime = CommandRuntime::new(vec!["echo".to_owned()], 1024, Arc::from([]));
    let reply = runtime.run(Attempt::new("t", 1, "x", missing.clone()), CancellationToken::new()).await;
    match reply {
        Reply::Failure { error, .. } => {
            assert!(error.contains("missing") && error.contains(&missing.display().to_string()), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
