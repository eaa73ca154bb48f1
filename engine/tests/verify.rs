//! Verification of a task's output: JSON Schema checks, commands and reviewer agents.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::Tokens;
use engine::runtime::{AgentRuntime, Attempt, Pending, Reply};
use engine::verify::{Check, Verdict, Verified, verify};
use manifest::Loc;
use manifest::plan::{At, Verification};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn schema_check(schema: serde_json::Value) -> Verification {
    Verification::SchemaCheck { schema: At::new(schema, Loc::default()) }
}

fn command(argv: &[&str]) -> Verification {
    Verification::Command { command: argv.iter().map(|&a| a.to_owned()).collect() }
}

fn reviewer(criteria: Option<&str>) -> Verification {
    Verification::LlmReviewer {
        agent: At::new("critic".to_owned(), Loc::default()),
        criteria: criteria.map(str::to_owned),
    }
}

/// Checks `output` of task `t`; ten seconds is a liveness bound, not a speed goal.
async fn run(verification: &Verification, check: Check<'_>) -> Verified {
    let work = verify(verification, check, CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(10), work).await.expect("the check ends")
}

async fn verdict(verification: &Verification, output: &str) -> Verdict {
    let workdir = tempfile::tempdir().expect("a temp folder");
    run(verification, Check::new("t", 1, "the input", output, workdir.path())).await.verdict
}

fn reason(verdict: Verdict) -> String {
    match verdict {
        Verdict::Fail(reason) => reason,
        Verdict::Pass => panic!("the check passed"),
    }
}

fn filings() -> Verification {
    schema_check(json!({
        "type": "object",
        "required": ["filings"],
        "properties": {"filings": {"type": "array", "items": {"type": "string"}}},
    }))
}

