//! The task cache of runs in PostgreSQL: the `runner_cache` table (migration 4), one row per key
//! and run, shared by every process that uses the database. Its calls wait for the database on
//! the connection's own thread, so they serve synchronous callers; stores are held and written
//! in batches in the background, and [`TableCache::flush`] waits for them.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::JoinHandle;

use super::{CacheError, Entry, Found, Key, Listed, Listing, Pruned, Stored};
use crate::store::StoreError;
use crate::store::postgres::Database;

/// How many bytes of entries are held before they are written in one statement.
const HELD_BYTES: usize = 1024 * 1024;

/// The task cache in a database.
pub struct TableCache {
    db: Database,
    held: Vec<Entry>,
    held_bytes: usize,
    writing: Vec<JoinHandle<Result<u64, StoreError>>>,
}

impl TableCache {
    /// The cache in `db`'s `runner_cache` table (made when the database was connected).
    pub fn new(db: Database) -> Self {
        TableCache { db, held: Vec::new(), held_bytes: 0, writing: Vec::new() }
    }

    /// Runs `work` on the database's thread and waits for it.
    fn wait<T, F, Fut>(&self, work: F) -> Result<T, CacheError>
    where
        T: Send + 'static,
        F: FnOnce(Database) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::channel();
        let future = work(self.db.clone());
        self.db.spawn(async move {
            let _ = sender.send(future.await);
        });
        match receiver.recv() {
            Ok(result) => result.map_err(|error| self.error(&error)),
            Err(_) => Err(CacheError::Io {
                action: "use",
                path: self.db.url().to_owned(),
                reason: "the database connection's thread has ended".to_owned(),
            }),
        }
    }

    /// A database error as the cache's.
    fn error(&self, error: &StoreError) -> CacheError {
        CacheError::Io { action: "use the task cache in", path: self.db.url().to_owned(), reason: error.to_string() }
    }

    /// For each of `keys`, what is stored under it: the newest entry, or with `run`, that run's
    /// entry (else whether other runs stored one).
    pub(super) fn find(&self, keys: &[Key], run: Option<&str>) -> Result<Vec<Found>, CacheError> {
        let wanted: Vec<String> = keys.iter().map(Key::to_string).collect();
        let run = run.map(str::to_owned);
        let rows = self.wait(move |db| async move {
            db.query(
                "read the task cache",
                "SELECT DISTINCT ON (key) key, entry, $2::text IS NULL OR run_id = $2 FROM runner_cache \
                 WHERE key = ANY($1) ORDER BY key, ($2::text IS NULL OR run_id = $2) DESC, stored_at DESC",
                &[&wanted, &run],
            )
            .await
        })?;
        let mut found: HashMap<String, Found> = HashMap::with_capacity(rows.len());
        for row in rows {
            let (key, entry, wanted): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
            let stored = if wanted {
                checked(&key, &entry).map(|entry| Stored::Entry(Box::new(entry)))
            } else {
                Ok(Stored::OtherRuns)
            };
            found.insert(key, stored);
        }
        Ok(keys.iter().map(|key| found.remove(&key.to_string()).unwrap_or(Ok(Stored::Nothing))).collect())
    }

    /// The newest entry stored for each of `tasks` of plan `plan`, where one can be read.
    pub(super) fn latest(&self, plan: &str, tasks: &[&str]) -> Result<Vec<Option<Entry>>, CacheError> {
        let (plan, wanted): (String, Vec<String>) = (plan.to_owned(), tasks.iter().map(|t| (*t).to_owned()).collect());
        let rows = self.wait(move |db| async move {
            db.query(
                "read the task cache",
                "SELECT DISTINCT ON (task) task, key, entry FROM runner_cache \
                 WHERE plan = $1 AND task = ANY($2) ORDER BY task, stored_at DESC",
                &[&plan, &wanted],
            )
            .await
        })?;
        let mut found: HashMap<String, Entry> = HashMap::with_capacity(rows.len());
        for row in rows {
            let (task, key, entry): (String, String, String) = (row.get(0), row.get(1), row.get(2));
            if let Ok(entry) = checked(&key, &entry) {
                found.insert(task, entry);
            }
        }
        Ok(tasks.iter().map(|task| found.remove(*task)).collect())
    }

    /// The newest entry stored under `key` (by run `run` only, when given).
    pub fn get(&self, key: &Key, run: Option<&str>) -> Result<Option<Entry>, CacheError> {
        match self.find(std::slice::from_ref(key), run)?.pop() {
            Some(Ok(Stored::Entry(entry))) => Ok(Some(*entry)),
            Some(Err(error)) => Err(error),
            Some(Ok(Stored::OtherRuns | Stored::Nothing)) | None => Ok(None),
        }
    }

    /// Stores entries: held, then written in the background a batch at a time.
    pub fn put(&mut self, entries: &[Entry]) {
        for entry in entries {
            self.held_bytes += entry.output.len() + entry.parts.len() + 256;
            self.held.push(entry.clone());
        }
        if self.held_bytes >= HELD_BYTES {
            self.write_held();
        }
    }

    /// Starts writing the entries held.
    fn write_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.held_bytes = 0;
        if held.is_empty() {
            return;
        }
        let db = self.db.clone();
        self.writing.retain(|write| !write.is_finished());
        self.writing.push(self.db.spawn(async move { insert(&db, held).await }));
    }

    /// Writes the entries held and waits until everything stored so far is written.
    pub fn flush(&mut self) -> Result<(), CacheError> {
        self.write_held();
        let writing = std::mem::take(&mut self.writing);
        let results = self.wait(move |db| async move {
            let mut results = Vec::new();
            for write in writing {
                results.push(write.await.unwrap_or_else(|error| {
                    Err(StoreError::Database {
                        action: "store in the task cache",
                        url: db.url().to_owned(),
                        reason: error.to_string(),
                    })
                }));
            }
            Ok(results)
        })?;
        match results.into_iter().find_map(Result::err) {
            Some(error) => Err(self.error(&error)),
            None => Ok(()),
        }
    }

    /// Every key's newest entry, newest first, with its size and what it holds.
    pub fn list(&self) -> Result<Listing, CacheError> {
        let rows = self.wait(move |db| async move {
            db.query(
                "list the task cache",
                "SELECT key, bytes, stored_at, entry FROM \
                 (SELECT DISTINCT ON (key) key, bytes, stored_at, entry FROM runner_cache ORDER BY key, stored_at DESC) newest \
                 ORDER BY stored_at DESC, key",
                &[],
            )
            .await
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let (key, bytes, stored_at, entry): (String, i64, i64, String) =
                    (row.get(0), row.get(1), row.get(2), row.get(3));
                let listed = Listed {
                    key: key.parse().ok()?,
                    bytes: u64::try_from(bytes).unwrap_or(0),
                    stored_at: u64::try_from(stored_at).unwrap_or(0),
                };
                Some((listed, checked(&key, &entry)))
            })
            .collect())
    }

    /// The bytes of every entry.
    pub fn bytes(&self) -> Result<u64, CacheError> {
        let total = self.wait(move |db| async move {
            let rows = db
                .query("measure the task cache", "SELECT coalesce(sum(bytes), 0)::bigint FROM runner_cache", &[])
                .await?;
            Ok(rows.first().map_or(0, |row| row.get::<_, i64>(0)))
        })?;
        Ok(u64::try_from(total).unwrap_or(0))
    }

    /// Removes entries stored before `before` (seconds since the epoch), then the oldest until
    /// the table holds at most `max_bytes`.
    pub fn prune(&mut self, before: Option<u64>, max_bytes: Option<u64>) -> Result<Pruned, CacheError> {
        self.flush()?;
        let before = before.map(|before| i64::try_from(before).unwrap_or(i64::MAX));
        let max_bytes = max_bytes.map(|max| i64::try_from(max).unwrap_or(i64::MAX));
        let (removed, kept, bytes) = self.wait(move |db| async move {
            let old = match before {
                Some(before) => {
                    db.execute("prune the task cache", "DELETE FROM runner_cache WHERE stored_at < $1", &[&before])
                        .await?
                }
                None => 0,
            };
            let over = match max_bytes {
                Some(max) => {
                    db.execute(
                        "prune the task cache",
                        "DELETE FROM runner_cache WHERE (key, run_id) IN (SELECT key, run_id FROM \
                         (SELECT key, run_id, sum(bytes) OVER (ORDER BY stored_at DESC, key, run_id) AS total \
                          FROM runner_cache) newest_first WHERE total > $1::bigint)",
                        &[&max],
                    )
                    .await?
                }
                None => 0,
            };
            let rows = db
                .query(
                    "measure the task cache",
                    "SELECT count(*), coalesce(sum(bytes), 0)::bigint FROM runner_cache",
                    &[],
                )
                .await?;
            let (kept, bytes) = rows.first().map_or((0, 0), |row| (row.get::<_, i64>(0), row.get::<_, i64>(1)));
            Ok((old + over, kept, bytes))
        })?;
        Ok(Pruned {
            removed: usize::try_from(removed).unwrap_or(usize::MAX),
            kept: usize::try_from(kept).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
            in_use: 0,
        })
    }
}

