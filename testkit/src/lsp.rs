//! A language-server client for tests and benchmarks: `runner lsp` spawned, messages framed
//! over its stdio, each answer and notification read with a deadline so a server that stops
//! answering fails the test instead of hanging it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for any one message.
const PATIENCE: Duration = Duration::from_secs(60);

/// A running `runner lsp` and what it has sent that no one has read yet.
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    pending: VecDeque<Value>,
    next_id: i64,
}

impl Client {
    /// Starts `runner lsp` from the binary at `runner` and initialises it, offering `encodings`
    /// (none: the protocol's UTF-16).
    pub fn start(runner: &Path, encodings: &[&str]) -> (Client, Value) {
        let mut client = Client::spawn(runner);
        let general = if encodings.is_empty() { json!({}) } else { json!({"positionEncodings": encodings}) };
        let init = client
            .request("initialize", json!({"processId": null, "rootUri": null, "capabilities": {"general": general}}));
        client.notify("initialized", json!({}));
        (client, init)
    }

    /// Starts `runner lsp` from the binary at `runner` and sends it nothing yet.
    pub fn spawn(runner: &Path) -> Client {
        let mut command = Command::new(runner);
        command.arg("lsp");
        Client::spawn_command(command)
    }

    /// Starts a language server from a command (`runner lsp` with an environment of its own,
    /// say) and sends it nothing yet.
    pub fn spawn_command(mut command: Command) -> Client {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("runner lsp starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client { child, stdin, messages, pending: VecDeque::new(), next_id: 0 }
    }

    /// Sends raw bytes, framed or not.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("the server reads its stdin");
        stdin.flush().expect("flushed");
    }

    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its whole response (`result` or `error`).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none())
    }

    /// Sends a request and returns its result; panics on an error response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params);
        assert!(response.get("error").is_none(), "{method} failed: {response}");
        response["result"].clone()
    }

    /// The next message that matches, keeping the others for later.
    pub fn wait(&mut self, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.pending.iter().position(&matches) {
            return self.pending.remove(at).expect("the position is in the queue");
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) if matches(&message) => return message,
                Ok(message) => self.pending.push_back(message),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no matching message within {PATIENCE:?}; had {:?}", self.pending)
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed its stdout; had {:?}", self.pending),
            }
        }
    }

    /// Opens a document with this text.
    pub fn open(&mut self, uri: &str, text: &str) {
        let item = json!({"uri": uri, "languageId": "yaml", "version": 1, "text": text});
        self.notify("textDocument/didOpen", json!({"textDocument": item}));
    }

    /// The next diagnostics published for `uri` at `version` or later.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let mut message = self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"].as_i64().is_some_and(|v| v >= version)
        });
        match message["params"]["diagnostics"].take() {
            Value::Array(diagnostics) => diagnostics,
            _ => Vec::new(),
        }
    }

    /// Asks the server to shut down and exit, and returns its exit code.
    pub fn stop(mut self) -> i32 {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        drop(self.stdin.take());
        self.exit_code()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end and returns its exit code.
    pub fn exit_code(&mut self) -> i32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be waited for") {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One framed message; `None` at the end of the stream.
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// The LSP position (UTF-16 columns) of the `n`th occurrence of `needle` in `text`, plus
/// `after` characters.
pub fn position(text: &str, needle: &str, n: usize, after: usize) -> Value {
    let offset = text.match_indices(needle).nth(n).expect("the needle is in the text").0;
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let column: usize = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().map(char::len_utf16).sum();
    json!({"line": line, "character": column + after})
}

/// Applies a `WorkspaceEdit`'s edits for `uri` to `text` (UTF-16 positions).
pub fn apply_edit(text: &str, edit: &Value, uri: &str) -> String {
    let edits = edit["changes"][uri].as_array().cloned().unwrap_or_default();
    apply_text_edits(text, &edits)
}

/// Applies `TextEdit`s (UTF-16 positions) to `text`, last first.
fn apply_text_edits(text: &str, edits: &[Value]) -> String {
    let offset = |p: &Value| -> usize {
        let line = p["line"].as_u64().expect("a line") as usize;
        let character = p["character"].as_u64().expect("a character") as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        let mut units = 0;
        for (at, c) in text[start..].char_indices() {
            if units >= character || c == '\n' {
                return start + at;
            }
            units += c.len_utf16();
        }
        text.len()
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            (offset(&e["range"]["start"]), offset(&e["range"]["end"]), e["newText"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (start, end, new) in spans {
        out.replace_range(start..end, &new);
    }
    out
}
