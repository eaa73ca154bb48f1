//! `GET /api/runs/{id}/stream`: server-sent events that follow a run's log as it grows,
//! whichever process writes it. The log is polled; only complete lines are read, so a line
//! being written is sent once its end is. Each message carries the new events and the state
//! of the tasks they touched, folded by the engine.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use engine::{Event, Handler, Record, RunState};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt, DuplexStream};

use super::Served;
use super::error::ApiError;
use super::runs::{EventView, check_size, existing};
use crate::logs::Tail;
use crate::store::Run;

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
    // A duplex pipe, not a simplex one: when the page goes away and the body is dropped, the
    // next write fails and the task ends.
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    tokio::spawn(follow(run, from.after.unwrap_or(0), writer));
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(reader));
    Ok(([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body).into_response())
}

/// Writes the messages of a run's log to `writer` as it grows, until the page goes away or the
/// log cannot be read.
async fn follow(run: Run, after: u64, mut writer: DuplexStream) {
    let mut tail = Tail::default();
    let mut seq = 0;
    let mut state = RunState::new();
    let mut quiet = Duration::ZERO;
    loop {
        let reading = {
            let run = run.clone();
            tokio::task::spawn_blocking(move || {
                let records = run.records_after(&mut tail, seq);
                (tail, records)
            })
            .await
        };
        let Ok((read, records)) = reading else { return };
        tail = read;
        let mut text = match records {
            Ok(records) => {
                seq = records.last().map_or(seq, |record| record.seq);
                messages(&mut state, &records, after)
            }
            Err(error) => {
                let error = serde_json::to_string(&format!("{error:#}")).unwrap_or_default();
                let _ = writer.write_all(format!("event: failure\ndata: {error}\n\n").as_bytes()).await;
                return;
            }
        };
        if text.is_empty() {
            quiet += POLL;
            if quiet >= KEEP_ALIVE {
                text = ": still here\n\n".to_owned();
            }
        }
        if !text.is_empty() {
            quiet = Duration::ZERO;
            if writer.write_all(text.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                // The page went away.
                return;
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Folds new records into `state` and turns those after `after` into data messages.
fn messages(state: &mut RunState, records: &[Record], after: u64) -> String {
    let mut out = String::new();
    for chunk in records.chunks(BATCH) {
        let mut touched = Vec::new();
        let mut events = Vec::new();
        let mut replanned = false;
        for record in chunk {
            state.apply(&record.event);
            if record.seq <= after {
                continue;
            }
            replanned |= matches!(record.event, Event::Replanned(_));
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
        let update = Update { events, status: state.status.as_str(), tokens: state.tokens, tasks, replanned };
        out.push_str(&format!("data: {}\n\n", serde_json::to_string(&update).unwrap_or_default()));
    }
    out
}
