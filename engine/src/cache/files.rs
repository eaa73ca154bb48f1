//! The task cache of one machine: packs of entries under the runner home, `cache/packs/`.
//!
//! Each process that stores entries appends them to a pack of its own (`ID.pack`, one JSON entry
//! a line) and lists each in the pack's index (`ID.idx`: key, offset, length, time stored and the
//! slot of its plan and task). The pack's bytes are written before its index line, so a reader
//! that finds a line finds the whole entry; nothing is rewritten in place, so two processes never
//! write one file, and a pack in use is locked so `prune` and `clear` leave it alone. An entry is
//! checked against its key and digest when read: a damaged one is reported and never trusted.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::{CacheError, Entry, Key};

/// The largest entry read back: an output is capped well below it, so a longer one is damage.
const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;

/// Where an entry is.
#[derive(Debug, Clone)]
struct Place {
    pack: Arc<PathBuf>,
    offset: u64,
    len: u64,
    stored_at: u64,
}

/// What one line of an index says.
struct Line {
    key: Key,
    place: Place,
    slot: u64,
}

/// The pack this process appends to.
struct Writer {
    pack: File,
    idx: File,
    path: Arc<PathBuf>,
    /// Where the next entry starts in the pack, the entries still held here included.
    offset: u64,
    /// Entries and index lines not written yet, and the index lines they make.
    held: (Vec<u8>, Vec<u8>, Vec<Line>),
    /// Every key this writer stored: one run stores the same work once.
    stored: std::collections::HashSet<Key>,
}

/// How many bytes of entries a writer holds before it writes them (and at the end of the run):
/// a file written between two fsyncs of a run's log adds its data to the second one, so writing
/// as the run goes made a run of 100,000 tasks a second slower; held to the end, the kernel
/// writes them back after the run.
const HELD_BYTES: usize = 8 * 1024 * 1024;

/// A summary of a stored entry, for `runner cache list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The key.
    pub key: Key,
    /// Its size in the pack, in bytes.
    pub bytes: u64,
    /// When it was stored, in seconds since the Unix epoch.
    pub stored_at: u64,
}

/// What `prune` or `clear` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Entries removed.
    pub removed: usize,
    /// Entries kept.
    pub kept: usize,
    /// Bytes the cache holds afterwards.
    pub bytes: u64,
    /// Packs left alone because a running process appends to them.
    pub in_use: usize,
}

/// The task cache in a folder.
pub struct FileCache {
    dir: PathBuf,
    /// Every entry's place by key, the newest where a key was stored twice.
    index: HashMap<Key, Place>,
    /// The places of older entries of keys stored more than once (by other runs).
    older: HashMap<Key, Vec<Place>>,
    /// The newest key stored for each plan and task.
    latest: HashMap<u64, (u64, Key)>,
    /// Index lines that could not be read, reported once.
    problems: Vec<String>,
    writer: Option<Writer>,
    /// The packs read so far, kept open: a run that reuses many outputs reads them all.
    open: std::sync::Mutex<HashMap<Arc<PathBuf>, File>>,
}

