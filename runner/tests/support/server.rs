//! `runner serve` started for a test on a free loopback port, and a small HTTP client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Env;

/// A running `runner serve`, killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub url: String,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

/// A response: its status, headers and body.
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

impl Server {
    /// Starts `runner serve --addr 127.0.0.1:0` with more arguments, in the test folder.
    pub fn start(env: &Env, args: &[&str]) -> Server {
        let mut command = env.runner_process();
        command.args(["serve", "--addr", "127.0.0.1:0"]).args(args).env_remove("RUNNER_SERVE_TOKEN");
        Server::spawn(command)
    }

    /// Starts a prepared `runner serve` command and reads the URL it prints.
    pub fn spawn(mut command: std::process::Command) -> Server {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("runner serve starts");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        BufReader::new(stdout).read_line(&mut line).expect("runner serve prints its URL");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .split('/')
            .take(3)
            .collect::<Vec<_>>()
            .join("/");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        Server { child, url, runtime, client: reqwest::Client::new() }
    }

    /// Sends a request built from the client and waits for the whole reply.
    pub fn send(&self, build: impl FnOnce(&reqwest::Client, &str) -> reqwest::RequestBuilder) -> Reply {
        let request = build(&self.client, &self.url);
        self.runtime.block_on(async {
            let response = request.send().await.expect("the server answers");
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let text = response.text().await.expect("a body");
            Reply { status, headers, text }
        })
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Reply {
        self.send(|client, url| client.get(format!("{url}{path}")))
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: Value) -> Reply {
        self.send(|client, url| client.post(format!("{url}{path}")).json(&body))
    }

    /// Waits until `check` holds for the reply to `GET path`, for at most `limit`.
    pub fn wait_for(&self, path: &str, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let reply = self.get(path);
            if reply.status == 200 && check(&reply.json()) {
                return reply.json();
            }
            assert!(started.elapsed() < limit, "{path} never got there: {}", reply.text);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Reads an event stream until `done` holds for the data messages read so far.
    pub fn stream(&self, path: &str, limit: Duration, mut step: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
        let url = format!("{}{path}", self.url);
        self.runtime.block_on(async {
            let mut response = self.client.get(url).send().await.expect("the stream opens");
            assert_eq!(response.status().as_u16(), 200);
            let mut text = String::new();
            let mut messages = Vec::new();
            let started = Instant::now();
            loop {
                let left = limit.saturating_sub(started.elapsed());
                let chunk = tokio::time::timeout(left, response.chunk()).await;
                let Ok(Ok(Some(chunk))) = chunk else { panic!("the stream stopped early: {messages:?}") };
                text.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = text.find("\n\n") {
                    let message: String = text.drain(..end + 2).collect();
                    if let Some(data) = message.strip_prefix("data: ") {
                        messages.push(serde_json::from_str(data.trim()).expect("a data message is JSON"));
                    }
                }
                if step(&messages) {
                    return messages;
                }
            }
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
