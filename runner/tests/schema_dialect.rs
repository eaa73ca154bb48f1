//! Schema-constrained answers: a task's `schema_check` schema goes to the server in the
//! provider's `schema_dialect`, a server that refuses it is asked in plain JSON mode from then
//! on with one warning, and `runner probe` finds the dialect a server honours by checking the
//! answers, not the status codes. Against the fake server, and against the real one of
//! `scripts/llama-server.sh` when `RUNNER_LLAMA_URL` names it.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use llm_support::{Out, llm_agent, llm_plan, runner, user};
use serde_json::{Value, json};
use support::Env;
use testkit::{FakeOpenAi, JSON_MODEL, Step, TOOLS_MODEL, real_server};

fn answer(text: &str) -> Step {
    Step::Answer(text.to_owned())
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
}

/// A plan whose provider `fake` has `provider_extra` (such as `, schema_dialect: ollama`) and
/// whose tasks (`EXTRACT ...` inputs) each hold their output to [`schema`].
fn schema_plan(server: &FakeOpenAi, provider_extra: &str, tasks: &[&str]) -> String {
    let workflow: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let after = if i == 0 { String::new() } else { format!(", depends_on: [{}]", tasks[i - 1]) };
            format!(
                "    - {{id: {id}, agent: a, input: \"EXTRACT {id}\"{after}, verification: {{type: schema_check, \
                 schema: {{type: object, properties: {{x: {{type: integer}}}}, required: [x]}}}}}}"
            )
        })
        .collect();
    llm_plan("dialect", &server.base_url(), &llm_agent("a"), &workflow.join("\n"), "").replacen(
        "model: fake-model}",
        &format!("model: fake-model{provider_extra}}}"),
        1,
    )
}

fn apply(env: &Env, run: &str) -> Out {
    runner(env, &["apply", "plan.yaml", "--yes", "--run-id", run])
}

