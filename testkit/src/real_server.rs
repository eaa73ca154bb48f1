//! The real OpenAI-compatible server of the end-to-end tests: llama-cpp-python serving
//! SmolLM2, installed and started by `scripts/llama-server.sh`, which prints its base URL.
//!
//! Tests reach it through [`real_server`]: with `RUNNER_LLAMA_URL` unset they are skipped
//! with a message (a developer without the server still runs the rest of the suite), unless
//! `RUNNER_REQUIRE_LLAMA=1` (which `.ci/run` sets), where a missing server fails the test.

use std::fs::File;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The model alias served with a function-calling chat format: the one to use for tools.
pub const TOOLS_MODEL: &str = "smollm2-tools";
/// The model alias served with the model's own chat template: the one to use for JSON mode.
pub const JSON_MODEL: &str = "smollm2";

/// The server answers one request at a time per model, so the tests of one binary take turns
/// instead of queueing behind each other's requests and timing out.
static TURN: Mutex<()> = Mutex::new(());

/// A turn at the real server: its base URL (ending in `/v1`), held until dropped. The turn is
/// this process's ([`TURN`]) and the machine's: an exclusive lock on a file named after the
/// server's address, so tests in other processes (another test binary, nextest, a second
/// suite) wait for it too instead of sharing the server's one slot.
pub struct RealServer {
    /// The base URL, e.g. `http://127.0.0.1:8089/v1`.
    pub url: String,
    _turn: MutexGuard<'static, ()>,
    _machine_turn: File,
}

/// The real server, or `None` when `RUNNER_LLAMA_URL` is unset and the server is not required.
///
/// # Panics
/// When `RUNNER_REQUIRE_LLAMA=1` and `RUNNER_LLAMA_URL` is unset: CI promised a server.
pub fn real_server(test: &str) -> Option<RealServer> {
    let url = match std::env::var("RUNNER_LLAMA_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_string(),
        _ => {
            assert!(
                std::env::var("RUNNER_REQUIRE_LLAMA").as_deref() != Ok("1"),
                "{test}: RUNNER_REQUIRE_LLAMA=1 but RUNNER_LLAMA_URL is unset; run scripts/llama-server.sh"
            );
            eprintln!("{test}: skipped, no real server (set RUNNER_LLAMA_URL to what scripts/llama-server.sh prints)");
            return None;
        }
    };
    let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let machine_turn =
        machine_turn(&url).unwrap_or_else(|error| panic!("{test}: cannot take a turn at {url}: {error}"));
    Some(RealServer { url, _turn: turn, _machine_turn: machine_turn })
}

/// The machine-wide turn at the server at `url`: the file lock, once every earlier holder
/// released it (the lock goes with its holder's process, so a test that died frees it).
fn machine_turn(url: &str) -> std::io::Result<File> {
    let name: String = url.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let path = std::env::temp_dir().join(format!("runner-real-server-{name}.turn"));
    let file = File::options().create(true).truncate(false).write(true).open(path)?;
    file.lock()?;
    Ok(file)
}
