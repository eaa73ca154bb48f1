//! The default store: one JSON object per line in `$RUNNER_HOME/runs/<run_id>/events.jsonl`.
//!
//! A writer thread owns the file. It takes every batch queued so far, writes them, calls
//! `fsync` once and then acknowledges them all, so records produced while a sync is in flight
//! share the next one (group commit). A new run's log can be staged in a hidden folder that is
//! renamed to the run's folder once its first records are durable, so a run folder never
//! exists without them.
//!
//! Each line ends with a CRC-32C of the record's JSON as one more field,
//! `,"crc":"<8 hex digits>"}`, so a line stays one JSON object that any reader parses and a
//! byte changed after it was written is found. Lines without one (written before they were
//! summed) are read as they are.
//!
//! On load, every record is checked against what the log promises (docs/events.md). A last
//! line without its newline, or one that is not JSON (a write cut by a crash), is dropped
//! with a warning and cut from the file before anything is appended; anything else that
//! breaks the promises (a checksum that does not match, an empty log among them) is
//! `store::corrupt`, and the file is left as it is.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use super::check::{Checker, DAMAGED};
use super::{Ack, Durable, EventStore, Returned, StoreError};
use crate::event::{Event, Record};
use crc32c::Crc;

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
            let mut out = Chunked { buffer: &mut buffer, file: &mut file, start: 0, crc: Crc::new() };
            for record in batches.iter().flat_map(|(records, _)| records) {
                if let Err(error) = out.line(record) {
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
/// tasks) is never held whole in memory. It sums each record's bytes as they pass.
struct Chunked<'a> {
    buffer: &'a mut Vec<u8>,
    file: &'a mut File,
    /// Where the record being encoded starts in the buffer.
    start: usize,
    /// The CRC of the record's bytes already written to the file.
    crc: Crc,
}

impl Chunked<'_> {
    /// Bytes gathered before they are written.
    const CHUNK: usize = 64 * 1024;

    /// Encodes a record as its line: its JSON, with its checksum as the last field.
    fn line(&mut self, record: &Record) -> Result<(), serde_json::Error> {
        self.start = self.buffer.len();
        self.crc = Crc::new();
        serde_json::to_writer(&mut *self, record)?;
        // The closing brace is still in the buffer: a full buffer is written out only before
        // more bytes go into it.
        let crc = self.crc.update(&self.buffer[self.start..]).value();
        if self.buffer.pop() != Some(b'}') {
            return Err(serde::ser::Error::custom("a record did not encode as a JSON object"));
        }
        self.buffer.extend_from_slice(&seal(crc));
        Ok(())
    }
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
        if self.buffer.len() >= Self::CHUNK {
            self.crc = self.crc.update(&self.buffer[self.start..]);
            self.start = 0;
            self.flush()?;
        }
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.write_all(self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

/// What opens a line's checksum field; 8 lower-case hex digits, `"}` and the newline follow.
const MARK: &[u8] = b",\"crc\":\"";

/// The length of a line's end from its checksum field on: [`MARK`], the digits, `"}\n`.
const SEAL: usize = MARK.len() + 8 + 3;

/// A line's end from its checksum field on, for a record whose JSON sums to `crc`.
fn seal(crc: u32) -> [u8; SEAL] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut seal = *b",\"crc\":\"00000000\"}\n";
    for (i, digit) in seal[MARK.len()..MARK.len() + 8].iter_mut().enumerate() {
        *digit = HEX[(crc >> (28 - 4 * i)) as usize & 0xf];
    }
    seal
}

/// Checks the checksum a complete line ends with and takes it off, leaving the record's JSON
/// exactly as it was summed; a line without one (an older runner's) is left as it is. The
/// error says why the checksum does not hold.
fn unseal(line: &mut Vec<u8>) -> Result<(), String> {
    let Some(at) = line.len().checked_sub(SEAL) else { return Ok(()) };
    let end = &line[at..];
    if !end.starts_with(MARK) || !end.ends_with(b"\"}\n") {
        return Ok(());
    }
    let digits = &end[MARK.len()..MARK.len() + 8];
    let Some(written) = hex(digits) else {
        let digits = String::from_utf8_lossy(digits);
        return Err(format!("the checksum `{digits}` is not 8 lower-case hex digits"));
    };
    line.truncate(at);
    line.push(b'}');
    let summed = Crc::new().update(line).value();
    if summed != written {
        return Err(format!(
            "checksum mismatch: the line says crc {written:08x}, its bytes sum to {summed:08x}; it changed after it was written"
        ));
    }
    Ok(())
}

/// The value of 8 lower-case hex digits.
fn hex(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |value, &digit| {
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        Some(value << 4 | u32::from(nibble))
    })
}

mod crc32c {
    //! CRC-32C (Castagnoli), the checksum of iSCSI, ext4 and SSE 4.2's `crc32` instruction:
    //! table-driven, eight bytes a step ("slicing-by-8").

    /// The polynomial, reflected.
    const POLY: u32 = 0x82F6_3B78;

    /// `TABLES[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
    static TABLES: [[u32; 256]; 8] = tables();

