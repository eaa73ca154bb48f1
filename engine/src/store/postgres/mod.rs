//! The PostgreSQL store, for runs driven from several machines: a run's records are rows of
//! `runner_events` and the run itself a row of `runner_runs`, which holds who drives it (a
//! lease with a fence) and a cancel request (docs/events.md shows the tables).
//!
//! A [`Database`] is one connection, driven by a thread of its own, so it serves synchronous
//! callers, any tokio runtime and the background work of leases alike. Its tables are made or
//! brought up to date on connecting ([`migrate`]). A connection the server drops (a restart,
//! a failover, `pg_terminate_backend`, an idle timeout) is made again in the background, with
//! backoff, and its `LISTEN`s with it; [`Database::retrying`] runs a statement again on the
//! new connection, for at most [`Database::reconnect_window`], before it gives up saying so. A run is recorded into through a
//! [`PgStore`], opened under a [`RunLease`]: every write checks that the lease's fence is still
//! the run's, so a process whose lease was taken over can no longer record anything.

mod lease;
mod migrate;
mod redact;
mod writer;

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use tokio::sync::{Mutex, broadcast, watch};
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Row, Socket};

pub use lease::{LeaseTimes, RunLease};
pub use redact::redact;
pub use writer::{PgStore, RECORDED};

use super::check::{Checker, DAMAGED};
use super::{Loaded, StoreError};
use crate::event::Record;

/// The `NOTIFY` channel of cancel requests; the payload is the run id.
pub const CANCEL_CHANNEL: &str = "runner_cancel";

/// How long connecting may take before it is given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a statement waits for a lost connection to be made again before it gives up,
/// unless [`Database::set_reconnect_window`] says otherwise.
pub const RECONNECT_WINDOW: Duration = Duration::from_secs(60);

/// The first and the longest wait between two tries to connect again.
const RECONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

/// Whether an error means the connection is gone (closed, or ended by the server), so the
/// statement may succeed on a new one; the SQLSTATEs are class 08 (connection exception) and
/// 57P01-57P03 (the server shutting down or ending the session). An error of the client's own
/// (a parameter or column of the wrong type) is not: it has a cause that is not the network's.
pub fn connection_lost(error: &tokio_postgres::Error) -> bool {
    let network =
        || std::error::Error::source(error).is_none_or(|source| source.downcast_ref::<std::io::Error>().is_some());
    error.is_closed()
        || error.as_db_error().is_none() && error.code().is_none() && network()
        || error.code().is_some_and(|code| {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        })
}

/// A connection to the database that holds the runs; cheap to clone (clones share it).
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("url", &self.inner.url).finish_non_exhaustive()
    }
}

struct Inner {
    /// The connection in use; replaced when a lost one is made again.
    client: RwLock<Arc<Client>>,
    /// Counts the connections made; moves when a lost one is replaced.
    connections: watch::Sender<u64>,
    /// How long a statement waits for a lost connection to be made again, in milliseconds.
    reconnect_ms: AtomicU64,
    config: Config,
    /// The runtime of the connection's thread, where the writers and lease renewals run.
    handle: tokio::runtime::Handle,
    /// The URL with its password replaced by `***`.
    url: String,
    notifications: broadcast::Sender<Notification>,
    /// The channels this connection `LISTEN`s to.
    listening: Mutex<BTreeSet<String>>,
    /// Dropped with the last clone, which ends the connection's thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A `NOTIFY` the connection received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The channel.
    pub channel: String,
    /// The payload.
    pub payload: String,
}

/// A run as `runner_runs` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// The run id.
    pub run_id: String,
    /// The plan's name.
    pub plan: String,
    /// When the run was created, RFC 3339 in UTC with milliseconds.
    pub created: String,
    /// The status its last recorded run event gave it: `new`, `running`, `paused`,
    /// `succeeded`, `failed`, `partial` or `cancelled`.
    pub status: String,
    /// The process that holds or last held the lease, if any.
    pub owner: Option<String>,
    /// Whether that lease is live now (by the database's clock).
    pub leased: bool,
    /// The fence of the last lease taken; each take adds one.
    pub fence: i64,
    /// Why a cancel was requested, when one is waiting to be honoured.
    pub cancel_request: Option<String>,
    /// What the run's records say, as its last write left it; `None` for a run without
    /// records, or one last written before the table kept it.
    pub summary: Option<RunSummary>,
}

