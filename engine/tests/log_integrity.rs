//! What a JSONL log proves about itself: every line the store writes carries a CRC-32C of its
//! bytes, so a changed byte is refused rather than folded; lines without one (older runners')
//! still load; and a log that contradicts itself (a task its plans do not have, records after
//! the run's end, no records at all) is refused with the file and line, as other damage is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engine::event::{Replanned, RunCreated};
use engine::store::{EventStore, JsonlStore, StoreError};
use engine::{Event, Outcome, Record};

/// A fresh folder under the system's temp folder, removed when dropped.
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new() -> Self {
        TempDir(tempfile::tempdir().expect("a temp folder"))
    }

    fn log(&self) -> PathBuf {
        self.0.path().join("events.jsonl")
    }
}

/// A plan of mock tasks with these ids, as a log records it (no source locations).
fn plan_of(ids: &[&str]) -> Arc<manifest::Plan> {
    let mut text = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions: {m: {runtime: mock}}\n  \
         workflow:\n",
    );
    for id in ids {
        text.push_str(&format!("    - {{id: {id}, agent: m, input: x}}\n"));
    }
    let plan = manifest::load_str("t.yaml", "t", &text, &|_| true).plan.expect("the plan loads");
    Arc::new(serde_json::from_value(serde_json::to_value(&plan).expect("encodes")).expect("decodes"))
}

fn record(seq: u64, event: Event) -> Record {
    Record { seq, at: "2026-11-22T12:45:03.456Z".into(), run_id: "r1".into(), event }
}

fn created(plan: Arc<manifest::Plan>) -> Event {
    Event::RunCreated(Box::new(RunCreated {
        schema: engine::event::SCHEMA_VERSION,
        plan,
        plan_sha256: "ab".repeat(32).into(),
        vars: Default::default(),
        strategy: manifest::plan::Strategy::Eager,
        source: None,
        retry_of: None,
        parent: None,
        trace: None,
        approved_tools: Vec::new(),
        growing: None,
        cache_reuse: Default::default(),
        forecast: None,
    }))
}

fn dispatched(task: &str) -> Event {
    Event::TaskDispatched { task: task.into(), attempt: 1, input: "x".into() }
}

fn succeeded(task: &str, output: &str) -> Event {
    Event::TaskSucceeded {
        task: task.into(),
        attempt: 1,
        dispatched_seq: None,
        output: output.into(),
        tokens: None,
        duration_ms: 3,
    }
}

fn completed() -> Event {
    Event::RunCompleted { status: Outcome::Succeeded, summary: "all tasks succeeded".into() }
}

/// Records numbered from 1.
fn records(events: impl IntoIterator<Item = Event>) -> Vec<Record> {
    events.into_iter().zip(1..).map(|(event, seq)| record(seq, event)).collect()
}

/// A finished run of tasks `a` and `b`.
fn finished_run() -> Vec<Record> {
    records([
        created(plan_of(&["a", "b"])),
        dispatched("a"),
        succeeded("a", "the output of a"),
        dispatched("b"),
        succeeded("b", "the output of b"),
        completed(),
    ])
}

/// Writes `records` through the store, as a run writes them.
async fn write(path: &Path, records: Vec<Record>) {
    let store = JsonlStore::create(path).expect("a new log");
    store.append(records).await.expect("durable");
}

/// Writes `records` as an older runner did: one JSON object a line, no checksum.
fn write_unsummed(path: &Path, records: &[Record]) {
    let text: String = records.iter().map(|r| format!("{}\n", serde_json::to_string(r).expect("encodes"))).collect();
    std::fs::write(path, text).expect("writes");
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).expect("reads").lines().map(str::to_owned).collect()
}

/// CRC-32C (Castagnoli, reflected, as iSCSI and ext4 use it), bit by bit: the reference the
/// store's table-driven one must agree with.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// Asserts that loading and opening the log both fail with `store::corrupt` at `line`, with a
/// reason holding `words` and a hint, and that the file is left exactly as it was.
fn assert_corrupt(path: &Path, line: usize, words: &str) {
    use miette::Diagnostic as _;
    let before = std::fs::read(path).expect("reads");
    for result in [JsonlStore::load(path).map(|_| ()), JsonlStore::open(path).map(|_| ())] {
        let error = result.expect_err("the log is refused");
        let StoreError::Corrupt { line: at, reason, .. } = &error else { panic!("expected Corrupt, got {error:?}") };
        assert_eq!(*at, line, "{error}");
        assert!(reason.contains(words), "{reason:?} should say {words:?}");
        assert!(error.to_string().contains(&format!("events.jsonl:{line}: ")), "{error}");
        assert_eq!(error.code().map(|c| c.to_string()).as_deref(), Some("store::corrupt"));
        assert!(error.help().is_some_and(|h| !h.to_string().is_empty()), "a hint says what to do");
    }
    assert_eq!(std::fs::read(path).expect("reads"), before, "a refused log is left as it was");
}

