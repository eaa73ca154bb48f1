//! The JSON views of runs: the list, one run (its graph from the start, its events and its
//! state), the state after any event (for the replay), and one task. Every state is the
//! engine's fold of the log, up to the event asked for. A run links the child runs its
//! sub-plan tasks started, and a child run the run and task that started it.

use std::collections::BTreeMap;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use engine::{Event, Record, RunState, TaskStatus, Tokens};
use manifest::plan::TaskKind;
use serde::{Deserialize, Serialize};

use super::Served;
use super::actions::Allowed;
use super::error::ApiError;
use super::graph_view::{GraphView, kind_name};
use super::map_view::{self, MapView};
use crate::home::{Created, RunDir, fold, runs_dir};
use crate::store::{Run, Runs};

/// The largest log the server reads.
pub const LOG_CAP: u64 = 1 << 30;

/// One run in the list.
#[derive(Debug, Serialize)]
pub struct RunRow {
    id: String,
    plan: String,
    status: String,
    started: String,
    /// When its last event was recorded; the page shows the duration between the two.
    updated: String,
    tokens: Tokens,
    tasks: usize,
    succeeded: usize,
}

/// `GET /api/runs`: every run, newest first.
pub async fn list(State(served): State<Arc<Served>>) -> Result<Json<Vec<RunRow>>, ApiError> {
    Ok(Json(tokio::task::spawn_blocking(move || rows(&served.runs)).await??))
}

/// Every run folder with whether a live process drives it.
fn run_folders() -> Result<Vec<(Run, bool)>, ApiError> {
    let folder = runs_dir();
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(ApiError::Internal(format!("cannot list {}: {error}", folder.display()))),
    };
    Ok(entries
        .flatten()
        .filter_map(|entry| RunDir::existing(&entry.file_name().to_string_lossy()).ok())
        .map(|run| {
            let driven = run.driver_pid().is_some();
            (Run::Dir(run), driven)
        })
        .collect())
}

/// The list from the database's rows: one query, each run's row keeping what the list shows;
/// a run last written before the rows kept it is read and folded.
fn database_rows(runs: &Runs) -> Result<Vec<RunRow>, ApiError> {
    let rows = runs.rows().map_err(|e| ApiError::Internal(format!("{e:#}")))?;
    Ok(rows
        .into_iter()
        .filter_map(|(run, row)| match &row.summary {
            Some(summary) => Some(RunRow {
                id: row.run_id.clone(),
                plan: row.plan.clone(),
                status: crate::runs::shown_row(&row).to_owned(),
                started: row.created.clone(),
                updated: summary.updated.clone(),
                tokens: summary.tokens,
                tasks: summary.tasks as usize,
                succeeded: summary.succeeded as usize,
            }),
            None => folded_row(run, row.leased).map(|folded| RunRow { started: row.created.clone(), ..folded }),
        })
        .collect())
}

/// A run's row of the list from its folded records; `None` for a run that never started.
fn folded_row(run: Run, driven: bool) -> Option<RunRow> {
    let records = load(&run).ok()?;
    let created = Created::of(&records)?;
    let state = fold(&records);
    Some(RunRow {
        id: run.id().to_owned(),
        plan: created.plan.name,
        status: crate::status::shown(&state, || driven).to_owned(),
        started: created.at,
        updated: records.last().map(|r| r.at.to_string()).unwrap_or_default(),
        tokens: state.tokens,
        tasks: state.tasks.len(),
        succeeded: state.succeeded_tasks(),
    })
}

fn rows(runs: &Runs) -> Result<Vec<RunRow>, ApiError> {
    if let Runs::Postgres(_) = runs {
        return database_rows(runs);
    }
    let mut rows: Vec<RunRow> =
        run_folders()?.into_iter().filter_map(|(run, driven)| folded_row(run, driven)).collect();
    rows.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| b.id.cmp(&a.id)));
    Ok(rows)
}

