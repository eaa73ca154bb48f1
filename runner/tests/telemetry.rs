//! What runner tells an operator: spans on stderr as text or JSON lines (`--log-format`,
//! `RUST_LOG`), never on stdout, and exported over OTLP/HTTP to a collector when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, one trace per run across the processes that drive it,
//! with the GenAI attributes on model requests and no prompts, outputs or keys unless asked.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};

use llm_support::{KEY, KEY_VAR, Out};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;
use serde_json::Value;
use support::Env;
use testkit::{COMPLETION_TOKENS, FakeOpenAi, OtlpReceiver, PROMPT_TOKENS, Step};

/// Runs `runner ARGS` with the API key set and these extra variables.
fn runner(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Out {
    let mut command = env.runner();
    command.env(KEY_VAR, KEY).env_remove("RUST_LOG").env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command.args(args).output().expect("runner runs");
    Out {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A mock plan of two tasks, b after a.
fn mock_plan(env: &Env) {
    env.write(
        "plan.yaml",
        &support::plan(
            "traced",
            "    echo: {runtime: mock}",
            "    - {id: a, agent: echo, input: first}\n    - {id: b, agent: echo, input: second, depends_on: [a]}",
        ),
    );
}

#[test]
fn json_logs_nest_attempts_in_tasks_in_the_run_and_stay_off_stdout() {
    let env = Env::new();
    mock_plan(&env);
    let quiet = runner(&env, &[], &["apply", "plan.yaml", "--yes", "--run-id", "quiet"]);
    assert_eq!(quiet.code, Some(0), "{quiet}");
    assert!(!quiet.stderr.contains("close"), "without RUST_LOG, spans are not written: {quiet}");

    let out = runner(&env, &[("RUST_LOG", "info")], &["apply", "plan.yaml", "--yes", "--log-format", "json"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.contains("\"level\""), "logs stay off stdout: {out}");
    let lines: Vec<Value> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).expect("every log line is one JSON object"))
        .collect();
    let closed = |name: &str| -> Vec<&Value> { lines.iter().filter(|l| l["span"]["name"] == name).collect() };
    let run = closed("run");
    assert_eq!(run.len(), 1, "{lines:#?}");
    assert_eq!(run[0]["span"]["plan"], "traced");
    assert_eq!(run[0]["span"]["status"], "succeeded");
    let tasks = closed("task");
    let ids: BTreeSet<&str> = tasks.iter().filter_map(|t| t["span"]["task"].as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["a", "b"]));
    for task in &tasks {
        assert_eq!(task["span"]["status"], "succeeded");
        assert_eq!(task["spans"][0]["name"], "run", "a task nests in the run: {task}");
    }
    let attempts = closed("attempt");
    assert_eq!(attempts.len(), 2, "{lines:#?}");
    for attempt in attempts {
        assert_eq!(attempt["span"]["status"], "succeeded");
        assert_eq!(attempt["spans"][0]["name"], "run", "{attempt}");
    }
    // The text format shows each span's whole chain: the attempt in its task in the run.
    let text = runner(&env, &[("RUST_LOG", "info")], &["apply", "plan.yaml", "--yes"]);
    assert_eq!(text.code, Some(0), "{text}");
    for task in ["a", "b"] {
        let chain =
            format!("plan=\"traced\"}}:task{{task=\"{task}\" agent=\"echo\"}}:attempt{{task=\"{task}\" attempt=1");
        assert!(text.stderr.contains(&chain), "`{chain}` is missing: {text}");
    }

    let bad = runner(&env, &[("RUST_LOG", "=[")], &["validate", "plan.yaml"]);
    assert_eq!(bad.code, Some(0), "{bad}");
    assert!(bad.stderr.contains("RUST_LOG is not a filter"), "{bad}");
}

/// One span as a collector receives it.
#[derive(Debug, Clone)]
struct Exported {
    trace: String,
    id: String,
    parent: String,
    name: String,
    attributes: BTreeMap<String, String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of an OTLP/HTTP protobuf export.
fn from_protobuf(body: &[u8]) -> Vec<Exported> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut spans = Vec::new();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                let attributes = span
                    .attributes
                    .into_iter()
                    .map(|kv| {
                        let value = match kv.value.and_then(|v| v.value) {
                            Some(Any::StringValue(s)) => s,
                            Some(Any::IntValue(i)) => i.to_string(),
                            Some(Any::BoolValue(b)) => b.to_string(),
                            Some(Any::DoubleValue(d)) => d.to_string(),
                            other => format!("{other:?}"),
                        };
                        (kv.key, value)
                    })
                    .collect();
                spans.push(Exported {
                    trace: hex(&span.trace_id),
                    id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name,
                    attributes,
                });
            }
        }
    }
    spans
}

/// The spans of an OTLP/HTTP JSON export (ids in hex, as the OTLP JSON encoding has them).
fn from_json(body: &[u8]) -> Vec<Exported> {
    let request: Value = serde_json::from_slice(body).expect("an OTLP JSON export");
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let mut spans = Vec::new();
    for resource in request["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                let attributes = span["attributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|kv| {
                        let value =
                            kv["value"].as_object().and_then(|v| v.values().next()).map(text).unwrap_or_default();
                        (text(&kv["key"]), value)
                    })
                    .collect();
                spans.push(Exported {
                    trace: text(&span["traceId"]).to_lowercase(),
                    id: text(&span["spanId"]).to_lowercase(),
                    parent: span["parentSpanId"].as_str().unwrap_or_default().to_lowercase(),
                    name: text(&span["name"]),
                    attributes,
                });
            }
        }
    }
    spans
}

