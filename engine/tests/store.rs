//! The JSONL event store: round trips, group commit, staged creation, and logs that are torn
//! (dropped) or break their promises (refused, never changed).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use engine::event::RunCreated;
use engine::store::{EventStore, JsonlStore, Returned, StoreError};
use engine::{Event, Outcome, Record, Tokens};
use records::{created, dispatched, record};

#[path = "support/records.rs"]
mod records;

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

/// A log of `n` records: `RunCreated`, then dispatches.
fn log_of(n: u64) -> Vec<Record> {
    std::iter::once(created()).chain((2..=n).map(dispatched)).collect()
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
            Event::RunCreated(Box::new(RunCreated {
                schema: engine::event::SCHEMA_VERSION,
                plan: Arc::new(plan),
                plan_sha256: "ab".repeat(32).into(),
                vars: BTreeMap::from([("k".to_owned(), serde_json::json!("v"))]),
                strategy: manifest::plan::Strategy::Phased,
                source: Some("/plans/t.yaml".into()),
                retry_of: None,
                parent: None,
                trace: None,
                approved_tools: Vec::new(),
                growing: None,
                cache_reuse: Default::default(),
                forecast: None,
            })),
        ),
        record(2, Event::TaskDispatched { task: "a".into(), attempt: 1, input: "line\n\"quoted\" \u{1F600}".into() }),
        record(
            3,
            Event::TaskSucceeded {
                task: "a".into(),
                attempt: 1,
                dispatched_seq: Some(2),
                output: "{\"json\": true}".into(),
                tokens: Some(Tokens { prompt: 3, completion: 4 }),
                duration_ms: 12,
            },
        ),
        record(4, Event::RetryScheduled { task: "a".into(), attempt: 2, delay_ms: 80, backoff_ms: Some(100) }),
        record(5, Event::ReviewDecided { task: "a".into(), approved: false, comment: None }),
        record(6, Event::RunResumed),
        record(7, Event::RunCompleted { status: Outcome::Partial, summary: "1 of 1".into() }),
    ];
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(records[..2].to_vec()).await.expect("durable");
    let back = store.append_returning(records[2..].to_vec()).await.expect("durable");
    assert_eq!(back, records[2..], "the records come back as they were appended");
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
    let records = log_of(1000);
    // Every third append asks for its record back: a batch of both kinds is synced together.
    let pending: Vec<Returned> = records
        .iter()
        .enumerate()
        .map(|(i, record)| -> Returned {
            if i % 3 == 0 {
                return store.append_returning(vec![record.clone()]);
            }
            let durable = store.append(vec![record.clone()]);
            Box::pin(async move { durable.await.map(|()| Vec::new()) })
        })
        .collect();
    for (i, durable) in pending.into_iter().enumerate() {
        let back = durable.await.expect("durable");
        assert_eq!(back.first(), (i % 3 == 0).then_some(&records[i]), "append {i}");
    }
    let syncs = store.syncs();
    assert!((1..1000).contains(&syncs), "{syncs} syncs for 1000 appends");
    let lines = lines(&dir.log());
    assert_eq!(lines.len(), 1000);
    for (line, record) in lines.iter().zip(&records) {
        let parsed: Record = serde_json::from_str(line).expect("each line is a record");
        assert_eq!(&parsed, record);
    }
    drop(store);
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records.len(), 1000);
}

/// Writes a log of `n` records through the store, then `tail` by hand.
async fn written(dir: &TempDir, n: u64, tail: &[u8]) {
    let store = JsonlStore::create(&dir.log()).expect("created");
    store.append(log_of(n)).await.expect("durable");
    drop(store);
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("opens");
    file.write_all(tail).expect("writes");
}

fn line_of(record: &Record) -> String {
    format!("{}\n", serde_json::to_string(record).expect("encodes"))
}

