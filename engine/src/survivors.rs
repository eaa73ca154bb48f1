//! The processes a runner that died (kill -9, a crash, a lost machine session) left running:
//! found by the mark every program of an attempt carries in its environment
//! (`RUNNER_ATTEMPT=<run>/...`, see [`crate::process`]) and ended before the run is resumed, so
//! they never run alongside the attempts that replace them.
//!
//! The mark is the record: it lives in the processes themselves, so no crash can lose it, and
//! a pid that was reused by an unrelated process does not carry it. They are found through
//! `/proc` (Linux); where there is none, none are found.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, getpgrp, kill_process, kill_process_group};

use crate::process::MARK;

/// A marked process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    /// Its pid.
    pub pid: i32,
    /// Its process group.
    pub group: i32,
    /// Its mark: `<run>/<task>/<attempt>`.
    pub attempt: String,
}

/// Marked processes that outlived a SIGKILL.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{} process(es) of run `{run}` still run after SIGKILL (pids {pids})", survivors.len())]
#[diagnostic(
    code(engine::survivors),
    help("they are probably stuck in the kernel (uninterruptible IO); end them, then resume again")
)]
pub struct SurvivorsError {
    /// The run.
    pub run: String,
    /// Their pids, comma-separated.
    pub pids: String,
    /// The processes.
    pub survivors: Vec<Survivor>,
}

/// The live processes (this one aside) marked with an attempt of `run`.
pub fn find(run: &str) -> Vec<Survivor> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let prefix = format!("{MARK}={run}/");
    let me = std::process::id();
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let dir = Path::new("/proc").join(pid.to_string());
            // A process of another user, or one that just ended, cannot be read: not ours.
            let environ = std::fs::read(dir.join("environ")).ok()?;
            let attempt = environ
                .split(|&b| b == 0)
                .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
                .map(|rest| format!("{run}/{}", String::from_utf8_lossy(rest)))?;
            let group = group_of(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
            Some(Survivor { pid: i32::try_from(pid).ok()?, group, attempt })
        })
        .collect()
}

/// Kills every process marked with an attempt of `run`, and the process groups they are in,
/// with SIGKILL, and waits until they are gone (at most `patience`). Returns those it found.
pub fn end(run: &str, patience: Duration) -> Result<Vec<Survivor>, SurvivorsError> {
    let own_group = getpgrp().as_raw_nonzero().get();
    let started = Instant::now();
    let mut ended: Vec<Survivor> = Vec::new();
    loop {
        let found = find(run);
        if found.is_empty() {
            return Ok(ended);
        }
        if started.elapsed() >= patience {
            let pids = found.iter().map(|s| s.pid.to_string()).collect::<Vec<_>>().join(", ");
            return Err(SurvivorsError { run: run.to_owned(), pids, survivors: found });
        }
        for survivor in found {
            // Its group holds the processes it started that dropped the mark; runner's own
            // group is never one of an attempt's.
            if survivor.group != own_group
                && let Some(group) = Pid::from_raw(survivor.group)
            {
                let _ = kill_process_group(group, Signal::KILL);
            }
            if let Some(pid) = Pid::from_raw(survivor.pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
            if !ended.iter().any(|e| e.pid == survivor.pid) {
                ended.push(survivor);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The process group in the text of `/proc/<pid>/stat`: the third field after the command
/// name, which is in parentheses and may hold spaces. A zombie (which can do nothing more)
/// counts as gone.
fn group_of(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state.starts_with(['Z', 'X']) {
        return None;
    }
    fields.nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::group_of;

    #[test]
    fn the_group_is_read_past_a_command_name_with_spaces_and_parentheses() {
        assert_eq!(group_of("4242 (a (b) c) S 1 4240 4240 0 -1"), Some(4240));
        assert_eq!(group_of("4242 (sh) Z 1 4240 4240 0 -1"), None);
        assert_eq!(group_of("garbage"), None);
    }
}
