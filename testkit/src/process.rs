//! Watching processes from tests: whether one is gone, and waiting (bounded) until it is.

use std::time::{Duration, Instant};

/// Whether the process `pid` is gone (a zombie counts as gone: it can do nothing more).
pub fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// Waits until `pid` is gone; false if it is still there after `patience`.
pub fn ends_within(pid: i32, patience: Duration) -> bool {
    let started = Instant::now();
    while !gone(pid) {
        if started.elapsed() > patience {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}