#[test]
fn each_dialect_sends_the_schema_its_own_way() {
    let expected = [
        (
            "",
            json!({"type": "json_schema", "json_schema": {"name": "t", "schema": schema(), "strict": true}}),
            Value::Null,
        ),
        (
            ", schema_dialect: json_schema",
            json!({"type": "json_schema", "json_schema": {"name": "t", "schema": schema(), "strict": true}}),
            Value::Null,
        ),
        (", schema_dialect: json_object", json!({"type": "json_object", "schema": schema()}), Value::Null),
        (", schema_dialect: ollama", Value::Null, schema()),
        (", schema_dialect: none", json!({"type": "json_object"}), Value::Null),
    ];
    for (extra, response_format, format) in expected {
        let server = FakeOpenAi::start(|_, _| answer(r#"{"x": 1}"#));
        let env = Env::new();
        env.write("plan.yaml", &schema_plan(&server, extra, &["t"]));
        let applied = apply(&env, "d1");
        assert_eq!(applied.code, Some(0), "{extra}: {applied}");
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{extra}");
        let body = &requests[0].body;
        assert_eq!(body.get("response_format").cloned().unwrap_or(Value::Null), response_format, "{extra}");
        assert_eq!(body.get("format").cloned().unwrap_or(Value::Null), format, "{extra}");
    }
}

#[test]
fn a_task_without_a_schema_sends_no_constraint() {
    let server = FakeOpenAi::start(|_, _| answer("plain text"));
    let env = Env::new();
    let plan = llm_plan("plain", &server.base_url(), &llm_agent("a"), "    - {id: t, agent: a, input: \"SAY\"}", "");
    env.write("plan.yaml", &plan);
    let applied = apply(&env, "p1");
    assert_eq!(applied.code, Some(0), "{applied}");
    let body = &server.requests()[0].body;
    assert!(body.get("response_format").is_none() && body.get("format").is_none(), "{body}");
}

#[test]
fn a_refused_dialect_falls_back_to_json_mode_for_the_rest_of_the_run_with_one_warning() {
    let server = FakeOpenAi::start(|body, _| match body["response_format"]["type"].as_str() {
        Some("json_schema") => Step::Status {
            code: 400,
            body: r#"{"error": {"message": "response_format json_schema is not supported"}}"#.to_owned(),
            retry_after: None,
        },
        _ => answer(r#"{"x": 1}"#),
    });
    let env = Env::new();
    env.write("plan.yaml", &schema_plan(&server, "", &["first", "second"]));
    let applied = apply(&env, "f1");
    assert_eq!(applied.code, Some(0), "the tasks succeed in JSON mode: {applied}");
    let formats: Vec<(String, Value)> =
        server.requests().iter().map(|r| (user(&r.body), r.body["response_format"].clone())).collect();
    let asked = |task: &str| -> Vec<Value> {
        formats.iter().filter(|(text, _)| text.contains(task)).map(|(_, format)| format.clone()).collect()
    };
    let first = asked("EXTRACT first");
    assert_eq!(first.len(), 2, "refused once, then asked again in JSON mode: {formats:#?}");
    assert_eq!(first[0]["type"], "json_schema");
    assert_eq!(first[1], json!({"type": "json_object"}));
    let second = asked("EXTRACT second");
    assert_eq!(second, [json!({"type": "json_object"})], "the provider stays in JSON mode: {formats:#?}");
    let warning = "provider `fake` refused a JSON Schema in the `json_schema` dialect";
    assert_eq!(applied.stderr.matches(warning).count(), 1, "{applied}");
    assert!(applied.stderr.contains("is not supported"), "the warning quotes the server: {applied}");
}

#[test]
fn a_bad_request_that_is_not_about_the_schema_is_not_a_fallback() {
    let server = FakeOpenAi::start(|_, _| Step::Status {
        code: 400,
        body: r#"{"error": "the prompt is too long"}"#.to_owned(),
        retry_after: None,
    });
    let env = Env::new();
    env.write("plan.yaml", &schema_plan(&server, "", &["t"]));
    let applied = apply(&env, "b1");
    assert_eq!(applied.code, Some(1), "{applied}");
    assert!(!applied.stderr.contains("refused a JSON Schema"), "plain JSON mode was refused too: {applied}");
}

/// The probe's question as a server sees it: a schema with a `colour` enum and a bounded count.
fn is_probe(body: &Value) -> bool {
    user(body).contains("\"colour\"")
}

/// A server that holds probe answers to the schema only in `honoured`, and answers what was
/// asked for (`red`, 1) otherwise, as a server that ignores the schema does.
fn honouring(honoured: fn(&Value) -> bool) -> FakeOpenAi {
    FakeOpenAi::start(move |body, _| {
        if !is_probe(body) {
            return answer(r#"{"answer": 7}"#);
        }
        if honoured(body) {
            answer(r#"{"colour": "vermilion", "count": 4}"#)
        } else {
            answer(r#"{"colour": "red", "count": 1}"#)
        }
    })
}

fn probe(env: &Env, server: &FakeOpenAi) -> Value {
    let out = runner(env, &["probe", &server.base_url(), "--model", "m", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {out}"));
    report["models"][0].clone()
}

/// Each dialect's `works`, sorted by dialect.
fn works(model: &Value) -> Vec<(String, bool)> {
    let mut works: Vec<(String, bool)> = model["schema_dialects"]
        .as_object()
        .expect("schema_dialects is an object")
        .iter()
        .map(|(dialect, verdict)| (dialect.clone(), verdict["works"] == true))
        .collect();
    works.sort();
    works
}

#[test]
fn probe_finds_the_one_dialect_a_server_honours_whatever_the_status_codes() {
    let server = honouring(|body| {
        body["response_format"]["type"] == "json_object" && body["response_format"].get("schema").is_some()
    });
    let env = Env::new();
    let model = probe(&env, &server);
    let found = works(&model);
    let expected = [("json_object", true), ("json_schema", false), ("ollama", false)];
    let expected: Vec<(String, bool)> = expected.iter().map(|(d, w)| ((*d).to_owned(), *w)).collect();
    assert_eq!(found, expected, "{model:#}");
    assert_eq!(model["schema_dialect"], "json_object");
    let ignored = model["schema_dialects"]["json_schema"]["detail"].as_str().unwrap_or_default();
    assert!(ignored.contains("ignores it"), "a 200 that ignores the schema is found out: {ignored}");
    let probes: Vec<Value> = server.requests().into_iter().map(|r| r.body).filter(is_probe).collect();
    assert_eq!(probes.len(), 3, "one request per dialect that sends a schema");
    let human = runner(&env, &["probe", &server.base_url(), "--model", "m"]);
    for words in [
        "schema dialect json_schema: NO: accepted the schema but the answer ignores it",
        "schema dialect json_object: yes: the answer holds to the schema",
        "recommended schema_dialect: json_object",
    ] {
        assert!(human.stdout.contains(words), "`{words}` in {human}");
    }
}

#[test]
fn probe_prefers_a_dialect_held_in_full_and_reports_a_refusal() {
    let server = FakeOpenAi::start(|body, _| {
        if !is_probe(body) {
            return answer(r#"{"answer": 7}"#);
        }
        match body["response_format"]["type"].as_str() {
            Some("json_schema") => {
                Step::Status { code: 400, body: "unknown response_format".to_owned(), retry_after: None }
            }
            // Keys, types and enum held, the bounds not: llama-cpp-python's grammar.
            Some("json_object") => answer(r#"{"colour": "chartreuse", "count": 1}"#),
            _ if body.get("format").is_some() => answer(r#"{"colour": "vermilion", "count": 9}"#),
            _ => answer("red, 1"),
        }
    });
    let env = Env::new();
    let model = probe(&env, &server);
    assert_eq!(works(&model).iter().filter(|(_, works)| *works).count(), 2, "{model:#}");
    let dialects = &model["schema_dialects"];
    assert!(dialects["json_schema"]["detail"].as_str().is_some_and(|d| d.contains("HTTP 400")), "{model:#}");
    assert!(
        dialects["json_object"]["detail"].as_str().is_some_and(|d| d.contains("not its integer bounds")),
        "{model:#}"
    );
    assert_eq!(model["schema_dialect"], "ollama", "a dialect held in full beats one held in part");
}

#[test]
fn probe_recommends_none_when_no_dialect_holds_the_answer() {
    let server = honouring(|_| false);
    let model = probe(&Env::new(), &server);
    assert!(works(&model).iter().all(|(_, works)| !works), "{model:#}");
    assert_eq!(model["schema_dialect"], "none");
}

#[test]
fn probe_tells_the_truth_about_the_real_servers_dialects() {
    let Some(server) = real_server("probe_tells_the_truth_about_the_real_servers_dialects") else { return };
    let env = Env::new();
    let mut command = env.runner_process();
    command.args(["probe", &server.url, "--model", JSON_MODEL, "--model", TOOLS_MODEL, "--format", "json"]);
    command.args(["--timeout", "300s"]);
    let output = command.output().expect("runner probe runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    eprintln!("runner probe {}:\n{report:#}", server.url);
    for model in report["models"].as_array().expect("models") {
        let dialects = &model["schema_dialects"];
        // llama-cpp-python refuses `json_schema` (HTTP 500, a validation error naming
        // `response_format`), holds `json_object` answers to the schema's keys, types and enum
        // (not its integer bounds), and ignores a top-level `format`.
        assert_eq!(dialects["json_schema"]["works"], false, "{model:#}");
        assert!(dialects["json_schema"]["detail"].as_str().is_some_and(|d| d.contains("response_format")), "{model:#}");
        assert_eq!(dialects["json_object"]["works"], true, "{model:#}");
        assert_eq!(dialects["ollama"]["works"], false, "{model:#}");
        assert_eq!(model["schema_dialect"], "json_object", "{model:#}");
    }
}