#[tokio::test]
async fn a_torn_last_line_is_dropped_and_cut_before_the_next_append() {
    let dir = TempDir::new("torn");
    written(&dir, 3, br#"{"seq":4,"at":"2026-11-22T12:45:03.456Z","run_id":"r1","type":"TaskDisp"#).await;

    let (store, loaded) = JsonlStore::open(&dir.log()).expect("opens despite the torn line");
    assert_eq!(loaded.records, log_of(3));
    let warning = loaded.warning.expect("a warning about the torn line");
    assert!(warning.contains("torn") && warning.contains("line 4"), "{warning}");
    store.append(vec![dispatched(4)]).await.expect("durable");
    drop(store);

    let loaded = JsonlStore::load(&dir.log()).expect("a valid log");
    assert_eq!(loaded.warning, None);
    assert_eq!(loaded.records, log_of(4));
    assert_eq!(lines(&dir.log()).len(), 4);
}

#[tokio::test]
async fn a_complete_record_without_its_newline_counts_as_torn() {
    let dir = TempDir::new("no-newline");
    written(&dir, 1, serde_json::to_string(&dispatched(2)).expect("encodes").as_bytes()).await;

    let (store, loaded) = JsonlStore::open(&dir.log()).expect("opens");
    assert_eq!(loaded.records, log_of(1));
    assert!(loaded.warning.is_some());
    store.append(vec![dispatched(2)]).await.expect("durable");
    drop(store);
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, log_of(2));
}

#[tokio::test]
async fn a_last_line_that_is_not_json_is_torn_even_with_its_newline() {
    let dir = TempDir::new("not-json-last");
    written(&dir, 2, b"{\"seq\":3,\"at\"\n").await;
    let (_, loaded) = JsonlStore::open(&dir.log()).expect("opens");
    assert_eq!(loaded.records, log_of(2));
    assert!(loaded.warning.is_some_and(|w| w.contains("line 3")));
    assert_eq!(lines(&dir.log()).len(), 2, "the torn line is cut");
}