#[test]
fn the_reference_crc_is_crc32c() {
    // The check value of CRC-32C.
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

#[tokio::test]
async fn every_line_ends_with_the_crc32c_of_the_record_without_it() {
    let dir = TempDir::new();
    write(&dir.log(), finished_run()).await;
    let lines = lines(&dir.log());
    assert_eq!(lines.len(), 6);
    for (line, record) in lines.iter().zip(finished_run()) {
        let plain = serde_json::to_string(&record).expect("encodes");
        let sum = crc32c(plain.as_bytes());
        let expected = format!("{},\"crc\":\"{sum:08x}\"}}", &plain[..plain.len() - 1]);
        assert_eq!(line, &expected, "the record as before, its checksum as the last field");
        // Every reader of JSON lines still reads it: as a value with one more field, and as a record.
        let value: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
        assert_eq!(value["crc"], format!("{sum:08x}"));
        assert_eq!(serde_json::from_str::<Record>(line).expect("a record"), record);
    }
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, finished_run());
}

#[tokio::test]
async fn the_line_docs_events_md_shows_is_the_line_the_store_writes() {
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/events.md"))
        .expect("docs/events.md reads");
    let section = docs.split("### The checksum").nth(1).expect("docs/events.md has a section on the checksum");
    let shown = section.lines().find(|line| line.starts_with('{')).expect("the section shows a line");
    let dir = TempDir::new();
    let record = Record {
        seq: 7,
        at: "2026-11-22T13:14:33.558Z".into(),
        run_id: "20261122-124503-example".into(),
        event: Event::RetryDue { task: "b".into() },
    };
    write(&dir.log(), vec![record]).await;
    assert_eq!(lines(&dir.log()), [shown]);
}

#[tokio::test]
async fn a_large_record_is_summed_whole_across_the_writers_chunks() {
    let dir = TempDir::new();
    let long = "x".repeat(300 * 1024);
    let run = records([created(plan_of(&["a"])), dispatched("a"), succeeded("a", &long)]);
    write(&dir.log(), run.clone()).await;
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, run);
    let third = &lines(&dir.log())[2];
    let plain = serde_json::to_string(&run[2]).expect("encodes");
    assert!(
        third.ends_with(&format!(",\"crc\":\"{:08x}\"}}", crc32c(plain.as_bytes()))),
        "{}",
        &third[third.len() - 30..]
    );
}

#[tokio::test]
async fn a_byte_changed_inside_an_output_is_refused_naming_the_line() {
    let dir = TempDir::new();
    write(&dir.log(), finished_run()).await;
    let text = std::fs::read_to_string(dir.log()).expect("reads");
    // Still valid JSON, still a valid record: only the checksum tells.
    std::fs::write(dir.log(), text.replacen("the output of a", "the output of A", 1)).expect("writes");
    assert_corrupt(&dir.log(), 3, "checksum");
}

#[tokio::test]
async fn a_checksum_that_is_not_hex_is_refused() {
    let dir = TempDir::new();
    write(&dir.log(), finished_run()).await;
    let mut lines = lines(&dir.log());
    let at = lines[1].len() - 3;
    lines[1].replace_range(at..at + 1, "g");
    std::fs::write(dir.log(), lines.join("\n") + "\n").expect("writes");
    assert_corrupt(&dir.log(), 2, "checksum");
}

#[tokio::test]
async fn a_log_without_checksums_loads_and_one_that_mixes_them_too() {
    let dir = TempDir::new();
    let run = finished_run();
    // Written by an older runner up to the second dispatch; continued by this one.
    write_unsummed(&dir.log(), &run[..4]);
    assert_eq!(JsonlStore::load(&dir.log()).expect("an old log loads").records, run[..4]);
    let (store, loaded) = JsonlStore::open(&dir.log()).expect("an old log opens");
    assert_eq!(loaded.records, run[..4]);
    store.append(run[4..].to_vec()).await.expect("durable");
    drop(store);
    let lines = lines(&dir.log());
    assert!(!lines[3].contains("\"crc\"") && lines[4].contains("\"crc\""), "{lines:?}");
    assert_eq!(JsonlStore::load(&dir.log()).expect("a mixed log loads").records, run);
}

