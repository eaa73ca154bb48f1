//! The processes of a run's agents when runner itself stops: killed with SIGKILL, `resume`
//! ends what the dead runner left running before it dispatches anything (and `cancel` and
//! `retry` end it too); stopped with SIGTERM,
//! the agents are stopped and the run can be resumed. And a run whose plan folder was deleted
//! is not failed by `resume` (nor retried into a failed run) but left as it was.
//!
//! Real processes; every wait is bounded and none is asserted as a duration.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{Env, plan};
use testkit::process::gone;

/// The first attempt ever (of any run in the folder) starts a grandchild that writes
/// `survivor.pid` and then a tick a line to `ticks.txt` every 100 ms, forever. Any other attempt counts the ticks, waits, counts again
/// and prints both counts: equal counts mean nothing from the first attempt ran alongside it.
const AGENT: &str = r#"n=${RUNNER_ATTEMPT##*/}
if [ "$n" = 1 ] && [ ! -e ticked ]; then
  touch ticked
  sh -c 'echo tick >> ticks.txt; echo $$ > survivor.tmp; mv survivor.tmp survivor.pid; while :; do echo tick >> ticks.txt; sleep 0.1; done'
fi
before=$(wc -l < ticks.txt)
sleep 0.5
after=$(wc -l < ticks.txt)
echo "attempt $n: $before $after"
"#;

/// A bound on waits: liveness, not speed.
const PATIENCE: Duration = Duration::from_secs(30);

fn ticking_plan(env: &Env) {
    env.write("agent.sh", AGENT);
    env.write(
        "plan.yaml",
        &plan(
            "ticking",
            "    ticker: {runtime: command, command: [sh, agent.sh]}",
            "    - {id: t, agent: ticker, input: x}",
        ),
    );
}

/// Starts `runner apply` of the ticking plan and returns it once the first attempt's grandchild
/// is up, with the grandchild's pid.
fn apply_until_ticking(env: &Env, run: &str) -> (Child, i32) {
    let mut child = env
        .runner_process()
        .args(["apply", "plan.yaml", "--yes", "--run-id", run])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner starts");
    let path = env.dir().join("survivor.pid");
    let started = Instant::now();
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            break text.trim().parse().expect("a pid");
        }
        assert!(started.elapsed() < PATIENCE, "the first attempt did not start");
        assert!(child.try_wait().expect("runner can be polled").is_none(), "runner exited early");
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, pid)
}

/// Waits until `pid` is gone; false if it is still there after [`PATIENCE`].
fn ends(pid: i32) -> bool {
    testkit::process::ends_within(pid, PATIENCE)
}

/// The exit code of `child`, which is killed if it has not exited after [`PATIENCE`].
fn exit_code_within_patience(child: &mut Child) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the child can be polled") {
            return status.code();
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("runner did not exit within {} s", PATIENCE.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills a process that a failed test left behind.
fn reap(pid: i32) {
    let _ = std::process::Command::new("kill").args(["-s", "KILL", &pid.to_string()]).stderr(Stdio::null()).status();
}

/// The output of task `t`, which says which attempt wrote it and the tick counts it saw.
fn output_of_t(env: &Env, run: &str) -> String {
    env.status(run)["tasks"]["t"]["output"].as_str().unwrap_or_default().to_owned()
}

fn counts_are_equal(output: &str) -> bool {
    let counts: Vec<&str> = output.rsplit_once(':').map_or(vec![], |(_, c)| c.split_whitespace().collect());
    counts.len() == 2 && counts[0] == counts[1]
}

#[test]
fn resume_ends_what_a_killed_runner_left_running_before_it_dispatches() {
    let env = Env::new();
    ticking_plan(&env);
    let (mut runner, survivor) = apply_until_ticking(&env, "killed");
    runner.kill().expect("SIGKILL is sent");
    runner.wait().expect("runner is reaped");
    assert!(!gone(survivor), "the agent's grandchild should outlive a SIGKILL of runner");

    let resumed = env.runner().args(["resume", "killed"]).timeout(PATIENCE).output().expect("runner runs");
    let survivor_gone = gone(survivor);
    reap(survivor);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(stdout.contains("ended ") && stdout.contains("t/1"), "{stdout}");
    let output = output_of_t(&env, "killed");
    assert!(output.starts_with("attempt 2:"), "{output}");
    assert!(counts_are_equal(&output), "the first attempt still ticked while the second ran: {output}");
    assert!(survivor_gone, "the survivor {survivor} still ran after resume");
}

#[test]
fn cancel_of_a_run_whose_runner_was_killed_ends_what_it_left_running() {
    let env = Env::new();
    ticking_plan(&env);
    let (mut runner, survivor) = apply_until_ticking(&env, "orphaned");
    runner.kill().expect("SIGKILL is sent");
    runner.wait().expect("runner is reaped");
    let cancelled = env.runner().args(["cancel", "orphaned"]).timeout(PATIENCE).output().expect("runner runs");
    let survivor_gone = gone(survivor);
    reap(survivor);
    assert_eq!(cancelled.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancelled.stderr));
    assert!(survivor_gone, "the survivor {survivor} still ran after the run was cancelled");
    assert_eq!(env.status("orphaned")["status"], "cancelled");
}

