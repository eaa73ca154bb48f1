//! Taking connections: at most [`Limits::connections`] open at once (the next one waits in the
//! listen queue until one closes), each served as HTTP/1.1 by hyper with the header deadline,
//! which also closes a kept-alive connection left idle that long.
//!
//! [`Limits::connections`]: super::limits::Limits::connections

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Served, routes};

/// How long to wait after an accept error that is not the client's (out of file descriptors)
/// before trying again, rather than spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long a closed connection goes on reading what the client still sends (see [`linger`]).
const LINGER: Duration = Duration::from_secs(2);

/// Serves connections from `listener` until Ctrl-C; connections still open then are dropped.
pub async fn serve(listener: TcpListener, served: Arc<Served>) {
    let limits = served.limits;
    let router = routes::router(served);
    let open = Arc::new(Semaphore::new(limits.connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let next = async {
            let permit = Arc::clone(&open).acquire_owned().await.expect("the connection semaphore is never closed");
            (listener.accept().await, permit)
        };
        let (accepted, permit) = tokio::select! {
            next = next => next,
            _ = &mut interrupted => return,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(connection(http.clone(), stream, router.clone(), permit));
            }
            Err(error) if concerns_one_connection(&error) => {
                tracing::debug!(%error, "a connection failed as it was accepted");
            }
            Err(error) => {
                tracing::warn!(%error, "cannot accept connections");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Serves one connection, holding its place among the open ones until it closes.
async fn connection(http: http1::Builder, stream: TcpStream, router: axum::Router, _place: OwnedSemaphorePermit) {
    let service = TowerToHyperService::new(router);
    match http.serve_connection(TokioIo::new(stream), service).without_shutdown().await {
        Ok(parts) => linger(parts.io.into_inner()).await,
        Err(error) => tracing::debug!(%error, "a connection ended in error"),
    }
}

/// Closes a connection the way RFC 9112 (section 9.6) asks: stop writing, then read and drop
/// what the client still sends for up to [`LINGER`], so that a client still sending a body the
/// server refused (`413`, `408`) reads the answer rather than a reset.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 64 * 1024];
    let drain = async { while stream.read(&mut sink).await.is_ok_and(|read| read > 0) {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Whether an accept error is about the one connection (reset or aborted before it was
/// taken), so the next accept can follow at once.
fn concerns_one_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(error.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset)
}
