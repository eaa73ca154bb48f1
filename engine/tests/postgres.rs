//! The PostgreSQL store against the real server (each test in a schema of its own): round
//! trips, group commit, fencing, leases, cancel requests, migrations, and rows that break a
//! log's promises. Skipped when the server does not answer, unless `RUNNER_REQUIRE_POSTGRES=1`.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::store::postgres::{Database, LeaseTimes, RunLease};
use engine::store::{EventStore, StoreError};
use engine::{Event, Outcome, Record};
use records::{created, dispatched, record};
use testkit::pg::TestDatabase;

#[path = "support/records.rs"]
mod records;

/// A lease that is never renewed during a test, so only the test moves it.
const STILL: LeaseTimes = LeaseTimes { length: Duration::from_secs(60), renew: Duration::from_secs(3600) };

async fn connect(schema: &TestDatabase) -> Database {
    Database::connect(&schema.url).await.expect("the test database connects")
}

async fn new_run(db: &Database, owner: &str) -> RunLease {
    db.create_run("r1", "t", owner, STILL).await.expect("a new run")
}

/// The text of a record as the JSONL store writes it, for rows a test inserts by hand.
fn text(record: &Record) -> String {
    serde_json::to_string(record).expect("a record encodes")
}

fn insert(schema: &TestDatabase, seq: i64, text: &str) {
    schema.execute(&format!(
        "INSERT INTO runner_events (run_id, seq, record) VALUES ('r1', {seq}, '{}')",
        text.replace('\'', "''")
    ));
}

#[tokio::test]
async fn records_round_trip_and_the_run_row_follows_the_status() {
    let Some(schema) = TestDatabase::new("records_round_trip") else { return };
    let db = connect(&schema).await;
    let lease = new_run(&db, "me").await;
    let store = db.store(&lease);
    let mut log = vec![created(), dispatched(2)];
    store.append(log.clone()).await.expect("appended");
    let run = db.run("r1").await.expect("the run's row");
    assert_eq!(
        (run.plan.as_str(), run.status.as_str(), run.owner.as_deref(), run.leased),
        ("t", "running", Some("me"), true)
    );
    let completed = record(3, Event::RunCompleted { status: Outcome::Succeeded, summary: "ok".into() });
    log.push(completed.clone());
    let back = store.append_returning(vec![completed.clone()]).await.expect("appended");
    assert_eq!(back, [completed], "the records come back once they are durable");
    let loaded = db.load("r1").await.expect("the log reads back");
    assert_eq!(loaded.records, log);
    assert_eq!(loaded.warning, None);
    assert_eq!(db.run("r1").await.expect("the run's row").status, "succeeded");
    assert_eq!(db.runs().await.expect("the runs").len(), 1);
    let stored = schema.column("SELECT record FROM runner_events WHERE seq = 2");
    assert_eq!(stored, [Some(text(&log[1]))], "a row holds the record exactly as a JSONL line would");
}

