//! Conversations on workers: the journal of an `llm` attempt a worker carries out, relayed
//! through `runner_journal` to the run's coordinator, whose driver records each entry and
//! decides each tool call exactly as for an attempt of its own (docs/workers.md).
//!
//! A worker writes an entry only under its current claim of the attempt (the same fence as its
//! reply), and takes an answer only while that claim is still current, so a worker whose claim
//! expired or was taken over can neither record a turn nor start a tool. The coordinator answers
//! only entries whose claim is current when it reads them, so a worker that takes an attempt
//! over and reads its conversation first gets every entry its predecessor had recorded, and
//! nothing that predecessor writes later.
//!
//! Every statement may run twice: an entry carries the worker's number for it, so writing it
//! again after a lost answer finds the first row; an answer is read, then deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use machine::Command;
use machine::conversation::{Conversation, ToolCallRecord};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::ClusterError;
use crate::event::{ModelTurn, ToolCallFinished};
use crate::journal::{Ask, Entry, Journal, Verdict};
use crate::store::postgres::Database;

/// The channel a written entry is announced on; the payload is its run id.
pub(crate) const WRITTEN: &str = "runner_journal";
/// The channel an answer is announced on; the payload is the id of the worker that waits for it.
pub(crate) const ANSWERED: &str = "runner_journal_answers";

/// A journal entry as it travels through the database. The task and attempt are the claimed
/// attempt's, which the coordinator knows: an entry cannot name another.
#[derive(Debug, Serialize, Deserialize)]
enum Note {
    /// A model turn.
    Turn(ModelTurn),
    /// A tool call about to run: may it?
    Call { turn: u32, call: ToolCallRecord, reason: String },
    /// A tool call's result.
    Result { call_id: String, tool: String, ok: bool, output: String },
    /// The conversation as recorded now.
    Read,
}

impl Note {
    /// The note for a journal entry; `None` for a command a journal never sends.
    fn of(ask: Ask) -> Option<Note> {
        let Ask::Record(command) = ask else { return Some(Note::Read) };
        Some(match *command {
            Command::ModelTurn(turn) => Note::Turn(turn),
            Command::CallTool { turn, call, reason, .. } => Note::Call { turn, call, reason },
            Command::ToolResult(ToolCallFinished { call_id, tool, ok, output, .. }) => {
                Note::Result { call_id, tool, ok, output }
            }
            _ => return None,
        })
    }

    /// Hands the note to `journal`, the coordinator's journal of the attempt, and waits for
    /// the driver's verdict.
    async fn give(self, journal: &Journal) -> Verdict {
        let (task, attempt) = journal.attempt();
        match self {
            Note::Turn(turn) => journal.turn(ModelTurn { task: task.to_owned(), attempt, ..turn }).await,
            Note::Call { turn, call, reason } => journal.call(turn, call, reason).await,
            Note::Result { call_id, tool, ok, output } => journal.result(call_id, tool, ok, output).await,
            Note::Read => journal.conversation().await,
        }
    }
}

/// The worker's side of one claimed attempt: where its journal's entries go.
pub(crate) struct Claim {
    db: Database,
    /// The worker's id, which answers are announced to.
    worker: String,
    /// The attempt's row.
    row: i64,
    /// The claim token.
    claim: i64,
    /// How often an answer is looked for without a notification.
    poll: Duration,
    /// Why the relay failed, if it did: the attempt then ends with a transient failure rather
    /// than as an attempt that no longer counts.
    broken: OnceLock<String>,
}

/// What a relayed attempt came to.
pub(crate) enum Relayed<T> {
    /// The work's own result.
    Done(T),
    /// The coordinator said the attempt no longer counts, or the claim was lost, before the
    /// work started.
    Stopped,
    /// The database could not carry an entry: why.
    Broken(String),
}

impl Claim {
    /// The relay of the attempt in `row`, claimed by `worker` with token `claim`.
    pub(crate) fn new(db: Database, worker: String, row: i64, claim: i64, poll: Duration) -> Self {
        Claim { db, worker, row, claim, poll, broken: OnceLock::new() }
    }

    /// Runs `work` with a journal relayed to the coordinator: the conversation recorded so far
    /// is read first (an attempt taken over goes on from its predecessor's last entry), then
    /// `work` is given the journal.
    pub(crate) async fn journaled<F, Fut, T>(&self, task: &str, attempt: u32, work: F) -> Relayed<T>
    where
        F: FnOnce(Journal) -> Fut,
        Fut: Future<Output = T>,
    {
        let (sender, entries) = mpsc::unbounded_channel();
        let working = async move {
            let reading = Journal::new(sender.clone(), task.to_owned(), attempt, Conversation::default());
            let Verdict::Conversation(recorded) = reading.conversation().await else { return None };
            drop(reading);
            Some(work(Journal::new(sender, task.to_owned(), attempt, *recorded)).await)
        };
        // The relay ends when the last journal is dropped, which `working` does as it ends.
        let (done, ()) = tokio::join!(working, self.forward(entries));
        match (self.broken.get(), done) {
            (Some(reason), _) => Relayed::Broken(reason.clone()),
            (None, Some(done)) => Relayed::Done(done),
            (None, None) => Relayed::Stopped,
        }
    }

