//! `GET /api/runs/{id}/stream`: server-sent events that follow a run's log as it grows,
//! whichever process writes it. The log is polled; only complete lines are read, so a line
//! being written is sent once its end is. Each message carries the new events and the state
//! of the tasks they touched, folded by the engine.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use engine::{Event, Handler, RunState};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use super::error::ApiError;
use super::runs::{EventView, LOG_CAP, existing};
use crate::logs::Tail;

/// How often the log is looked at.
const POLL: Duration = Duration::from_millis(250);
/// How often a quiet stream sends a comment, so proxies and browsers keep it open.
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
    /// Whether the plan changed (a replan): the page reloads the graph.
    replanned: bool,
}

/// Opens the stream of a run.
pub async fn stream(Path(id): Path<String>, Query(from): Query<From>) -> Result<Response, ApiError> {
    let run = existing(&id)?;
    let size = std::fs::metadata(run.log()).map(|m| m.len()).unwrap_or(0);
    if size > LOG_CAP {
        return Err(ApiError::TooLarge { what: format!("the log of run `{id}`"), cap: LOG_CAP });
    }
    // A duplex pipe, not a simplex one: when the page goes away and the body is dropped, the
    // next write fails and the task ends.
    let (reader, mut writer) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let mut tail = Some(Tail::default());
        let mut state = RunState::new();
        let after = from.after.unwrap_or(0);
        let mut quiet = Duration::ZERO;
        loop {
            let Some(mut reading) = tail.take() else { return };
            let read = {
                let run = run.clone();
                tokio::task::spawn_blocking(move || {
                    let records = reading.read(&run);
                    (reading, records)
                })
                .await
            };
            let Ok((reading, records)) = read else { return };
            tail = Some(reading);
            let message = match records {
                Ok(records) => {
                    let mut messages = Vec::new();
                    for chunk in records.chunks(BATCH) {
                        let mut touched = Vec::new();
                        let mut events = Vec::new();
                        let mut replanned = false;
                        for record in chunk {
                            state.apply(&record.event);
                            if record.seq <= after {
                                continue;
                            }
                            replanned |= matches!(record.event, Event::Replanned { .. });
                            touched.extend(record.event.task().map(str::to_owned));
                            events.push(EventView::new(record));
                        }
                        if events.is_empty() {
                            continue;
                        }
                        let tasks = touched
                            .into_iter()
                            .filter_map(|task| {
                                let index = state.index_of(&task)?;
                                Some((task, state.tasks[index].status.as_str()))
                            })
                            .collect();
                        let update =
                            Update { events, status: state.status.as_str(), tokens: state.tokens, tasks, replanned };
                        messages.push(format!("data: {}\n\n", serde_json::to_string(&update).unwrap_or_default()));
                    }
                    messages.concat()
                }
                Err(error) => {
                    let text = serde_json::to_string(&format!("{error:#}")).unwrap_or_default();
                    let _ = writer.write_all(format!("event: failure\ndata: {text}\n\n").as_bytes()).await;
                    return;
                }
            };
            let message = if message.is_empty() && quiet >= KEEP_ALIVE {
                quiet = Duration::ZERO;
                ": still here\n\n".to_owned()
            } else {
                message
            };
            if message.is_empty() {
                quiet += POLL;
            } else if writer.write_all(message.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                // The page went away.
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    });
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(reader));
    Ok(([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body).into_response())
}
