//! Past runs, newest first: what the forecast learns its expected figures from, and what
//! `runner forecast --accuracy` scores.

use engine::forecast::History;

use crate::home::{RunDir, runs_dir};
use crate::store::{Run, Runs};

/// How many of the newest runs the forecast learns from.
pub const HISTORY_RUNS: usize = 20;

/// The most bytes of run logs the forecast reads for its history: a run of hundreds of thousands
/// of tasks is passed over rather than slow every `critic`.
const HISTORY_LOG_BYTES: u64 = 32 << 20;

/// The newest `limit` runs of `runs` (all of them for `usize::MAX`), newest first: by the time of
/// their log's last write for run folders, by creation for PostgreSQL. With `small`, run folders
/// are taken only while their logs come to at most [`HISTORY_LOG_BYTES`] in all (a log that
/// would pass it is left out).
pub fn newest(runs: &Runs, limit: usize, small: bool) -> anyhow::Result<Vec<Run>> {
    if let Runs::Postgres(_) = runs {
        return Ok(runs.rows()?.into_iter().take(limit).map(|(run, _)| run).collect());
    }
    let entries = match std::fs::read_dir(runs_dir()) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => anyhow::bail!("cannot list {}: {error}", runs_dir().display()),
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(run) = RunDir::existing(&entry.file_name().to_string_lossy()) else { continue };
        let Ok(meta) = std::fs::metadata(run.log()) else { continue };
        found.push((meta.modified().ok(), meta.len(), run));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.2.dir.cmp(&a.2.dir)));
    let mut room = if small { HISTORY_LOG_BYTES } else { u64::MAX };
    let mut fits = |size: u64| match room.checked_sub(size) {
        Some(left) => {
            room = left;
            true
        }
        None => false,
    };
    Ok(found.into_iter().filter(|(_, size, _)| fits(*size)).take(limit).map(|(_, _, run)| Run::Dir(run)).collect())
}

/// What the newest runs of `runs` observed; empty when there are none. A run that cannot be read
/// is passed over: the history only sharpens a forecast that stands without it.
pub fn history(runs: &Runs) -> History {
    let mut history = History::default();
    match newest(runs, HISTORY_RUNS, true) {
        Ok(found) => {
            for run in found {
                match run.load() {
                    Ok((records, _)) => history.add(&records),
                    Err(error) => tracing::debug!(run = run.id(), %error, "a past run left out of the forecast"),
                }
            }
        }
        Err(error) => tracing::debug!(%error, "no past runs for the forecast"),
    }
    history
}
