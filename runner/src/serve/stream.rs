//! `GET /api/runs/{id}/stream`: server-sent events that follow a run's log as it grows,
//! whichever process writes it. A run folder's log is polled; only complete lines are read, so
//! a line being written is sent once its end is. A run in the database is read again when the
//! database announces new records of it (`LISTEN runner_events`), and every few seconds
//! besides, in case an announcement was lost with a connection. Each message carries the new
//! events and the state of the tasks and maps they touched, folded by the engine.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event as Message, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use engine::store::postgres::{Notification, RECORDED};
use engine::{Event, Handler, Record, RunState};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Served;
use super::error::ApiError;
use super::map_view::{self, MapView};
use super::runs::{EventView, check_size, existing};
use crate::store::{Run, Tail};

/// How often a run folder's log is looked at.
const POLL: Duration = Duration::from_millis(250);
/// How often a run in the database is looked at when no announcement came.
const DATABASE_POLL: Duration = Duration::from_secs(30);
/// How often a quiet stream sends a comment (`: still here`), so proxies and browsers keep it
/// open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The most events one message carries; more wait for the next.
const BATCH: usize = 5_000;

/// Where the page's copy of the log ends.
#[derive(Debug, Deserialize)]
pub struct From {
    /// The `seq` of the last event the page has (default: none).
    after: Option<u64>,
}

/// One message: events after the page's last and the state they lead to.
#[derive(Debug, Serialize)]
struct Update {
    events: Vec<EventView>,
    status: &'static str,
    tokens: engine::Tokens,
    /// The status of every task the events are about.
    tasks: BTreeMap<String, &'static str>,
    /// The expanded maps the events are about (a map's own events or its items'), whole.
    maps: BTreeMap<String, MapView>,
    /// The tasks among `tasks` skipped because their condition was false.
    skipped_by_condition: Vec<String>,
    /// The tasks among `tasks` whose output was taken from an earlier run.
    reused: Vec<String>,
    /// Whether the plan changed (a replan, or a task the planner of a growing plan wrote): the
    /// page reloads the graph.
    replanned: bool,
}

/// Opens the stream of a run: a message of events as they are logged, `failure` (its data a
/// JSON string) when the log cannot be read, after which the stream ends.
pub async fn stream(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Query(from): Query<From>,
) -> Result<Response, ApiError> {
    let run = tokio::task::spawn_blocking(move || {
        let run = existing(&served.runs, &id)?;
        check_size(&run)?;
        Ok::<_, ApiError>(run)
    })
    .await??;
    let announced = match &run {
        Run::Pg { pg, .. } => Some(pg.db().listen(RECORDED).await.map_err(|e| ApiError::Internal(e.to_string()))?),
        Run::Dir(_) => None,
    };
    let follow = Follow {
        run,
        announced,
        after: from.after.unwrap_or(0),
        tail: Tail::default(),
        seq: 0,
        state: RunState::new(),
        ready: VecDeque::new(),
        read: false,
        failed: false,
    };
    // When the page goes away, the body and with it this stream are dropped: the following ends.
    let messages = futures_util::stream::unfold(follow, |follow| async move {
        follow.next().await.map(|(message, follow)| (Ok::<_, Infallible>(message), follow))
    });
    Ok(Sse::new(messages).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("still here")).into_response())
}

/// A run's log followed as it grows.
struct Follow {
    run: Run,
    /// The database's announcements of new records, for a run there.
    announced: Option<broadcast::Receiver<Notification>>,
    /// The `seq` of the last event the page has.
    after: u64,
    tail: Tail,
    /// The `seq` of the last record read.
    seq: u64,
    /// The records read so far, folded.
    state: RunState,
    /// Messages read and not yet sent.
    ready: VecDeque<Message>,
    /// Whether the log was read before, so the next read waits for [`POLL`].
    read: bool,
    /// Whether the log could not be read: the failure is the last message.
    failed: bool,
}

impl Follow {
    /// The next message, looking at the log every [`POLL`] until there is one; `None` once the
    /// failure was sent.
    async fn next(mut self) -> Option<(Message, Follow)> {
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some((message, self));
            }
            if self.failed {
                return None;
            }
            if std::mem::replace(&mut self.read, true) {
                match self.announced.as_mut() {
                    Some(announced) => {
                        let _ = tokio::time::timeout(DATABASE_POLL, recorded(announced, self.run.id())).await;
                    }
                    None => tokio::time::sleep(POLL).await,
                }
            }
            let (run, mut tail, seq) = (self.run.clone(), std::mem::take(&mut self.tail), self.seq);
            let (tail, records) = tokio::task::spawn_blocking(move || {
                let records = run.records_after(&mut tail, seq);
                (tail, records)
            })
            .await
            .ok()?;
            self.tail = tail;
            match records {
                Ok(records) => {
                    self.seq = records.last().map_or(self.seq, |record| record.seq);
                    self.ready.extend(messages(&mut self.state, &records, self.after));
                }
                Err(error) => {
                    let error = serde_json::to_string(&format!("{error:#}")).unwrap_or_default();
                    self.ready.push_back(Message::default().event("failure").data(error));
                    self.failed = true;
                }
            }
        }
    }
}

/// Waits for the database to announce new records of run `id` (or to have dropped some
/// announcements, which may have been of it).
async fn recorded(announced: &mut broadcast::Receiver<Notification>, id: &str) {
    loop {
        match announced.recv().await {
            Ok(note) if note.channel != RECORDED || note.payload != id => {}
            Ok(_) | Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// Folds new records into `state` and turns those after `after` into data messages.
fn messages(state: &mut RunState, records: &[Record], after: u64) -> Vec<Message> {
    let mut out = Vec::new();
    for chunk in records.chunks(BATCH) {
        let mut touched = BTreeSet::new();
        let mut events = Vec::new();
        let mut replanned = false;
        for record in chunk {
            state.apply(&record.event);
            if record.seq <= after {
                continue;
            }
            replanned |= matches!(record.event, Event::Replanned(_) | Event::TaskPlanned(_));
            touched.extend(record.event.task().map(str::to_owned));
            events.push(EventView::new(record));
        }
        if events.is_empty() {
            continue;
        }
        let maps = map_view::touched(state, touched.iter().map(String::as_str));
        let skipped_by_condition = touched
            .iter()
            .filter(|task| state.index_of(task).is_some_and(|i| state.tasks[i].skipped_by_condition))
            .cloned()
            .collect();
        let reused = touched
            .iter()
            .filter(|task| state.index_of(task).is_some_and(|i| state.tasks[i].reused))
            .cloned()
            .collect();
        let tasks: BTreeMap<String, &'static str> = touched
            .into_iter()
            .filter_map(|task| {
                let index = state.index_of(&task)?;
                Some((task, state.tasks[index].status.as_str()))
            })
            .collect();
        let update = Update {
            events,
            status: state.status.as_str(),
            tokens: state.tokens,
            tasks,
            maps,
            skipped_by_condition,
            reused,
            replanned,
        };
        out.push(Message::default().data(serde_json::to_string(&update).unwrap_or_default()));
    }
    out
}
