//! Crashes: a run killed with SIGKILL resumes without running a finished task again, a log
//! whose last line was torn by a crash is cut back and continued, only one process drives a
//! run at a time, a damaged log is refused by every command, and a run whose first record
//! could not be written leaves nothing behind.

mod support;

use std::time::{Duration, Instant};

use engine::{Event, Handler, Outcome, Record, RunState, RunStatus};
use support::{Env, SLOW_SCRIPT, plan};

/// A chain t1..t6 with a fan-out f1, f2 after t2 that joins again at t6: eight slow tasks.
fn slow_plan(script: &str) -> String {
    let agent = format!("    slow: {{runtime: command, command: [python3, {script:?}]}}");
    let workflow = r#"    - {id: t1, agent: slow, input: t1}
    - {id: t2, agent: slow, input: t2, depends_on: [t1]}
    - {id: f1, agent: slow, input: f1, depends_on: [t2]}
    - {id: f2, agent: slow, input: f2, depends_on: [t2]}
    - {id: t3, agent: slow, input: t3, depends_on: [t2]}
    - {id: t4, agent: slow, input: t4, depends_on: [t3]}
    - {id: t5, agent: slow, input: t5, depends_on: [t4]}
    - {id: t6, agent: slow, input: t6, depends_on: [t5, f1, f2]}"#;
    plan("slow", &agent, workflow)
}

const TASKS: [&str; 8] = ["t1", "t2", "f1", "f2", "t3", "t4", "t5", "t6"];

fn typed_records(env: &Env, run: &str) -> Vec<Record> {
    let text = std::fs::read_to_string(env.log(run)).expect("the log is readable");
    text.lines().map(|line| serde_json::from_str(line).expect("every line is a record")).collect()
}

#[test]
fn a_killed_run_resumes_without_running_a_finished_task_twice() {
    let env = Env::new();
    let script = env.write("task.py", SLOW_SCRIPT);
    env.write("plan.yaml", &slow_plan(&script.display().to_string()));
    let mut child = env.spawn_apply("plan.yaml", "crash");
    let started = Instant::now();
    while env.succeeded("crash").len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "two tasks did not succeed within 60 s");
        assert!(child.try_wait().expect("the child can be polled").is_none(), "runner exited before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL is sent");
    child.wait().expect("the child is reaped");
    let before = env.succeeded("crash");
    assert!(before.len() >= 2 && before.len() < TASKS.len(), "killed mid-run: {before:?}");

    let status = env.runner().args(["status", "crash"]).output().expect("runner runs");
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("interrupted") && status.contains("runner resume crash"), "{status}");

    let resumed = env.runner().args(["resume", "crash"]).output().expect("runner runs");
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));

    let json = env.status("crash");
    assert_eq!(json["status"], "succeeded");
    for task in TASKS {
        assert_eq!(json["tasks"][task]["status"], "succeeded", "{task}");
    }
    let effects = env.side_effects();
    for task in TASKS {
        assert!(effects.get(task).copied().unwrap_or(0) >= 1, "{task} never ran: {effects:?}");
    }
    for task in &before {
        assert_eq!(effects.get(task), Some(&1), "{task} succeeded before the kill and ran again: {effects:?}");
    }

    let records = typed_records(&env, "crash");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    let events: Vec<Event> = records.into_iter().map(|r| r.event).collect();
    assert_eq!(RunState::fold(&events).status, RunStatus::Finished(Outcome::Succeeded));
    assert!(events.iter().any(|e| matches!(e, Event::RunResumed)));
}

