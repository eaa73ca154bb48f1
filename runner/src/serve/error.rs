//! What `runner serve` refuses: at start ([`ServeError`]) and per request ([`ApiError`], sent
//! as `{"code", "message"}` with its HTTP status).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use miette::Diagnostic;

use super::host::HostError;

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
    /// A token that is short or holds characters other than letters, digits and `-._~`: easy
    /// to guess, or changed when it is pasted into a URL or a cookie.
    #[error(
        "the token from {from} is refused: a token needs at least {min} characters, each a letter, a digit \
         or one of `-._~` (this one has {chars} characters{other}); make one with `openssl rand -hex 16`"
    )]
    #[diagnostic(code(serve::weak_token))]
    WeakToken {
        /// Where it was given: `--token` or `RUNNER_SERVE_TOKEN`.
        from: &'static str,
        /// How many characters it has.
        chars: usize,
        /// `, some of them other characters`, or nothing.
        other: &'static str,
        /// The fewest characters a token may have.
        min: usize,
    },
    /// A limit set in the environment that is not a number the server can use.
    #[error("{variable}={value:?} is not {wanted}")]
    #[diagnostic(code(serve::setting))]
    Setting {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        wanted: &'static str,
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
    /// A request whose `Host` or target does not have the one shape [`host::check`] allows:
    /// one `Host` header, no userinfo, a path as target.
    ///
    /// [`host::check`]: super::host::check
    #[error("{0}")]
    #[diagnostic(code(serve::bad_host))]
    BadHost(HostError),
    /// A `Host` naming another port, or another machine on a server without a token (a page
    /// of another site reaching loopback by renaming its own host).
    #[error("{0}")]
    #[diagnostic(code(serve::foreign_host))]
    ForeignHost(HostError),
    /// A state-changing request sent by a page of another origin than the server's own.
    #[error("`Origin: {0}` is not this server's own origin: only its own page may change anything")]
    #[diagnostic(code(serve::origin))]
    Origin(String),
    /// A request body that did not arrive whole within the body deadline.
    #[error("the request body did not arrive within {0} ms")]
    #[diagnostic(code(serve::body_timeout))]
    BodyTimeout(u128),
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
            ApiError::BadRequest(_) | ApiError::BadHost(_) => StatusCode::BAD_REQUEST,
            ApiError::Outside(_) | ApiError::ForeignHost(_) | ApiError::Origin(_) => StatusCode::FORBIDDEN,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
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

impl From<HostError> for ApiError {
    fn from(error: HostError) -> Self {
        match error {
            HostError::Port { .. } | HostError::Foreign(_) => ApiError::ForeignHost(error),
            HostError::Count(_) | HostError::Target(_) | HostError::Malformed(_) => ApiError::BadHost(error),
        }
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(error: tokio::task::JoinError) -> Self {
        ApiError::Internal(format!("a request's work stopped: {error}"))
    }
}
