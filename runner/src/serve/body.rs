//! Request bodies, read whole before a handler runs: within the body deadline of
//! [`Limits`](super::limits::Limits) and under [`CAP`], so that a client announcing a large
//! body, or sending one slowly, holds nothing for long.

use std::pin::Pin;
use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::{Served, plan_view};

/// The largest request body: a pasted plan and a little JSON around it.
pub const CAP: usize = plan_view::PLAN_CAP as usize + 64 * 1024;

/// Hands the request on with its body read whole: `413` when it announces or sends more
/// than [`CAP`], `408` when it is not all in within the deadline.
pub async fn read_whole(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let deadline = served.limits.body;
    match tokio::time::timeout(deadline, whole(body)).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Ok(Err(error)) => error.into_response(),
        Err(_) => ApiError::BodyTimeout(deadline.as_millis()).into_response(),
    }
}

/// The body's bytes, refused as soon as it announces or has sent more than [`CAP`].
async fn whole(mut body: Body) -> Result<Bytes, ApiError> {
    let too_large = || ApiError::TooLarge { what: "the request body".to_owned(), cap: CAP as u64 };
    if body.size_hint().lower() > CAP as u64 {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|error| ApiError::BadRequest(format!("the request body was cut: {error}")))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > CAP {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(bytes))
}