#[test]
fn a_torn_last_line_is_dropped_with_a_warning_and_the_run_continues() {
    let env = Env::new();
    env.write(
        "plan.yaml",
        &plan(
            "torn",
            "    echo: {runtime: mock}",
            r#"    - {id: draft, agent: echo, input: "the draft"}
    - {id: ok, type: human_review, depends_on: [draft], prompt: "fine?"}
    - {id: publish, agent: echo, input: "{{ tasks.draft.output }}", depends_on: [ok]}"#,
        ),
    );
    let output = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "torn"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(env.runner().args(["approve", "torn", "ok"]).output().expect("runs").status.code(), Some(0));
    let clean = std::fs::read(env.log("torn")).expect("the log is readable");
    let mut torn = clean.clone();
    torn.extend_from_slice(br#"{"seq": 99, "at": "2026-01-01T00:00:00.000Z", "run_id": "torn", "type": "TaskSucc"#);
    std::fs::write(env.log("torn"), &torn).expect("the torn line is written");

    let events = env.runner().args(["events", "torn"]).output().expect("runner runs");
    assert_eq!(String::from_utf8_lossy(&events.stdout).lines().count(), clean.iter().filter(|&&b| b == b'\n').count());

    let resumed = env.runner().args(["resume", "torn"]).output().expect("runner runs");
    let stderr = String::from_utf8_lossy(&resumed.stderr).into_owned();
    assert!(stderr.contains("warning") && stderr.contains("torn last line"), "{stderr}");
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");

    let records = typed_records(&env, "torn");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    assert_eq!(env.status("torn")["tasks"]["publish"]["output"], "the draft");
}

/// Starts `runner apply` of the slow plan as a child process and waits for one success.
fn start_slow(env: &Env, run: &str) -> std::process::Child {
    let script = env.write("task.py", SLOW_SCRIPT);
    env.write("plan.yaml", &slow_plan(&script.display().to_string()));
    let child = env
        .runner_process()
        .args(["apply", "plan.yaml", "--yes", "--run-id", run])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner starts");
    let started = Instant::now();
    while env.succeeded(run).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no task succeeded within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn cancel_stops_a_run_that_another_process_drives() {
    let env = Env::new();
    let mut child = start_slow(&env, "live");
    let cancel = env.runner().args(["cancel", "live"]).output().expect("runner runs");
    assert_eq!(cancel.status.code(), Some(0), "{}", String::from_utf8_lossy(&cancel.stderr));
    assert_eq!(child.wait().expect("the child exits").code(), Some(130));
    assert_eq!(env.status("live")["status"], "cancelled");
    let cancelled = env.records("live").into_iter().find(|r| r["type"] == "RunCancelled").expect("RunCancelled");
    assert_eq!(cancelled["reason"], "cancelled by runner cancel", "the log says who cancelled");
    let lock = std::fs::File::open(env.home().join("runs/live/lock")).expect("the lock file stays");
    assert!(lock.try_lock().is_ok(), "the lock is released at the end");
}

#[test]
fn ctrl_c_cancels_gracefully() {
    let env = Env::new();
    let mut child = start_slow(&env, "sigint");
    let kill = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    assert!(kill.expect("kill runs").success());
    assert_eq!(child.wait().expect("the child exits").code(), Some(130));
    assert_eq!(env.types("sigint").last().map(String::as_str), Some("RunCancelled"));
    let last = env.records("sigint").pop().expect("the log has records");
    assert_eq!(last["reason"], "interrupted");
}

#[test]
fn logs_follow_prints_events_until_the_run_ends() {
    let env = Env::new();
    let mut child = start_slow(&env, "follow");
    let follow = env.runner().args(["logs", "follow", "--follow"]).timeout(Duration::from_secs(60)).output();
    let follow = follow.expect("runner runs");
    assert_eq!(follow.status.code(), Some(0));
    assert_eq!(child.wait().expect("the child exits").code(), Some(0));
    let lines = String::from_utf8_lossy(&follow.stdout).lines().count();
    assert_eq!(lines, env.records("follow").len());
    assert!(String::from_utf8_lossy(&follow.stdout).lines().last().is_some_and(|l| l.contains("RunCompleted")));
}

/// A plan of two tasks that each take two seconds once the file `slow` exists, else none.
fn two_step_plan(env: &Env) {
    let agent = r#"    wait: {runtime: command, command: [sh, -c, "if [ -f slow ]; then sleep 2; fi; cat"]}"#;
    env.write(
        "plan.yaml",
        &plan(
            "two-step",
            agent,
            "    - {id: a, agent: wait, input: a}\n    - {id: b, agent: wait, input: b, depends_on: [a]}",
        ),
    );
}

/// A run that crashed right after dispatching its first task, as a kill -9 leaves it: a
/// finished run's log cut back to its first two records, and a lock file holding `pid`.
fn crashed_run(env: &Env, run: &str, pid: &str) {
    two_step_plan(env);
    let applied = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", run]).output().expect("runs");
    assert_eq!(applied.status.code(), Some(0), "{}", String::from_utf8_lossy(&applied.stderr));
    let text = std::fs::read_to_string(env.log(run)).expect("the log reads");
    let first: String = text.split_inclusive('\n').take(2).collect();
    assert!(first.contains("RunCreated") && first.contains("TaskDispatched"), "{first}");
    std::fs::write(env.log(run), first).expect("the log is cut back");
    std::fs::write(env.home().join("runs").join(run).join("lock"), format!("{pid}\n")).expect("a stale lock");
}

/// The pid of a process that has exited.
fn dead_pid() -> String {
    let mut child = std::process::Command::new("true").spawn().expect("`true` starts");
    child.wait().expect("`true` exits");
    child.id().to_string()
}

/// Waits for a child, killing it and failing if it takes over `limit`.
fn finish(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let started = Instant::now();
    while child.try_wait().expect("the child can be polled").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("runner did not exit within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("the output is read")
}

#[test]
fn concurrent_resumes_of_a_crashed_run_drive_it_exactly_once() {
    let env = Env::new();
    crashed_run(&env, "crashed", &dead_pid());
    env.write("slow", "");
    let children: Vec<_> = (0..8)
        .map(|_| {
            env.runner_process()
                .args(["resume", "crashed"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("runner starts")
        })
        .collect();
    let outputs: Vec<_> = children.into_iter().map(|child| finish(child, Duration::from_secs(120))).collect();

    let mut drove = 0;
    let mut refused = 0;
    for output in &outputs {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stdout.contains("resuming run `crashed`") {
            drove += 1;
            assert_eq!(output.status.code(), Some(0), "{stderr}");
        } else if stderr.contains("run `crashed` is being driven by process") {
            refused += 1;
            assert_ne!(output.status.code(), Some(0));
        } else {
            // Started after the driver had finished.
            assert!(stdout.contains("has already ended"), "stdout: {stdout}\nstderr: {stderr}");
        }
    }
    assert_eq!(drove, 1, "exactly one process drives the run");
    assert!(refused >= 1, "the others were told who drives it");

    let records = typed_records(&env, "crashed");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    let events: Vec<Event> = records.into_iter().map(|r| r.event).collect();
    assert_eq!(events.iter().filter(|e| matches!(e, Event::RunResumed)).count(), 1);
    assert_eq!(events.iter().filter(|e| matches!(e, Event::RunCompleted { .. })).count(), 1);
    assert!(matches!(events.last(), Some(Event::RunCompleted { status: Outcome::Succeeded, .. })));
}

#[test]
fn a_lock_file_left_by_a_dead_process_does_not_block_whatever_pid_it_holds() {
    let own = std::process::id().to_string();
    for (run, pid) in [("pid-one", "1"), ("own-pid", own.as_str()), ("dead-pid", &dead_pid()), ("garbage", "x")] {
        let env = Env::new();
        crashed_run(&env, run, pid);
        let resumed = env.runner().args(["resume", run]).timeout(Duration::from_secs(60)).output().expect("runs");
        assert_eq!(resumed.status.code(), Some(0), "lock `{pid}`: {}", String::from_utf8_lossy(&resumed.stderr));
        assert_eq!(env.types(run).last().map(String::as_str), Some("RunCompleted"), "lock `{pid}`");
    }
}

#[test]
fn every_command_refuses_a_damaged_log_with_its_line_and_a_hint_and_never_hangs() {
    let unknown = r#"{"seq":3,"at":"2026-11-22T12:45:03.456Z","run_id":"bad","type":"TaskTeleported"}"#;
    for damage in ["duplicate", "unknown type"] {
        let env = Env::new();
        crashed_run(&env, "bad", &dead_pid());
        let mut text = std::fs::read_to_string(env.log("bad")).expect("the log reads");
        let last = text.lines().last().expect("a last line").to_owned();
        text.push_str(&if damage == "duplicate" { last } else { unknown.to_owned() });
        text.push('\n');
        std::fs::write(env.log("bad"), &text).expect("the damage is written");

        let commands: [&[&str]; 10] = [
            &["resume", "bad"],
            &["answer", "bad", "a", "yes"],
            &["graph", "bad"],
            &["status", "bad"],
            &["status", "bad", "--format", "json"],
            &["logs", "bad"],
            &["logs", "bad", "--follow"],
            &["events", "bad"],
            &["retry", "bad"],
            &["cancel", "bad"],
        ];
        for args in commands {
            let output = env.runner().args(args).timeout(Duration::from_secs(60)).output().expect("runner runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(6), "{damage}, {args:?}: a damaged log exits 6: {stderr}");
            assert!(stderr.contains("events.jsonl:3: ") && stderr.contains("help: "), "{damage}, {args:?}: {stderr}");
        }
        assert_eq!(std::fs::read_to_string(env.log("bad")).expect("reads"), text, "{damage}: the log is unchanged");
    }
}

#[test]
fn a_run_whose_first_record_did_not_fit_on_disk_leaves_nothing_and_its_id_can_be_applied_again() {
    let env = Env::new();
    let mission = "m".repeat(4000);
    env.write(
        "plan.yaml",
        &plan("big", "    echo: {runtime: mock}", "    - {id: a, agent: echo, input: a}")
            .replace("mission: test the runner", &format!("mission: {mission}")),
    );
    // A file size limit of one block makes writing the RunCreated fail, as a full disk would.
    let runner = assert_cmd::cargo::cargo_bin("runner");
    let full = std::process::Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" apply plan.yaml --yes --run-id big"])
        .arg(&runner)
        .current_dir(env.dir())
        .env("RUNNER_HOME", env.home())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(full.status.code().is_some_and(|c| c != 0), "the first write should fail: {stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(env.home().join("runs"))
        .expect("the runs folder exists")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert!(left.is_empty(), "nothing is left behind: {left:?}");

    let again = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "big"]).output().expect("runs");
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(env.status("big")["status"], "succeeded");
}