/// Writes `entries` in one statement; an entry a run stored under its key already stays.
async fn insert(db: &Database, entries: Vec<Entry>) -> Result<u64, StoreError> {
    let mut columns: [Vec<String>; 5] = Default::default();
    let (mut bytes, mut stored_at) = (Vec::new(), Vec::new());
    for entry in entries {
        let Ok(json) = serde_json::to_string(&entry) else { continue };
        bytes.push(i64::try_from(json.len()).unwrap_or(i64::MAX));
        stored_at.push(i64::try_from(entry.stored_at).unwrap_or(i64::MAX));
        let [key, run, plan, task, text] = &mut columns;
        key.push(entry.key);
        run.push(entry.run);
        plan.push(entry.plan);
        task.push(entry.task);
        text.push(json);
    }
    let [key, run, plan, task, text] = &columns;
    db.execute(
        "store in the task cache",
        "INSERT INTO runner_cache (key, run_id, plan, task, entry, bytes, stored_at) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[]) \
         ON CONFLICT (key, run_id) DO NOTHING",
        &[key, run, plan, task, text, &bytes, &stored_at],
    )
    .await
}

/// The entry a row holds as JSON, checked against the key it is stored under.
fn checked(key: &str, json: &str) -> Result<Entry, CacheError> {
    let damaged = |reason: String| CacheError::Damaged { key: key.to_owned(), reason };
    let parsed: Key = key.parse().map_err(|_| damaged("its key is not 64 hex digits".to_owned()))?;
    let entry: Entry = serde_json::from_str(json).map_err(|error| damaged(format!("it is not an entry ({error})")))?;
    match entry.damage(&parsed) {
        Some(reason) => Err(damaged(reason)),
        None => Ok(entry),
    }
}