#[tokio::test]
async fn batches_queued_while_one_is_in_flight_share_the_next_transaction() {
    let Some(schema) = TestDatabase::new("group_commit") else { return };
    let db = connect(&schema).await;
    let lease = new_run(&db, "me").await;
    let store = db.store(&lease);
    // Another connection holds the run's row, so the first write waits in flight.
    let blocker = connect(&schema).await;
    blocker
        .client()
        .batch_execute("BEGIN; SELECT 1 FROM runner_runs WHERE run_id = 'r1' FOR UPDATE")
        .await
        .expect("locked");
    let first = store.append(vec![created()]);
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH fenced%'";
    while schema.column(waiting) != [Some("1".to_owned())] {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rest: Vec<_> = (2..=6).map(|seq| store.append(vec![dispatched(seq)])).collect();
    blocker.client().batch_execute("COMMIT").await.expect("unlocked");
    first.await.expect("the first batch is durable");
    for durable in rest {
        durable.await.expect("a later batch is durable");
    }
    assert_eq!(store.transactions(), 2, "one transaction for the first batch, one for the five queued behind it");
    let seqs: Vec<u64> = db.load("r1").await.expect("reads back").records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn a_live_lease_is_refused_and_a_taken_over_one_can_no_longer_record() {
    let Some(schema) = TestDatabase::new("fencing") else { return };
    let db = connect(&schema).await;
    let first = new_run(&db, "host-a pid 1").await;
    assert_eq!(first.fence(), 1);
    let old = db.store(&first);
    old.append(vec![created()]).await.expect("appended");

    let other = connect(&schema).await;
    match other.take_lease("r1", "host-b pid 2", STILL).await {
        Err(error @ StoreError::Leased { .. }) => {
            assert!(error.to_string().contains("run `r1` is being driven by host-a pid 1"), "{error}");
        }
        other => panic!("a live lease must be refused: {other:?}"),
    }
    // The first holder stops renewing (paused, cut off): its lease runs out.
    schema.execute("UPDATE runner_runs SET lease_until = now() - interval '1 second'");
    let second = other.take_lease("r1", "host-b pid 2", STILL).await.expect("an expired lease is taken over");
    assert_eq!(second.fence(), 2);

    let refused = old.append(vec![dispatched(2)]).await;
    assert_eq!(refused, Err(StoreError::Fenced { run_id: "r1".into() }));
    assert_eq!(old.append(vec![dispatched(2)]).await, Err(StoreError::Closed), "the old writer stopped");
    let new = other.store(&second);
    new.append(vec![dispatched(2)]).await.expect("the new holder records");
    let seqs: Vec<u64> = db.load("r1").await.expect("reads back").records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2], "nothing of the old holder's after the takeover");
    let fences = schema.column("SELECT fence::text FROM runner_events WHERE run_id = 'r1' ORDER BY seq");
    assert_eq!(fences, [Some("1".to_owned()), Some("2".to_owned())], "each row keeps the fence it was written under");
}

