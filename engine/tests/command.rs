//! The `command` runtime: a real process per attempt, input on stdin, output from stdout.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engine::event::ErrorClass;
use engine::runtime::{AgentRuntime, Attempt, CommandRuntime, Reply};
use tokio_util::sync::CancellationToken;

/// A fresh folder under the system's temp folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("engine-command-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temp folder");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn attempt(input: &str, workdir: &TempDir) -> Attempt {
    Attempt::new("t", 1, input, workdir.0.clone())
}

/// Runs `argv` on `input`; ten seconds is a liveness bound, not a speed goal.
async fn run(argv: &[&str], max_output_bytes: u64, input: &str, workdir: &TempDir) -> Reply {
    let runtime = CommandRuntime::new(argv.iter().map(|&a| a.to_owned()).collect(), max_output_bytes, Arc::from([]));
    let work = runtime.run(attempt(input, workdir), CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(10), work).await.expect("the process ends")
}

#[tokio::test]
async fn stdin_reaches_the_program_and_stdout_comes_back() {
    let dir = TempDir::new("cat");
    let reply = run(&["cat"], 1024, "hello\nworld", &dir).await;
    assert_eq!(reply, Reply::Output { text: "hello\nworld".into(), tokens: None });
    let script = "import sys; print(sys.stdin.read().upper())";
    let reply = run(&["python3", "-c", script], 1024, "shout", &dir).await;
    assert_eq!(reply, Reply::Output { text: "SHOUT".into(), tokens: None });
}

#[tokio::test]
async fn a_nonzero_exit_is_a_retryable_failure_with_stderr() {
    let dir = TempDir::new("exit");
    let script = "import sys; sys.stderr.write('disk on fire'); sys.exit(3)";
    match run(&["python3", "-c", script], 1024, "", &dir).await {
        Reply::Failure { error, class, .. } => {
            assert_eq!(class, ErrorClass::Agent);
            assert!(error.contains("disk on fire"), "{error}");
            assert!(error.contains("exit code 3"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn output_over_the_cap_fails_naming_max_output_bytes() {
    let dir = TempDir::new("cap");
    let input = "x".repeat(10_000);
    match run(&["cat"], 100, &input, &dir).await {
        Reply::Failure { error, .. } => assert!(error.contains("max_output_bytes"), "{error}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    // Exactly at the cap is fine.
    let reply = run(&["cat"], 100, &input[..100], &dir).await;
    assert_eq!(reply, Reply::Output { text: input[..100].to_owned(), tokens: None });
}

#[tokio::test]
async fn a_program_that_never_stops_writing_is_stopped_at_the_cap() {
    let dir = TempDir::new("endless");
    match run(&["yes"], 100, "", &dir).await {
        Reply::Failure { error, .. } => assert!(error.contains("max_output_bytes"), "{error}"),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_clarification_object_is_a_question() {
    let dir = TempDir::new("question");
    let reply = run(&["cat"], 1024, r#"{"needs_clarification": "Which year?"}"#, &dir).await;
    assert_eq!(reply, Reply::Question("Which year?".into(), None));
    // Anything more is an ordinary output.
    let text = r#"{"needs_clarification": "Which year?", "draft": "x"}"#;
    assert_eq!(run(&["cat"], 1024, text, &dir).await, Reply::Output { text: text.into(), tokens: None });
}

#[tokio::test]
async fn a_missing_program_is_not_retryable() {
    let dir = TempDir::new("missing");
    match run(&["no-such-program-for-runner-tests"], 1024, "", &dir).await {
        Reply::Failure { error, class, .. } => {
            assert_eq!(class, ErrorClass::Permanent);
            assert!(error.contains("no-such-program-for-runner-tests"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn cancel_stops_a_long_process_promptly() {
    let dir = TempDir::new("cancel");
    let runtime = CommandRuntime::new(vec!["sleep".into(), "30".into()], 1024, Arc::from([]));
    let cancel = CancellationToken::new();
    let work = runtime.run(attempt("", &dir), cancel.clone());
    let trigger = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    };
    let (reply, ()) = tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(work, trigger) })
        .await
        .expect("cancel ends the attempt well within the 30 s sleep");
    assert!(matches!(reply, Reply::Failure { class: ErrorClass::Permanent, .. }), "{reply:?}");
}

#[tokio::test]
async fn input_that_looks_like_shell_is_never_run_by_a_shell() {
    let dir = TempDir::new("shell");
    let input = "$(touch pwned); rm -rf x `touch pwned2` && echo > pwned3";
    let reply = run(&["cat"], 1024, input, &dir).await;
    assert_eq!(reply, Reply::Output { text: input.into(), tokens: None });
    let created: Vec<_> = std::fs::read_dir(&dir.0).expect("lists").collect();
    assert!(created.is_empty(), "{created:?}");
}

#[tokio::test]
async fn hidden_variables_never_reach_the_program() {
    let workdir = TempDir::new("hidden");
    let runtime = CommandRuntime::new(vec!["/usr/bin/env".into()], 1 << 20, Arc::from(["PATH".to_owned()]));
    let work = runtime.run(attempt("", &workdir), CancellationToken::new());
    let reply = tokio::time::timeout(Duration::from_secs(10), work).await.expect("the process ends");
    let Reply::Output { text, .. } = reply else { panic!("env runs: {reply:?}") };
    assert!(!text.lines().any(|line| line.starts_with("PATH=")), "{text}");
    assert!(std::env::var_os("PATH").is_some(), "the test process has PATH, so hiding it is what removed it");
}
