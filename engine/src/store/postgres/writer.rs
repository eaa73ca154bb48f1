//! Appending a run's records: a writer task on the connection's thread takes every batch
//! queued so far and writes them all with one statement (one round trip, one transaction),
//! then acknowledges them all (group commit). The statement checks the run's fence, so a
//! writer whose lease was taken over records nothing. The same statement keeps the run's row
//! up to date (status, task counts, tokens, the last record's time) and tells listeners that
//! the run has new records (`NOTIFY runner_events`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::Database;
use crate::event::{Event, Record};
use crate::store::{Ack, Durable, EventStore, Returned, StoreError, Summary};

/// The channel a run's new records are announced on, in the transaction that writes them; the
/// payload is the run id.
pub const RECORDED: &str = "runner_events";

/// Records to write, the summary after them (when the driver gave one), and whom to tell.
type Batch = (Vec<Record>, Option<Summary>, Ack);

/// Appends one run's records to `runner_events` under a run lease, with group commit.
#[derive(Debug)]
pub struct PgStore {
    sender: mpsc::UnboundedSender<Batch>,
    transactions: Arc<AtomicU64>,
    /// The summary the next append carries.
    summary: Mutex<Option<Summary>>,
}

/// The records and the run's status in one statement: the update finds the run's row only
/// while the fence is the writer's, and the insert takes its rows from that update, so a
/// fenced-off writer inserts nothing. A unique violation on `(run_id, seq)` fails it whole.
/// Each row keeps the fence it was written under, so a reader can check that no writer wrote
/// after another took the run over (the fences along a run's rows never go down).
const APPEND: &str = "WITH fenced AS ( \
                          UPDATE runner_runs SET status = coalesce($3, status), \
                            tasks = coalesce($6, tasks), succeeded = coalesce($7, succeeded), \
                            prompt_tokens = coalesce($8, prompt_tokens), \
                            completion_tokens = coalesce($9, completion_tokens), updated = $10 \
                          WHERE run_id = $1 AND fence = $2 RETURNING run_id \
                      ), told AS (SELECT pg_notify($11, run_id) FROM fenced) \
                      INSERT INTO runner_events (run_id, seq, record, fence) \
                      SELECT fenced.run_id, batch.seq, batch.record, $2 \
                      FROM fenced, told, unnest($4::bigint[], $5::text[]) AS batch (seq, record)";

/// The SQLSTATE of a unique violation.
const UNIQUE_VIOLATION: &str = "23505";

impl PgStore {
    pub(super) fn spawn(db: &Database, run_id: &str, fence: i64) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let transactions = Arc::new(AtomicU64::new(0));
        db.spawn(write_loop(db.clone(), run_id.to_owned(), fence, receiver, Arc::clone(&transactions)));
        PgStore { sender, transactions, summary: Mutex::new(None) }
    }

    /// How many statements (each one transaction and one round trip) the writer has sent.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }
}

