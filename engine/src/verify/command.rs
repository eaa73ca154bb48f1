//! `command` verification: a process reads the output on stdin; exit 0 passes. The argv is run
//! directly, never through a shell, as the `command` runtime does.

use std::process::ExitStatus;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{Check, DEFAULT_TIMEOUT, Verdict, excerpt};

/// How much of stdout and of stderr is kept; the rest is read and dropped so that the
/// process is never blocked on a full pipe.
const READ_CAP: u64 = 64 * 1024;

/// How much of the process's output a reason quotes.
const MAX_DETAIL: usize = 500;

/// Runs `argv` in the check's folder with the output on stdin, killing it after the timeout.
pub(super) async fn check(argv: &[String], check: &Check<'_>, cancel: &CancellationToken) -> Verdict {
    let timeout = check.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let Some((program, args)) = argv.split_first() else {
        return Verdict::Fail("the verification command is empty".to_owned());
    };
    let mut child = match crate::process::spawn(program, args, check.workdir, check.hidden) {
        Ok(child) => child,
        Err(error) => return Verdict::Fail(format!("cannot start verification command `{program}`: {error}")),
    };
    let Some((mut stdin, stdout, stderr)) = child.pipes() else {
        return Verdict::Fail("the verification command has no stdin, stdout or stderr".to_owned());
    };
    let output = check.output;
    // The program takes real time; a plan test's virtual clock waits for it.
    let _real_time = crate::process::RealTime::hold(timeout);
    let end = {
        let work = async {
            // A program that exits without reading its input closes the pipe; that is not an error.
            let feed = async move {
                let _ = stdin.write_all(output.as_bytes()).await;
                drop(stdin);
            };
            let (_, stdout, stderr) = tokio::join!(feed, read_capped(stdout), read_capped(stderr));
            (child.wait().await, stdout, stderr)
        };
        tokio::select! {
            finished = work => End::Finished(finished),
            () = tokio::time::sleep(timeout) => End::TimedOut,
            () = cancel.cancelled() => End::Cancelled,
        }
    };
    let (status, stdout, stderr) = match end {
        End::Finished(finished) => finished,
        End::TimedOut => {
            child.kill();
            return Verdict::Fail(format!("verification command `{program}` timed out after {timeout:?}"));
        }
        End::Cancelled => {
            child.kill();
            return Verdict::Fail("the verification was cancelled".to_owned());
        }
    };
    match status {
        Ok(status) if status.success() => Verdict::Pass,
        Ok(status) => Verdict::Fail(failure(status, &stdout, &stderr)),
        Err(error) => Verdict::Fail(format!("verification command `{program}` could not be waited for: {error}")),
    }
}

/// How waiting for the process ended.
enum End {
    /// It exited: its status, stdout and stderr.
    Finished((std::io::Result<ExitStatus>, String, String)),
    /// The timeout passed first.
    TimedOut,
    /// The run was cancelled first.
    Cancelled,
}

/// The reason for a non-zero exit: the code and an excerpt of stderr, or of stdout when
/// stderr is empty.
fn failure(status: ExitStatus, stdout: &str, stderr: &str) -> String {
    let how = status.code().map_or_else(
        || "verification command was killed by a signal".to_owned(),
        |code| format!("verification command exited with {code}"),
    );
    let detail = if stderr.trim().is_empty() { stdout } else { stderr };
    let detail = excerpt(detail, MAX_DETAIL);
    if detail.is_empty() { how } else { format!("{how}: {detail}") }
}

/// The first [`READ_CAP`] bytes of a stream, as text; the rest is drained and dropped.
async fn read_capped(mut stream: impl AsyncRead + Unpin) -> String {
    let mut buffer = Vec::new();
    let kept = (&mut stream).take(READ_CAP).read_to_end(&mut buffer).await;
    let mut text = String::from_utf8_lossy(&buffer).into_owned();
    match kept {
        Ok(_) => {
            if let Ok(more @ 1..) = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await {
                text.push_str(&format!("\n(and {more} more bytes)"));
            }
        }
        Err(error) => text.push_str(&format!("\n(unreadable: {error})")),
    }
    text
}
