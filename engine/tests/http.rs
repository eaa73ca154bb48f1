//! The `http` runtime against a local server: what it sends, how it reads statuses and bodies,
//! and that its secrets never reach a reply.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use engine::Command;
use engine::Job;
use engine::event::ErrorClass;
use engine::runtime::{AgentRuntime, Attempt, HttpRuntime, Reply};
use manifest::Loc;
use manifest::plan::{At, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How the server answers one request.
#[derive(Clone)]
enum Answer {
    /// This status and body; `{{authorization}}` in the body becomes the request's header.
    Status(u16, String),
    /// `200 OK` with this body in chunks of ten bytes and no length given up front.
    Chunked(String),
    /// Reads the request and never answers.
    Hang,
}

/// One request the server received.
#[derive(Debug, Clone)]
struct Request {
    line: String,
    headers: HashMap<String, String>,
    body: String,
}

/// A local HTTP/1.1 server answering with a script (the last answer repeats).
struct Server {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    async fn start(script: Vec<Answer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
        let url = format!("http://{}/score", listener.local_addr().expect("a bound address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, script) = (Arc::clone(&seen), script.clone());
                tokio::spawn(answer(stream, seen, script));
            }
        });
        Server { url, requests }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

async fn answer(mut stream: TcpStream, seen: Arc<Mutex<Vec<Request>>>, script: Vec<Answer>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let authorization = headers.get("authorization").cloned().unwrap_or_default();
    let request = Request { line, headers, body: String::from_utf8_lossy(&body).into_owned() };
    let number = {
        let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.push(request);
        seen.len() - 1
    };
    let Some(step) = script.get(number).or(script.last()).cloned() else { return };
    match step {
        Answer::Status(code, body) => {
            let body = body.replace("{{authorization}}", &authorization);
            let response = format!(
                "HTTP/1.1 {code} Scripted\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
        Answer::Chunked(body) => {
            let mut response = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_owned();
            for piece in body.as_bytes().chunks(10) {
                response.push_str(&format!("{:x}\r\n{}\r\n", piece.len(), String::from_utf8_lossy(piece)));
            }
            response.push_str("0\r\n\r\n");
            let _ = stream.write_all(response.as_bytes()).await;
        }
        Answer::Hang => std::future::pending::<()>().await,
    }
}

fn at(text: &str) -> At<String> {
    At::new(text.to_owned(), Loc::default())
}

fn http(url: &str, key: Option<&str>, headers: &[(&str, &str)], max_output_bytes: u64) -> Runtime {
    Runtime::Http {
        url: at(url),
        api_key_env: key.map(at),
        headers_env: headers.iter().map(|(h, v)| ((*h).to_owned(), at(v))).collect::<BTreeMap<_, _>>(),
        max_output_bytes,
    }
}

/// The runtime with `SCORER_KEY=sk-secret`, `SCORER_TEAM=blue` and
/// `SCORER_TYPE=application/json` as its environment.
fn runtime(definition: &Runtime) -> Arc<dyn AgentRuntime> {
    HttpRuntime::with_env("scorer", definition, |name| match name {
        "SCORER_KEY" => Some("sk-secret".to_owned()),
        "SCORER_TEAM" => Some("blue".to_owned()),
        "SCORER_TYPE" => Some("application/json".to_owned()),
        _ => None,
    })
}

fn attempt(input: &str) -> Attempt {
    Attempt::new("t", 1, input, std::env::temp_dir())
}

/// Runs one attempt; ten seconds is a liveness bound, not a speed goal.
async fn run(runtime: &Arc<dyn AgentRuntime>, input: &str) -> Reply {
    let work = runtime.run(attempt(input), CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(10), work).await.expect("the attempt ends")
}

/// The error and whether it is transient (the kind `retry_on: transient` retries).
fn failure(reply: Reply) -> (String, bool) {
    match reply {
        Reply::Failure { error, class, .. } => (error, class == ErrorClass::Transient),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn posts_the_input_with_its_headers_and_the_body_is_the_output() {
    let server = Server::start(vec![Answer::Status(200, "score: 7\n".into())]).await;
    let definition = http(&server.url, Some("SCORER_KEY"), &[("X-Team", "SCORER_TEAM")], 1024);
    let reply = run(&runtime(&definition), "rate this\nplease").await;
    assert_eq!(reply, Reply::Output { text: "score: 7".into(), tokens: None });
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.line, "POST /score HTTP/1.1");
    assert_eq!(request.body, "rate this\nplease");
    assert_eq!(request.headers.get("authorization").map(String::as_str), Some("Bearer sk-secret"));
    assert_eq!(request.headers.get("x-team").map(String::as_str), Some("blue"));
    assert_eq!(request.headers.get("content-type").map(String::as_str), Some("text/plain; charset=utf-8"));
}

#[tokio::test]
async fn a_content_type_from_headers_env_replaces_the_default() {
    let server = Server::start(vec![Answer::Status(200, "{}".into())]).await;
    let definition = http(&server.url, None, &[("Content-Type", "SCORER_TYPE")], 1024);
    run(&runtime(&definition), r#"{"a": 1}"#).await;
    let requests = server.requests();
    assert_eq!(requests[0].headers.get("content-type").map(String::as_str), Some("application/json"));
}

#[tokio::test]
async fn a_clarification_body_asks_a_question() {
    let server = Server::start(vec![Answer::Status(200, r#"{"needs_clarification": "which year?"}"#.into())]).await;
    let reply = run(&runtime(&http(&server.url, None, &[], 1024)), "x").await;
    assert_eq!(reply, Reply::Question("which year?".into(), None));
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retryable_other_statuses_are_not() {
    for (code, transient) in [(500, true), (503, true), (429, true), (400, false), (404, false), (302, false)] {
        let server = Server::start(vec![Answer::Status(code, format!("status {code} body"))]).await;
        let (error, retryable) = failure(run(&runtime(&http(&server.url, None, &[], 1024)), "x").await);
        assert_eq!(retryable, transient, "{code}: {error}");
        assert!(error.contains(&code.to_string()), "{error}");
        assert!(error.contains(&format!("status {code} body")), "{error}");
    }
}

#[tokio::test]
async fn a_service_that_cannot_be_reached_is_retryable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let url = format!("http://{}/gone", listener.local_addr().expect("a bound address"));
    drop(listener);
    let (error, retryable) = failure(run(&runtime(&http(&url, None, &[], 1024)), "x").await);
    assert!(retryable, "{error}");
    assert!(error.contains("cannot reach"), "{error}");
}

#[tokio::test]
async fn a_body_over_max_output_bytes_fails_for_good() {
    let server = Server::start(vec![Answer::Status(200, "x".repeat(100))]).await;
    let (error, retryable) = failure(run(&runtime(&http(&server.url, None, &[], 99)), "x").await);
    assert!(!retryable);
    assert!(error.contains("more than max_output_bytes (99 bytes)"), "{error}");
    let server = Server::start(vec![Answer::Status(200, "x".repeat(99))]).await;
    let reply = run(&runtime(&http(&server.url, None, &[], 99)), "x").await;
    assert_eq!(reply, Reply::Output { text: "x".repeat(99), tokens: None });
}

#[tokio::test]
async fn a_streamed_body_is_capped_as_it_arrives() {
    let server = Server::start(vec![Answer::Chunked("y".repeat(100))]).await;
    let (error, retryable) = failure(run(&runtime(&http(&server.url, None, &[], 99)), "x").await);
    assert!(!retryable);
    assert!(error.contains("more than max_output_bytes (99 bytes)"), "{error}");
    let server = Server::start(vec![Answer::Chunked("y".repeat(99))]).await;
    let reply = run(&runtime(&http(&server.url, None, &[], 99)), "x").await;
    assert_eq!(reply, Reply::Output { text: "y".repeat(99), tokens: None });
}

#[tokio::test]
async fn the_key_never_appears_in_a_failure_even_when_the_service_echoes_it() {
    let server = Server::start(vec![Answer::Status(401, "bad credentials: {{authorization}}".into())]).await;
    let definition = http(&server.url, Some("SCORER_KEY"), &[("X-Team", "SCORER_TEAM")], 1024);
    let (error, retryable) = failure(run(&runtime(&definition), "x").await);
    assert!(!retryable);
    assert!(error.contains("bad credentials: Bearer [redacted]"), "{error}");
    assert!(!error.contains("sk-secret"), "{error}");
}

#[tokio::test]
async fn the_key_never_appears_in_an_output_either() {
    let server = Server::start(vec![Answer::Status(200, "you sent {{authorization}}".into())]).await;
    let reply = run(&runtime(&http(&server.url, Some("SCORER_KEY"), &[], 1024)), "x").await;
    assert_eq!(reply, Reply::Output { text: "you sent Bearer [redacted]".into(), tokens: None });
}

#[tokio::test]
async fn an_unset_variable_refuses_every_attempt_naming_it() {
    let server = Server::start(vec![Answer::Status(200, "ok".into())]).await;
    let definition = http(&server.url, Some("SCORER_KEY"), &[("X-Other", "NOT_SET_ANYWHERE")], 1024);
    let (error, retryable) = failure(run(&runtime(&definition), "x").await);
    assert!(!retryable);
    assert!(error.contains("`NOT_SET_ANYWHERE`") && error.contains("headers_env"), "{error}");
    assert!(!error.contains("sk-secret"), "{error}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn the_attempts_timeout_ends_a_hanging_request_retryably() {
    let server = Server::start(vec![Answer::Hang]).await;
    let job = Job {
        runtime: runtime(&http(&server.url, None, &[], 1024)),
        request: attempt("x"),
        timeout: Some(Duration::from_millis(200)),
        check: None,
        gate: None,
        error_limit: 10_000,
        hidden: Arc::from([]),
        jitter_seed: None,
        span: tracing::Span::none(),
    };
    let work = job.perform(CancellationToken::new());
    let commands = tokio::time::timeout(Duration::from_secs(10), work).await.expect("the attempt ends");
    match commands.as_slice() {
        [Command::Failed { error, class, .. }] => {
            assert_eq!(*class, ErrorClass::Timeout);
            assert!(error.contains("timed out after 200ms"), "{error}");
        }
        other => panic!("expected one failure, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn cancelling_ends_the_request() {
    let server = Server::start(vec![Answer::Hang]).await;
    let cancel = CancellationToken::new();
    let work = runtime(&http(&server.url, None, &[], 1024)).run(attempt("x"), cancel.clone());
    let handle = tokio::spawn(work);
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    let reply =
        tokio::time::timeout(Duration::from_secs(10), handle).await.expect("the attempt ends").expect("no panic");
    match reply {
        Reply::Failure { error, class, .. } => {
            assert_eq!((error.as_str(), class), ("cancelled", ErrorClass::Cancelled))
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
