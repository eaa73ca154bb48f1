//! The shipped examples `research.yaml` and `triage.yaml`, run by the real binary against a
//! real OpenAI-compatible server (llama-cpp-python serving SmolLM2, `scripts/llama-server.sh`),
//! through a recording proxy that sees every request and answer.
//!
//! The model is tiny and its prose poor, so these tests assert protocol, not prose: the runs end
//! in a final state within a bound, every request carries the settings of the plan, tool calls
//! reach the tool with the model's arguments, the tokens the run records are the usage the
//! server reported, and a gate holds its cap. They are skipped without `RUNNER_LLAMA_URL`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Env;
use testkit::{FakeOpenAi, RealServer, Step, TOOLS_MODEL, real_server};

/// The longest one example run may take before the test gives up on it: a bound on the
/// test, not a speed goal.
const RUN_BOUND: Duration = Duration::from_secs(600);
/// The longest one request of at most [`MAX_TOKENS`] answer tokens may take: the tests hold
/// the server's only turn while they run, so a slower request means the server is loaded by
/// something else, or broken, and the failure names it.
const REQUEST_BOUND: Duration = Duration::from_secs(120);
/// The output limit the tests set, to keep the tiny model's answers short.
const MAX_TOKENS: u64 = 96;

/// A tool that records the JSON it gets on stdin in `calls.jsonl`, then runs the tool given as
/// its arguments with the same input, or prints canned search results when given none.
const RECORDER: &str = r#"import json, subprocess, sys
data = sys.stdin.read()
with open("calls.jsonl", "a") as calls:
    calls.write(json.dumps(json.loads(data)) + "\n")
if len(sys.argv) > 1:
    sys.exit(subprocess.run(sys.argv[1:], input=data, text=True).returncode)
print(json.dumps([{"title": "XyzzyCorp", "url": "https://example.com/xyzzy", "snippet": "XyzzyCorp grew 12%."}]))
"#;

/// A proxy in front of the real server: it forwards each request as it is and keeps every
/// answer, so the test knows the usage the server reported and the tool calls it made, and
/// how long each request took.
struct Proxy {
    server: FakeOpenAi,
    answers: Arc<Mutex<Vec<Value>>>,
    timings: Arc<Mutex<Vec<Timing>>>,
}

/// One request through the proxy: its number, how long the server took, its status and the
/// usage it reported.
#[derive(Debug, Clone)]
struct Timing {
    request: usize,
    took: Duration,
    status: u16,
    prompt: u64,
    completion: u64,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request {} took {:.1} s (status {}, {} prompt + {} completion tokens)",
            self.request,
            self.took.as_secs_f64(),
            self.status,
            self.prompt,
            self.completion
        )
    }
}

impl Proxy {
    fn start(real: &RealServer) -> Self {
        let address = real.url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        let path = format!(
            "/{}/chat/completions",
            real.url.trim_start_matches("http://").split_once('/').map_or("v1", |(_, p)| p)
        );
        let answers = Arc::new(Mutex::new(Vec::new()));
        let timings = Arc::new(Mutex::new(Vec::new()));
        let (kept, timed) = (Arc::clone(&answers), Arc::clone(&timings));
        let server = FakeOpenAi::start(move |body, request| {
            let started = Instant::now();
            let (status, text) = forward(&address, &path, body);
            let answer = serde_json::from_str::<Value>(&text).ok().filter(|_| status == 200);
            let tokens = |side: &str| answer.as_ref().and_then(|a| a["usage"][side].as_u64()).unwrap_or(0);
            let timing = Timing {
                request,
                took: started.elapsed(),
                status,
                prompt: tokens("prompt_tokens"),
                completion: tokens("completion_tokens"),
            };
            timed.lock().unwrap_or_else(PoisonError::into_inner).push(timing);
            match answer {
                Some(answer) => {
                    kept.lock().unwrap_or_else(PoisonError::into_inner).push(answer);
                    Step::Raw(text)
                }
                None => Step::Status { code: status, body: text, retry_after: None },
            }
        });
        Proxy { server, answers, timings }
    }