#[test]
fn retry_of_a_run_whose_runner_was_killed_ends_what_it_left_running() {
    let env = Env::new();
    ticking_plan(&env);
    let (mut runner, survivor) = apply_until_ticking(&env, "dropped");
    runner.kill().expect("SIGKILL is sent");
    runner.wait().expect("runner is reaped");

    let retried =
        env.runner().args(["retry", "dropped", "--run-id", "again"]).timeout(PATIENCE).output().expect("runner runs");
    let survivor_gone = gone(survivor);
    reap(survivor);
    let stdout = String::from_utf8_lossy(&retried.stdout);
    assert_eq!(retried.status.code(), Some(0), "{}", String::from_utf8_lossy(&retried.stderr));
    assert!(stdout.contains("ended ") && stdout.contains("t/1"), "{stdout}");
    let output = output_of_t(&env, "again");
    assert!(counts_are_equal(&output), "the old attempt still ticked while the new run's ran: {output}");
    assert!(survivor_gone, "the old run's survivor {survivor} still ran after retry");
}

#[test]
fn sigterm_stops_the_agents_and_leaves_a_run_that_resumes() {
    let env = Env::new();
    ticking_plan(&env);
    let (mut runner, ticker) = apply_until_ticking(&env, "term");
    let kill = std::process::Command::new("kill").args(["-TERM", &runner.id().to_string()]).status();
    assert!(kill.expect("kill runs").success());
    let code = exit_code_within_patience(&mut runner);
    let stopped = ends(ticker);
    reap(ticker);
    assert_eq!(code, Some(143));
    assert!(stopped, "the agent's grandchild {ticker} still runs after SIGTERM");
    let types = env.types("term");
    assert!(!types.iter().any(|t| t == "RunCancelled"), "{types:?}");
    assert_eq!(env.status("term")["status"], "interrupted", "no process drives it any more");

    let resumed = env.runner().args(["resume", "term"]).timeout(PATIENCE).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let output = output_of_t(&env, "term");
    assert!(output.starts_with("attempt 2:") && counts_are_equal(&output), "{output}");
}

#[test]
fn resume_after_the_plan_folder_was_deleted_says_so_and_changes_nothing() {
    let env = Env::new();
    let folder = env.dir().join("project");
    std::fs::create_dir(&folder).expect("the plan folder is made");
    let write_plan = |folder: &Path| {
        let text = plan(
            "gone",
            "    echo: {runtime: command, command: [echo, hello]}",
            "    - {id: ok, type: human_review, prompt: go?}\n    - {id: say, agent: echo, input: x, depends_on: [ok]}",
        );
        std::fs::write(folder.join("plan.yaml"), text).expect("the plan is written");
    };
    write_plan(&folder);
    let applied = env.runner().args(["apply", "project/plan.yaml", "--yes", "--run-id", "gone"]).output();
    assert_eq!(applied.expect("runner runs").status.code(), Some(3), "the run waits for the review");
    let approved = env.runner().args(["approve", "gone", "ok"]).output().expect("runner runs");
    assert_eq!(approved.status.code(), Some(0));
    std::fs::remove_dir_all(&folder).expect("the plan folder is deleted");
    let log = std::fs::read(env.log("gone")).expect("the log is readable");

    let resumed = env.runner().args(["resume", "gone"]).output().expect("runner runs");
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("missing") && stderr.contains(&folder.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read(env.log("gone")).expect("the log is readable"), log, "resume recorded something");
    let retried = env.runner().args(["retry", "gone", "--run-id", "again"]).output().expect("runner runs");
    let stderr = String::from_utf8_lossy(&retried.stderr);
    assert!(retried.status.code() == Some(2) && stderr.contains("missing"), "{stderr}");
    assert!(!env.home().join("runs/again").exists(), "retry made a run that could not run");

    std::fs::create_dir(&folder).expect("the plan folder is back");
    write_plan(&folder);
    let resumed = env.runner().args(["resume", "gone"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(env.status("gone")["tasks"]["say"]["output"], "hello");
}
