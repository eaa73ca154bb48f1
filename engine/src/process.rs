//! How runner starts and stops every program it runs (command agents, tools, verification
//! commands): each in a process group of its own, killed whole when its attempt gives up on it
//! (a timeout, a cancel, a run that stops), and marked with the attempt it belongs to, so that
//! the processes a crashed runner left behind can be found ([`crate::survivors`]).

use std::future::Future;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// The environment variable that marks a program with its attempt: `<run>/<task>/<attempt>`,
/// where `<run>` is what the driver was given (`Driver::mark_processes`).
pub const MARK: &str = "RUNNER_ATTEMPT";

tokio::task_local! {
    /// The mark of the attempt whose work runs on the current task.
    static ATTEMPT: Arc<str>;
}

/// Runs `work` so that every program it starts carries `RUNNER_ATTEMPT=<mark>`.
pub fn marked<F: Future>(mark: Arc<str>, work: F) -> impl Future<Output = F::Output> {
    ATTEMPT.scope(mark, work)
}

/// Starts `program` with `args` the way runner runs every program: the argv directly, never a
/// shell; in `workdir`; stdin, stdout and stderr piped; without the `hidden` environment
/// variables (those that hold API keys), so a program cannot print a key into an output; marked
/// with the current attempt, if any; and in a process group of its own, so that a Ctrl-C at the
/// terminal reaches runner only (which stops the program itself) and the group can be killed
/// whole.
pub fn spawn(program: &str, args: &[String], workdir: &Path, hidden: &[String]) -> io::Result<Group> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for variable in hidden {
        command.env_remove(variable);
    }
    if let Ok(mark) = ATTEMPT.try_with(Arc::clone) {
        command.env(MARK, &*mark);
    }
    let child = command.spawn()?;
    // The program leads its group, so the group's id is its pid.
    let leader = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
    Ok(Group { child, leader })
}

/// Keeps a paused tokio clock (a plan test's virtual time) from jumping ahead while a real
/// program runs: tokio advances a paused clock by itself only when every task waits for a
/// timer, which is what waiting for a program looks like. Held for at most `limit` of real
/// time, after which the clock may move again, so a program that hangs still reaches its
/// timeout. On a clock that is not paused it changes nothing.
#[derive(Debug)]
pub struct RealTime {
    /// Dropping it ends the blocking task that holds the clock.
    _release: std::sync::mpsc::Sender<()>,
}

impl RealTime {
    /// Holds the clock until the returned value is dropped or `limit` has passed.
    pub fn hold(limit: std::time::Duration) -> Self {
        let (release, held) = std::sync::mpsc::channel::<()>();
        // tokio does not advance a paused clock while a blocking task runs; this one ends when
        // the sender is dropped (the receive fails at once) or after `limit`.
        drop(tokio::task::spawn_blocking(move || held.recv_timeout(limit)));
        RealTime { _release: release }
    }
}

/// A started program and its process group. Dropping it before the program was waited for
/// kills the whole group (SIGKILL): the program and everything it started that stayed in its
/// group.
#[derive(Debug)]
pub struct Group {
    child: Child,
    /// The group's id, until the program has been waited for. Until then its pid (the group's
    /// id) cannot be given to another process, so killing the group cannot hit a stranger.
    leader: Option<Pid>,
}

impl Group {
    /// The program's stdin, stdout and stderr; `None` once they were taken.
    pub fn pipes(&mut self) -> Option<(ChildStdin, ChildStdout, ChildStderr)> {
        Some((self.child.stdin.take()?, self.child.stdout.take()?, self.child.stderr.take()?))
    }

    /// Waits for the program to exit. Processes it started and left running are left alone:
    /// a program that ends normally may keep a helper on purpose.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.leader = None;
        Ok(status)
    }

    /// Kills the whole group at once (SIGKILL), unless the program was already waited for.
    pub fn kill(&mut self) {
        if let Some(leader) = self.leader.take() {
            // The group may be gone already; there is nothing left to do then.
            let _ = kill_process_group(leader, Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}
