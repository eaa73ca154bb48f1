//! The routes: the page and its assets, the JSON API, the event streams and the actions.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};

use super::{Served, actions, auth, body, plan_view, runs, stream};

/// Every route, behind the guard of [`auth`], with request bodies read whole by [`body`]
/// (whose cap the extractors are told too, or they would apply axum's smaller default).
pub fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", include_str!("assets/index.html"))))
        .route("/app.js", get(|| asset("text/javascript; charset=utf-8", include_str!("assets/app.js"))))
        .route("/app.css", get(|| asset("text/css; charset=utf-8", include_str!("assets/app.css"))))
        .route("/api/runs", get(runs::list))
        .route("/api/runs/{id}", get(runs::run))
        .route("/api/runs/{id}/state", get(runs::state))
        .route("/api/runs/{id}/tasks/{task}", get(runs::task))
        .route("/api/runs/{id}/stream", get(stream::stream))
        .route("/api/runs/{id}/answer", post(actions::answer))
        .route("/api/runs/{id}/approve", post(actions::approve))
        .route("/api/runs/{id}/reject", post(actions::reject))
        .route("/api/runs/{id}/cancel", post(actions::cancel))
        .route("/api/runs/{id}/resume", post(actions::resume))
        .route("/api/runs/{id}/retry", post(actions::retry))
        .route("/api/plan", get(plan_view::by_path).post(plan_view::pasted))
        .layer(DefaultBodyLimit::max(body::CAP))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&served), body::read_whole))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&served), auth::guard))
        .with_state(served)
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body)
}
