//! The default store: one JSON object per line in `$RUNNER_HOME/runs/<run_id>/events.jsonl`.
//!
//! A writer thread owns the file. It takes every batch queued so far, writes them, calls
//! `fsync` once and then acknowledges them all, so records produced while a sync is in flight
//! share the next one (group commit). On load, a last line that does not parse (a write cut by
//! a crash) is dropped with a warning and cut from the file before anything is appended.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::{Durable, EventStore, StoreError};
use crate::event::Record;

type Batch = (Vec<Record>, oneshot::Sender<Result<(), StoreError>>);

/// Appends records to a JSONL file through a writer thread with group commit.
#[derive(Debug)]
pub struct JsonlStore {
    sender: mpsc::Sender<Batch>,
    syncs: Arc<AtomicU64>,
}

/// What was read from an existing log.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The records, in order.
    pub records: Vec<Record>,
    /// A warning about a torn last line that was dropped.
    pub warning: Option<String>,
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> StoreError + 'a {
    move |error| StoreError::Io { action, path: path.display().to_string(), reason: error.to_string() }
}

impl JsonlStore {
    /// Creates the log of a new run (its folder too); fails if it exists.
    pub fn create(path: &Path) -> Result<Self, StoreError> {
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(io("create", folder))?;
        }
        let file = OpenOptions::new().create_new(true).append(true).open(path).map_err(io("create", path))?;
        Ok(Self::spawn(file, path.to_path_buf()))
    }

    /// Reads an existing log, cuts a torn last line, and opens it for appending.
    pub fn open(path: &Path) -> Result<(Self, Loaded), StoreError> {
        let (loaded, good_len) = read(path)?;
        let mut file = OpenOptions::new().read(true).write(true).open(path).map_err(io("open", path))?;
        file.set_len(good_len).map_err(io("truncate", path))?;
        file.seek(SeekFrom::End(0)).map_err(io("seek", path))?;
        file.sync_all().map_err(io("sync", path))?;
        Ok((Self::spawn(file, path.to_path_buf()), loaded))
    }

    /// Reads a log without opening it for writing.
    pub fn load(path: &Path) -> Result<Loaded, StoreError> {
        read(path).map(|(loaded, _)| loaded)
    }

    /// How many times the writer has called `fsync`.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    fn spawn(file: File, path: PathBuf) -> Self {
        let (sender, receiver) = mpsc::channel::<Batch>();
        let syncs = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&syncs);
        // If no thread can be started the receiver is dropped, and every append reports `Closed`.
        let writer = std::thread::Builder::new()
            .name("runner-event-writer".into())
            .spawn(move || write_loop(file, &path, &receiver, &counter));
        drop(writer);
        JsonlStore { sender, syncs }
    }
}

fn write_loop(mut file: File, path: &Path, receiver: &mpsc::Receiver<Batch>, syncs: &AtomicU64) {
    let mut buffer = Vec::with_capacity(64 * 1024);
    while let Ok(first) = receiver.recv() {
        let mut batches = vec![first];
        batches.extend(receiver.try_iter());
        buffer.clear();
        let mut result = Ok(());
        for (records, _) in &batches {
            for record in records {
                if let Err(error) = serde_json::to_writer(&mut buffer, record) {
                    result = Err(StoreError::Io {
                        action: "encode",
                        path: path.display().to_string(),
                        reason: error.to_string(),
                    });
                }
                buffer.push(b'\n');
            }
        }
        if result.is_ok() {
            result = file.write_all(&buffer).and_then(|()| file.sync_data()).map_err(io("write", path));
            syncs.fetch_add(1, Ordering::Relaxed);
        }
        let failed = result.is_err();
        for (_, ack) in batches {
            let _ = ack.send(result.clone());
        }
        if failed {
            return;
        }
    }
}

impl EventStore for JsonlStore {
    fn append(&self, records: Vec<Record>) -> Durable {
        let (ack, done) = oneshot::channel();
        if self.sender.send((records, ack)).is_err() {
            return Box::pin(std::future::ready(Err(StoreError::Closed)));
        }
        Box::pin(async move { done.await.unwrap_or(Err(StoreError::Closed)) })
    }
}

/// Parses a log; returns the records and the length of the part that parsed.
fn read(path: &Path) -> Result<(Loaded, u64), StoreError> {
    let file = File::open(path).map_err(io("open", path))?;
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut good_len = 0u64;
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut torn: Option<String> = None;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io("read", path))?;
        if read == 0 {
            break;
        }
        number += 1;
        if let Some(reason) = torn.take() {
            // A bad line followed by more lines is damage, not a torn write.
            return Err(StoreError::Corrupt { path: path.display().to_string(), line: number - 1, reason });
        }
        let complete = line.ends_with(b"\n");
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) if complete => {
                records.push(record);
                good_len += read as u64;
            }
            Ok(_) => torn = Some("the line has no end".into()),
            Err(error) => torn = Some(error.to_string()),
        }
    }
    let warning = torn.map(|reason| {
        format!(
            "{}: dropped a torn last line (line {number}: {reason}); the run continues from the line before",
            path.display()
        )
    });
    Ok((Loaded { records, warning }, good_len))
}
