//! The default store: one JSON object per line in `$RUNNER_HOME/runs/<run_id>/events.jsonl`.
//!
//! A writer thread owns the file. It takes every batch queued so far, writes them, calls
//! `fsync` once and then acknowledges them all, so records produced while a sync is in flight
//! share the next one (group commit). A new run's log can be staged in a hidden folder that is
//! renamed to the run's folder once its first records are durable, so a run folder never
//! exists without them.
//!
//! On load, every record is checked against what the log promises (docs/events.md). A last
//! line without its newline, or one that is not JSON (a write cut by a crash), is dropped
//! with a warning and cut from the file before anything is appended; anything else that
//! breaks the promises is `store::corrupt`, and the file is left as it is.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use super::check::{Checker, DAMAGED};
use super::{Ack, Durable, EventStore, Returned, StoreError};
use crate::event::{Event, Record};

type Batch = (Vec<Record>, Ack);

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
    /// Creates a new log (and its folder if needed); fails if the log exists.
    pub fn create(path: &Path) -> Result<Self, StoreError> {
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(io("create", folder))?;
        }
        let file = OpenOptions::new().create_new(true).append(true).open(path).map_err(io("create", path))?;
        Ok(Self::spawn(file, path.to_path_buf(), None))
    }

    /// Creates a new log in a staging folder (`path`'s parent, which must exist) and renames
    /// that folder to `folder` once the first append is durable; the append fails if `folder`
    /// exists by then. When the first append fails, or the store is dropped before one, the
    /// staging folder is removed with all it holds. So `folder` never exists without the
    /// log's first records.
    pub fn stage(path: &Path, folder: &Path) -> Result<Self, StoreError> {
        let staging = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let file = OpenOptions::new().create_new(true).append(true).open(path).map_err(io("create", path))?;
        let publish = Publish { staging: staging.to_path_buf(), folder: folder.to_path_buf() };
        Ok(Self::spawn(file, path.to_path_buf(), Some(publish)))
    }

    /// Reads an existing log, cuts a torn last line, and opens it for appending.
    pub fn open(path: &Path) -> Result<(Self, Loaded), StoreError> {
        let (loaded, good_len) = read(path)?;
        let mut file = OpenOptions::new().read(true).write(true).open(path).map_err(io("open", path))?;
        file.set_len(good_len).map_err(io("truncate", path))?;
        file.seek(SeekFrom::End(0)).map_err(io("seek", path))?;
        file.sync_all().map_err(io("sync", path))?;
        Ok((Self::spawn(file, path.to_path_buf(), None), loaded))
    }

    /// Reads a log without opening it for writing.
    pub fn load(path: &Path) -> Result<Loaded, StoreError> {
        read(path).map(|(loaded, _)| loaded)
    }

    /// How many times the writer has called `fsync`.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    fn spawn(file: File, path: PathBuf, publish: Option<Publish>) -> Self {
        let (sender, receiver) = mpsc::channel::<Batch>();
        let syncs = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&syncs);
        // If no thread can be started the receiver is dropped, and every append reports `Closed`.
        let writer = std::thread::Builder::new()
            .name("runner-event-writer".into())
            .spawn(move || write_loop(file, path, publish, &receiver, &counter));
        drop(writer);
        JsonlStore { sender, syncs }
    }
}

/// A staged log's folder and where it goes once the first records are durable.
struct Publish {
    staging: PathBuf,
    folder: PathBuf,
}

impl Publish {
    /// Renames the staging folder into place and makes the rename durable.
    fn publish(&self) -> Result<(), StoreError> {
        if self.folder.exists() {
            return Err(StoreError::Io {
                action: "create",
                path: self.folder.display().to_string(),
                reason: "it exists already (another process created it meanwhile)".into(),
            });
        }
        std::fs::rename(&self.staging, &self.folder).map_err(io("create", &self.folder))?;
        match self.folder.parent() {
            Some(parent) => File::open(parent).and_then(|dir| dir.sync_all()).map_err(io("sync", parent)),
            None => Ok(()),
        }
    }