impl PgStore {
    fn next_summary(&self) -> Option<Summary> {
        self.summary.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl EventStore for PgStore {
    fn summarize(&self, summary: Summary) {
        *self.summary.lock().unwrap_or_else(PoisonError::into_inner) = Some(summary);
    }

    fn append(&self, records: Vec<Record>) -> Durable {
        let summary = self.next_summary();
        Ack::durable(|ack| self.sender.send((records, summary, ack)).is_ok())
    }

    fn append_returning(&self, records: Vec<Record>) -> Returned {
        let summary = self.next_summary();
        Ack::returned(|ack| self.sender.send((records, summary, ack)).is_ok())
    }
}

async fn write_loop(
    db: Database,
    run_id: String,
    fence: i64,
    mut receiver: mpsc::UnboundedReceiver<Batch>,
    transactions: Arc<AtomicU64>,
) {
    let mut prepared = Prepared::default();
    while let Some(first) = receiver.recv().await {
        let mut batches = vec![first];
        while let Ok(batch) = receiver.try_recv() {
            batches.push(batch);
        }
        let records = batches.iter().flat_map(|(records, _, _)| records);
        // The summary after the last batch that has one: the state after every record written.
        let summary = batches.iter().rev().find_map(|(_, summary, _)| *summary);
        let result = if records.clone().next().is_none() {
            Ok(())
        } else {
            transactions.fetch_add(1, Ordering::Relaxed);
            write(&db, &mut prepared, &run_id, fence, records, summary).await
        };
        let failed = result.is_err();
        for (records, _, ack) in batches {
            ack.send(records, &result);
        }
        if failed {
            return;
        }
    }
}

/// The append statement prepared on the connection in use; prepared again on a new one.
#[derive(Default)]
struct Prepared {
    on: Option<(Arc<tokio_postgres::Client>, tokio_postgres::Statement)>,
}

impl Prepared {
    async fn on(
        &mut self,
        client: &Arc<tokio_postgres::Client>,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        match &self.on {
            Some((prepared_on, statement)) if Arc::ptr_eq(prepared_on, client) => Ok(statement.clone()),
            _ => {
                let statement = client.prepare(APPEND).await?;
                self.on = Some((Arc::clone(client), statement.clone()));
                Ok(statement)
            }
        }
    }
}

/// Writes a batch in one statement. When the connection is lost on the way, the batch is
/// written again on a new one, unless the first statement committed before its answer was
/// lost: then its rows are there, under this writer's fence, and the batch is done.
async fn write<'a>(
    db: &Database,
    prepared: &mut Prepared,
    run_id: &str,
    fence: i64,
    records: impl Iterator<Item = &'a Record> + Clone,
    summary: Option<Summary>,
) -> Result<(), StoreError> {
    let mut seqs = Vec::new();
    let mut texts = Vec::new();
    for record in records.clone() {
        seqs.push(i64::try_from(record.seq).unwrap_or(i64::MAX));
        let text = serde_json::to_string(record).map_err(|error| StoreError::Database {
            action: "encode a record",
            url: db.url().to_owned(),
            reason: error.to_string(),
        })?;
        texts.push(text);
    }
    let status = records.clone().filter_map(|record| status_after(&record.event)).last();
    let updated = records.last().map(|record| record.at.to_string());
    let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let tasks = summary.map(|s| number(s.tasks));
    let succeeded = summary.map(|s| number(s.succeeded));
    let prompt = summary.map(|s| number(s.tokens.prompt));
    let completion = summary.map(|s| number(s.tokens.completion));
    let (seqs, texts, status) = (&seqs, &texts, &status);
    let (tasks, succeeded, prompt, completion, updated) = (&tasks, &succeeded, &prompt, &completion, &updated);
    let prepared = tokio::sync::Mutex::new(prepared);
    let mut tries = 0;
    let written = db
        .retrying("write the run's records", |client| {
            tries += 1;
            let again = tries > 1;
            let prepared = &prepared;
            async move {
                if again && committed(&client, run_id, fence, seqs).await? {
                    return Ok(Some(seqs.len() as u64));
                }
                let statement = prepared.lock().await.on(&client).await?;
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 11] =
                    [&run_id, &fence, status, seqs, texts, tasks, succeeded, prompt, completion, updated, &RECORDED];
                match client.execute(&statement, &params).await {
                    Err(error) if error.code().is_some_and(|code| code.code() == UNIQUE_VIOLATION) => Ok(None),
                    written => written.map(Some),
                }
            }
        })
        .await?;
    match written {
        Some(0) => Err(StoreError::Fenced { run_id: run_id.to_owned() }),
        Some(_) => Ok(()),
        None => Err(StoreError::Conflict { run_id: run_id.to_owned(), seq: seqs.first().map_or(0, |&seq| seq as u64) }),
    }
}

/// Whether a batch's rows are all in the store while `fence` is still the run's: a statement
/// that committed before the connection carrying its answer was lost.
async fn committed(
    client: &tokio_postgres::Client,
    run_id: &str,
    fence: i64,
    seqs: &[i64],
) -> Result<bool, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT count(*) FROM runner_events e JOIN runner_runs r USING (run_id) \
             WHERE e.run_id = $1 AND r.fence = $2 AND e.seq = ANY($3)",
            &[&run_id, &fence, &seqs],
        )
        .await?;
    Ok(row.get::<_, i64>(0) == seqs.len() as i64)
}

/// The run status an event leaves the run in, for `runner_runs.status`; `None` for events
/// that do not change it.
fn status_after(event: &Event) -> Option<&'static str> {
    match event {
        Event::RunCreated(_) | Event::RunResumed => Some("running"),
        Event::RunPaused { .. } => Some("paused"),
        Event::RunCancelled { .. } => Some("cancelled"),
        Event::RunCompleted { status, .. } => Some(status.as_str()),
        _ => None,
    }
}