impl FileCache {
    /// Opens the cache in `dir` (created on the first store), reading every pack's index.
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        let mut cache = FileCache {
            dir: dir.to_path_buf(),
            index: HashMap::new(),
            older: HashMap::new(),
            latest: HashMap::new(),
            problems: Vec::new(),
            writer: None,
            open: std::sync::Mutex::default(),
        };
        for idx in cache.indexes()? {
            cache.read_index(&idx)?;
        }
        Ok(cache)
    }

    /// The folder of the packs.
    fn packs(&self) -> PathBuf {
        self.dir.join("packs")
    }

    /// Every index file, sorted by name.
    fn indexes(&self) -> Result<Vec<PathBuf>, CacheError> {
        let packs = self.packs();
        let read = match fs::read_dir(&packs) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(CacheError::io("read", &packs, &error)),
        };
        let mut found: Vec<PathBuf> = read
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "idx"))
            .collect();
        found.sort();
        Ok(found)
    }

    /// Reads one index into the maps; a line that cannot be read is noted and skipped.
    fn read_index(&mut self, idx: &Path) -> Result<(), CacheError> {
        let file = match File::open(idx) {
            Ok(file) => file,
            // Removed by a `prune` or `clear` since the folder was listed.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(CacheError::io("read", idx, &error)),
        };
        let pack = Arc::new(idx.with_extension("pack"));
        let mut text = Vec::new();
        BufReader::new(file).read_to_end(&mut text).map_err(|error| CacheError::io("read", idx, &error))?;
        // A line still being written has no end yet: it is left for the next reader.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
        for (n, line) in text[..whole].split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
            match parse_line(line, &pack) {
                Some(line) => self.remember(line),
                None => self.problems.push(format!("{}:{}: an index line that cannot be read", idx.display(), n + 1)),
            }
        }
        Ok(())
    }

    /// Adds an index line to the maps.
    fn remember(&mut self, line: Line) {
        let Line { key, place, slot } = line;
        let stored_at = place.stored_at;
        let displaced = match self.index.get(&key) {
            Some(newest) if newest.stored_at > stored_at => Some(place),
            _ => self.index.insert(key, place),
        };
        if let Some(displaced) = displaced {
            self.older.entry(key).or_default().push(displaced);
        }
        if self.latest.get(&slot).is_none_or(|(at, _)| *at <= stored_at) {
            self.latest.insert(slot, (stored_at, key));
        }
    }

    /// Index lines that could not be read while opening, one message each.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Whether an entry is stored under `key` (it may still turn out damaged when read).
    pub fn contains(&self, key: &Key) -> bool {
        self.index.contains_key(key)
    }

    /// The newest entry stored under `key`: `None` when there is none (or its pack was removed
    /// since), an error when it is damaged.
    pub fn get(&self, key: &Key) -> Result<Option<Entry>, CacheError> {
        match self.index.get(key) {
            Some(place) => self.read(key, place),
            None => Ok(None),
        }
    }

    /// The newest entry stored under `key` by run `run`, if any.
    pub fn get_from(&self, key: &Key, run: &str) -> Result<Option<Entry>, CacheError> {
        let mut older: Vec<&Place> = self.older.get(key).into_iter().flatten().collect();
        older.sort_by_key(|place| std::cmp::Reverse(place.stored_at));
        for place in self.index.get(key).into_iter().chain(older) {
            if let Some(entry) = self.read(key, place)?.filter(|entry| entry.run == run) {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }

    /// Reads and checks the entry at `place`.
    fn read(&self, key: &Key, place: &Place) -> Result<Option<Entry>, CacheError> {
        let damaged = |reason: String| CacheError::Damaged { key: key.to_string(), reason };
        if place.len > MAX_ENTRY_BYTES {
            return Err(damaged(format!("its index gives it {} bytes", place.len)));
        }
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let file = match open.entry(Arc::clone(&place.pack)) {
            std::collections::hash_map::Entry::Occupied(found) => found.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => match File::open(&*place.pack) {
                Ok(file) => slot.insert(file),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(error) => return Err(CacheError::io("read", &place.pack, &error)),
            },
        };
        let mut bytes = vec![0; place.len as usize];
        file.read_exact_at(&mut bytes, place.offset)
            .map_err(|error| damaged(format!("its pack ends before it does ({error})")))?;
        let entry: Entry =
            serde_json::from_slice(&bytes).map_err(|error| damaged(format!("it is not an entry ({error})")))?;
        match entry.damage(key) {
            Some(reason) => Err(damaged(reason)),
            None => Ok(Some(entry)),
        }
    }

    /// The newest entry stored for task `task` of plan `plan`, if any can be read.
    pub fn latest(&self, plan: &str, task: &str) -> Option<Entry> {
        let (_, key) = self.latest.get(&slot_of(plan, task))?;
        self.get(key).ok().flatten()
    }

    /// Stores entries, appending them to this process's pack.
    pub fn put(&mut self, entries: &[Entry]) -> Result<(), CacheError> {
        if entries.is_empty() {
            return Ok(());
        }
        if self.writer.is_none() {
            self.writer = Some(self.new_writer()?);
        }
        let writer = self.writer.as_mut().unwrap_or_else(|| unreachable!("the writer was just made"));
        let (pack, idx, lines) = &mut writer.held;
        for entry in entries {
            let Ok(key) = entry.key.parse::<Key>() else { continue };
            if !writer.stored.insert(key) {
                continue;
            }
            let start = pack.len();
            serde_json::to_writer(&mut *pack, entry).map_err(|error| CacheError::Encode(error.to_string()))?;
            let len = (pack.len() - start) as u64;
            pack.push(b'\n');
            let offset = writer.offset;
            writer.offset += len + 1;
            let slot = slot_of(&entry.plan, &entry.task);
            idx.extend_from_slice(format!("{key} {offset} {len} {} {slot:016x}\n", entry.stored_at).as_bytes());
            let place = Place { pack: Arc::clone(&writer.path), offset, len, stored_at: entry.stored_at };
            lines.push(Line { key, place, slot });
        }
        if writer.held.0.len() >= HELD_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the entries this process holds: each whole in its pack before the index names it.
    pub fn flush(&mut self) -> Result<(), CacheError> {
        let Some(writer) = &mut self.writer else { return Ok(()) };
        let (pack, idx, lines) = std::mem::take(&mut writer.held);
        if pack.is_empty() {
            return Ok(());
        }
        writer.pack.write_all(&pack).map_err(|error| CacheError::io("write", &writer.path, &error))?;
        writer.idx.write_all(&idx).map_err(|error| CacheError::io("write", &writer.path, &error))?;
        for line in lines {
            self.remember(line);
        }
        Ok(())
    }

    /// A new pack for this process, locked while it lives.
    fn new_writer(&self) -> Result<Writer, CacheError> {
        let packs = self.packs();
        fs::create_dir_all(&packs).map_err(|error| CacheError::io("create", &packs, &error))?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let name = format!("{nanos:x}-{}", std::process::id());
        let path = packs.join(format!("{name}.pack"));
        let open = |path: &Path| {
            OpenOptions::new().create_new(true).append(true).open(path).map_err(|e| CacheError::io("create", path, &e))
        };
        let pack = open(&path)?;
        pack.lock().map_err(|error| CacheError::io("lock", &path, &error))?;
        let idx = open(&packs.join(format!("{name}.idx")))?;
        let (held, stored) = (Default::default(), std::collections::HashSet::new());
        Ok(Writer { pack, idx, path: Arc::new(path), offset: 0, held, stored })
    }

    /// Every entry's key, size and time, newest first.
    pub fn list(&self) -> Vec<Listed> {
        let mut listed: Vec<Listed> = self
            .index
            .iter()
            .map(|(key, place)| Listed { key: *key, bytes: place.len, stored_at: place.stored_at })
            .collect();
        listed.sort_by(|a, b| b.stored_at.cmp(&a.stored_at).then(a.key.cmp(&b.key)));
        listed
    }

    /// The bytes of every pack.
    pub fn bytes(&self) -> u64 {
        self.indexes()
            .unwrap_or_default()
            .iter()
            .filter_map(|idx| fs::metadata(idx.with_extension("pack")).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Removes entries stored before `before` (seconds since the epoch), then the oldest until
    /// the packs hold at most `max_bytes`, by writing the entries kept into new packs. Packs a
    /// running process appends to are left as they are.
    pub fn prune(&mut self, before: Option<u64>, max_bytes: Option<u64>) -> Result<Pruned, CacheError> {
        // This process's own pack is finished with: later stores start a new one.
        self.flush()?;
        drop(self.writer.take());
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        let mut report = Pruned::default();
        let mut kept: Vec<(Key, Place)> = Vec::new();
        let mut free: Vec<PathBuf> = Vec::new();
        let mut locks = Vec::new();
        for idx in self.indexes()? {
            let pack = idx.with_extension("pack");
            let Ok(file) = File::open(&pack) else { continue };
            if file.try_lock().is_err() {
                report.in_use += 1;
                continue;
            }
            locks.push(file);
            free.push(idx);
        }
        let free_packs: Vec<PathBuf> = free.iter().map(|idx| idx.with_extension("pack")).collect();
        for (key, place) in &self.index {
            if free_packs.iter().any(|p| p == &*place.pack) {
                kept.push((*key, place.clone()));
            }
        }
        let total = kept.len();
        kept.retain(|(_, place)| before.is_none_or(|before| place.stored_at > before));
        kept.sort_by_key(|(_, place)| std::cmp::Reverse(place.stored_at));
        if let Some(max) = max_bytes {
            let in_use: u64 = self
                .bytes()
                .saturating_sub(free_packs.iter().filter_map(|p| fs::metadata(p).ok()).map(|m| m.len()).sum());
            let mut room = max.saturating_sub(in_use);
            kept.retain(|(_, place)| {
                let fits = place.len < room;
                if fits {
                    room -= place.len + 1;
                }
                fits
            });
        }
        let entries: Vec<Entry> = kept.iter().filter_map(|(key, _)| self.get(key).ok().flatten()).collect();
        report.kept = entries.len();
        report.removed = total - entries.len();
        // The entries kept go into a pack of their own before the old ones are removed.
        let mut fresh = FileCache {
            writer: None,
            index: HashMap::new(),
            older: HashMap::new(),
            latest: HashMap::new(),
            problems: Vec::new(),
            dir: self.dir.clone(),
            open: std::sync::Mutex::default(),
        };
        fresh.put(&entries)?;
        fresh.flush()?;
        drop(fresh.writer.take());
        for idx in &free {
            let _ = fs::remove_file(idx);
            let _ = fs::remove_file(idx.with_extension("pack"));
        }
        drop(locks);
        *self = FileCache::open(&self.dir)?;
        report.bytes = self.bytes();
        Ok(report)
    }
}

impl Drop for FileCache {
    /// Writes what this process still holds; a cache that cannot be written loses those entries,
    /// which later runs then compute again.
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::warn!(%error, "cannot store outputs in the task cache");
        }
    }
}

/// Reads one index line: `KEY OFFSET LEN STORED_AT SLOT`.
fn parse_line(line: &[u8], pack: &Arc<PathBuf>) -> Option<Line> {
    let text = std::str::from_utf8(line).ok()?;
    let mut fields = text.split(' ');
    let key = fields.next()?.parse::<Key>().ok()?;
    let offset = fields.next()?.parse().ok()?;
    let len = fields.next()?.parse().ok()?;
    let stored_at = fields.next()?.parse().ok()?;
    let slot = u64::from_str_radix(fields.next()?, 16).ok()?;
    if fields.next().is_some() {
        return None;
    }
    Some(Line { key, place: Place { pack: Arc::clone(pack), offset, len, stored_at }, slot })
}

/// The slot of a plan's task: where the newest key stored for it is found.
fn slot_of(plan: &str, task: &str) -> u64 {
    let digest = Sha256::new().chain_update(plan.as_bytes()).chain_update([0]).chain_update(task.as_bytes()).finalize();
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_else(|_| unreachable!("a digest has 32 bytes")))
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