/// `examples/research.yaml` pointed at a fake model server that answers every agent.
fn research(env: &Env, server: &FakeOpenAi) {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let text = std::fs::read_to_string(examples.join("research.yaml")).expect("the example");
    let text = text
        .replace("http://localhost:11434/v1", &server.base_url())
        .replace("api_key_env: OLLAMA_API_KEY", &format!("api_key_env: {KEY_VAR}"));
    env.write("research.yaml", &text);
    let tool = std::fs::read_to_string(examples.join("tools/web_search.py")).expect("the tool");
    std::fs::create_dir_all(env.dir().join("tools")).expect("a tools folder");
    env.write("tools/web_search.py", &tool);
}

#[test]
fn a_run_paused_and_resumed_exports_one_trace_of_run_task_attempt_and_model_request() {
    let server = FakeOpenAi::start(|body, _| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("financial analyst") {
            Step::Answer(r#"{"revenue": "REV-42M", "growth": "12%"}"#.to_owned())
        } else {
            Step::Answer("- a finding (https://example.com/1)".to_owned())
        }
    });
    let collector = OtlpReceiver::start();
    let env = Env::new();
    research(&env, &server);
    let endpoint = collector.endpoint();
    let otel = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    let applied = runner(&env, &otel, &["apply", "research.yaml", "--yes", "--run-id", "r1"]);
    assert_eq!(applied.code, Some(3), "paused at the review: {applied}");
    assert_eq!(runner(&env, &[], &["approve", "r1", "approve"]).code, Some(0));
    let json = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("RUNNER_OTEL_CONTENT", "1"),
    ];
    let resumed = runner(&env, &json, &["resume", "r1"]);
    assert_eq!(resumed.code, Some(0), "{resumed}");

    let exports = collector.exports();
    assert!(exports.iter().any(|e| e.content_type == "application/x-protobuf"), "apply exports protobuf");
    assert!(exports.iter().any(|e| e.content_type == "application/json"), "resume exports JSON as asked");
    let spans: Vec<Exported> = exports
        .iter()
        .flat_map(|e| if e.content_type.ends_with("json") { from_json(&e.body) } else { from_protobuf(&e.body) })
        .collect();
    let traces: BTreeSet<&str> = spans.iter().map(|s| s.trace.as_str()).collect();
    assert_eq!(traces.len(), 1, "one trace for the run across both processes: {spans:#?}");

    let by_id: BTreeMap<&str, &Exported> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let parent_name = |span: &Exported| by_id.get(span.parent.as_str()).map(|p| p.name.clone()).unwrap_or_default();
    let runs: Vec<&Exported> = spans.iter().filter(|s| s.name == "run").collect();
    assert_eq!(runs.len(), 2, "apply's run span and resume's: {runs:#?}");
    assert!(runs.iter().any(|r| parent_name(r) == "run"), "resume's run span continues apply's");

    let chats: Vec<&Exported> = spans.iter().filter(|s| s.name == "chat qwen3:8b").collect();
    let mut tasks = BTreeSet::new();
    for chat in &chats {
        let attempt = by_id[chat.parent.as_str()];
        let task = by_id[attempt.parent.as_str()];
        assert_eq!((attempt.name.as_str(), task.name.as_str(), parent_name(task).as_str()), ("attempt", "task", "run"));
        tasks.insert(task.attributes["task"].clone());
        assert_eq!(chat.attributes["gen_ai.request.model"], "qwen3:8b");
        assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
        assert_eq!(chat.attributes["gen_ai.usage.input_tokens"], PROMPT_TOKENS.to_string());
        assert_eq!(chat.attributes["gen_ai.usage.output_tokens"], COMPLETION_TOKENS.to_string());
    }
    let llm_tasks = ["search_news", "search_filings", "search_competitors", "synthesize", "write_brief"];
    assert_eq!(tasks, llm_tasks.iter().map(|t| (*t).to_owned()).collect(), "every model request nests in its task");

    let content = ["gen_ai.input.messages", "gen_ai.output.messages"];
    for span in &spans {
        for (key, value) in &span.attributes {
            assert!(!value.contains(KEY), "the key reached the collector in {key}");
            if !content.contains(&key.as_str()) {
                assert!(!value.contains("Find news") && !value.contains("a finding"), "content reached {key}");
            }
        }
    }
    let prompts: Vec<&Exported> =
        chats.iter().copied().filter(|c| c.attributes.contains_key("gen_ai.input.messages")).collect();
    assert!(!prompts.is_empty(), "RUNNER_OTEL_CONTENT=1 lets the resumed run's prompts in");
    assert!(prompts.iter().all(|c| c.attributes["gen_ai.input.messages"].contains("Write the brief")), "{prompts:#?}");
    let before_resume = chats.iter().filter(|c| !c.attributes.contains_key("gen_ai.input.messages")).count();
    assert_eq!(before_resume, 4, "apply's four model requests carry no content");
}

#[test]
fn a_collector_that_cannot_be_reached_is_warned_about_once_and_the_run_goes_on() {
    let env = Env::new();
    mock_plan(&env);
    // A port nobody listens on: the listener is gone once it has given its number.
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = runner(&env, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)], &["apply", "plan.yaml", "--yes"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let warnings = out.stderr.matches("spans could not be exported to $OTEL_EXPORTER_OTLP_ENDPOINT").count();
    assert_eq!(warnings, 1, "{}", out.stderr);
}
