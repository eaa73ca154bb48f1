//! The server's stdio: LSP messages framed by `Content-Length` headers. A message that is not
//! JSON-RPC, or is larger than the cap, is reported on stderr and skipped, where lsp-server's own
//! stdio reader would stop the server.

use std::io::{BufRead, Read, Write};
use std::thread::JoinHandle;

use lsp_server::{Connection, Message};

/// The largest message read: a whole plan at the plan cap, each byte escaped in JSON as six.
fn cap() -> u64 {
    manifest::plan_limit().saturating_mul(6).saturating_add(1 << 20)
}

/// The threads that read stdin and write stdout; joined when the server stops.
pub struct Threads {
    reader: JoinHandle<()>,
    writer: JoinHandle<std::io::Result<()>>,
}

impl Threads {
    /// Waits for the writer to flush what was sent; the reader is left to end with stdin.
    pub fn join(self) -> std::io::Result<()> {
        drop(self.reader);
        self.writer.join().unwrap_or_else(|_| Err(std::io::Error::other("the LSP writer thread panicked")))
    }
}

/// Notifications the server has already written as JSON: diagnostics of a large plan are
/// megabytes, and going through `serde_json::Value` (as `lsp_server::Notification` does) took
/// most of the time from an edit to its diagnostics.
pub type Written = crossbeam_channel::Sender<String>;

/// The JSON of a notification, serialised straight from its parameters.
pub fn notification<P: serde::Serialize>(method: &str, params: &P) -> serde_json::Result<String> {
    #[derive(serde::Serialize)]
    struct Outgoing<'a, P> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_string(&Outgoing { jsonrpc: "2.0", method, params })
}

/// A connection over this process's stdin and stdout, and a way to send notifications already
/// written as JSON.
pub fn stdio() -> (Connection, Written, Threads) {
    let (to_server, receiver) = crossbeam_channel::bounded::<Message>(16);
    let (sender, from_server) = crossbeam_channel::unbounded::<Message>();
    let (written, from_written) = crossbeam_channel::unbounded::<String>();
    let reader = std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        while let Some(message) = next(&mut input) {
            let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
            if to_server.send(message).is_err() || exit {
                break;
            }
        }
    });
    let writer = std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut output = stdout.lock();
        loop {
            crossbeam_channel::select! {
                recv(from_server) -> message => match message {
                    Ok(message) => message.write(&mut output)?,
                    // The server is done: what it wrote last goes out before the writer ends.
                    Err(_) => {
                        for json in from_written.try_iter() {
                            write!(output, "Content-Length: {}\r\n\r\n{json}", json.len())?;
                        }
                        output.flush()?;
                        return Ok(());
                    }
                },
                recv(from_written) -> json => if let Ok(json) = json {
                    write!(output, "Content-Length: {}\r\n\r\n{json}", json.len())?;
                },
            }
            output.flush()?;
        }
    });
    (Connection { sender, receiver }, written, Threads { reader, writer })
}

/// The next message on `input`; `None` at its end. Malformed messages are skipped.
pub fn next(input: &mut impl BufRead) -> Option<Message> {
    loop {
        let length = match headers(input)? {
            Some(length) => length,
            None => {
                tracing::warn!("an LSP message without a Content-Length header was skipped");
                continue;
            }
        };
        if length > cap() {
            tracing::warn!(length, cap = cap(), "an LSP message over the size cap was skipped");
            std::io::copy(&mut input.take(length), &mut std::io::sink()).ok()?;
            continue;
        }
        let mut body = vec![0; length as usize];
        input.read_exact(&mut body).ok()?;
        match serde_json::from_slice::<Message>(&body) {
            Ok(message) => return Some(message),
            Err(error) => tracing::warn!(%error, "a malformed LSP message was skipped"),
        }
    }
}

/// Reads one header block; `None` at the end of input, `Some(None)` when it has no length.
fn headers(input: &mut impl BufRead) -> Option<Option<u64>> {
    let mut length = None;
    let mut line = String::new();
    let mut any = false;
    loop {
        line.clear();
        // A header line is short; a longer one is not a header and is cut, not held.
        let read = input.by_ref().take(4096).read_line(&mut line).ok()?;
        if read == 0 {
            return None;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            if any {
                return Some(length);
            }
            continue;
        }
        any = true;
        if let Some((name, value)) = trimmed.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    #[test]
    fn malformed_and_headerless_messages_are_skipped_and_the_next_one_read() {
        let good = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let input = format!("{}X-Other: 1\r\n\r\n{}", framed("{not json"), framed(good));
        let mut input = std::io::Cursor::new(input.into_bytes());
        let message = next(&mut input).expect("the good message after the bad ones");
        assert!(matches!(message, Message::Notification(n) if n.method == "initialized"));
        assert!(next(&mut input).is_none(), "then the end of input");
    }

    #[test]
    fn a_body_cut_short_ends_the_input() {
        let mut input = std::io::Cursor::new(b"Content-Length: 100\r\n\r\n{}".to_vec());
        assert!(next(&mut input).is_none());
    }
}