/// What a run's row keeps of its records for the runs list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Its tasks, items of maps and planned tasks included.
    pub tasks: u64,
    /// Those that succeeded.
    pub succeeded: u64,
    /// The tokens it used.
    pub tokens: crate::event::Tokens,
    /// When its last record was written, as the record says.
    pub updated: String,
}

impl Database {
    /// Connects (no TLS), then creates or upgrades the tables. Errors name the URL with its
    /// password hidden.
    pub async fn connect(url: &str) -> Result<Database, StoreError> {
        let shown = redact(url);
        let failed = |action: &'static str, reason: String| StoreError::Database { action, url: shown.clone(), reason };
        let mut config =
            Config::from_str(url).map_err(|error| failed("read the database URL", redact(&error.to_string())))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // A peer that vanishes without closing (a partition, a host that died) is noticed in
        // about half a minute rather than the system's two hours, unless the URL says otherwise.
        if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            config
                .keepalives_idle(Duration::from_secs(15))
                .keepalives_interval(Duration::from_secs(5))
                .keepalives_retries(3);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(Duration::from_secs(30));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| failed("start the database's runtime", error.to_string()))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("runner-postgres".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|error| failed("start the database's thread", error.to_string()))?;
        let opened = config.clone();
        let connected = handle.spawn(async move {
            let (mut client, mut connection) = opened.connect(NoTls).await?;
            // The connection is driven here while the tables are migrated, then handed to the
            // supervisor, which needs the database it belongs to.
            let (migrated, done) = tokio::sync::oneshot::channel::<()>();
            let driver = tokio::spawn(async move {
                tokio::select! {
                    () = drive(&mut connection, None) => {}
                    _ = done => {}
                }
                // In a tuple: the connection is a future, which the task would otherwise seem
                // to hand back unawaited.
                (connection,)
            });
            let result = migrate::apply(&mut client).await;
            let _ = migrated.send(());
            result.map(|()| (client, driver))
        });
        let (client, driver) = match connected.await {
            Ok(Ok(pair)) => pair,
            Ok(Err(error)) => return Err(failed("connect to the database", reason(&error))),
            Err(error) => return Err(failed("connect to the database", error.to_string())),
        };
        let (connection,) = driver.await.map_err(|error| failed("connect to the database", error.to_string()))?;
        let (notifications, _) = broadcast::channel(1024);
        let inner = Arc::new(Inner {
            client: RwLock::new(Arc::new(client)),
            connections: watch::Sender::new(1),
            reconnect_ms: AtomicU64::new(RECONNECT_WINDOW.as_secs() * 1000),
            config,
            handle,
            url: shown,
            notifications,
            listening: Mutex::default(),
            _stop: stop,
        });
        inner.handle.spawn(supervise(Arc::downgrade(&inner), connection));
        Ok(Database { inner })
    }

    /// The URL, with its password replaced by `***`.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The connection in use, for queries of the engine's own tables. A statement that fails
    /// because it was lost ([`connection_lost`]) may be run again through
    /// [`Database::retrying`].
    pub fn client(&self) -> Arc<Client> {
        let client = self.inner.client.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(&client)
    }

    /// How long a statement waits for a lost connection to be made again before it gives up.
    pub fn reconnect_window(&self) -> Duration {
        Duration::from_millis(self.inner.reconnect_ms.load(Ordering::Relaxed))
    }

    /// Sets [`Database::reconnect_window`] for every clone of this database (the CLI takes it
    /// from `RUNNER_DB_RECONNECT_SECS`).
    pub fn set_reconnect_window(&self, window: Duration) {
        let ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        self.inner.reconnect_ms.store(ms, Ordering::Relaxed);
    }

    /// Runs `statement` on the connection; when the connection was lost, waits for the new one
    /// and runs it again, for at most [`Database::reconnect_window`] in all, then gives up with an error
    /// that says how long the database has been away. Other errors are `action`'s, at once.
    /// Only statements that may run twice go through here (reads, and writes whose second
    /// run finds the first's work, or changes nothing).
    pub async fn retrying<T, F, Fut>(&self, action: &'static str, mut statement: F) -> Result<T, StoreError>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let window = self.reconnect_window();
        let since = tokio::time::Instant::now();
        loop {
            let client = self.client();
            match statement(Arc::clone(&client)).await {
                Ok(value) => return Ok(value),
                Err(error) if connection_lost(&error) => {
                    let left = window.saturating_sub(since.elapsed());
                    if left.is_zero() || !self.replaced(&client, left).await {
                        return Err(self.gone(action, window, &error));
                    }
                    tracing::info!(
                        action,
                        "the database connection was lost; running the statement again on a new one"
                    );
                }
                Err(error) => return Err(self.error(action, &error)),
            }
        }
    }

    /// The rows of `sql` with `params`, run through [`Database::retrying`].
    pub async fn query(
        &self,
        action: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.retrying(action, |client| async move { client.query(sql, params).await }).await
    }

    /// How many rows `sql` with `params` changed, run through [`Database::retrying`].
    pub async fn execute(
        &self,
        action: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.retrying(action, |client| async move { client.execute(sql, params).await }).await
    }

    /// Waits at most `patience` for a connection other than `lost`; whether one came.
    async fn replaced(&self, lost: &Arc<Client>, patience: Duration) -> bool {
        let mut connections = self.inner.connections.subscribe();
        let current = |db: &Database| !Arc::ptr_eq(&db.client(), lost);
        let wait = async {
            while !current(self) {
                if connections.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(patience, wait).await.unwrap_or(false)
    }

    /// The error of a statement given up on after the connection stayed lost for `window`.
    fn gone(&self, action: &'static str, window: Duration, error: &tokio_postgres::Error) -> StoreError {
        StoreError::Database {
            action,
            url: self.inner.url.clone(),
            reason: format!(
                "the connection was lost and could not be made again within {} \
                 (RUNNER_DB_RECONNECT_SECS sets how long to wait): {}",
                if window.subsec_millis() == 0 {
                    format!("{} s", window.as_secs())
                } else {
                    format!("{} ms", window.as_millis())
                },
                reason(error)
            ),
        }
    }

    /// Runs `future` on the connection's thread, so it goes on whatever the caller's runtime does.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.handle.spawn(future)
    }

    /// A database error as a [`StoreError`].
    pub fn error(&self, action: &'static str, error: &tokio_postgres::Error) -> StoreError {
        StoreError::Database { action, url: self.inner.url.clone(), reason: reason(error) }
    }

    /// Records a new run (no events yet) and takes its lease; `store::exists` when the id is
    /// taken.
    pub async fn create_run(
        &self,
        run_id: &str,
        plan: &str,
        owner: &str,
        times: LeaseTimes,
    ) -> Result<RunLease, StoreError> {
        lease::create(self, run_id, plan, owner, times).await
    }

    /// Takes the lease of an existing run that nobody holds (or whose holder let it expire):
    /// the run's fence grows by one, which refuses every later write of an earlier holder.
    /// `store::leased` names the live holder, `store::not_found` a missing run.
    pub async fn take_lease(&self, run_id: &str, owner: &str, times: LeaseTimes) -> Result<RunLease, StoreError> {
        lease::take(self, run_id, owner, times).await
    }

    /// A store that appends to the run of `lease`, as long as the lease is the run's.
    pub fn store(&self, lease: &RunLease) -> PgStore {
        PgStore::spawn(self, lease.run_id(), lease.fence())
    }

    /// One run's row; `store::not_found` when there is none.
    pub async fn run(&self, run_id: &str) -> Result<RunRow, StoreError> {
        let rows = self.query("read the run", &format!("{RUN_ROW} WHERE run_id = $1"), &[&run_id]).await?;
        rows.first().map(run_row).ok_or_else(|| self.not_found(run_id))
    }

    /// Every run, newest first.
    pub async fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows = self.query("list the runs", &format!("{RUN_ROW} ORDER BY created DESC, run_id DESC"), &[]).await?;
        Ok(rows.iter().map(run_row).collect())
    }

    /// The runs under way that nobody drives: their lease ran out, or was let go.
    pub async fn undriven(&self) -> Result<Vec<String>, StoreError> {
        let sql = "SELECT run_id FROM runner_runs WHERE status = 'running' \
                   AND (lease_until IS NULL OR lease_until <= now()) ORDER BY created";
        let rows = self.query("look for runs nobody drives", sql, &[]).await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// A run's records in order, checked as the JSONL store checks a log (docs/events.md): a
    /// record that breaks a promise is `store::corrupt`, naming its row. A run without records
    /// (created, never started) gives none.
    pub async fn load(&self, run_id: &str) -> Result<Loaded, StoreError> {
        self.run(run_id).await?;
        let sql = "SELECT seq, record FROM runner_events WHERE run_id = $1 ORDER BY seq";
        let rows = self.query("read the run's records", sql, &[&run_id]).await?;
        let mut checker = Checker::new(format!("{} run `{run_id}` row", self.url()));
        for (i, row) in rows.iter().enumerate() {
            let line = i + 1;
            let seq: i64 = row.get(0);
            let text: &str = row.get(1);
            match serde_json::from_str::<Record>(text) {
                Ok(record) if i64::try_from(record.seq).ok() != Some(seq) => {
                    let reason = format!("the record says seq {} but is stored as seq {seq}", record.seq);
                    return Err(checker.corrupt(line, reason, DAMAGED));
                }
                Ok(record) if *record.run_id != *run_id => {
                    let reason = format!("a record of run `{}` among the records of run `{run_id}`", record.run_id);
                    return Err(checker.corrupt(line, reason, DAMAGED));
                }
                Ok(record) => checker.accept(record, line)?,
                Err(error) => match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(value) => return Err(checker.not_a_record(&value, &error, line)),
                    Err(error) => return Err(checker.corrupt(line, format!("not JSON: {error}"), DAMAGED)),
                },
            }
        }
        Ok(Loaded { records: checker.into_records(), warning: None })
    }

    /// The records of a run after `seq`, in order, for following a live run; unchecked beyond
    /// being records of this run.
    pub async fn records_after(&self, run_id: &str, seq: u64) -> Result<Vec<Record>, StoreError> {
        let after = i64::try_from(seq).unwrap_or(i64::MAX);
        let sql = "SELECT seq, record FROM runner_events WHERE run_id = $1 AND seq > $2 ORDER BY seq";
        let rows = self.query("read the run's records", sql, &[&run_id, &after]).await?;
        let place = format!("{} run `{run_id}` seq", self.url());
        rows.iter()
            .map(|row| {
                let seq: i64 = row.get(0);
                serde_json::from_str::<Record>(row.get(1)).map_err(|error| StoreError::Corrupt {
                    path: place.clone(),
                    line: usize::try_from(seq).unwrap_or(0),
                    reason: format!("not an event record ({error})"),
                    hint: DAMAGED,
                })
            })
            .collect()
    }

    /// Asks whoever drives the run to cancel it: the request is kept in the run's row and
    /// announced with `NOTIFY` on [`CANCEL_CHANNEL`].
    pub async fn request_cancel(&self, run_id: &str, reason: &str) -> Result<(), StoreError> {
        let sql = "WITH asked AS (UPDATE runner_runs SET cancel_request = $2 WHERE run_id = $1 RETURNING run_id) \
                   SELECT pg_notify($3, run_id) FROM asked";
        let asked = self.query("ask for the cancel", sql, &[&run_id, &reason, &CANCEL_CHANNEL]).await?;
        if asked.is_empty() { Err(self.not_found(run_id)) } else { Ok(()) }
    }

    /// Forgets a run's cancel request (a process starting to drive the run does, as a new
    /// `runner apply` removes an old `cancel` file).
    pub async fn clear_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        let sql = "UPDATE runner_runs SET cancel_request = NULL WHERE run_id = $1";
        self.execute("clear the cancel request", sql, &[&run_id]).await?;
        Ok(())
    }

    /// Waits until someone asks to cancel the run and returns why: woken by `NOTIFY`, and
    /// looking every `poll` as well, in case a notification was missed.
    pub async fn cancel_requested(&self, run_id: &str, poll: Duration) -> Result<String, StoreError> {
        let mut notes = self.listen(CANCEL_CHANNEL).await?;
        loop {
            if let Some(reason) = self.run(run_id).await?.cancel_request {
                return Ok(reason);
            }
            let _ = tokio::time::timeout(poll, async {
                loop {
                    match notes.recv().await {
                        Ok(note) if note.payload == run_id => return,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                    }
                }
            })
            .await;
        }
    }

    /// `LISTEN`s to `channel` (once per connection) and returns a receiver of every
    /// notification from then on.
    pub async fn listen(&self, channel: &str) -> Result<broadcast::Receiver<Notification>, StoreError> {
        let receiver = self.inner.notifications.subscribe();
        let mut listening = self.inner.listening.lock().await;
        // Listed before it is listened to, so a connection made again meanwhile listens too
        // (the supervisor takes this lock, which is not held across the statement).
        if listening.insert(channel.to_owned()) {
            drop(listening);
            let statement = format!("LISTEN {}", quoted(channel));
            let listened = self
                .retrying("listen for notifications", |client| {
                    let statement = statement.clone();
                    async move { client.batch_execute(&statement).await }
                })
                .await;
            if let Err(error) = listened {
                self.inner.listening.lock().await.remove(channel);
                return Err(error);
            }
        }
        Ok(receiver)
    }

    fn not_found(&self, run_id: &str) -> StoreError {
        StoreError::NotFound { run_id: run_id.to_owned(), url: self.inner.url.clone() }
    }
}