/// A run's records, refusing a log over [`LOG_CAP`].
pub fn load(run: &Run) -> Result<Vec<Record>, ApiError> {
    check_size(run)?;
    run.load().map(|(records, _)| records).map_err(|e| ApiError::Internal(format!("{e:#}")))
}

/// Refuses a run folder's log over [`LOG_CAP`].
pub fn check_size(run: &Run) -> Result<(), ApiError> {
    if let Run::Dir(dir) = run {
        let size = std::fs::metadata(dir.log()).map(|m| m.len()).unwrap_or(0);
        if size > LOG_CAP {
            return Err(ApiError::TooLarge { what: format!("the log of run `{}`", dir.id), cap: LOG_CAP });
        }
    }
    Ok(())
}

/// An existing run, or 404.
pub fn existing(runs: &Runs, id: &str) -> Result<Run, ApiError> {
    runs.existing(id).map_err(|e| ApiError::NotFound(format!("{e:#}")))
}

/// One event as the page lists it and the timeline places it.
#[derive(Debug, Serialize)]
pub struct EventView {
    seq: u64,
    at: String,
    #[serde(rename = "type")]
    kind: &'static str,
    task: Option<String>,
    attempt: Option<u32>,
    /// The event in one readable line, as `runner logs` prints it.
    line: String,
}

impl EventView {
    /// The view of a record.
    pub fn new(record: &Record) -> Self {
        let attempt = match &record.event {
            Event::TaskDispatched { attempt, .. }
            | Event::TaskSucceeded { attempt, .. }
            | Event::TaskFailed { attempt, .. } => Some(*attempt),
            _ => None,
        };
        EventView {
            seq: record.seq,
            at: record.at.to_string(),
            kind: record.event.name(),
            task: record.event.task().map(str::to_owned),
            attempt,
            line: crate::event_line::line(record),
        }
    }
}

/// Where a run stands after some event: its status and every task that is not pending.
#[derive(Debug, Serialize)]
pub struct StateView {
    seq: u64,
    status: &'static str,
    tokens: Tokens,
    /// The status of each task that has left `pending`.
    tasks: BTreeMap<String, &'static str>,
    /// The maps expanded so far, by map task: their items and how many have each status.
    maps: BTreeMap<String, MapView>,
    /// The tasks skipped because their condition (`when`) was false, not by a failure.
    skipped_by_condition: Vec<String>,
    /// The tasks whose output was taken from an earlier run (the task cache, or a retried run).
    reused: Vec<String>,
    /// The tasks that wait for a person: a question, a tool call's approval, or else a review
    /// decision.
    waiting: Vec<Waiting>,
    /// What the run takes now (the live state only; a replayed one has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    actions: Option<Allowed>,
    /// The child run of each sub-plan or `expand` task (a map's items each have their own),
    /// by task id: the child of its latest attempt that is in the run store.
    children: BTreeMap<String, String>,
}

/// A task that waits for a person.
#[derive(Debug, Serialize)]
struct Waiting {
    task: String,
    question: Option<String>,
    /// The tool call waiting for approval: the tool, its arguments and the model's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<engine::conversation::Approval>,
}

impl StateView {
    /// The view of a state; `status` is the run's status as shown (a run nobody drives any
    /// more is `interrupted`).
    pub fn new(state: &RunState, status: &'static str) -> Self {
        let id = |i: usize| state.plan.tasks[i].id.value.to_string();
        let tasks = state
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status != TaskStatus::Pending)
            .map(|(i, t)| (id(i), t.status.as_str()))
            .collect();
        let waiting = state
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status == TaskStatus::Paused)
            .map(|(i, t)| Waiting {
                task: id(i).to_string(),
                question: t.question().map(str::to_owned),
                tool: state.conversations.get(&id(i)).and_then(|c| c.waiting.clone()),
            })
            .collect();
        let skipped_by_condition =
            state.tasks.iter().enumerate().filter(|(_, t)| t.skipped_by_condition).map(|(i, _)| id(i)).collect();
        let reused = state.tasks.iter().enumerate().filter(|(_, t)| t.reused).map(|(i, _)| id(i)).collect();
        StateView {
            seq: state.seq,
            status,
            tokens: state.tokens,
            tasks,
            maps: map_view::all(state),
            skipped_by_condition,
            reused,
            waiting,
            actions: None,
            children: BTreeMap::new(),
        }
    }

    /// The same view with the child runs of run `id` that `runs` holds.
    pub fn with_children(self, state: &RunState, runs: &Runs, id: &str) -> Result<Self, ApiError> {
        Ok(StateView { children: children(state, runs, id)?, ..self })
    }

    /// The view of a run's state now: its status as shown and the actions it takes, asking at
    /// most once whether a live process drives it.
    pub fn live(state: &RunState, run: &Run) -> Self {
        let driver = std::cell::OnceCell::new();
        let driven = || *driver.get_or_init(|| run.driver().is_some());
        let status = crate::status::shown(state, driven);
        StateView { actions: Some(Allowed::of(state.status, driven)), ..StateView::new(state, status) }
    }
}

