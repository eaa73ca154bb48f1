//! Logs that contradict themselves, or are not there: a task the plan lacks, records after the
//! run completed, a byte changed inside an output, an empty or missing `events.jsonl` (or a
//! folder in its place). Every command that reads the run refuses it with exit 6, naming the
//! file (and the line), as it refuses other damage; a log written before records carried a
//! checksum still reads.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Env, plan};

/// A finished run `r` of two mock tasks: `a`, then `b` reading its output.
fn finished(env: &Env) {
    env.write(
        "plan.yaml",
        &plan(
            "two",
            "    echo: {runtime: mock}",
            r#"    - {id: a, agent: echo, input: "hello {{ mission }}"}
    - {id: b, agent: echo, input: "b reads {{ tasks.a.output }}", depends_on: [a]}"#,
        ),
    );
    let applied = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "r"]).output().expect("runs");
    assert_eq!(applied.status.code(), Some(0), "{}", String::from_utf8_lossy(&applied.stderr));
}

/// The run's records as an older runner wrote them (no checksums), changed by `edit`, then
/// numbered again from 1 and written back.
fn rewrite(env: &Env, edit: impl FnOnce(&mut Vec<Value>)) {
    let mut records = env.records("r");
    for record in &mut records {
        record.as_object_mut().expect("an object").remove("crc");
    }
    edit(&mut records);
    let mut text = String::new();
    for (seq, record) in records.iter_mut().enumerate() {
        record["seq"] = (seq + 1).into();
        text.push_str(&format!("{record}\n"));
    }
    std::fs::write(env.log("r"), text).expect("the log is written");
}

/// A `TaskSucceeded` of task `task` with `output`.
fn success(task: &str, output: &str) -> Value {
    serde_json::json!({
        "seq": 0, "at": "2026-11-22T12:45:03.456Z", "run_id": "r", "type": "TaskSucceeded",
        "task": task, "attempt": 1, "output": output, "duration_ms": 0
    })
}

/// Asserts that every command reading run `r` exits 6 with an error holding each of `words`,
/// and that none of them changed what is in the run's folder.
fn refused_by_every_command(env: &Env, words: &[&str]) {
    let before = std::fs::read(env.log("r")).ok();
    let commands: [&[&str]; 6] =
        [&["status", "r"], &["events", "r"], &["logs", "r"], &["resume", "r"], &["retry", "r"], &["cancel", "r"]];
    for args in commands {
        let output = env.runner().args(args).timeout(Duration::from_secs(60)).output().expect("runner runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(6), "{args:?}: {stderr}");
        for word in words {
            assert!(stderr.contains(word), "{args:?} should say {word:?}: {stderr}");
        }
        assert!(stderr.contains("help: "), "{args:?}: a hint says what to do: {stderr}");
    }
    assert_eq!(std::fs::read(env.log("r")).ok(), before, "the log is left as it was");
    let runs = env.runner().arg("runs").output().expect("runner runs");
    let runs = String::from_utf8_lossy(&runs.stdout).into_owned();
    let row = runs.lines().find(|l| l.starts_with("r ")).unwrap_or_else(|| panic!("listed: {runs}"));
    assert!(row.contains("unreadable"), "{row}");
}

#[test]
fn a_success_of_a_task_the_plan_does_not_have_is_refused() {
    let env = Env::new();
    finished(&env);
    rewrite(&env, |records| {
        let end = records.len() - 1;
        records.insert(end, success("ghost", "boo"));
    });
    let line = env.records("r").len() - 1;
    refused_by_every_command(&env, &[&format!("events.jsonl:{line}: "), "task `ghost`"]);
}

#[test]
fn a_late_success_after_the_run_completed_is_refused() {
    let env = Env::new();
    finished(&env);
    rewrite(&env, |records| records.push(success("b", "late")));
    let line = env.records("r").len();
    refused_by_every_command(&env, &[&format!("events.jsonl:{line}: "), "after the run's `RunCompleted`"]);
}

#[test]
fn a_second_run_completed_is_refused() {
    let env = Env::new();
    finished(&env);
    rewrite(&env, |records| {
        let mut again = records.last().expect("a RunCompleted").clone();
        again["status"] = "partial".into();
        records.push(again);
    });
    let line = env.records("r").len();
    refused_by_every_command(&env, &[&format!("events.jsonl:{line}: "), "a second `RunCompleted`"]);
}

#[test]
fn a_byte_changed_inside_an_output_is_refused_by_its_checksum() {
    let env = Env::new();
    finished(&env);
    let text = std::fs::read_to_string(env.log("r")).expect("the log reads");
    let (line, _) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("\"TaskSucceeded\"") && l.contains("hello test the runner"))
        .expect("a's success");
    let damaged: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == line { l.replacen("hello", "jello", 1) } else { l.to_owned() })
        .collect();
    std::fs::write(env.log("r"), damaged.join("\n") + "\n").expect("the damage is written");
    refused_by_every_command(&env, &[&format!("events.jsonl:{}: ", line + 1), "checksum"]);
}

#[test]
fn an_empty_log_is_refused_naming_the_file() {
    let env = Env::new();
    finished(&env);
    std::fs::write(env.log("r"), "").expect("the log is emptied");
    refused_by_every_command(&env, &["events.jsonl:1: ", "empty"]);
}

#[test]
fn a_missing_log_in_a_run_folder_is_refused_naming_the_file() {
    let env = Env::new();
    finished(&env);
    std::fs::remove_file(env.log("r")).expect("the log is removed");
    refused_by_every_command(&env, &["events.jsonl:1: ", "no log"]);
}

#[test]
fn a_folder_in_place_of_the_log_is_refused_naming_the_file() {
    let env = Env::new();
    finished(&env);
    std::fs::remove_file(env.log("r")).expect("the log is removed");
    std::fs::create_dir(env.log("r")).expect("a folder in its place");
    refused_by_every_command(&env, &["events.jsonl:1: ", "not a file"]);
}

#[test]
fn a_folder_that_is_not_a_run_is_still_no_run() {
    let env = Env::new();
    finished(&env);
    let output = env.runner().args(["status", "nothing"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no run `nothing`"));
}

#[test]
fn a_log_written_before_checksums_still_reads() {
    let env = Env::new();
    finished(&env);
    let summed = env.records("r");
    assert!(summed.iter().all(|r| r["crc"].as_str().is_some_and(|c| c.len() == 8)), "{summed:?}");
    rewrite(&env, |_| {});
    assert!(env.records("r").iter().all(|r| r.get("crc").is_none()));
    assert_eq!(env.status("r")["status"], "succeeded");
    let runs = env.runner().arg("runs").output().expect("runner runs");
    let runs = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(runs.lines().any(|l| l.starts_with("r ") && l.contains("succeeded") && l.contains("2/2")), "{runs}");
}