    fn timings(&self) -> Vec<Timing> {
        self.timings.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Fails naming every request that took longer than [`REQUEST_BOUND`].
    fn assert_requests_bounded(&self, run: &str) {
        let slow: Vec<String> =
            self.timings().iter().filter(|t| t.took > REQUEST_BOUND).map(ToString::to_string).collect();
        assert!(slow.is_empty(), "{run}: requests over {REQUEST_BOUND:?}:\n{}", slow.join("\n"));
    }

    /// The slowest request so far, for a message.
    fn slowest(&self) -> String {
        self.timings().into_iter().max_by_key(|t| t.took).map_or_else(|| "no request yet".to_owned(), |t| t.to_string())
    }

    fn answers(&self) -> Vec<Value> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The usage of every answer, summed: (prompt, completion).
    fn usage(&self) -> (u64, u64) {
        self.answers().iter().fold((0, 0), |(p, c), a| {
            (
                p + a["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
                c + a["usage"]["completion_tokens"].as_u64().unwrap_or(0),
            )
        })
    }

    /// The arguments of every tool call the server made, parsed.
    fn tool_calls(&self) -> Vec<(String, Value)> {
        self.answers()
            .iter()
            .flat_map(|a| a["choices"][0]["message"]["tool_calls"].as_array().cloned().unwrap_or_default())
            .map(|call| {
                let name = call["function"]["name"].as_str().unwrap_or_default().to_owned();
                let arguments = call["function"]["arguments"].as_str().and_then(|a| serde_json::from_str(a).ok());
                (name, arguments.unwrap_or(Value::Null))
            })
            .collect()
    }
}

/// One HTTP/1.1 request to the real server; its status and body.
fn forward(address: &str, path: &str, body: &Value) -> (u16, String) {
    let payload = body.to_string();
    let sent = TcpStream::connect(address).and_then(|mut stream| {
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            payload.len()
        )?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        Ok(raw)
    });
    let Ok(raw) = sent else { return (502, "the proxy cannot reach the real server".to_owned()) };
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(502);
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    (status, if chunked { dechunk(body) } else { body.to_owned() })
}

/// The body of a chunked transfer.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Copies an example into the test folder, pointed at the proxy: the model served, no
/// streaming (llama-cpp-python cannot stream tool calls), a small output limit, few turns and
/// retries, and every tool wrapped by the recorder.
fn example(env: &Env, name: &str, proxy: &Proxy, tools: &[(&str, &str)]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut plan = std::fs::read_to_string(root.join(name)).expect("the example");
    plan = plan
        .replace(
            "base_url: http://localhost:11434/v1",
            &format!("base_url: \"{}\"\n      stream: false", proxy.server.base_url()),
        )
        .replace("max_tokens: 2048", &format!("max_tokens: {MAX_TOKENS}"))
        .replace("qwen3:8b", TOOLS_MODEL);
    for turns in ["max_turns: 6", "max_turns: 3"] {
        plan = plan.replace(turns, "max_turns: 2");
    }
    for attempts in ["max_attempts: 3", "max_attempts: 2"] {
        plan = plan.replace(attempts, "max_attempts: 1");
    }
    for (old, new) in tools {
        assert!(plan.contains(old), "{name} has `{old}`");
        plan = plan.replace(old, new);
    }
    env.write(name, &plan);
    for folder in ["tools", "data"] {
        std::fs::create_dir_all(env.dir().join(folder)).expect("a folder");
    }
    env.write("tools/recorder.py", RECORDER);
    for file in ["tools/grep_log.py", "data/app.log"] {
        std::fs::copy(root.join(file), env.dir().join(file)).expect("copied");
    }
}

/// Runs `runner ARGS` to its end, within [`RUN_BOUND`]; its exit code. Over the bound, the
/// failure names the slowest request `proxy` saw.
fn run_bounded(env: &Env, args: &[&str], proxy: Option<&Proxy>) -> Option<i32> {
    let mut child = env
        .runner_process()
        .args(args)
        .env("OLLAMA_API_KEY", "unused")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner starts");
    let deadline = Instant::now() + RUN_BOUND;
    loop {
        if let Some(status) = child.try_wait().expect("runner can be waited for") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let slowest = proxy.map(Proxy::slowest).unwrap_or_default();
            panic!("`runner {}` did not end within {RUN_BOUND:?}; slowest: {slowest}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Applies `plan` as run `run` and drives it to its end: a review is approved, a question
/// (the tiny model asks some) answered, and the run resumed, a few times at most; a run still
/// paused after that is cancelled.
fn drive(env: &Env, plan: &str, run: &str, proxy: &Proxy) {
    let mut code = run_bounded(env, &["apply", plan, "--yes", "--run-id", run], Some(proxy));
    for _ in 0..4 {
        if code != Some(3) {
            break;
        }
        let status = env.status(run);
        for (task, state) in status["tasks"].as_object().into_iter().flatten() {
            if state["status"] != "paused" {
                continue;
            }
            let args: Vec<&str> = if state["question"].is_string() {
                vec!["answer", run, task, "Nobody can answer: do your best without asking."]
            } else {
                vec!["approve", run, task]
            };
            let decided = env.runner().args(&args).output().expect("runner runs");
            assert!(decided.status.success(), "{}", String::from_utf8_lossy(&decided.stderr));
        }
        code = run_bounded(env, &["resume", run], Some(proxy));
    }
    if code == Some(3) {
        let cancelled = env.runner().args(["cancel", run]).output().expect("runner runs");
        assert!(cancelled.status.success(), "{}", String::from_utf8_lossy(&cancelled.stderr));
    } else {
        assert!(matches!(code, Some(0 | 1 | 5)), "{run} ends succeeded, failed or partial, not {code:?}");
    }
}

/// The protocol facts every example run must show.
fn assert_protocol(env: &Env, run: &str, proxy: &Proxy, started: Instant) {
    for timing in proxy.timings() {
        eprintln!("{run}: {timing}");
    }
    proxy.assert_requests_bounded(run);
    let status = env.status(run);
    let outcome = status["status"].as_str().unwrap_or_default().to_owned();
    assert!(["succeeded", "partial", "failed", "cancelled"].contains(&outcome.as_str()), "{run} ended: {status:#}");
    let requests = proxy.server.requests();
    assert!(!requests.is_empty(), "{run} asked the model nothing");
    for request in &requests {
        let body = &request.body;
        assert_eq!(body["model"], TOOLS_MODEL);
        assert_eq!(
            (&body["temperature"], &body["seed"], &body["max_tokens"]),
            (&json!(0.0), &json!(42), &json!(MAX_TOKENS))
        );
        assert!(body.get("stream").is_none(), "the provider says stream: false");
        assert_eq!(body.get("tool_choice").is_some(), body.get("tools").is_some(), "tool_choice goes with tools");
        for message in body["messages"].as_array().into_iter().flatten() {
            assert!(!message["content"].is_null(), "no message has a null content: {message}");
        }
    }
    let (prompt, completion) = proxy.usage();
    let server = json!({"prompt": prompt, "completion": completion});
    // An attempt that timed out abandoned its request, so the server may have answered (and
    // the proxy counted) what runner never received; on a loaded machine that happens.
    let timed_out = env.records(run).iter().any(|r| r["type"] == "TaskFailed" && r["class"] == "timeout");
    if timed_out {
        for side in ["prompt", "completion"] {
            let (ours, theirs) = (status["tokens"][side].as_u64(), server[side].as_u64());
            assert!(ours <= theirs, "{run}: {side} tokens {ours:?} over the server's {theirs:?}");
        }
    } else {
        assert_eq!(status["tokens"], server, "{run}: the server's usage");
    }
    let recorded: Vec<Value> = std::fs::read_to_string(env.dir().join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let made: Vec<Value> = proxy.tool_calls().into_iter().map(|(_, arguments)| arguments).collect();
    for call in &recorded {
        assert!(made.contains(call), "the tool ran with {call}, which the model never sent: {made:?}");
    }
    eprintln!(
        "{run}: {outcome} in {:.1} s, {} requests, {prompt} prompt + {completion} completion tokens, {} tool calls made, {} run",
        started.elapsed().as_secs_f64(),
        requests.len(),
        made.len(),
        recorded.len()
    );
}

#[test]
fn the_research_example_ends_against_a_real_server_and_keeps_the_protocol() {
    let Some(real) = real_server("the_research_example_ends_against_a_real_server_and_keeps_the_protocol") else {
        return;
    };
    let proxy = Proxy::start(&real);
    let env = Env::new();
    let recorder = "command: [python3, tools/recorder.py]";
    // A small gate cap, so that the gate has something to hold.
    example(
        &env,
        "research.yaml",
        &proxy,
        &[("command: [python3, tools/web_search.py]", recorder), ("max_output_tokens: 1500", "max_output_tokens: 40")],
    );
    let started = Instant::now();
    drive(&env, "research.yaml", "r1", &proxy);
    assert_protocol(&env, "r1", &proxy, started);
    for record in env.records("r1").iter().filter(|r| r["type"] == "ContextCompacted" && r["scope"] == "gate") {
        assert!(record["tokens_after"].as_u64().unwrap_or(u64::MAX) <= 40, "the gate holds its cap: {record}");
    }
    let gate = &env.status("r1")["tasks"]["synthesize"];
    if gate["status"] == "succeeded" {
        let compacted = env.records("r1").iter().any(|r| r["type"] == "ContextCompacted" && r["scope"] == "gate");
        let words = gate["output"].as_str().unwrap_or_default().split_whitespace().count();
        assert!(compacted || words <= 40, "a gate output over its cap is compacted: {gate}");
    }
}

#[test]
fn the_triage_example_ends_against_a_real_server_and_keeps_the_protocol() {
    let Some(real) = real_server("the_triage_example_ends_against_a_real_server_and_keeps_the_protocol") else {
        return;
    };
    let proxy = Proxy::start(&real);
    let env = Env::new();
    let wrapped = "command: [python3, tools/recorder.py, python3, tools/grep_log.py]";
    example(&env, "triage.yaml", &proxy, &[("command: [python3, tools/grep_log.py]", wrapped)]);
    let started = Instant::now();
    drive(&env, "triage.yaml", "t1", &proxy);
    assert_protocol(&env, "t1", &proxy, started);
}

#[test]
fn a_streamed_answer_from_the_real_server_is_read_to_its_last_event() {
    let Some(real) = real_server("a_streamed_answer_from_the_real_server_is_read_to_its_last_event") else {
        return;
    };
    let env = Env::new();
    let plan = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: stream}}\nspec:\n  mission: say hello\n  providers:\n    \
         local: {{kind: openai, base_url: \"{}\", model: {}, max_tokens: 24, temperature: 0, seed: 42, idle_timeout: 2m}}\n  \
         agent_definitions:\n    a: {{runtime: llm, provider: local, max_turns: 1}}\n  workflow:\n    \
         - {{id: hello, agent: a, input: \"Say hello in one word.\", on_failure: skip}}\n",
        real.url,
        testkit::JSON_MODEL
    );
    env.write("stream.yaml", &plan);
    let code = run_bounded(&env, &["apply", "stream.yaml", "--yes", "--run-id", "s1"], None);
    assert!(matches!(code, Some(0 | 5)), "the run ends: {code:?}");
    // The answer either ended (`stop`) or was cut at max_tokens (`length`): either way its last
    // event was read, which a broken or unread stream would not give.
    let records = env.records("s1");
    let ended = records.iter().find(|r| r["type"] == "TaskSucceeded" || r["type"] == "TaskFailed").expect("an end");
    if ended["type"] == "TaskFailed" {
        let error = ended["error"].as_str().unwrap_or_default();
        assert!(error.contains("cut at 24 tokens"), "{error}");
    } else {
        assert!(!ended["output"].as_str().unwrap_or_default().trim().is_empty(), "{ended}");
    }
    // llama-cpp-python sends no usage in a stream, whatever `stream_options` asks: the turn's
    // tokens are counted with the tokenizer instead, so budgets still see them.
    for side in ["prompt", "completion"] {
        assert!(ended["tokens"][side].as_u64().unwrap_or(0) > 0, "{side} tokens are recorded: {ended}");
    }
}