    const fn tables() -> [[u32; 256]; 8] {
        let mut tables = [[0u32; 256]; 8];
        let mut byte = 0;
        while byte < 256 {
            let mut crc = byte as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
                bit += 1;
            }
            tables[0][byte] = crc;
            byte += 1;
        }
        let mut k = 1;
        while k < 8 {
            let mut byte = 0;
            while byte < 256 {
                let before = tables[k - 1][byte];
                tables[k][byte] = (before >> 8) ^ tables[0][(before & 0xff) as usize];
                byte += 1;
            }
            k += 1;
        }
        tables
    }

    /// A CRC in progress over bytes given in pieces.
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Crc(u32);

    impl Crc {
        /// The CRC of no bytes yet.
        pub(super) const fn new() -> Self {
            Crc(!0)
        }

        /// The CRC with `bytes` added.
        pub(super) fn update(self, bytes: &[u8]) -> Self {
            let t = &TABLES;
            let mut crc = self.0;
            let (words, rest) = bytes.as_chunks::<8>();
            for word in words {
                let word = u64::from_le_bytes(*word);
                let low = (word as u32) ^ crc;
                let high = (word >> 32) as u32;
                crc = t[7][(low & 0xff) as usize]
                    ^ t[6][(low >> 8 & 0xff) as usize]
                    ^ t[5][(low >> 16 & 0xff) as usize]
                    ^ t[4][(low >> 24) as usize]
                    ^ t[3][(high & 0xff) as usize]
                    ^ t[2][(high >> 8 & 0xff) as usize]
                    ^ t[1][(high >> 16 & 0xff) as usize]
                    ^ t[0][(high >> 24) as usize];
            }
            for &byte in rest {
                crc = (crc >> 8) ^ t[0][((crc ^ u32::from(byte)) & 0xff) as usize];
            }
            Crc(crc)
        }

        /// The CRC of the bytes added.
        pub(super) fn value(self) -> u32 {
            !self.0
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Crc;

        #[test]
        fn the_check_value_of_crc32c() {
            assert_eq!(Crc::new().update(b"123456789").value(), 0xE306_9283);
            assert_eq!(Crc::new().update(b"").value(), 0);
        }

        #[test]
        fn bytes_given_in_pieces_sum_as_given_whole() {
            let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
            let whole = Crc::new().update(&bytes).value();
            for cut in [0, 1, 7, 8, 9, 500, 999, 1000] {
                let (a, b) = bytes.split_at(cut);
                assert_eq!(Crc::new().update(a).update(b).value(), whole, "cut at {cut}");
            }
        }
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

/// The hint for a log with no complete record.
const EMPTY: &str = "runner creates a run's log with its first records, so this one was emptied or damaged since: \
                     restore it from a copy, or remove the run's folder to forget the run";

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
        match parse(&checker, &mut line, number)? {
            Line::Record(record) => {
                checker.accept(record, number)?;
                good_len += read as u64;
            }
            Line::NotJson(reason) => torn = Some(reason),
        }
    }
    if checker.is_empty() {
        let reason = match torn {
            None => "the log is empty: it holds not even the run's `RunCreated`".to_owned(),
            Some(reason) => format!("the log holds no complete record: its only line is torn ({reason})"),
        };
        return Err(checker.corrupt(1, reason, EMPTY));
    }
    let warning = torn.map(|reason| {
        format!(
            "{}: dropped a torn last line (line {number}: {reason}); the run continues from the line before",
            path.display()
        )
    });
    Ok((Loaded { records: checker.into_records(), warning }, good_len))
}

/// What a complete line holds.
enum Line {
    /// A record, its checksum checked if it has one.
    Record(Record),
    /// Text that is not JSON, and why: a torn write if it is the last line, else damage.
    NotJson(String),
}

/// One complete line of a log, as those who follow a live log read the lines appended since
/// it was loaded: its checksum checked and taken off (a line without one is read as it is),
/// then its record. The error says what is wrong with the line.
pub fn record_of_line(line: &[u8]) -> Result<Record, String> {
    let mut line = line.to_vec();
    unseal(&mut line)?;
    serde_json::from_slice::<Record>(&line).map_err(|error| format!("not an event record ({error})"))
}

/// Reads the complete line `number`: its checksum, then its record. JSON that is not a record,
/// or whose checksum does not hold, is `store::corrupt`.
fn parse(checker: &Checker, line: &mut Vec<u8>, number: usize) -> Result<Line, StoreError> {
    let summed = unseal(line);
    let error = match serde_json::from_slice::<Record>(line) {
        Ok(record) => return summed.map(|()| Line::Record(record)).map_err(|r| checker.corrupt(number, r, DAMAGED)),
        Err(error) => error,
    };
    match (serde_json::from_slice::<serde_json::Value>(line), summed) {
        (Err(error), _) => Ok(Line::NotJson(format!("not JSON: {error}"))),
        (Ok(_), Err(reason)) => Err(checker.corrupt(number, reason, DAMAGED)),
        (Ok(value), Ok(())) => Err(checker.not_a_record(&value, &error, number)),
    }
}