    /// Writes each entry under the claim and hands back its answer, until the journal is gone.
    async fn forward(&self, mut entries: mpsc::UnboundedReceiver<Entry>) {
        let mut answers = match self.db.listen(ANSWERED).await {
            Ok(answers) => Some(answers),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for the coordinator's answers; looking for them instead");
                None
            }
        };
        let mut number = 0;
        while let Some(Entry { ask, reply }) = entries.recv().await {
            number += 1;
            let verdict = match Note::of(ask) {
                Some(note) => self.relay(number, &note, &mut answers).await.unwrap_or_else(|error| {
                    tracing::warn!(%error, row = self.row, "cannot relay a journal entry: the attempt stops");
                    let _ = self.broken.set(format!("cannot relay the attempt's journal to its coordinator: {error}"));
                    Verdict::Stop
                }),
                None => Verdict::Stop,
            };
            let _ = reply.send(verdict);
        }
    }

    /// Writes entry `number` and waits for its answer; [`Verdict::Stop`] once the claim is lost.
    async fn relay(
        &self,
        number: i32,
        note: &Note,
        answers: &mut Option<tokio::sync::broadcast::Receiver<crate::store::postgres::Notification>>,
    ) -> Result<Verdict, ClusterError> {
        let text = serde_json::to_string(note).map_err(|error| ClusterError::Query(error.to_string()))?;
        let Some(id) = write(&self.db, self.row, self.claim, number, &text).await? else { return Ok(Verdict::Stop) };
        loop {
            match answer(&self.db, id, self.row, self.claim).await? {
                Answer::Given(verdict) => {
                    if let Err(error) = self.db.execute("delete a taken answer", DELETE, &[&id]).await {
                        tracing::debug!(%error, "cannot delete a taken answer; its attempt's row takes it along");
                    }
                    return Ok(verdict);
                }
                Answer::Lost => return Ok(Verdict::Stop),
                Answer::Pending => {}
            }
            let told = async {
                match answers.as_mut() {
                    Some(receiver) => loop {
                        match receiver.recv().await {
                            Ok(note) if note.channel != ANSWERED || note.payload != self.worker => continue,
                            Ok(_) | Err(RecvError::Lagged(_)) => return,
                            Err(RecvError::Closed) => std::future::pending::<()>().await,
                        }
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = told => {}
                () = tokio::time::sleep(self.poll) => {}
            }
        }
    }
}

const DELETE: &str = "DELETE FROM runner_journal WHERE id = $1";

/// Writes entry `number` of a claimed attempt and announces it; its id, or `None` when the
/// claim is no longer current. Run again, it finds the row a first run wrote.
async fn write(db: &Database, row: i64, claim: i64, number: i32, entry: &str) -> Result<Option<i64>, ClusterError> {
    let sql = "WITH entry AS (INSERT INTO runner_journal (attempt_row, claim, number, run_id, entry) \
                 SELECT id, claim, $3, run_id, $4 FROM runner_attempts \
                 WHERE id = $1 AND claim = $2 AND state = 'claimed' AND lease_until >= now() \
                 ON CONFLICT (attempt_row, claim, number) DO NOTHING RETURNING id, run_id), \
               told AS (SELECT pg_notify($5, run_id) FROM entry) \
               SELECT id FROM entry, told \
               UNION ALL SELECT id FROM runner_journal WHERE attempt_row = $1 AND claim = $2 AND number = $3";
    let rows = db.query("write a journal entry", sql, &[&row, &claim, &number, &entry, &WRITTEN]).await?;
    Ok(rows.first().map(|row| row.get(0)))
}

/// Where the answer to an entry stands.
enum Answer {
    Given(Verdict),
    Pending,
    /// The claim is no longer current (or the attempt was withdrawn).
    Lost,
}

/// Reads the answer to entry `id`, only while the claim that wrote it is current.
async fn answer(db: &Database, id: i64, row: i64, claim: i64) -> Result<Answer, ClusterError> {
    let sql = "SELECT j.answer FROM runner_journal j JOIN runner_attempts a ON a.id = j.attempt_row \
               WHERE j.id = $1 AND a.id = $2 AND a.claim = $3 AND a.state = 'claimed' AND a.lease_until >= now()";
    let rows = db.query("read a journal entry's answer", sql, &[&id, &row, &claim]).await?;
    let Some(found) = rows.first() else { return Ok(Answer::Lost) };
    let Some(text) = found.get::<_, Option<&str>>(0) else { return Ok(Answer::Pending) };
    let verdict = serde_json::from_str(text)
        .map_err(|error| ClusterError::Query(format!("the answer to journal entry {id} is not readable: {error}")))?;
    Ok(Answer::Given(verdict))
}

/// The coordinator's side: the journals of the attempts it queued, and the entries it is
/// answering.
#[derive(Default)]
pub(crate) struct Intake {
    /// The coordinator's journal of each journaled attempt in the queue, by row.
    journals: Mutex<HashMap<i64, Arc<Journal>>>,
    /// Entries taken, by id, with their attempt's row: `None` while the driver decides, then
    /// its verdict, kept until the attempt is forgotten, so an entry is decided once however
    /// often it is read (a read may overlap the writing of its answer, or writing it fail).
    taken: Mutex<HashMap<i64, (i64, Option<Verdict>)>>,
}

impl Intake {
    /// Keeps the journal of the attempt queued as `row`.
    pub(crate) fn keep(&self, row: i64, journal: Journal) {
        self.journals().insert(row, Arc::new(journal));
    }

    /// Forgets the journal of `row`: its attempt replied or was withdrawn.
    pub(crate) fn forget(&self, row: i64) {
        self.journals().remove(&row);
        self.taken().retain(|_, (of, _)| *of != row);
    }

    /// Forgets every journal.
    pub(crate) fn clear(&self) {
        self.journals().clear();
        self.taken().clear();
    }

    /// Whether an attempt whose entries may come is queued.
    pub(crate) fn expecting(&self) -> bool {
        !self.journals().is_empty()
    }

    fn journals(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<Journal>>> {
        self.journals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn taken(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (i64, Option<Verdict>)>> {
        self.taken.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the run's unanswered entries written under current claims and hands each, once,
    /// to its attempt's journal; each answer is written back as the driver gives it. An entry
    /// of an attempt whose journal is not kept yet (a worker claimed the row before the
    /// statement that queued it returned here) waits for the next reading.
    pub(crate) async fn take(self: &Arc<Self>, db: &Database, run_id: &str) {
        let sql = "SELECT j.id, j.attempt_row, j.entry FROM runner_journal j \
                   JOIN runner_attempts a ON a.id = j.attempt_row AND a.claim = j.claim \
                   WHERE j.run_id = $1 AND j.answer IS NULL AND a.state = 'claimed' AND a.lease_until >= now() \
                   ORDER BY j.id";
        let rows = match db.query("read the journal entries of workers", sql, &[&run_id]).await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "cannot read the journal entries of workers; trying again");
                return;
            }
        };
        for row in rows {
            let (id, attempt_row, text): (i64, i64, String) = (row.get(0), row.get(1), row.get(2));
            let decided = match self.taken().get(&id) {
                None => None,
                Some((_, None)) => continue,
                Some((_, Some(verdict))) => Some(verdict.clone()),
            };
            let Some(journal) = self.journals().get(&attempt_row).cloned() else { continue };
            let (intake, db) = (Arc::clone(self), db.clone());
            self.taken().insert(id, (attempt_row, decided.clone()));
            tokio::spawn(async move {
                let verdict = match decided {
                    Some(verdict) => verdict,
                    None => match serde_json::from_str::<Note>(&text) {
                        Ok(note) => note.give(&journal).await,
                        Err(error) => {
                            tracing::warn!(%error, id, "a journal entry is not readable: its attempt stops");
                            Verdict::Stop
                        }
                    },
                };
                if let Err(error) = answer_entry(&db, id, &verdict).await {
                    tracing::warn!(%error, id, "cannot answer a journal entry; trying again");
                }
                if let Some(taken) = intake.taken().get_mut(&id) {
                    taken.1 = Some(verdict);
                }
            });
        }
    }
}

/// Writes the answer to entry `id` and tells the worker that waits for it.
async fn answer_entry(db: &Database, id: i64, verdict: &Verdict) -> Result<(), ClusterError> {
    let text = serde_json::to_string(verdict).map_err(|error| ClusterError::Query(error.to_string()))?;
    let sql = "WITH answered AS (UPDATE runner_journal j SET answer = $2 FROM runner_attempts a \
                 WHERE j.id = $1 AND a.id = j.attempt_row RETURNING a.worker) \
               SELECT pg_notify($3, coalesce(worker, '')) FROM answered";
    db.query("answer a journal entry", sql, &[&id, &text, &ANSWERED]).await?;
    Ok(())
}
