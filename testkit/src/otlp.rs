//! A local OpenTelemetry collector for tests: it accepts OTLP/HTTP trace exports
//! (`POST /v1/traces`) and keeps each body as it arrived, for the test to decode.

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::routing::post;

use crate::background::Background;

/// One export received: its content type and body.
#[derive(Debug, Clone)]
pub struct Export {
    /// `application/x-protobuf` or `application/json`.
    pub content_type: String,
    /// The request body.
    pub body: Vec<u8>,
}

/// A collector on `127.0.0.1` that answers every trace export with success, stopped when dropped.
pub struct OtlpReceiver {
    server: Background,
    exports: Arc<Mutex<Vec<Export>>>,
}

impl OtlpReceiver {
    /// Starts the collector on a free port.
    pub fn start() -> Self {
        let exports = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().route("/v1/traces", post(receive)).with_state(Arc::clone(&exports));
        OtlpReceiver { server: Background::serve(app), exports }
    }

    /// The endpoint to set `OTEL_EXPORTER_OTLP_ENDPOINT` to.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.server.address)
    }

    /// Every export received so far, in arrival order.
    pub fn exports(&self) -> Vec<Export> {
        self.exports.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

async fn receive(State(exports): State<Arc<Mutex<Vec<Export>>>>, headers: HeaderMap, body: Bytes) -> &'static str {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    exports.lock().unwrap_or_else(PoisonError::into_inner).push(Export { content_type, body: body.to_vec() });
    // An empty protobuf message and an empty JSON object both say "all accepted".
    if headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().ends_with(b"json")) { "{}" } else { "" }
}
