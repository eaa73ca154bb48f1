//! What `runner serve` refuses: at start ([`ServeError`]) and per request ([`ApiError`], sent
//! as `{"code", "message"}` with its HTTP status).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use miette::Diagnostic;

/// Why the server does not start.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ServeError {
    /// A non-loopback address without a token would let anyone on the network act on runs.
    #[error("`runner serve --addr {addr}` listens beyond this machine and needs a token")]
    #[diagnostic(code(serve::token_required), help("pass --token T or set RUNNER_SERVE_TOKEN"))]
    TokenRequired {
        /// The address asked for.
        addr: String,
    },
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    #[diagnostic(code(serve::bind))]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Why a request is refused.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ApiError {
    /// No such run, task or file.
    #[error("{0}")]
    #[diagnostic(code(serve::not_found))]
    NotFound(String),
    /// The request does not make sense.
    #[error("{0}")]
    #[diagnostic(code(serve::bad_request))]
    BadRequest(String),
    /// A path that leads out of the served folder.
    #[error("`{0}` is not a file inside the served folder")]
    #[diagnostic(code(serve::outside))]
    Outside(String),
    /// A file or body over its cap.
    #[error("{what} is larger than {cap} bytes")]
    #[diagnostic(code(serve::too_large))]
    TooLarge {
        /// What was too large.
        what: String,
        /// The cap.
        cap: u64,
    },
    /// The token is missing or wrong.
    #[error("this server needs its token: open the URL it printed, or send `Authorization: Bearer T`")]
    #[diagnostic(code(serve::unauthorized))]
    Unauthorized,
    /// The Host header names another machine (a page of another site reaching loopback).
    #[error("requests must name this machine as their host")]
    #[diagnostic(code(serve::foreign_host))]
    ForeignHost,
    /// An action that only a run still going can take (cancel, resume), on a run that has
    /// ended or never started.
    #[error("run `{run}` {state}: there is nothing to {action}")]
    #[diagnostic(code(serve::ended))]
    Ended {
        /// The run.
        run: String,
        /// Where it stands: `has already ended (succeeded)`, `never started`.
        state: String,
        /// The action refused.
        action: &'static str,
    },
    /// An action the run's state or its driving process refuses.
    #[error("{0}")]
    #[diagnostic(code(serve::refused))]
    Refused(String),
    /// Something failed on this side.
    #[error("{0}")]
    #[diagnostic(code(serve::internal))]
    Internal(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Outside(_) | ApiError::ForeignHost => StatusCode::FORBIDDEN,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Refused(_) | ApiError::Ended { .. } => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// An error from the command line's code paths, whole chain in one line.
    pub fn refused(error: &anyhow::Error) -> Self {
        ApiError::Refused(format!("{error:#}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.code().map(|c| c.to_string()).unwrap_or_default();
        let body = serde_json::json!({ "code": code, "message": self.to_string() });
        (self.status(), Json(body)).into_response()
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(error: tokio::task::JoinError) -> Self {
        ApiError::Internal(format!("a request's work stopped: {error}"))
    }
}