#[tokio::test]
async fn conforming_json_passes_the_schema_check() {
    assert_eq!(verdict(&filings(), r#"{"filings": ["10-K", "8-K"]}"#).await, Verdict::Pass);
}

#[tokio::test]
async fn schema_errors_name_the_path() {
    let reason = reason(verdict(&filings(), r#"{"filings": ["10-K", {"form": "8-K"}]}"#).await);
    assert!(reason.starts_with("the output does not match the schema:"), "{reason}");
    assert!(reason.contains("- at /filings/1: "), "{reason}");
}

#[tokio::test]
async fn fenced_json_amid_prose_is_accepted() {
    let output = "Here are the filings:\n\n```json\n{\"filings\": [\"10-K\"]}\n```\n\nLet me know if you need more.";
    assert_eq!(verdict(&filings(), output).await, Verdict::Pass);
}

#[tokio::test]
async fn non_json_fails_the_schema_check() {
    let reason = reason(verdict(&filings(), "I found no filings.").await);
    assert!(reason.starts_with("the output is not valid JSON: "), "{reason}");
}

#[tokio::test]
async fn truncated_json_fails_with_its_position() {
    let reason = reason(verdict(&filings(), "{\"filings\": [\"10-K\",\n \"8-").await);
    assert_eq!(reason, "the output is not valid JSON: EOF while parsing a string at line 2 column 4");
}

#[tokio::test]
async fn a_command_that_exits_zero_passes() {
    let check = command(&["python3", "-c", "import sys; d=sys.stdin.read(); sys.exit(0 if 'ok' in d else 1)"]);
    assert_eq!(verdict(&check, "all ok").await, Verdict::Pass);
    assert_eq!(reason(verdict(&check, "bad").await), "verification command exited with 1");
}

#[tokio::test]
async fn a_failing_command_quotes_its_stderr() {
    let check =
        command(&["python3", "-c", "import sys; sys.stdout.write('noise'); sys.exit('missing section: Risks')"]);
    assert_eq!(reason(verdict(&check, "text").await), "verification command exited with 1: missing section: Risks");
}

#[tokio::test]
async fn a_failing_command_quotes_its_stdout_when_stderr_is_empty() {
    let check = command(&["grep", "-c", "needle"]);
    assert_eq!(reason(verdict(&check, "hay\nstack").await), "verification command exited with 1: 0");
}

#[tokio::test]
async fn long_command_output_is_quoted_in_short() {
    let check = command(&["python3", "-c", "import sys; sys.stderr.write('error line\\n' * 100000); sys.exit(2)"]);
    let reason = reason(verdict(&check, "").await);
    assert!(reason.starts_with("verification command exited with 2: error line\n"), "{reason}");
    assert!(reason.chars().count() <= "verification command exited with 2: ".len() + 500, "{reason}");
}

#[tokio::test]
async fn a_command_that_ignores_a_large_output_still_finishes() {
    let output = "x".repeat(4 * 1024 * 1024);
    assert_eq!(verdict(&command(&["true"]), &output).await, Verdict::Pass);
    assert_eq!(verdict(&command(&["wc", "-c"]), &output).await, Verdict::Pass);
}

#[tokio::test]
async fn a_command_runs_in_the_workdir() {
    let workdir = tempfile::tempdir().expect("a temp folder");
    std::fs::write(workdir.path().join("expected.txt"), "brief").expect("a file");
    let check = command(&["python3", "-c", "import sys; sys.exit(open('expected.txt').read() != sys.stdin.read())"]);
    assert_eq!(run(&check, Check::new("t", 1, "", "brief", workdir.path())).await.verdict, Verdict::Pass);
}

#[tokio::test]
async fn a_missing_program_fails_with_the_os_error() {
    let reason = reason(verdict(&command(&["no-such-program-for-runner"]), "x").await);
    assert!(reason.starts_with("cannot start verification command `no-such-program-for-runner`: "), "{reason}");
    assert!(reason.contains("No such file or directory"), "{reason}");
}

#[tokio::test]
async fn an_empty_command_fails() {
    assert_eq!(reason(verdict(&command(&[]), "x").await), "the verification command is empty");
}

#[tokio::test]
async fn a_command_that_runs_too_long_times_out() {
    let workdir = tempfile::tempdir().expect("a temp folder");
    let check = Check::new("t", 1, "", "x", workdir.path()).with_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let verdict = run(&command(&["sleep", "5"]), check).await.verdict;
    assert_eq!(reason(verdict), "verification command `sleep` timed out after 200ms");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_cancelled_check_fails() {
    let workdir = tempfile::tempdir().expect("a temp folder");
    let cancel = CancellationToken::new();
    cancel.cancel();
    let check = Check::new("t", 1, "", "x", workdir.path());
    let verified = verify(&command(&["sleep", "5"]), check, cancel).await;
    assert_eq!(reason(verified.verdict), "the verification was cancelled");
}

/// A reviewer that gives one fixed reply and keeps the attempts it was given.
struct Reviewer {
    reply: Reply,
    attempts: Mutex<Vec<Attempt>>,
}

impl Reviewer {
    fn new(reply: Reply) -> Arc<Self> {
        Arc::new(Reviewer { reply, attempts: Mutex::new(Vec::new()) })
    }

    fn answering(text: &str) -> Arc<Self> {
        Reviewer::new(Reply::Output { text: text.to_owned(), tokens: Some(Tokens { prompt: 120, completion: 15 }) })
    }
}

impl AgentRuntime for Reviewer {
    fn run(&self, attempt: Attempt, _: CancellationToken) -> Pending {
        self.attempts.lock().expect("not poisoned").push(attempt);
        Box::pin(std::future::ready(self.reply.clone()))
    }
}

async fn review(reviewer: &Arc<Reviewer>, criteria: Option<&str>) -> Verified {
    let runtime: Arc<dyn AgentRuntime> = reviewer.clone();
    let check = Check::new("write_brief", 1, "Write a brief.", "The brief.", Path::new(".")).with_reviewer(runtime);
    run(&self::reviewer(criteria), check).await
}

#[tokio::test]
async fn a_reviewer_that_approves_passes_and_reports_its_tokens() {
    let critic = Reviewer::answering(r#"{"pass": true, "reason": "complete"}"#);
    let verified = review(&critic, Some("cites two sources")).await;
    assert_eq!(verified, Verified { verdict: Verdict::Pass, tokens: Some(Tokens { prompt: 120, completion: 15 }) });
    let attempts = critic.attempts.lock().expect("not poisoned");
    let [attempt] = attempts.as_slice() else { panic!("one review, not {}", attempts.len()) };
    assert_eq!((attempt.task.as_str(), attempt.attempt), ("write_brief.review", 1));
    assert!(attempt.input.contains("Criteria: cites two sources"), "{}", attempt.input);
    assert!(attempt.input.contains("The brief."), "{}", attempt.input);
    let schema = attempt.schema.as_ref().expect("the review schema");
    assert_eq!(schema["required"], json!(["pass", "reason"]));
}

#[tokio::test]
async fn a_reviewer_that_rejects_fails_with_its_reason() {
    let critic = Reviewer::answering("```json\n{\"pass\": false, \"reason\": \"No sources are cited.\"}\n```");
    let verified = review(&critic, None).await;
    assert_eq!(reason(verified.verdict), "the reviewer rejected the output: No sources are cited.");
    assert_eq!(verified.tokens, Some(Tokens { prompt: 120, completion: 15 }));
}

#[tokio::test]
async fn a_reviewer_answering_garbage_fails_the_review() {
    let verified = review(&Reviewer::answering("Looks great to me!"), None).await;
    assert_eq!(verified.tokens, Some(Tokens { prompt: 120, completion: 15 }));
    let reason = reason(verified.verdict);
    assert!(
        reason
            .starts_with("the review could not be completed: the reviewer `critic` answered \"Looks great to me!\": ")
    );
}

#[tokio::test]
async fn a_reviewer_that_fails_fails_the_review() {
    let verified = review(&Reviewer::new(Reply::failed("HTTP 503")), None).await;
    assert_eq!(
        verified,
        Verified {
            verdict: Verdict::Fail(
                "the review could not be completed: the reviewer `critic` failed: HTTP 503".to_owned()
            ),
            tokens: None,
        }
    );
}

#[tokio::test]
async fn a_reviewer_cannot_ask_questions() {
    let verified = review(&Reviewer::new(Reply::Question("Which fiscal year?".to_owned(), None)), None).await;
    let reason = reason(verified.verdict);
    assert!(
        reason.starts_with("the review could not be completed: the reviewer `critic` asked a question"),
        "{reason}"
    );
    assert!(reason.contains("Which fiscal year?"), "{reason}");
}

#[tokio::test]
async fn a_review_without_a_reviewer_runtime_fails() {
    let reason = reason(verdict(&reviewer(None), "The brief.").await);
    assert_eq!(reason, "the review could not be completed: no runtime was given for the reviewer agent `critic`");
}