/// Asserts that loading and opening the log both fail with `store::corrupt` at `line`, with a
/// reason holding `words` and a hint, and that the file is left exactly as it was.
fn assert_corrupt(dir: &TempDir, line: usize, words: &str) {
    use miette::Diagnostic as _;
    let before = std::fs::read(dir.log()).expect("reads");
    for result in [JsonlStore::load(&dir.log()).map(|_| ()), JsonlStore::open(&dir.log()).map(|_| ())] {
        let error = result.expect_err("the log is refused");
        match &error {
            StoreError::Corrupt { line: at, path, reason, .. } => {
                assert_eq!(*at, line, "{error}");
                assert!(path.ends_with("events.jsonl"), "{path}");
                assert!(reason.contains(words), "{reason:?} should say {words:?}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert!(error.to_string().contains(&format!("events.jsonl:{line}: ")), "{error}");
        assert_eq!(error.code().map(|c| c.to_string()).as_deref(), Some("store::corrupt"));
        assert!(error.help().is_some_and(|h| !h.to_string().is_empty()), "a hint says what to do");
    }
    assert_eq!(std::fs::read(dir.log()).expect("reads"), before, "a refused log is left as it was");
}

#[tokio::test]
async fn a_bad_line_in_the_middle_is_corruption_naming_the_line() {
    let dir = TempDir::new("corrupt");
    written(&dir, 1, format!("not json at all\n{}", line_of(&dispatched(2))).as_bytes()).await;
    assert_corrupt(&dir, 2, "not JSON");
}

#[tokio::test]
async fn a_duplicated_last_line_is_corruption_not_a_hang_or_a_drop() {
    let dir = TempDir::new("duplicate");
    written(&dir, 3, line_of(&dispatched(3)).as_bytes()).await;
    assert_corrupt(&dir, 4, "seq 3 again");
}

#[tokio::test]
async fn a_seq_gap_is_corruption() {
    let dir = TempDir::new("gap");
    written(&dir, 3, line_of(&dispatched(5)).as_bytes()).await;
    assert_corrupt(&dir, 4, "records 4 to 4 are missing");
}

#[tokio::test]
async fn a_seq_going_back_is_corruption() {
    let dir = TempDir::new("back");
    written(&dir, 3, line_of(&dispatched(2)).as_bytes()).await;
    assert_corrupt(&dir, 4, "out of order");
}

#[tokio::test]
async fn an_unknown_event_type_as_the_last_line_is_kept_and_refused() {
    let dir = TempDir::new("unknown-last");
    written(
        &dir,
        2,
        b"{\"seq\":3,\"at\":\"2026-11-22T12:45:03.456Z\",\"run_id\":\"r1\",\"type\":\"TaskTeleported\"}\n",
    )
    .await;
    assert_corrupt(&dir, 3, "unknown event type `TaskTeleported`");
}

#[tokio::test]
async fn an_unknown_event_type_in_the_middle_is_refused() {
    let dir = TempDir::new("unknown-middle");
    let unknown = "{\"seq\":3,\"at\":\"2026-11-22T12:45:03.456Z\",\"run_id\":\"r1\",\"type\":\"TaskTeleported\"}\n";
    written(&dir, 2, format!("{unknown}{}", line_of(&dispatched(4))).as_bytes()).await;
    assert_corrupt(&dir, 3, "unknown event type");
}

#[tokio::test]
async fn a_known_type_with_a_missing_field_is_not_a_record() {
    let dir = TempDir::new("missing-field");
    written(&dir, 2, b"{\"seq\":3,\"at\":\"2026-11-22T12:45:03.456Z\",\"run_id\":\"r1\",\"type\":\"TaskSucceeded\"}\n")
        .await;
    assert_corrupt(&dir, 3, "not a valid `TaskSucceeded` record");
}

#[tokio::test]
async fn json_that_is_not_an_event_record_is_refused_even_last() {
    let dir = TempDir::new("not-a-record");
    written(&dir, 2, b"{\"hello\": 1}\n").await;
    assert_corrupt(&dir, 3, "not an event record");
    let dir = TempDir::new("array");
    written(&dir, 2, b"[1, 2]\n").await;
    assert_corrupt(&dir, 3, "not an event record");
}

#[tokio::test]
async fn an_unknown_schema_version_is_refused() {
    let dir = TempDir::new("schema");
    let mut first = serde_json::to_value(created()).expect("encodes");
    first["schema"] = 99.into();
    std::fs::create_dir_all(dir.log().parent().expect("a folder")).expect("creates");
    std::fs::write(dir.log(), format!("{first}\n{}", line_of(&dispatched(2)))).expect("writes");
    assert_corrupt(&dir, 1, "schema version 99");
}

#[tokio::test]
async fn a_record_of_another_run_is_refused() {
    let dir = TempDir::new("other-run");
    let mut stranger = dispatched(3);
    stranger.run_id = "r2".into();
    written(&dir, 2, line_of(&stranger).as_bytes()).await;
    assert_corrupt(&dir, 3, "a record of run `r2` in the log of run `r1`");
}

#[tokio::test]
async fn a_log_must_start_with_run_created_at_seq_1() {
    let dir = TempDir::new("no-created");
    std::fs::create_dir_all(dir.log().parent().expect("a folder")).expect("creates");
    std::fs::write(dir.log(), line_of(&dispatched(1))).expect("writes");
    assert_corrupt(&dir, 1, "not the run's `RunCreated`");
    std::fs::write(dir.log(), line_of(&record(2, created().event))).expect("writes");
    assert_corrupt(&dir, 1, "seq 2, not 1");
    let mut second = created();
    second.seq = 2;
    std::fs::write(dir.log(), format!("{}{}", line_of(&created()), line_of(&second))).expect("writes");
    assert_corrupt(&dir, 2, "a second `RunCreated`");
}

#[tokio::test]
async fn create_refuses_an_existing_log() {
    let dir = TempDir::new("exists");
    written(&dir, 1, b"").await;
    match JsonlStore::create(&dir.log()) {
        Err(StoreError::Io { action, .. }) => assert_eq!(action, "create"),
        other => panic!("expected an error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, log_of(1), "left untouched");
}

/// A staging folder with its log, and the run folder it becomes.
fn staged(dir: &TempDir) -> (PathBuf, PathBuf) {
    let staging = dir.0.join("runs").join(".r1.new");
    std::fs::create_dir_all(&staging).expect("a staging folder");
    (staging, dir.0.join("runs").join("r1"))
}

#[tokio::test]
async fn a_staged_log_appears_in_its_folder_once_its_first_records_are_durable() {
    let dir = TempDir::new("staged");
    let (staging, folder) = staged(&dir);
    std::fs::write(staging.join("lock"), "").expect("a file beside the log");
    let store = JsonlStore::stage(&staging.join("events.jsonl"), &folder).expect("staged");
    assert!(!folder.exists(), "no run folder before the first record");
    store.append(log_of(2)).await.expect("durable");
    assert!(!staging.exists() && folder.join("lock").exists(), "the staging folder became the run's");
    store.append(vec![dispatched(3)]).await.expect("durable");
    drop(store);
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, log_of(3));
}

#[tokio::test]
async fn a_staged_log_whose_first_append_fails_leaves_no_folder_behind() {
    let dir = TempDir::new("staged-fails");
    let (staging, folder) = staged(&dir);
    let store = JsonlStore::stage(&staging.join("events.jsonl"), &folder).expect("staged");
    // Another process takes the run id meanwhile: the first append must not replace its run.
    std::fs::create_dir_all(&folder).expect("a rival folder");
    std::fs::write(folder.join("events.jsonl"), line_of(&created())).expect("the rival's log");
    match store.append(log_of(2)).await {
        Err(StoreError::Io { path, .. }) => assert!(path.ends_with("r1"), "{path}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(!staging.exists(), "the staging folder is removed");
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, vec![created()], "the rival's log is intact");
    assert_eq!(store.append(vec![dispatched(3)]).await, Err(StoreError::Closed));
}

#[tokio::test]
async fn a_staged_log_dropped_before_any_append_leaves_no_folder_behind() {
    let dir = TempDir::new("staged-dropped");
    let (staging, folder) = staged(&dir);
    drop(JsonlStore::stage(&staging.join("events.jsonl"), &folder).expect("staged"));
    // The writer thread removes it once it sees the store is gone.
    for _ in 0..500 {
        if !staging.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!staging.exists() && !folder.exists());
}

mod damage {
    //! Random damage to a valid log: loading never panics, and either refuses the log with
    //! `store::corrupt`, leaving it untouched, or returns every complete record in it, dropping
    //! at most a torn last line.

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Damage {
        Truncate(usize),
        Delete(usize, usize),
        Insert(usize, Vec<u8>),
        DuplicateLine(usize),
        SwapLines(usize, usize),
        ReplaceLine(usize, String),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            any::<usize>().prop_map(Damage::Truncate),
            (any::<usize>(), 1..40usize).prop_map(|(at, n)| Damage::Delete(at, n)),
            (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(at, b)| Damage::Insert(at, b)),
            (any::<usize>(), prop::sample::select(vec![b'\n', b'{', b'}', b'"', b'1', b' ']))
                .prop_map(|(at, b)| Damage::Insert(at, vec![b])),
            any::<usize>().prop_map(Damage::DuplicateLine),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Damage::SwapLines(a, b)),
            (any::<usize>(), "[ -~]{0,30}").prop_map(|(at, text)| Damage::ReplaceLine(at, text)),
        ]
    }

    /// Splits after each newline; a last piece without one is kept.
    fn split(bytes: &[u8]) -> Vec<Vec<u8>> {
        bytes.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
    }

    fn apply(bytes: &mut Vec<u8>, damage: &Damage) {
        let len = bytes.len().max(1);
        match damage {
            Damage::Truncate(at) => bytes.truncate(at % len),
            Damage::Delete(at, n) => {
                let start = (at % len).min(bytes.len());
                let end = (start + n).min(bytes.len());
                bytes.drain(start..end);
            }
            Damage::Insert(at, new) => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            Damage::DuplicateLine(i) => edit_lines(bytes, *i, |lines, i| lines.insert(i, lines[i].clone())),
            Damage::SwapLines(i, j) => edit_lines(bytes, *i, |lines, i| {
                let j = j % lines.len();
                lines.swap(i, j);
            }),
            Damage::ReplaceLine(i, text) => {
                edit_lines(bytes, *i, |lines, i| lines[i] = format!("{text}\n").into_bytes())
            }
        }
    }

    /// Changes the lines of `bytes` with the line `i` (modulo their count) picked.
    fn edit_lines(bytes: &mut Vec<u8>, i: usize, edit: impl FnOnce(&mut Vec<Vec<u8>>, usize)) {
        let mut lines = split(bytes);
        if lines.is_empty() {
            return;
        }
        let i = i % lines.len();
        edit(&mut lines, i);
        *bytes = lines.concat();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn damaged_logs_load_whole_or_are_refused(n in 1..8u64, damages in prop::collection::vec(damage(), 1..4)) {
            let dir = TempDir::new("damage");
            std::fs::create_dir_all(dir.log().parent().expect("a folder")).expect("creates");
            let mut bytes: Vec<u8> = log_of(n).iter().map(line_of).collect::<String>().into_bytes();
            for damage in &damages {
                apply(&mut bytes, damage);
            }
            std::fs::write(dir.log(), &bytes).expect("writes");
            let pieces = split(&bytes);
            match JsonlStore::open(&dir.log()) {
                Ok((store, loaded)) => {
                    drop(store);
                    let dropped = loaded.warning.is_some();
                    let kept = if dropped { pieces.len() - 1 } else { pieces.len() };
                    prop_assert_eq!(loaded.records.len(), kept, "every record is returned");
                    for (piece, record) in pieces.iter().zip(&loaded.records) {
                        let parsed: Record = serde_json::from_slice(piece).expect("a kept line is a record");
                        prop_assert_eq!(&parsed, record);
                        prop_assert!(piece.ends_with(b"\n"));
                    }
                    if dropped {
                        let last = pieces.last().expect("a line was dropped");
                        let torn = !last.ends_with(b"\n") || serde_json::from_slice::<serde_json::Value>(last).is_err();
                        prop_assert!(torn, "only a torn line is dropped: {:?}", String::from_utf8_lossy(last));
                    }
                    let seqs: Vec<u64> = loaded.records.iter().map(|r| r.seq).collect();
                    prop_assert_eq!(seqs, (1..=kept as u64).collect::<Vec<_>>());
                    prop_assert_eq!(std::fs::read(dir.log()).expect("reads"), pieces[..kept].concat(), "only the torn line is cut");
                }
                Err(StoreError::Corrupt { line, .. }) => {
                    // An empty log is refused at its first line.
                    prop_assert!((1..=pieces.len().max(1)).contains(&line), "line {} of {}", line, pieces.len());
                    prop_assert_eq!(std::fs::read(dir.log()).expect("reads"), bytes, "a refused log is left as it was");
                }
                Err(other) => prop_assert!(false, "unexpected error {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_version_1_log_loads_and_folds_with_the_new_fields_defaulted() {
    use engine::Handler;
    use engine::event::ErrorClass;
    let dir = TempDir::new("version-1");
    let mut created = serde_json::to_value(created()).expect("encodes");
    created["schema"] = 1.into();
    // Version-1 plans wrote every policy in full, without `retry_on`.
    for task in created["plan"]["tasks"].as_array_mut().expect("tasks") {
        task["on_failure"] = serde_json::json!(
            {"action": "fail", "max_attempts": 1, "backoff": "1s", "factor": 2, "max_backoff": "1m", "then": "fail"}
        );
    }
    let at = "2026-11-22T12:45:03.456Z";
    let events = [
        serde_json::json!({"type": "TaskDispatched", "task": "a", "attempt": 1, "input": "x"}),
        serde_json::json!({"type": "TaskFailed", "task": "a", "attempt": 1, "error": "boom"}),
        serde_json::json!({"type": "RetryScheduled", "task": "a", "attempt": 2, "delay_ms": 1000}),
        serde_json::json!({"type": "RetryDue", "task": "a"}),
        serde_json::json!({"type": "TaskDispatched", "task": "a", "attempt": 2, "input": "x"}),
        serde_json::json!({"type": "TaskSucceeded", "task": "a", "attempt": 2, "output": "fine", "duration_ms": 5}),
        serde_json::json!({"type": "RunCompleted", "status": "succeeded", "summary": "1 of 1"}),
    ];
    let mut text = format!("{created}\n");
    for (n, event) in events.into_iter().enumerate() {
        let mut line = serde_json::json!({"seq": n + 2, "at": at, "run_id": "r1"});
        line.as_object_mut().expect("an object").extend(event.as_object().expect("an object").clone());
        text.push_str(&format!("{line}\n"));
    }
    std::fs::create_dir_all(dir.log().parent().expect("a folder")).expect("creates");
    std::fs::write(dir.log(), text).expect("writes");

    let loaded = JsonlStore::load(&dir.log()).expect("a version-1 log loads");
    assert_eq!(loaded.warning, None);
    let events: Vec<Event> = loaded.records.into_iter().map(|r| r.event).collect();
    assert_eq!(
        events[2],
        Event::TaskFailed {
            task: "a".into(),
            attempt: 1,
            dispatched_seq: None,
            error: "boom".into(),
            class: ErrorClass::Agent,
            retryable: false,
            tokens: None,
        }
    );
    assert_eq!(events[3], Event::RetryScheduled { task: "a".into(), attempt: 2, delay_ms: 1000, backoff_ms: None });
    let state = engine::RunState::fold(&events);
    assert_eq!(state.status, engine::RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.plan.tasks[0].on_failure.value.retry_on, manifest::plan::RetryOn::Any);
    assert_eq!(state.tasks[0].attempts, 2);
    assert_eq!(state.tasks[0].dispatched_seq(), Some(6), "counted from the events, so old logs link too");
    assert_eq!(state.seq, 8);
}

/// The first records of a crashed run as runner wrote them before a task's fields at their
/// defaults were left out of its plan: every field written, `null`s and empty lists included.
const FULL_PLAN_LOG: &str = concat!(
    r#"{"seq":1,"at":"2026-11-24T13:47:50.678Z","run_id":"old","type":"RunCreated","schema":2,"plan":{"name":"old-log","description":null,"labels":{},"form":"enveloped","mission":null,"mission_analysis":null,"providers":{},"tools":{},"agents":{"echo":{"runtime":{"runtime":"mock","latency":null,"default":"ok","responses":{}},"system_prompt":null,"reliability_weight":null,"timeout":null}},"tasks":[{"id":"a","kind":"task","agent":"echo","input":"first","prompt":null,"depends_on":[],"inputs":[],"chained_after":null,"parallel_group":null,"verification":null,"on_failure":{"action":"fail","max_attempts":1,"backoff":"1s","factor":2,"max_backoff":"1m","then":"fail","retry_on":"any"},"critical":false,"timeout":null,"attachments":[],"max_output_tokens":null},{"id":"b","kind":"task","agent":"echo","input":"after {{ tasks.a.output }}","prompt":null,"depends_on":["a"],"inputs":[],"chained_after":null,"parallel_group":null,"verification":null,"on_failure":{"action":"retry","max_attempts":3,"backoff":"1s","factor":2,"max_backoff":"1m","then":"fail","retry_on":"any"},"critical":false,"timeout":"30s","attachments":[],"max_output_tokens":null},{"id":"c","kind":"task","agent":"echo","input":"last","prompt":null,"depends_on":["b"],"inputs":[],"chained_after":null,"parallel_group":"g","verification":null,"on_failure":{"action":"fail","max_attempts":1,"backoff":"1s","factor":2,"max_backoff":"1m","then":"fail","retry_on":"any"},"critical":true,"timeout":null,"attachments":[],"max_output_tokens":null}],"control":{"strategy":"eager","max_concurrency":null,"parallel_groups":{},"max_turns_per_phase":null,"replan_on_empty_result":false,"max_replans":2,"planner":null,"compactor":null,"token_budget":null,"context_budget":null,"summary_budget":null,"error_char_limit":2000,"allow_clarification":true}},"plan_sha256":"12303e9b651b2553f63eeddeb7331b084242ea39c2c5a60ddc02b16f05d3abc2","vars":{},"strategy":"eager"}"#,
    "\n",
    r#"{"seq":2,"at":"2026-11-24T13:47:50.678Z","run_id":"old","type":"TaskDispatched","task":"a","attempt":1,"input":"first"}"#,
    "\n",
    r#"{"seq":3,"at":"2026-11-24T13:47:50.680Z","run_id":"old","type":"TaskSucceeded","task":"a","attempt":1,"dispatched_seq":2,"output":"ok","duration_ms":0}"#,
    "\n",
);

/// The plan of [`FULL_PLAN_LOG`], as a manifest.
const FULL_PLAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: old-log}\nspec:\n  \
                         agent_definitions:\n    echo: {runtime: mock, default: ok}\n  workflow:\n    \
                         - {id: a, agent: echo, input: first}\n    \
                         - {id: b, agent: echo, input: \"after {{ tasks.a.output }}\", depends_on: [a], on_failure: retry, timeout: 30s}\n    \
                         - {id: c, agent: echo, input: last, depends_on: [b], critical: true, parallel_group: g}\n";

#[tokio::test]
async fn a_log_whose_plan_wrote_every_field_resumes_and_a_new_one_leaves_the_defaults_out() {
    let dir = TempDir::new("full-plan");
    std::fs::create_dir_all(dir.log().parent().expect("a folder")).expect("creates");
    std::fs::write(dir.log(), FULL_PLAN_LOG).expect("writes");
    let (store, loaded) = JsonlStore::open(&dir.log()).expect("a log with the plan in full opens");
    let Some(old) = loaded.records[0].event.plan() else { panic!("the log starts with RunCreated") };
    let fresh = manifest::load_str("plan.yaml", "plan", FULL_PLAN, &|_| true).plan.expect("the plan loads");
    assert_eq!(
        serde_json::to_value(&**old).expect("encodes"),
        serde_json::to_value(&fresh).expect("encodes"),
        "the plan read back in full is the plan a new run records"
    );

    // Left out now: what each task has at its default (task `a` has nothing else).
    let encoded = serde_json::to_value(&fresh).expect("encodes");
    assert_eq!(encoded["tasks"][0], serde_json::json!({"id": "a", "agent": "echo", "input": "first"}));
    let b = encoded["tasks"][1].as_object().expect("a task");
    assert_eq!(b.get("on_failure").map(|p| p["max_attempts"].clone()), Some(3.into()));
    assert_eq!(b.get("timeout"), Some(&serde_json::json!("30s")));
    let decoded: manifest::Plan = serde_json::from_value(encoded).expect("decodes");
    assert_eq!(serde_json::to_value(&decoded).expect("encodes"), serde_json::to_value(&**old).expect("encodes"));
    assert!(decoded.tasks[2].critical && decoded.tasks[2].extras().parallel_group.is_some());

    let driver = engine::driver::Driver::new("old".into(), store, &loaded.records, dir.0.clone());
    let cancel = tokio_util::sync::CancellationToken::new();
    let state = driver.run(engine::Command::Continue, cancel).await.expect("the old run resumes");
    assert_eq!(state.status, engine::RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.tasks[1].input.as_deref(), Some("after ok"), "b read a's output from before the crash");
    let records = JsonlStore::load(&dir.log()).expect("the log reads").records;
    let dispatched_a = records.iter().filter(|r| matches!(&r.event, Event::TaskDispatched { task, .. } if task == "a"));
    assert_eq!(dispatched_a.count(), 1, "a finished before the crash and does not run again");
}

/// A JSONL store the test keeps a handle on, to read its fsync count after the run.
struct Shared(Arc<JsonlStore>);

impl EventStore for Shared {
    fn append(&self, records: Vec<Record>) -> engine::store::Durable {
        self.0.append(records)
    }
}

#[tokio::test]
async fn a_run_syncs_once_a_batch_and_a_batch_takes_all_the_ready_work() {
    // Three layers of four tasks, each task needing two of the layer before, and a chain of
    // three: a layer's results and the next layer's dispatches share one batch and one fsync.
    let mut layered = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: l}\nspec:\n  agent_definitions: {m: {runtime: mock}}\n  workflow:\n",
    );
    for layer in 0..3 {
        for n in 0..4 {
            let deps = if layer == 0 {
                String::new()
            } else {
                format!(", depends_on: [t{}_{n}, t{}_{}]", layer - 1, layer - 1, (n + 1) % 4)
            };
            layered.push_str(&format!("    - {{id: t{layer}_{n}, agent: m, input: x{deps}}}\n"));
        }
    }
    let chain = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: c}\nspec:\n  agent_definitions: {m: {runtime: mock}}\n  \
                 workflow:\n    - {id: a, agent: m, input: x}\n    - {id: b, agent: m, input: x, depends_on: [a]}\n    \
                 - {id: c, agent: m, input: x, depends_on: [b]}\n";
    for (name, text, depth) in [("layered", layered.as_str(), 3), ("chain", chain, 3)] {
        let dir = TempDir::new(name);
        let plan = manifest::load_str("p.yaml", "p", text, &|_| true).plan.expect("the plan loads");
        let store = Arc::new(JsonlStore::create(&dir.log()).expect("created"));
        let driver = engine::driver::Driver::new("r1".into(), Shared(Arc::clone(&store)), &[], dir.0.clone());
        let start = engine::Command::Start(engine::Start::plan(Arc::new(plan)));
        let state = driver.run(start, tokio_util::sync::CancellationToken::new()).await.expect("the run is driven");
        assert_eq!(state.status, engine::RunStatus::Finished(Outcome::Succeeded), "{name}");
        // The first batch dispatches the first layer, each next one takes a layer's results
        // and dispatches the next, the last one takes the last results and ends the run.
        assert_eq!(store.syncs(), depth + 1, "{name}: one fsync a batch, one batch a layer");
    }
}