/// The child run each sub-plan or `expand` task of run `id` started, by task id: the child of
/// its latest attempt that `runs` holds (as `children::child_of` finds it, without reading
/// the child's log). A task not dispatched yet has none, even replayed to before a child that
/// exists now; a map starts none itself, each of its items does.
fn children(state: &RunState, runs: &Runs, id: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let mut children = BTreeMap::new();
    for (spec, task) in state.plan.tasks.iter().zip(&state.tasks) {
        if !matches!(spec.kind, TaskKind::Plan | TaskKind::Expand) || spec.extras().for_each.is_some() {
            continue;
        }
        for attempt in (1..=task.attempts).rev() {
            let child = engine::child::child_run_id(id, &spec.id.value, attempt);
            if runs.find(&child).map_err(|e| ApiError::Internal(format!("{e:#}")))?.is_some() {
                children.insert(spec.id.value.to_string(), child);
                break;
            }
        }
    }
    Ok(children)
}

/// One run: its plan's graph (every task, pending ones included), its events and its state,
/// and the run and task that started it when it is a sub-plan's child run.
#[derive(Debug, Serialize)]
pub struct RunView {
    id: String,
    source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<engine::child::Parent>,
    graph: GraphView,
    events: Vec<EventView>,
    state: StateView,
    /// What the run was forecast to take beside what it took, when it recorded a forecast.
    #[serde(skip_serializing_if = "Option::is_none")]
    forecast: Option<crate::scored::Scored>,
}

/// `GET /api/runs/{id}`.
pub async fn run(State(served): State<Arc<Served>>, Path(id): Path<String>) -> Result<Json<RunView>, ApiError> {
    let view = tokio::task::spawn_blocking(move || {
        let run = existing(&served.runs, &id)?;
        let records = load(&run)?;
        let created = Created::of(&records)
            .ok_or_else(|| ApiError::NotFound(format!("run `{id}` has no RunCreated event: it never started")))?;
        let state = fold(&records);
        Ok::<_, ApiError>(RunView {
            source: created.source,
            parent: created.parent,
            graph: GraphView::of_run(&state)?,
            events: records.iter().map(EventView::new).collect(),
            forecast: crate::scored::Scored::of(&records, &state),
            state: StateView::live(&state, &run).with_children(&state, &served.runs, &id)?,
            id,
        })
    })
    .await??;
    Ok(Json(view))
}

/// Which point of a run's history a request asks about.
#[derive(Debug, Deserialize)]
pub struct At {
    /// The number of events folded (default: all).
    at: Option<usize>,
}

/// The records of a run up to an event, folded.
fn state_at(runs: &Runs, id: &str, at: Option<usize>) -> Result<(Run, Vec<Record>, RunState), ApiError> {
    let run = existing(runs, id)?;
    let mut records = load(&run)?;
    if let Some(at) = at {
        records.truncate(at);
    }
    let state = fold(&records);
    Ok((run, records, state))
}

