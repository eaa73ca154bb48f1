//! The JSONL event store: round trips, group commit, torn and corrupt logs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use engine::store::{EventStore, JsonlStore, StoreError};
use engine::{Event, Outcome, Record, Tokens};

/// A fresh folder under the system's temp folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("engine-store-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temp folder");
        TempDir(path)
    }

    fn log(&self) -> PathBuf {
        self.0.join("runs").join("r1").join("events.jsonl")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(seq: u64, event: Event) -> Record {
    Record { seq, at: "2026-11-22T12:45:03.456Z".into(), run_id: "r1".into(), event }
}

fn dispatched(seq: u64) -> Record {
    record(seq, Event::TaskDispatched { task: format!("t{seq}"), attempt: 1, input: format!("input {seq}") })
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).expect("the log reads").lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn records_round_trip() {
    let dir = TempDir::new("round-trip");
    let loaded = manifest::load_str(
        "t.yaml",
        "t",
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions: {m: {runtime: mock}}\n  \
         workflow:\n    - {id: a, agent: m, input: \"héllo {{ mission }}\\n\"}\n",
        &|_| true,
    );
    let plan = loaded.plan.expect("the plan loads");
    // Source locations are not part of the record: compare with the plan as recorded.
    let plan: manifest::Plan = serde_json::from_value(serde_json::to_value(&plan).expect("encodes")).expect("decodes");
    let records = vec![
        record(
            1,
            Event::RunCreated {
                schema: engine::event::SCHEMA_VERSION,
                plan: std::sync::Arc::new(plan),
                plan_sha256: "ab".repeat(32),
                vars: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
                strategy: manifest::plan::Strategy::Phased,
                source: Some("/plans/t.yaml".into()),
                retry_of: None,
            },
        ),
        record(2, Event::TaskDispatched { task: "a".into(), attempt: 1, input: "line\n\"quoted\" \u{1F600}".into() }),
        record(
            3,
            Event::TaskSucceeded {
                task: "a".into(),
                attempt: 1,
                output: "{\"json\": true}".into(),
                tokens: Some(Tokens { prompt: 3, completion: 4 }),
                duration_ms: 12,
            },
        ),
        record(4, Event::RetryScheduled { task: "a".into(), attempt: 2, delay_ms: 100 }),
        record(5, Event::ReviewDecided { task: "a".into(), approved: false, comment: None }),
        record(6, Event::RunResumed),
        record(7, Event::RunCompleted { status: Outcome::Partial, summary: "1 of 1".into() }),
    ];
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(records[..2].to_vec()).await.expect("durable");
    store.append(records[2..].to_vec()).await.expect("durable");
    drop(store);
    let loaded = JsonlStore::load(&dir.log()).expect("loads");
    assert_eq!(loaded.warning, None);
    assert_eq!(loaded.records, records);
    assert_eq!(lines(&dir.log()).len(), records.len(), "one line per record");
}

#[tokio::test]
async fn appends_queued_together_share_syncs() {
    let dir = TempDir::new("group-commit");
    let store = JsonlStore::create(&dir.log()).expect("created");
    let pending: Vec<_> = (1..=1000).map(|seq| store.append(vec![dispatched(seq)])).collect();
    for durable in pending {
        durable.await.expect("durable");
    }
    let syncs = store.syncs();
    assert!((1..1000).contains(&syncs), "{syncs} syncs for 1000 appends");
    let lines = lines(&dir.log());
    assert_eq!(lines.len(), 1000);
    for (line, seq) in lines.iter().zip(1..) {
        let parsed: Record = serde_json::from_str(line).expect("each line is a record");
        assert_eq!(parsed, dispatched(seq));
    }
    drop(store);
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records.len(), 1000);
}

#[tokio::test]
async fn a_torn_last_line_is_dropped_and_cut_before_the_next_append() {
    let dir = TempDir::new("torn");
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append((1..=3).map(dispatched).collect()).await.expect("durable");
    drop(store);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("opens");
    file.write_all(br#"{"seq":4,"at":"2026-11-22T12:45:03.456Z","run_id":"r1","type":"TaskDisp"#).expect("writes");
    drop(file);

    let (store, loaded) = JsonlStore::open(&dir.log()).expect("opens despite the torn line");
    assert_eq!(loaded.records, (1..=3).map(dispatched).collect::<Vec<_>>());
    let warning = loaded.warning.expect("a warning about the torn line");
    assert!(warning.contains("torn") && warning.contains("line 4"), "{warning}");
    store.append(vec![dispatched(4)]).await.expect("durable");
    drop(store);

    let loaded = JsonlStore::load(&dir.log()).expect("a valid log");
    assert_eq!(loaded.warning, None);
    assert_eq!(loaded.records, (1..=4).map(dispatched).collect::<Vec<_>>());
    assert_eq!(lines(&dir.log()).len(), 4);
}

#[tokio::test]
async fn a_complete_record_without_its_newline_counts_as_torn() {
    let dir = TempDir::new("no-newline");
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(vec![dispatched(1)]).await.expect("durable");
    drop(store);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("opens");
    file.write_all(serde_json::to_string(&dispatched(2)).expect("encodes").as_bytes()).expect("writes");
    drop(file);

    let (store, loaded) = JsonlStore::open(&dir.log()).expect("opens");
    assert_eq!(loaded.records, vec![dispatched(1)]);
    assert!(loaded.warning.is_some());
    store.append(vec![dispatched(2)]).await.expect("durable");
    drop(store);
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, vec![dispatched(1), dispatched(2)]);
}

#[tokio::test]
async fn a_bad_line_in_the_middle_is_corruption_naming_the_line() {
    let dir = TempDir::new("corrupt");
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(vec![dispatched(1)]).await.expect("durable");
    drop(store);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("opens");
    file.write_all(b"not json at all\n").expect("writes");
    file.write_all(format!("{}\n", serde_json::to_string(&dispatched(3)).expect("encodes")).as_bytes()).expect("w");
    drop(file);
    let before = std::fs::read(dir.log()).expect("reads");

    for error in [JsonlStore::load(&dir.log()).map(|_| ()), JsonlStore::open(&dir.log()).map(|_| ())] {
        match error {
            Err(StoreError::Corrupt { line, ref path, .. }) => {
                assert_eq!(line, 2);
                assert!(path.ends_with("events.jsonl"), "{path}");
                let message = error.expect_err("corrupt").to_string();
                assert!(message.contains("events.jsonl:2:"), "{message}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
    assert_eq!(std::fs::read(dir.log()).expect("reads"), before, "a corrupt log is left as it was");
}

#[tokio::test]
async fn create_refuses_an_existing_log() {
    let dir = TempDir::new("exists");
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(vec![dispatched(1)]).await.expect("durable");
    drop(store);
    match JsonlStore::create(&dir.log()) {
        Err(StoreError::Io { action, .. }) => assert_eq!(action, "create"),
        other => panic!("expected an error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, vec![dispatched(1)], "left untouched");
}
