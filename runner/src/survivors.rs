//! The processes a runner that died left running (`engine::survivors`): every program of a run
//! is marked with the run's folder, and `resume` (also `cancel` and `retry` of a run nobody
//! drives) ends the marked ones before it dispatches anything, so an old attempt never runs
//! alongside the one that replaces it.

use std::time::Duration;

use crate::live::say;
use crate::store::Run;

/// How long `resume` waits for the survivors to be gone after SIGKILL.
const PATIENCE: Duration = Duration::from_secs(5);

/// Ends the processes of `run` that a dead runner left behind, and says which attempts they
/// belonged to.
pub fn end(run: &Run) -> anyhow::Result<()> {
    let mark = run.mark();
    let ended = engine::survivors::end(&mark, PATIENCE).map_err(|e| anyhow::anyhow!("{e}"))?;
    if ended.is_empty() {
        return Ok(());
    }
    let prefix = format!("{mark}/");
    let mut attempts: Vec<&str> = ended.iter().map(|s| s.attempt.strip_prefix(&prefix).unwrap_or(&s.attempt)).collect();
    attempts.sort_unstable();
    attempts.dedup();
    say(&format!(
        "ended {} process(es) that the runner which died left running (task/attempt: {})",
        ended.len(),
        attempts.join(", ")
    ));
    Ok(())
}
