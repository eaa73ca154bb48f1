//! The actions of the command line, taken from the page (POST with a JSON body only): answer,
//! approve, reject and cancel go through the same functions as `runner answer`, `approve`,
//! `reject` and `cancel` and record the same events; resume and retry drive a run, so they
//! start this program (`runner resume ID`, `runner retry ID`) as the command line would, with
//! the run's lock working as it always does. Cancel and resume are refused on a run that has
//! ended or never started, and the page offers them only where [`Allowed`] says they are taken.

use std::process::{Command, Stdio};

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use engine::{RunStatus, TaskStatus};
use serde::{Deserialize, Serialize};

use super::Served;
use super::error::ApiError;
use super::runs::existing;
use crate::home::{Created, fold};
use crate::store::Run;

/// The actions on a whole run that it takes now, as the page offers them: cancel while it is
/// going (started and not ended), resume while it is going and no live process drives it (as
/// `runner resume` needs the run's lock). Retry takes any run that started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Allowed {
    cancel: bool,
    resume: bool,
}

impl Allowed {
    /// What a run in `status` allows; `driven` says whether a live process drives it, and is
    /// asked only for a run that is going.
    pub fn of(status: RunStatus, driven: impl FnOnce() -> bool) -> Self {
        let going = is_going(status);
        Allowed { cancel: going, resume: going && !driven() }
    }
}

/// Whether a run has started and not ended.
fn is_going(status: RunStatus) -> bool {
    status != RunStatus::New && !status.is_final()
}

/// The run `id` when it is going; [`ApiError::Ended`] for `action` when it has ended or never
/// started.
fn going(served: &Served, id: &str, action: &'static str) -> Result<Run, ApiError> {
    let run = existing(&served.runs, id)?;
    let status = fold(&super::runs::load(&run)?).status;
    if is_going(status) {
        return Ok(run);
    }
    let state = match status {
        RunStatus::New => "never started".to_owned(),
        ended => format!("has already ended ({})", ended.as_str()),
    };
    Err(ApiError::Ended { run: id.to_owned(), state, action })
}

/// What an action did.
#[derive(Debug, Serialize)]
pub struct Done {
    message: String,
    /// The run the action concerns: a retry's is a new one.
    run: String,
}

/// An answer to a task's question.
#[derive(Debug, Deserialize)]
pub struct Answer {
    task: String,
    text: String,
    /// Resume the run once nothing else waits for a person.
    #[serde(default)]
    resume: bool,
}

/// A review decision.
#[derive(Debug, Deserialize)]
pub struct Decision {
    task: String,
    comment: Option<String>,
    /// Resume the run once nothing else waits for a person.
    #[serde(default)]
    resume: bool,
}

/// A retry, of every task that did not succeed or from one task on.
#[derive(Debug, Deserialize)]
pub struct Retry {
    from: Option<String>,
}

/// `POST /api/runs/{id}/answer`.
pub async fn answer(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(answer): Json<Answer>,
) -> Result<Json<Done>, ApiError> {
    let command = engine::Command::Answer { task: answer.task, text: answer.text };
    decided(served, id, command, answer.resume).await
}

/// `POST /api/runs/{id}/approve`.
pub async fn approve(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(decision): Json<Decision>,
) -> Result<Json<Done>, ApiError> {
    let command = engine::Command::Decide { task: decision.task, approved: true, comment: decision.comment };
    decided(served, id, command, decision.resume).await
}

/// `POST /api/runs/{id}/reject`.
pub async fn reject(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(decision): Json<Decision>,
) -> Result<Json<Done>, ApiError> {
    let command = engine::Command::Decide { task: decision.task, approved: false, comment: decision.comment };
    decided(served, id, command, decision.resume).await
}

async fn decided(
    served: Arc<Served>,
    id: String,
    command: engine::Command,
    resume: bool,
) -> Result<Json<Done>, ApiError> {
    let done = tokio::task::spawn_blocking(move || {
        existing(&served.runs, &id)?;
        let (state, records) =
            crate::decide::record_decision(&served.runs, &id, command).map_err(|e| ApiError::refused(&e))?;
        let mut message = format!("recorded {}", records.iter().map(|r| r.event.name()).collect::<Vec<_>>().join(", "));
        let waits = state.tasks.iter().any(|t| t.status == TaskStatus::Paused);
        if resume && !state.status.is_final() && !waits {
            message.push_str("; ");
            message.push_str(&start(&served, &["resume", &id])?);
        }
        Ok::<_, ApiError>(Done { message, run: id })
    })
    .await??;
    Ok(Json(done))
}

/// `POST /api/runs/{id}/cancel` (an empty JSON object); 409 for a run that is not going.
pub async fn cancel(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(_): Json<serde_json::Value>,
) -> Result<Json<Done>, ApiError> {
    let done = tokio::task::spawn_blocking(move || {
        going(&served, &id, "cancel")?;
        let message = crate::cancel::cancel(&served.runs, &id).map_err(|e| ApiError::refused(&e))?;
        Ok::<_, ApiError>(Done { message, run: id })
    })
    .await??;
    Ok(Json(done))
}

/// `POST /api/runs/{id}/resume` (an empty JSON object); 409 for a run that is not going or
/// that a live process drives.
pub async fn resume(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(_): Json<serde_json::Value>,
) -> Result<Json<Done>, ApiError> {
    let done = tokio::task::spawn_blocking(move || {
        let run = going(&served, &id, "resume")?;
        if let Some(driver) = run.driver() {
            return Err(ApiError::Refused(format!("run `{id}` is being driven by {driver}")));
        }
        let message = start(&served, &["resume", &id])?;
        Ok(Done { message, run: id })
    })
    .await??;
    Ok(Json(done))
}

/// `POST /api/runs/{id}/retry` with `{"from": TASK}` or `{}`: a new run, whose id is returned.
pub async fn retry(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Json(retry): Json<Retry>,
) -> Result<Json<Done>, ApiError> {
    let done = tokio::task::spawn_blocking(move || {
        let run = existing(&served.runs, &id)?;
        let records = super::runs::load(&run)?;
        let created = Created::of(&records)
            .ok_or_else(|| ApiError::Refused(format!("run `{id}` never started: there is nothing to retry")))?;
        if let Some(from) = &retry.from
            && fold(&records).index_of(from).is_none()
        {
            return Err(ApiError::NotFound(format!("run `{id}` has no task `{from}`")));
        }
        let new_id = crate::home::new_run_id(&created.plan.name);
        let mut args = vec!["retry", id.as_str(), "--run-id", new_id.as_str()];
        if let Some(from) = &retry.from {
            args.extend(["--from", from.as_str()]);
        }
        let message = start(&served, &args)?;
        Ok(Done { message, run: new_id })
    })
    .await??;
    Ok(Json(done))
}

/// Starts this program with `args` (an argument vector, never a shell line), detached from
/// the request, on the same runs (a database's URL goes in `RUNNER_STORE`, out of the process
/// list); a thread reaps it when it ends.
fn start(served: &Served, args: &[&str]) -> Result<String, ApiError> {
    let program = std::env::current_exe().map_err(|e| ApiError::Internal(format!("cannot find this program: {e}")))?;
    let mut command = Command::new(program);
    if let crate::store::Runs::Postgres(pg) = &served.runs {
        command.env("RUNNER_STORE", pg.url());
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ApiError::Internal(format!("cannot start `runner {}`: {e}", args.join(" "))))?;
    let pid = child.id();
    std::thread::spawn(move || child.wait());
    Ok(format!("started `runner {}` (process {pid})", args.join(" ")))
}