/// `GET /api/runs/{id}/state?at=N`: the state after the first N events.
pub async fn state(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Query(at): Query<At>,
) -> Result<Json<StateView>, ApiError> {
    let view = tokio::task::spawn_blocking(move || {
        let (run, _, state) = state_at(&served.runs, &id, at.at)?;
        let view = match at.at {
            Some(_) => StateView::new(&state, state.status.as_str()),
            None => StateView::live(&state, &run),
        };
        view.with_children(&state, &served.runs, &id)
    })
    .await??;
    Ok(Json(view))
}

/// One task after some event: what it was given and gave, and its events.
#[derive(Debug, Serialize)]
pub struct TaskView {
    id: String,
    kind: &'static str,
    agent: Option<String>,
    depends_on: Vec<String>,
    status: &'static str,
    /// Whether it was skipped because its condition was false (not by a failure).
    skipped_by_condition: bool,
    /// Where its output came from when the task cache gave it: the run, attempt and key.
    #[serde(skip_serializing_if = "Option::is_none")]
    reused_from: Option<engine::Origin>,
    /// Its condition (`when`), as an expression.
    when: Option<String>,
    /// The map task it is an item of, if it is one.
    map: Option<String>,
    attempts: u32,
    failures: u32,
    input: Option<String>,
    output: Option<String>,
    error: Option<String>,
    question: Option<String>,
    answers: Vec<String>,
    feedback: Option<String>,
    /// Tokens its attempts and checks used.
    tokens: Tokens,
    /// Why its outputs failed their checks, one per failed check.
    verification: Vec<String>,
    /// Its events, whole, as recorded.
    events: Vec<Record>,
}

/// `GET /api/runs/{id}/tasks/{task}?at=N`.
pub async fn task(
    State(served): State<Arc<Served>>,
    Path((id, task)): Path<(String, String)>,
    Query(at): Query<At>,
) -> Result<Json<TaskView>, ApiError> {
    let view = tokio::task::spawn_blocking(move || {
        let (_, records, state) = state_at(&served.runs, &id, at.at)?;
        let index = state
            .index_of(&task)
            .ok_or_else(|| ApiError::NotFound(format!("run `{id}` has no task `{task}` at this point")))?;
        let spec = &state.plan.tasks[index];
        let map = manifest::template::map_of_item(&task).filter(|map| state.maps.contains_key(*map)).map(str::to_owned);
        let current = &state.tasks[index];
        let events: Vec<Record> = records.into_iter().filter(|r| r.event.task() == Some(task.as_str())).collect();
        let mut tokens = Tokens::default();
        let mut verification = Vec::new();
        let reused_from = events.iter().rev().find_map(|record| match &record.event {
            Event::TaskReused { from: Some(from), .. } => Some((**from).clone()),
            _ => None,
        });
        for record in &events {
            let used = match &record.event {
                Event::TaskSucceeded { tokens, .. } | Event::TaskFailed { tokens, .. } => *tokens,
                Event::VerificationFailed { tokens, reason, .. } => {
                    verification.push(reason.clone());
                    *tokens
                }
                _ => None,
            };
            if let Some(used) = used {
                tokens.prompt += used.prompt;
                tokens.completion += used.completion;
            }
        }
        Ok::<_, ApiError>(TaskView {
            id: task,
            kind: kind_name(spec.kind),
            agent: state.plan.agent_of(spec).map(str::to_owned),
            depends_on: state.graph.parents(index).map(|p| state.plan.tasks[p].id.value.to_string()).collect(),
            status: current.status.as_str(),
            skipped_by_condition: current.skipped_by_condition,
            reused_from,
            when: spec.extras().when.as_ref().map(|w| manifest::template::expression(&w.value).to_owned()),
            map,
            attempts: current.attempts,
            failures: current.failures,
            input: current.input.as_deref().map(str::to_owned),
            output: current.output.as_deref().map(str::to_owned),
            error: current.error().map(str::to_owned),
            question: current.question().map(str::to_owned),
            answers: current.answers().to_vec(),
            feedback: current.feedback().map(str::to_owned),
            tokens,
            verification,
            events,
        })
    })
    .await??;
    Ok(Json(view))
}