#[tokio::test]
async fn a_renewal_finds_a_lost_lease_and_a_released_one_is_free_at_once() {
    let Some(schema) = TestDatabase::new("renewal") else { return };
    let db = connect(&schema).await;
    let quick = LeaseTimes { length: Duration::from_secs(60), renew: Duration::from_millis(20) };
    let lease = db.create_run("r1", "t", "a", quick).await.expect("a new run");
    schema.execute("UPDATE runner_runs SET fence = fence + 1");
    tokio::time::timeout(Duration::from_secs(10), async {
        while !lease.is_lost() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a renewal notices the lease was taken");
    schema.execute("UPDATE runner_runs SET fence = 1");
    lease.release().await.expect("released");
    let run = db.run("r1").await.expect("the run's row");
    assert_eq!((run.owner, run.leased), (None, false));
    let again = db.take_lease("r1", "b", STILL).await.expect("a released run is free at once");
    assert_eq!(again.fence(), 2);
}

#[tokio::test]
async fn a_seq_recorded_twice_is_refused_not_ignored() {
    let Some(schema) = TestDatabase::new("conflict") else { return };
    let db = connect(&schema).await;
    let lease = new_run(&db, "me").await;
    db.store(&lease).append(vec![created(), dispatched(2)]).await.expect("appended");
    let again = db.store(&lease).append(vec![dispatched(2), dispatched(3)]).await;
    assert_eq!(again, Err(StoreError::Conflict { run_id: "r1".into(), seq: 2 }));
    assert_eq!(db.load("r1").await.expect("reads back").records.len(), 2, "the refused batch left nothing");
}

#[tokio::test]
async fn runs_are_created_once_and_missing_runs_are_named() {
    let Some(schema) = TestDatabase::new("create") else { return };
    let db = connect(&schema).await;
    let _lease = new_run(&db, "me").await;
    assert!(matches!(db.create_run("r1", "t", "you", STILL).await, Err(StoreError::Exists { .. })));
    assert!(matches!(db.take_lease("nope", "you", STILL).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(db.load("nope").await, Err(StoreError::NotFound { .. })));
    assert_eq!(db.load("r1").await.expect("a run without records").records, []);
}

/// Loads the run whose rows a test wrote by hand and returns the `store::corrupt` error.
async fn corrupt(schema: &TestDatabase) -> (usize, String, &'static str) {
    let db = connect(schema).await;
    match db.load("r1").await {
        Err(StoreError::Corrupt { line, reason, hint, .. }) => (line, reason, hint),
        other => panic!("expected store::corrupt, got {other:?}"),
    }
}

async fn with_rows(name: &str, rows: &[(i64, String)]) -> Option<(usize, String, &'static str)> {
    let schema = TestDatabase::new(name)?;
    let db = connect(&schema).await;
    let _lease = new_run(&db, "me").await;
    for (seq, text) in rows {
        insert(&schema, *seq, text);
    }
    Some(corrupt(&schema).await)
}

#[tokio::test]
async fn rows_that_break_the_logs_promises_are_corrupt_naming_the_row() {
    let good = |seq| (seq as i64, text(&if seq == 1 { created() } else { dispatched(seq) }));
    let Some((line, reason, _)) = with_rows("not_json", &[good(1), (2, "{\"seq\": 2, \"at\"".into()), good(3)]).await
    else {
        return;
    };
    assert_eq!(line, 2);
    assert!(reason.starts_with("not JSON"), "{reason}");

    let (line, reason, _) = with_rows("gap", &[good(1), good(2), good(4)]).await.expect("the server answered");
    assert_eq!(line, 3);
    assert!(reason.contains("records 3 to 3 are missing"), "{reason}");

    let mut other = dispatched(2);
    other.run_id = "r2".into();
    let (line, reason, _) = with_rows("other_run", &[good(1), (2, text(&other))]).await.expect("the server answered");
    assert_eq!(line, 2);
    assert!(reason.contains("a record of run `r2`"), "{reason}");

    let moved = (3, text(&dispatched(2)));
    let (_, reason, _) = with_rows("moved", &[good(1), good(2), moved]).await.expect("the server answered");
    assert!(reason.contains("says seq 2 but is stored as seq 3"), "{reason}");

    let unknown = (2, text(&dispatched(2)).replace("TaskDispatched", "TaskTeleported"));
    let (_, reason, hint) = with_rows("unknown", &[good(1), unknown]).await.expect("the server answered");
    assert!(reason.contains("unknown event type `TaskTeleported`"), "{reason}");
    assert!(hint.contains("newer runner"), "{hint}");

    let (line, reason, _) = with_rows("no_created", &[good(2)]).await.expect("the server answered");
    assert_eq!(line, 1);
    assert!(reason.contains("seq 2, not 1"), "{reason}");
}

#[tokio::test]
async fn records_are_append_only() {
    let Some(schema) = TestDatabase::new("append_only") else { return };
    let db = connect(&schema).await;
    let lease = new_run(&db, "me").await;
    db.store(&lease).append(vec![created()]).await.expect("appended");
    for change in ["UPDATE runner_events SET record = '{}'", "DELETE FROM runner_events"] {
        let refused = db.client().batch_execute(change).await.expect_err("a change to a record is refused");
        assert!(refused.as_db_error().is_some_and(|e| e.message().contains("append-only")), "{refused}");
    }
    assert_eq!(db.load("r1").await.expect("reads back").records, [created()]);
}

#[tokio::test]
async fn migrations_apply_once_even_when_processes_start_together() {
    let Some(schema) = TestDatabase::new("migrations") else { return };
    let connecting: Vec<_> = (0..4)
        .map(|_| {
            let url = schema.url.clone();
            tokio::spawn(async move { Database::connect(&url).await })
        })
        .collect();
    for connected in connecting {
        connected.await.expect("joined").expect("every process connects and finds the tables ready");
    }
    let versions = "SELECT version::text FROM runner_schema_version ORDER BY version";
    let applied = schema.column(versions);
    let expected: Vec<Option<String>> = (1..=applied.len()).map(|v| Some(v.to_string())).collect();
    assert!(!applied.is_empty(), "the migrations were recorded");
    assert_eq!(applied, expected, "each migration once, in order");
    Database::connect(&schema.url).await.expect("connecting again changes nothing");
    assert_eq!(schema.column(versions), applied);
}

#[tokio::test]
async fn a_cancel_request_reaches_the_process_that_waits_for_it() {
    let Some(schema) = TestDatabase::new("cancel") else { return };
    let db = connect(&schema).await;
    let _lease = new_run(&db, "me").await;
    let waiter = db.clone();
    // Polling once an hour: only the notification can end the wait within the bound.
    let waiting = tokio::spawn(async move { waiter.cancel_requested("r1", Duration::from_secs(3600)).await });
    let mut notes = db.listen(engine::store::postgres::CANCEL_CHANNEL).await.expect("listening");
    let other = connect(&schema).await;
    other.request_cancel("r1", "cancelled by runner cancel").await.expect("asked");
    let reason = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("woken").expect("joined");
    assert_eq!(reason.expect("a reason"), "cancelled by runner cancel");
    assert_eq!(notes.recv().await.expect("a notification").payload, "r1");
    db.clear_cancel("r1").await.expect("cleared");
    assert_eq!(db.run("r1").await.expect("the row").cancel_request, None);
    assert!(matches!(other.request_cancel("nope", "x").await, Err(StoreError::NotFound { .. })));
}

#[tokio::test]
async fn a_connection_the_server_ends_is_made_again_and_the_store_goes_on() {
    let Some(schema) = TestDatabase::new("reconnect") else { return };
    let db = connect(&schema).await;
    let lease = new_run(&db, "me").await;
    let store = db.store(&lease);
    store.append(vec![created()]).await.expect("appended");
    let mut notes = db.listen(engine::store::postgres::CANCEL_CHANNEL).await.expect("listening");
    // As a restart or failover would; the writer's next batch, the reads and the listening
    // all go on on a new connection.
    assert!(schema.terminate_connections() > 0, "the store had a connection");
    store.append(vec![dispatched(2)]).await.expect("appended after the connection was ended");
    let loaded = db.load("r1").await.expect("the log reads back");
    assert_eq!(loaded.records, [created(), dispatched(2)], "each record once");
    assert!(schema.terminate_connections() > 0, "the new connection is ended too");
    let other = connect(&schema).await;
    other.request_cancel("r1", "asked after two drops").await.expect("asked");
    let note = tokio::time::timeout(Duration::from_secs(20), notes.recv()).await.expect("notified").expect("a note");
    assert_eq!(note.payload, "r1", "the new connection listens to what the lost one did");
    assert_eq!(db.run("r1").await.expect("the row").cancel_request.as_deref(), Some("asked after two drops"));
}

/// A TCP relay to the test database that can be taken away: it then ends every connection it
/// carries and refuses new ones, as a database that went down does. It can also lose the next
/// answer the database sends: it drops those bytes and ends that connection, as a network
/// that fails just after the database committed a statement does.
struct Relay {
    address: std::net::SocketAddr,
    down: Arc<AtomicBool>,
    lose_answer: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(to: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
        let address = listener.local_addr().expect("its address");
        let (down, open) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let lose_answer = Arc::new(AtomicBool::new(false));
        let (to, gate, kept, lose) = (to.to_owned(), Arc::clone(&down), Arc::clone(&open), Arc::clone(&lose_answer));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&to) else { continue };
                if gate.load(Ordering::SeqCst) {
                    continue;
                }
                let mut streams = kept.lock().expect("the relay's list");
                streams.extend([client.try_clone().expect("a clone"), server.try_clone().expect("a clone")]);
                let (to_server, from_server) =
                    (client.try_clone().expect("a clone"), server.try_clone().expect("a clone"));
                std::thread::spawn(move || relay(to_server, from_server, None));
                let lose = Arc::clone(&lose);
                std::thread::spawn(move || relay(server, client, Some(lose)));
            }
        });
        Relay { address, down, lose_answer, open }
    }

    /// Drops the next bytes the database sends and ends that connection.
    fn lose_next_answer(&self) {
        self.lose_answer.store(true, Ordering::SeqCst);
    }

    /// Ends every connection and refuses the next ones.
    fn take_down(&self) {
        self.down.store(true, Ordering::SeqCst);
        for stream in self.open.lock().expect("the relay's list").drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Copies `from` into `into` until either ends; with `lose` set when bytes come, drops them
/// and ends both instead.
fn relay(mut from: TcpStream, mut into: TcpStream, lose: Option<Arc<AtomicBool>>) {
    use std::io::{Read, Write};
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(read @ 1..) = from.read(&mut buffer) {
        if lose.as_ref().is_some_and(|lose| lose.swap(false, Ordering::SeqCst)) {
            break;
        }
        if into.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = into.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

/// The test database's URL through `relay`, and the server's `host:port` it replaces.
fn through(schema: &TestDatabase, relay: impl FnOnce(&str) -> Relay) -> (String, Relay) {
    let server = schema.url.split('@').nth(1).and_then(|rest| rest.split('/').next()).expect("host:port in the URL");
    let relay = relay(server);
    (schema.url.replacen(server, &relay.address.to_string(), 1), relay)
}

#[tokio::test]
async fn a_batch_committed_before_its_answer_was_lost_is_not_written_twice() {
    let Some(schema) = TestDatabase::new("lost_answer") else { return };
    let (url, relay) = through(&schema, Relay::start);
    let db = Database::connect(&url).await.expect("connects through the relay");
    let lease = new_run(&db, "me").await;
    let store = db.store(&lease);
    store.append(vec![created()]).await.expect("appended");
    // The database commits the next batch, but its answer never arrives: the writer must find
    // the batch there on the new connection, not write it again (a unique violation) or lose it.
    relay.lose_next_answer();
    store.append(vec![dispatched(2)]).await.expect("appended once, though its answer was lost");
    store
        .append(vec![record(3, Event::RunCompleted { status: Outcome::Succeeded, summary: "ok".into() })])
        .await
        .expect("the writer goes on");
    let loaded = db.load("r1").await.expect("the log reads back");
    assert_eq!(loaded.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3], "each record once");
}

#[tokio::test]
async fn a_database_that_stays_away_is_given_up_on_after_the_stated_time_saying_so() {
    let Some(schema) = TestDatabase::new("gone") else { return };
    let (url, relay) = through(&schema, Relay::start);
    let db = Database::connect(&url).await.expect("connects through the relay");
    let _lease = new_run(&db, "me").await;
    db.set_reconnect_window(Duration::from_millis(700));
    relay.take_down();
    let started = std::time::Instant::now();
    let error = db.run("r1").await.expect_err("the database is away").to_string();
    assert!(error.contains("could not be made again within 700 ms"), "{error}");
    assert!(error.contains("RUNNER_DB_RECONNECT_SECS"), "the message says how to wait longer: {error}");
    assert!(started.elapsed() < Duration::from_secs(30), "it gave up, after {:?}", started.elapsed());
}

#[tokio::test]
async fn an_unreachable_database_is_an_error_that_hides_the_password() {
    let error =
        Database::connect("postgres://runner:s3cret@127.0.0.1:1/test").await.expect_err("nothing listens on port 1");
    let shown = error.to_string();
    assert!(matches!(error, StoreError::Database { .. }), "{error:?}");
    assert!(!shown.contains("s3cret") && shown.contains("runner:***@127.0.0.1:1"), "{shown}");
    let error = Database::connect("postgres://runner:s3cret@127.0.0.1:1/test?port=x").await.expect_err("a bad URL");
    assert!(!error.to_string().contains("s3cret"), "{error}");
}

#[tokio::test]
async fn a_parameter_of_the_wrong_type_is_an_error_at_once_not_a_lost_connection() {
    let Some(schema) = TestDatabase::new("wrong_type") else { return };
    let db = connect(&schema).await;
    // Were it taken for a lost connection, the statement would be tried again for an hour.
    db.set_reconnect_window(Duration::from_secs(3600));
    let error = db.query("count", "SELECT $1::numeric", &[&1_i64]).await.expect_err("i64 is not numeric").to_string();
    assert!(error.contains("error serializing parameter 0"), "{error}");
    assert!(!error.contains("connection was lost"), "{error}");
}
