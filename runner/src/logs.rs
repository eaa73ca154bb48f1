//! `runner logs` (one readable line per event, optionally following a live run) and `runner
//! events` (the raw records, one JSON object per line).

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use engine::{Handler, Record, RunState, RunStatus};

use crate::diagnostics::print;
use crate::home::RunDir;
use crate::live::line;

/// How often `--follow` looks for new events.
const POLL: Duration = Duration::from_millis(200);

/// Prints a run's events as readable lines; with `follow`, keeps printing new ones until the
/// run ends, pauses, or is left without a process driving it.
pub fn logs(run_id: &str, follow: bool) -> anyhow::Result<u8> {
    let run = RunDir::existing(run_id)?;
    if !follow {
        let (records, warning) = run.load()?;
        if let Some(warning) = warning {
            eprintln!("warning: {warning}");
        }
        let mut out = String::new();
        for record in &records {
            out.push_str(&line(record));
            out.push('\n');
        }
        print(&out)?;
        return Ok(0);
    }
    // A damaged log is refused before following it, as every other command does.
    run.load()?;
    let mut tail = Tail::default();
    let mut state = RunState::new();
    let mut last_chance = false;
    loop {
        for record in tail.read(&run)? {
            state.apply(&record.event);
            print(&format!("{}\n", line(&record)))?;
        }
        if state.status.is_final() || state.status == RunStatus::Paused {
            return Ok(0);
        }
        if run.driver_pid().is_none() {
            // Read once more: the process may have written its last events and left.
            if last_chance {
                eprintln!("run `{run_id}` is not being driven (interrupted); `runner resume {run_id}` continues it");
                return Ok(0);
            }
            last_chance = true;
        } else {
            last_chance = false;
        }
        std::thread::sleep(POLL);
    }
}

/// Prints a run's records as JSON lines (re-serialised, so a torn last line is left out).
pub fn events(run_id: &str) -> anyhow::Result<u8> {
    let run = RunDir::existing(run_id)?;
    let (records, warning) = run.load()?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    let mut out = String::new();
    for record in &records {
        out.push_str(&serde_json::to_string(record)?);
        out.push('\n');
    }
    print(&out)?;
    Ok(0)
}

/// Reads the complete lines appended to a log since the last read; a torn last line waits
/// until its end is written.
#[derive(Debug, Default)]
pub struct Tail {
    offset: u64,
    partial: Vec<u8>,
    line: usize,
}

impl Tail {
    /// The records whose lines were completed since the last call.
    pub fn read(&mut self, run: &RunDir) -> anyhow::Result<Vec<Record>> {
        let path = run.log();
        let mut file =
            std::fs::File::open(&path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        let length = file.metadata().map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?.len();
        if length < self.offset {
            // The next process to open the log cut its torn last line: read it again from there.
            self.offset = self.offset.saturating_sub(self.partial.len() as u64).min(length);
            self.partial.clear();
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let mut records = Vec::new();
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let text: Vec<u8> = self.partial.drain(..=end).collect();
            self.line += 1;
            let record = serde_json::from_slice::<Record>(&text)
                .map_err(|e| anyhow::anyhow!("{}:{}: not an event record ({e})", path.display(), self.line))?;
            records.push(record);
        }
        Ok(records)
    }
}