    /// Removes the staging folder of a log whose first records never became durable.
    fn abandon(&self) {
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}

fn write_loop(
    mut file: File,
    mut path: PathBuf,
    mut publish: Option<Publish>,
    receiver: &mpsc::Receiver<Batch>,
    syncs: &AtomicU64,
) {
    let mut buffer = Vec::with_capacity(Chunked::CHUNK);
    while let Ok(first) = receiver.recv() {
        let mut batches = vec![first];
        batches.extend(receiver.try_iter());
        buffer.clear();
        let mut result = Ok(());
        std::thread::scope(|scope| {
            // A `RunCreated` encodes its plan twice: as the plan, then for `plan_sha256`; the
            // hash is computed on a thread of its own while the plan is encoded here.
            for record in batches.iter().flat_map(|(records, _)| records) {
                if let Event::RunCreated(created) = &record.event {
                    scope.spawn(|| created.plan_sha256.as_str().len());
                }
            }
            let mut out = Chunked { buffer: &mut buffer, file: &mut file };
            for record in batches.iter().flat_map(|(records, _)| records) {
                let encoded = serde_json::to_writer(&mut out, record)
                    .and_then(|()| out.write_all(b"\n").map_err(serde_json::Error::io));
                if let Err(error) = encoded {
                    let action = if error.is_io() { "write" } else { "encode" };
                    result =
                        Err(StoreError::Io { action, path: path.display().to_string(), reason: error.to_string() });
                    break;
                }
            }
            if result.is_ok() {
                result = out.flush().map_err(io("write", &path));
            }
        });
        if result.is_ok() {
            result = file.sync_data().map_err(io("write", &path));
            syncs.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(staged) = publish.take() {
            result = result.and_then(|()| staged.publish());
            match (&result, path.file_name()) {
                // From now on the log's own path names it in messages.
                (Ok(()), Some(name)) => path = staged.folder.join(name),
                (Ok(()), None) => {}
                (Err(_), _) => staged.abandon(),
            }
        }
        let failed = result.is_err();
        for (records, ack) in batches {
            ack.send(records, &result);
        }
        if failed {
            return;
        }
    }
    if let Some(staged) = publish {
        staged.abandon();
    }
}

/// The encoder's output: gathered in a reused buffer and written to the file whenever it
/// holds [`Chunked::CHUNK`] bytes, so a large record (a new run's plan, tens of MB at 100k
/// tasks) is never held whole in memory.
struct Chunked<'a> {
    buffer: &'a mut Vec<u8>,
    file: &'a mut File,
}

impl Chunked<'_> {
    /// Bytes gathered before they are written.
    const CHUNK: usize = 64 * 1024;
}

impl Write for Chunked<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    /// The encoder writes a few bytes at a time: taken here without the default loop over
    /// `write`, which cost more than copying them.
    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= Self::CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.write_all(self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

impl EventStore for JsonlStore {
    fn append(&self, records: Vec<Record>) -> Durable {
        Ack::durable(|ack| self.sender.send((records, ack)).is_ok())
    }

    fn append_returning(&self, records: Vec<Record>) -> Returned {
        Ack::returned(|ack| self.sender.send((records, ack)).is_ok())
    }
}

/// Parses a log and checks its promises; returns the records and the length of the part that
/// holds them (everything but a torn last line).
fn read(path: &Path) -> Result<(Loaded, u64), StoreError> {
    let file = File::open(path).map_err(io("open", path))?;
    let mut reader = BufReader::new(file);
    let mut checker = Checker::new(path.display().to_string());
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
            // A line that is not JSON followed by more lines is damage, not a torn write.
            return Err(checker.corrupt(number - 1, reason, DAMAGED));
        }
        if !line.ends_with(b"\n") {
            // `read_until` only stops short of a newline at the end of the file.
            torn = Some("the line has no end".into());
            continue;
        }
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) => {
                checker.accept(record, number)?;
                good_len += read as u64;
            }
            Err(error) => match serde_json::from_slice::<serde_json::Value>(&line) {
                Ok(value) => return Err(checker.not_a_record(&value, &error, number)),
                Err(error) => torn = Some(format!("not JSON: {error}")),
            },
        }
    }
    let warning = torn.map(|reason| {
        format!(
            "{}: dropped a torn last line (line {number}: {reason}); the run continues from the line before",
            path.display()
        )
    });
    Ok((Loaded { records: checker.into_records(), warning }, good_len))
}
