//! `runner serve`: a web view of the runs under `RUNNER_HOME`, served from this process with
//! its page embedded: the runs, a run's graph and timeline updated live, a replay of its
//! events, plan previews and the actions of the command line.

mod actions;
mod auth;
mod body;
mod error;
mod graph_view;
mod host;
mod limits;
mod listen;
mod map_view;
mod plan_view;
mod routes;
mod runs;
mod stream;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

pub use error::ServeError;
use limits::Limits;

/// The arguments of `runner serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on; any address but loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// The token every request must carry: 16 characters or more, each a letter, a digit or one
    /// of `-._~` (default: `$RUNNER_SERVE_TOKEN`).
    #[arg(long)]
    token: Option<String>,
}

/// What every request handler shares: the served folder, the token, where runs live, the
/// port and the limits.
#[derive(Debug)]
pub struct Served {
    /// The folder manifests are opened from (the current directory), canonical.
    root: PathBuf,
    /// The token requests must carry, when one is set.
    token: Option<String>,
    /// The run folders, or the database `--store` names.
    runs: crate::store::Runs,
    /// The port the server is bound to, which every request's `Host` must name.
    port: u16,
    /// The deadlines and the connection cap.
    limits: Limits,
}

/// Serves until interrupted; refuses a weak token, a non-loopback address without a token and
/// limits that are not numbers.
pub fn run(runs: &crate::store::Runs, args: &ServeArgs) -> anyhow::Result<u8> {
    let token = auth::token(args.token.as_deref())?;
    if !args.addr.ip().is_loopback() && token.is_none() {
        return Err(ServeError::TokenRequired { addr: args.addr.to_string() }.into());
    }
    let limits = Limits::from_env()?;
    let root =
        std::env::current_dir().and_then(|dir| dir.canonicalize()).context("cannot read the current directory")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|source| ServeError::Bind { addr: args.addr.to_string(), source })?;
        let bound = listener.local_addr().context("read the bound address")?;
        let served = Arc::new(Served { root, token, runs: runs.clone(), port: bound.port(), limits });
        announce(&served, bound);
        listen::serve(listener, served).await;
        anyhow::Ok(())
    })?;
    Ok(0)
}

/// Prints the URL to open (with the token, when there is one) and where runs and plans are.
fn announce(served: &Served, bound: SocketAddr) {
    let query = served.token.as_ref().map(|token| format!("?token={token}")).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "runner serve: http://{bound}/{query}");
    let _ = writeln!(stdout, "  runs in {}; plans opened from {}", served.runs.place(), served.root.display());
    let _ = stdout.flush();
}
