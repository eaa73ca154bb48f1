//! Plan previews: a manifest under the served folder, or pasted text, read and reviewed the
//! way `runner validate` and `runner critic` do, with every problem at its line. A manifest
//! opened by path has its sub-plans loaded with it, each of which must be under the served
//! folder too; a pasted one names no folder, so its sub-plan tasks have no child graph.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use manifest::Loaded;
use serde::{Deserialize, Serialize};

use super::Served;
use super::error::ApiError;
use super::graph_view::GraphView;
use crate::diagnostics::JsonDiagnostic;

/// The largest manifest the server reads, from a file or pasted.
pub const PLAN_CAP: u64 = 4 << 20;

/// What the page shows of a plan before it runs.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    name: String,
    valid: bool,
    score: f64,
    /// The manifest's text, for showing each problem at its line.
    text: String,
    graph: Option<GraphView>,
    /// Validation errors and warnings.
    diagnostics: Vec<JsonDiagnostic>,
    findings: Vec<FindingView>,
}

/// One finding of the critic.
#[derive(Debug, Serialize)]
struct FindingView {
    code: String,
    severity: &'static str,
    task: Option<String>,
    message: String,
    help: Option<String>,
    line: usize,
    column: usize,
}

impl PlanReport {
    fn new(loaded: &Loaded) -> Self {
        let critique = crate::critic::review(loaded);
        let source = &loaded.source;
        let findings = critique
            .findings()
            .map(|finding| {
                let (line, column) = source.line_column(finding.loc.span.offset());
                FindingView {
                    code: finding.code(),
                    severity: finding.severity.as_str(),
                    task: finding.task.clone(),
                    message: finding.to_string(),
                    help: finding.help.as_deref().map(str::to_owned),
                    line,
                    column,
                }
            })
            .collect();
        PlanReport {
            name: loaded.plan.as_ref().map_or_else(|| source.name.clone(), |p| p.name.clone()),
            valid: loaded.is_valid(),
            score: critique.scores.overall,
            text: source.text.to_string(),
            graph: loaded.valid().map(|(plan, graph)| GraphView::new(plan, graph)),
            diagnostics: loaded.diagnostics.iter().map(|d| JsonDiagnostic::new(d, source)).collect(),
            findings,
        }
    }
}

/// A manifest asked for by its path in the served folder.
#[derive(Debug, Deserialize)]
pub struct ByPath {
    path: String,
}

/// `GET /api/plan?path=P`: a manifest under the served folder, with its sub-plans (a sub-plan
/// file outside the folder is refused as the manifest would be).
pub async fn by_path(
    State(served): State<Arc<Served>>,
    Query(query): Query<ByPath>,
) -> Result<Json<PlanReport>, ApiError> {
    let report = tokio::task::spawn_blocking(move || {
        let path = inside(&served.root, &query.path)?;
        let size = std::fs::metadata(&path).map_err(|e| ApiError::NotFound(format!("{}: {e}", query.path)))?.len();
        if size > PLAN_CAP {
            return Err(ApiError::TooLarge { what: query.path, cap: PLAN_CAP });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ApiError::BadRequest(format!("{}: {e}", query.path)))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let stem = path.file_stem().map_or_else(|| "plan".to_owned(), |s| s.to_string_lossy().into_owned());
        let root = &served.root;
        let files = |file: &str| inside(&base, file).is_ok_and(|found| found.starts_with(root) && found.is_file());
        let mut loaded = manifest::load_str(&query.path, &stem, &text, &files);
        manifest::subplan::resolve(&mut loaded, &path);
        if let Some(outside) =
            loaded.included.iter().find(|file| !file.path.canonicalize().is_ok_and(|p| p.starts_with(root)))
        {
            return Err(ApiError::Outside(outside.path.display().to_string()));
        }
        Ok(PlanReport::new(&loaded))
    })
    .await??;
    Ok(Json(report))
}

/// A pasted manifest.
#[derive(Debug, Deserialize)]
pub struct Pasted {
    text: String,
}

/// `POST /api/plan` with `{"text": ...}`: a pasted manifest. It has no folder, so the files it
/// attaches are taken to exist.
pub async fn pasted(Json(pasted): Json<Pasted>) -> Result<Json<PlanReport>, ApiError> {
    if pasted.text.len() as u64 > PLAN_CAP {
        return Err(ApiError::TooLarge { what: "the pasted plan".to_owned(), cap: PLAN_CAP });
    }
    let report = tokio::task::spawn_blocking(move || {
        PlanReport::new(&manifest::load_str("pasted.yaml", "pasted", &pasted.text, &|_| true))
    })
    .await?;
    Ok(Json(report))
}

/// A relative path resolved inside `root`: no absolute paths, no `..`, and no symbolic link
/// that leads out of it.
pub fn inside(root: &Path, requested: &str) -> Result<PathBuf, ApiError> {
    let relative = Path::new(requested);
    let plain = relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if requested.is_empty() || !plain {
        return Err(ApiError::Outside(requested.to_owned()));
    }
    let found = root.join(relative).canonicalize().map_err(|e| ApiError::NotFound(format!("{requested}: {e}")))?;
    let root = root.canonicalize().map_err(|e| ApiError::Internal(format!("{}: {e}", root.display())))?;
    if !found.starts_with(&root) {
        return Err(ApiError::Outside(requested.to_owned()));
    }
    Ok(found)
}