#[tokio::test]
async fn a_torn_last_line_with_a_checksum_is_still_dropped() {
    let dir = TempDir::new();
    write(&dir.log(), finished_run()).await;
    let text = std::fs::read_to_string(dir.log()).expect("reads");
    std::fs::write(dir.log(), &text[..text.len() - 5]).expect("cut mid-checksum");
    let (_, loaded) = JsonlStore::open(&dir.log()).expect("opens");
    assert_eq!(loaded.records, finished_run()[..5]);
    assert!(loaded.warning.is_some_and(|w| w.contains("line 6")));
}

#[test]
fn a_task_the_plan_does_not_have_is_refused() {
    let dir = TempDir::new();
    let mut run = finished_run();
    run.insert(5, record(6, succeeded("ghost", "boo")));
    run[6].seq = 7;
    write_unsummed(&dir.log(), &run);
    assert_corrupt(&dir.log(), 6, "task `ghost`");
}

/// A run of `a` whose replan puts `b` in its place.
fn replanned_run() -> Vec<Record> {
    let replanned = Replanned {
        task: "a".into(),
        removed: vec!["a".into()],
        added: vec!["b".into()],
        plan: plan_of(&["b"]),
        score: 9.0,
        tokens: None,
    };
    records([
        created(plan_of(&["a"])),
        dispatched("a"),
        Event::ReplanRequested { task: "a".into(), reason: "boom".into() },
        Event::Replanned(Box::new(replanned)),
        dispatched("b"),
        succeeded("b", "done"),
        completed(),
    ])
}

#[test]
fn a_task_added_by_a_recorded_replan_is_known_from_the_replan_on() {
    let dir = TempDir::new();
    write_unsummed(&dir.log(), &replanned_run());
    assert_eq!(JsonlStore::load(&dir.log()).expect("loads").records, replanned_run());

    let mut early = replanned_run();
    early.swap(3, 4);
    (early[3].seq, early[4].seq) = (4, 5);
    write_unsummed(&dir.log(), &early);
    assert_corrupt(&dir.log(), 4, "task `b`");
}

#[test]
fn nothing_is_recorded_after_the_run_completed() {
    let dir = TempDir::new();
    let mut late = finished_run();
    late.push(record(7, succeeded("b", "late")));
    write_unsummed(&dir.log(), &late);
    assert_corrupt(&dir.log(), 7, "after the run's `RunCompleted`");

    let mut twice = finished_run();
    twice.push(record(7, Event::RunCompleted { status: Outcome::Partial, summary: "again".into() }));
    write_unsummed(&dir.log(), &twice);
    assert_corrupt(&dir.log(), 7, "a second `RunCompleted`");
}

#[test]
fn nothing_is_recorded_after_the_run_was_cancelled() {
    let dir = TempDir::new();
    let mut run = finished_run();
    run[5] = record(6, Event::RunCancelled { reason: "stop".into() });
    run.push(record(7, Event::RunResumed));
    write_unsummed(&dir.log(), &run);
    assert_corrupt(&dir.log(), 7, "after the run's `RunCancelled`");
}

#[test]
fn an_empty_log_is_refused_naming_it() {
    let dir = TempDir::new();
    std::fs::write(dir.log(), "").expect("writes");
    assert_corrupt(&dir.log(), 1, "empty");
}

#[test]
fn a_log_whose_only_line_is_torn_is_refused_and_left_as_it_is() {
    let dir = TempDir::new();
    std::fs::write(dir.log(), r#"{"seq":1,"at":"2026-11-22T12:45:03.456Z","run_id":"r1","type":"RunCre"#)
        .expect("writes");
    assert_corrupt(&dir.log(), 1, "no complete record");
}

mod damage {
    //! One byte of a log the store wrote changed to any other: the log is refused, or it loads
    //! exactly the records written: all of them, or those before a last line that became torn
    //! (which may hold two records when the damage took the newline between them).

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn a_changed_byte_never_loads_as_a_different_record(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let dir = TempDir::new();
            let run = finished_run();
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
            runtime.block_on(write(&dir.log(), run.clone()));
            let mut bytes = std::fs::read(dir.log()).expect("reads");
            let at = at.index(bytes.len());
            prop_assume!(bytes[at] != byte);
            bytes[at] = byte;
            std::fs::write(dir.log(), &bytes).expect("writes");
            match JsonlStore::load(&dir.log()) {
                Ok(loaded) => {
                    let kept = loaded.records.len();
                    prop_assert!(kept == run.len() || loaded.warning.is_some(), "{kept} records without a warning");
                    prop_assert_eq!(&loaded.records[..], &run[..kept], "byte {} set to {}", at, byte);
                }
                Err(StoreError::Corrupt { .. }) => {}
                Err(other) => prop_assert!(false, "unexpected error {other:?}"),
            }
        }
    }
}