/// Drives `connection` until it ends, passing its notifications to `notifications`.
async fn drive<S, T>(
    connection: &mut tokio_postgres::Connection<S, T>,
    notifications: Option<&broadcast::Sender<Notification>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
        if let (AsyncMessage::Notification(note), Some(sender)) = (message, notifications) {
            let _ = sender.send(Notification { channel: note.channel().into(), payload: note.payload().into() });
        }
    }
}

/// Keeps the database connected while it is in use: drives the connection, and when the
/// server drops it, connects again with backoff, puts the new client in place, listens again
/// to the channels listened to, and tells waiting statements. Ends with the last [`Database`].
async fn supervise(inner: Weak<Inner>, first: tokio_postgres::Connection<Socket, tokio_postgres::tls::NoTlsStream>) {
    let mut connection = first;
    loop {
        let Some(notifications) = inner.upgrade().map(|inner| inner.notifications.clone()) else { return };
        drive(&mut connection, Some(&notifications)).await;
        // Dropped at once, so statements still waiting on it fail as lost rather than wait
        // for an answer that cannot come (a connection cut without a word from the server).
        drop(connection);
        drop(notifications);
        let mut wait = RECONNECT_BACKOFF.0;
        connection = loop {
            let Some(alive) = inner.upgrade() else { return };
            let config = alive.config.clone();
            let url = alive.url.clone();
            drop(alive);
            match config.connect(NoTls).await {
                Ok((client, connection)) => {
                    let Some(alive) = inner.upgrade() else { return };
                    tokio::spawn(adopt(alive, client));
                    break connection;
                }
                Err(error) => {
                    tracing::warn!(%url, reason = %reason(&error), "cannot connect to the database again; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RECONNECT_BACKOFF.1);
                }
            }
        };
    }
}

/// Puts a new connection's client in place of the lost one, once it listens to every channel
/// the lost one did, and tells the statements waiting for it.
async fn adopt(inner: Arc<Inner>, client: Client) {
    let listening = inner.listening.lock().await;
    for channel in listening.iter() {
        if let Err(error) = client.batch_execute(&format!("LISTEN {}", quoted(channel))).await {
            tracing::warn!(%channel, reason = %reason(&error), "cannot listen again after reconnecting");
        }
    }
    *inner.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(client);
    drop(listening);
    inner.connections.send_modify(|count| *count += 1);
    tracing::info!(url = %inner.url, "connected to the database again");
}

/// A channel's name as an SQL identifier.
fn quoted(channel: &str) -> String {
    format!("\"{}\"", channel.replace('"', "\"\""))
}

/// The columns of a [`RunRow`], in its order.
const RUN_ROW: &str = "SELECT run_id, plan, \
                       to_char(created AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), status, owner, \
                       coalesce(lease_until > now(), false), fence, cancel_request, \
                       tasks, succeeded, prompt_tokens, completion_tokens, updated FROM runner_runs";

fn run_row(row: &tokio_postgres::Row) -> RunRow {
    RunRow {
        run_id: row.get(0),
        plan: row.get(1),
        created: row.get(2),
        status: row.get(3),
        owner: row.get(4),
        leased: row.get(5),
        fence: row.get(6),
        cancel_request: row.get(7),
        summary: match (row.get::<_, Option<i64>>(8), row.get::<_, Option<i64>>(9)) {
            (Some(tasks), Some(succeeded)) => Some(RunSummary {
                tasks: tasks.max(0) as u64,
                succeeded: succeeded.max(0) as u64,
                tokens: crate::event::Tokens {
                    prompt: row.get::<_, Option<i64>>(10).unwrap_or(0).max(0) as u64,
                    completion: row.get::<_, Option<i64>>(11).unwrap_or(0).max(0) as u64,
                },
                updated: row.get::<_, Option<String>>(12).unwrap_or_default(),
            }),
            _ => None,
        },
    }
}

/// A database error's reason: the server's message when it sent one, with its detail.
fn reason(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_owned(),
        },
        None => {
            let mut text = error.to_string();
            let mut cause = std::error::Error::source(error);
            while let Some(inner) = cause {
                text.push_str(&format!(": {inner}"));
                cause = inner.source();
            }
            redact(&text)
        }
    }
}

/// Who this process is, as a lease's owner and messages name it: `<host> pid <pid>`.
pub fn this_process() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host} pid {}", std::process::id())
}
