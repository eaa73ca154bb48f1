//! The `llm` runtime against a fake OpenAI server over real HTTP: prompts, tool calls, turn
//! limits, error classification and retries, redaction of the API key, and provider limits.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::Tokens;
use engine::event::ErrorClass;
use engine::llm::LlmAgents;
use engine::runtime::{AgentRuntime, Attempt, Reply};
use manifest::plan::{Agent, At, Attachment, Generation, Provider, Runtime, Tool, ToolChoice};
use manifest::{Loc, Plan};
use serde_json::{Value, json};
use testkit::{FakeOpenAi, Step};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-test-5f1e9a7c3b";

/// A plan with provider `local` (model `m`) at `server` and one llm agent `a` on it.
struct Setup {
    plan: Plan,
}

impl Setup {
    fn new(server: &FakeOpenAi) -> Self {
        let mut plan = Plan::default();
        plan.providers.insert(
            "local".to_owned(),
            Provider {
                kind: "openai".to_owned(),
                base_url: server.base_url(),
                model: Some("m".to_owned()),
                ..Provider::default()
            },
        );
        plan.agents.insert(
            "a".to_owned(),
            Agent { runtime: llm_on("local"), system_prompt: Some("You are terse.".to_owned()), ..Agent::default() },
        );
        Setup { plan }
    }

    fn provider(mut self, change: impl FnOnce(&mut Provider)) -> Self {
        change(self.plan.providers.get_mut("local").expect("the provider"));
        self
    }

    fn tool(mut self, name: &str, command: &[&str], input_schema: Option<Value>) -> Self {
        self.plan.tools.insert(
            name.to_owned(),
            Tool {
                description: format!("The {name} tool"),
                command: command.iter().map(|&a| a.to_owned()).collect(),
                input_schema: input_schema.map(|s| At::new(s, Loc::default())),
                ..Tool::default()
            },
        );
        if let Runtime::Llm { tools, .. } = &mut self.plan.agents.get_mut("a").expect("the agent").runtime {
            tools.push(at(name));
        }
        self
    }

    fn max_turns(mut self, turns: u32) -> Self {
        if let Runtime::Llm { max_turns, .. } = &mut self.plan.agents.get_mut("a").expect("the agent").runtime {
            *max_turns = Some(turns);
        }
        self
    }

    fn agent(mut self, change: impl FnOnce(&mut Option<ToolChoice>, &mut Generation)) -> Self {
        if let Runtime::Llm { tool_choice, generation, .. } =
            &mut self.plan.agents.get_mut("a").expect("the agent").runtime
        {
            change(tool_choice, generation);
        }
        self
    }

    fn agents(&self) -> LlmAgents {
        LlmAgents::with_env(&self.plan, |name| (name == "TEST_KEY").then(|| KEY.to_owned()))
    }

    fn runtime(&self) -> Arc<dyn AgentRuntime> {
        self.agents().runtime("a")
    }
}

/// An llm agent's runtime on `provider`, everything else left out.
fn llm_on(provider: &str) -> Runtime {
    let mut runtime = Runtime::default();
    if let Runtime::Llm { provider: named, .. } = &mut runtime {
        *named = Some(at(provider));
    }
    runtime
}

fn at(text: &str) -> At<String> {
    At::new(text.to_owned(), Loc::default())
}

fn attempt(input: &str, workdir: &Path) -> Attempt {
    Attempt::new("t", 1, input, workdir.to_path_buf())
}

/// Runs one attempt; ten seconds is a liveness bound, not a speed goal.
async fn run(runtime: &Arc<dyn AgentRuntime>, attempt: Attempt) -> Reply {
    tokio::time::timeout(Duration::from_secs(10), runtime.run(attempt, CancellationToken::new()))
        .await
        .expect("the attempt ends")
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().expect("messages")
}

fn failure(reply: Reply) -> (String, ErrorClass) {
    match reply {
        Reply::Failure { error, class, .. } => (error, class),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn answers_with_usage_and_sends_system_and_input() {
    let server = FakeOpenAi::script(vec![Step::Answer("hello".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let reply = run(&Setup::new(&server).runtime(), attempt("Say hello", dir.path())).await;
    assert_eq!(reply, Reply::Output { text: "hello".to_owned(), tokens: Some(Tokens { prompt: 10, completion: 5 }) });
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(body["model"], "m");
    assert_eq!(messages(body)[0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(messages(body)[1], json!({"role": "user", "content": "Say hello"}));
    assert!(body.get("tools").is_none() && body.get("response_format").is_none());
    assert_eq!(requests[0].authorization, None, "no api_key_env, no Authorization header");
}

#[tokio::test]
async fn attachments_list_links_and_inline_capped_files() {
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(dir.path().join("docs")).expect("a folder");
    std::fs::write(dir.path().join("docs/style.md"), "Write short sentences.").expect("a file");
    std::fs::write(dir.path().join("big.txt"), "x".repeat(70 * 1024)).expect("a file");
    let mut attempt = attempt("Write the brief", dir.path());
    attempt.attachments = vec![
        Attachment::Link("https://example.com/style.pdf".to_owned()),
        Attachment::File("docs/style.md".to_owned()),
        Attachment::File("big.txt".to_owned()),
    ];
    // A trailing slash on the base URL is tolerated.
    let setup = Setup::new(&server).provider(|p| p.base_url.push('/'));
    let reply = run(&setup.runtime(), attempt).await;
    assert!(matches!(reply, Reply::Output { .. }), "{reply:?}");
    let body = &server.requests()[0].body;
    let user = messages(body)[1]["content"].as_str().expect("text");
    assert!(user.starts_with("Write the brief"));
    assert!(user.contains("Links:\n- https://example.com/style.pdf"), "{user}");
    assert!(user.contains("## File: docs/style.md") && user.contains("Write short sentences."));
    assert!(user.contains("## File: big.txt") && user.contains("[truncated: `big.txt` is 71680 bytes"));
    assert!(user.len() < 66 * 1024, "the file is capped at 64 KiB, got {} bytes", user.len());
}

#[tokio::test]
async fn an_unreadable_attachment_fails_without_a_request() {
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut attempt = attempt("x", dir.path());
    attempt.attachments = vec![Attachment::File("missing.md".to_owned())];
    let (error, class) = failure(run(&Setup::new(&server).runtime(), attempt).await);
    assert_eq!(class, ErrorClass::Permanent);
    assert!(error.contains("`missing.md`"), "{error}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_schema_is_sent_in_the_providers_dialect() {
    let server = FakeOpenAi::script(vec![Step::Answer(r#"{"filings": []}"#.to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let schema = json!({"type": "object", "required": ["filings"]});
    let mut attempt = attempt("Find filings", dir.path());
    attempt.schema = Some(schema.clone());
    let reply = run(&Setup::new(&server).runtime(), attempt).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == r#"{"filings": []}"#), "{reply:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
    let user = messages(body)[1]["content"].as_str().expect("text");
    assert!(user.contains("one JSON object only"), "{user}");
    assert!(user.contains(&serde_json::to_string_pretty(&schema).expect("json")), "{user}");
}

#[tokio::test]
async fn a_tool_gets_its_arguments_on_stdin_and_its_output_goes_back() {
    let server = FakeOpenAi::script(vec![
        Step::ToolCalls(vec![("lookup".to_owned(), r#"{"query":"rust"}"#.to_owned())]),
        Step::Answer("done".to_owned()),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("marker.txt"), " (from the workdir)").expect("a file");
    // `cat - marker.txt`: the arguments from stdin, then a file that only the workdir has.
    let setup = Setup::new(&server).tool("lookup", &["cat", "-", "marker.txt"], None);
    let reply = run(&setup.runtime(), attempt("Look it up", dir.path())).await;
    assert_eq!(reply, Reply::Output { text: "done".to_owned(), tokens: Some(Tokens { prompt: 20, completion: 10 }) });
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body["tools"],
        json!([{"type": "function", "function": {
            "name": "lookup", "description": "The lookup tool", "parameters": {"type": "object"}
        }}])
    );
    let second = messages(&requests[1].body);
    assert_eq!(second.len(), 4);
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_0_0");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "lookup");
    assert_eq!(
        second[3],
        json!({"role": "tool", "tool_call_id": "call_0_0", "content": r#"{"query":"rust"} (from the workdir)"#})
    );
}

#[tokio::test]
async fn bad_tool_calls_are_reported_to_the_model_and_never_run() {
    let server = FakeOpenAi::script(vec![
        Step::ToolCalls(vec![
            ("touch".to_owned(), r#"{"q": 1}"#.to_owned()),
            ("touch".to_owned(), "{not json".to_owned()),
            ("rm".to_owned(), r#"{"path": "/"}"#.to_owned()),
        ]),
        Step::Answer("sorry".to_owned()),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let schema = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    let setup = Setup::new(&server).tool("touch", &["touch", "ran"], Some(schema));
    let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == "sorry"), "{reply:?}");
    assert!(!dir.path().join("ran").exists(), "a call with invalid arguments must not run");
    let second = messages(&server.requests()[1].body).clone();
    let results: Vec<&str> = second[3..].iter().map(|m| m["content"].as_str().expect("text")).collect();
    assert_eq!(results.len(), 3);
    assert!(results[0].contains("do not match its input schema") && results[0].contains("query"), "{}", results[0]);
    assert!(results[1].contains("not valid JSON"), "{}", results[1]);
    assert!(results[2].contains("there is no tool `rm`"), "{}", results[2]);
}

#[tokio::test]
async fn ask_user_becomes_a_question() {
    let server = FakeOpenAi::script(vec![Step::ToolCalls(vec![(
        "ask_user".to_owned(),
        r#"{"question": "Which fiscal year?"}"#.to_owned(),
    )])]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut asking = attempt("x", dir.path());
    asking.may_ask = true;
    let reply = run(&Setup::new(&server).runtime(), asking).await;
    assert_eq!(reply, Reply::Question("Which fiscal year?".to_owned(), Some(Tokens { prompt: 10, completion: 5 })));
    let tools = &server.requests()[0].body["tools"];
    assert_eq!(tools[0]["function"]["name"], "ask_user");
    assert_eq!(tools[0]["function"]["parameters"]["required"], json!(["question"]));
}

#[tokio::test]
async fn ask_user_is_not_offered_when_the_attempt_may_not_ask() {
    let server = FakeOpenAi::script(vec![
        Step::ToolCalls(vec![("ask_user".to_owned(), r#"{"question": "?"}"#.to_owned())]),
        Step::Answer("fine".to_owned()),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let reply = run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == "fine"), "{reply:?}");
    let requests = server.requests();
    assert!(requests[0].body.get("tools").is_none());
    assert!(messages(&requests[1].body)[3]["content"].as_str().expect("text").contains("there is no tool"));
}

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_fails_at_max_turns() {
    let server = FakeOpenAi::script(vec![Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())])]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).tool("lookup", &["cat"], None).max_turns(3);
    let (error, class) = failure(run(&setup.runtime(), attempt("x", dir.path())).await);
    assert_eq!(error, "[llm::max_turns] the agent used all 3 turns without a final answer");
    assert_eq!(class, ErrorClass::Permanent);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_time_it_asks_for() {
    let server = FakeOpenAi::script(vec![
        Step::Status { code: 429, body: "slow down".to_owned(), retry_after: Some(1) },
        Step::Answer("ok".to_owned()),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let started = Instant::now();
    let reply = run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == "ok"), "{reply:?}");
    assert_eq!(server.requests().len(), 2);
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After: 1 is honoured");
}

#[tokio::test]
async fn server_errors_are_retried_then_fail_retryably() {
    let server =
        FakeOpenAi::script(vec![Step::Status { code: 500, body: "upstream broke".to_owned(), retry_after: None }]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let (error, class) = failure(run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Transient);
    assert!(error.contains("HTTP 500") && error.contains("upstream broke") && error.contains("3 tries"), "{error}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_quotes_an_excerpt() {
    let body = format!("model not found {}", "y".repeat(2000));
    let server = FakeOpenAi::script(vec![Step::Status { code: 400, body, retry_after: None }]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let (error, class) = failure(run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Permanent);
    assert!(error.contains("HTTP 400") && error.contains("model not found"), "{error}");
    assert!(error.len() < 700, "the body is an excerpt: {} bytes", error.len());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_body_fails_quoting_it() {
    let server = FakeOpenAi::script(vec![Step::Raw(r#"{"choices": "nope"}"#.to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let (error, class) = failure(run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Agent);
    assert!(error.starts_with("[llm::malformed] malformed response from `local`"), "{error}");
    assert!(error.contains(r#"{"choices": "nope"}"#), "{error}");
}

#[tokio::test]
async fn a_server_that_hangs_times_out_retryably() {
    let server = FakeOpenAi::script(vec![Step::Hang]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).provider(|p| p.timeout = Some(manifest::Duration::from_millis(300)));
    let (error, class) = failure(run(&setup.runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Timeout);
    assert!(error.contains("did not answer within 300ms"), "{error}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn cancelling_ends_the_attempt_promptly() {
    let server = FakeOpenAi::script(vec![Step::Hang]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let runtime = Setup::new(&server).runtime();
    let cancel = CancellationToken::new();
    let work = runtime.run(attempt("x", dir.path()), cancel.clone());
    let started = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let reply = tokio::time::timeout(Duration::from_secs(5), work).await.expect("the attempt ends");
    assert!(matches!(reply, Reply::Failure { .. }), "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_api_key_never_appears_in_a_reply() {
    let echo = testkit::AUTHORIZATION_ECHO;
    let server = FakeOpenAi::script(vec![
        Step::Status { code: 401, body: format!("bad credentials: {echo}"), retry_after: None },
        // The key straddles the 500-character excerpt cut.
        Step::Status { code: 403, body: format!("{}{echo}", "z".repeat(495)), retry_after: None },
        Step::Raw(format!("oops {echo}")),
        Step::Answer(format!("your key is {echo}")),
        Step::ToolCalls(vec![("ask_user".to_owned(), json!({"question": format!("is it {echo}?")}).to_string())]),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).provider(|p| p.api_key_env = Some(at("TEST_KEY")));
    let runtime = setup.runtime();
    let mut replies = Vec::new();
    for _ in 0..5 {
        let mut asking = attempt("x", dir.path());
        asking.may_ask = true;
        replies.push(run(&runtime, asking).await);
    }
    let requests = server.requests();
    assert_eq!(requests[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let fragment = &KEY[..6];
    for reply in &replies {
        let text = format!("{reply:?}");
        assert!(!text.contains(KEY) && !text.contains(fragment), "the key leaked: {text}");
    }
    assert!(format!("{:?}", replies[0]).contains("Bearer [redacted]"), "{:?}", replies[0]);
    assert!(format!("{:?}", replies[3]).contains("your key is Bearer [redacted]"), "{:?}", replies[3]);
    assert!(matches!(&replies[4], Reply::Question(q, _) if q == "is it Bearer [redacted]?"), "{:?}", replies[4]);
    assert!(!format!("{:?}", setup.agents()).contains(KEY), "Debug shows no key");
}

#[tokio::test]
async fn misconfigured_agents_refuse_naming_the_problem() {
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let unset = Setup::new(&server).provider(|p| p.api_key_env = Some(at("UNSET_VARIABLE")));
    let (error, class) = failure(run(&unset.runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Permanent);
    assert!(error.contains("`UNSET_VARIABLE`") && error.contains("not set"), "{error}");

    let mut unknown = Setup::new(&server);
    if let Some(agent) = unknown.plan.agents.get_mut("a") {
        agent.runtime = llm_on("elsewhere");
    }
    let (error, class) = failure(run(&unknown.runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Permanent);
    assert!(error.contains("`elsewhere`"), "{error}");
    assert!(server.requests().is_empty());
}

/// Four attempts at once; the server's in-flight count is the measure.
async fn most_in_flight(max_concurrency: u32) -> (usize, usize) {
    let server = FakeOpenAi::script(vec![Step::Delay(Duration::from_millis(200), Box::new(Step::Answer("ok".into())))]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let runtime = Setup::new(&server).provider(|p| p.max_concurrency = Some(max_concurrency)).runtime();
    let mut attempts = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let work = runtime.run(attempt("x", dir.path()), CancellationToken::new());
        attempts.spawn(tokio::time::timeout(Duration::from_secs(10), work));
    }
    while let Some(reply) = attempts.join_next().await {
        let reply = reply.expect("the task ran").expect("the attempt ends");
        assert!(matches!(reply, Reply::Output { .. }), "{reply:?}");
    }
    (server.max_in_flight(), server.requests().len())
}

#[tokio::test]
async fn max_concurrency_holds_requests_in_flight() {
    assert_eq!(most_in_flight(1).await, (1, 4));
    let (unbounded, requests) = most_in_flight(4).await;
    assert!(unbounded > 1, "the measure sees overlap without the limit");
    assert_eq!(requests, 4);
}

#[tokio::test]
async fn tools_go_with_tool_choice_and_generation_settings_with_every_request() {
    let server = FakeOpenAi::script(vec![
        Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())]),
        Step::Answer("done".to_owned()),
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server)
        .provider(|p| p.generation = Generation { max_tokens: Some(300), temperature: Some(0.5), seed: Some(7) })
        .tool("lookup", &["cat"], None)
        .agent(|tool_choice, generation| {
            *tool_choice = Some(ToolChoice::Required);
            generation.temperature = Some(0.0);
        });
    let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == "done"), "{reply:?}");
    for request in server.requests() {
        let body = &request.body;
        assert_eq!(body["tool_choice"], "required");
        assert_eq!((&body["max_tokens"], &body["temperature"], &body["seed"]), (&json!(300), &json!(0.0), &json!(7)));
    }
    // Without tools there is no tool_choice; without settings the default output limit is sent.
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await;
    let body = &server.requests()[0].body;
    assert!(body.get("tool_choice").is_none() && body.get("temperature").is_none() && body.get("seed").is_none());
    assert_eq!(body["max_tokens"], engine::llm::DEFAULT_MAX_TOKENS);
    // An agent that sets no tool_choice lets the model decide.
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    run(&Setup::new(&server).tool("lookup", &["cat"], None).runtime(), attempt("x", dir.path())).await;
    assert_eq!(server.requests()[0].body["tool_choice"], "auto");
}

#[tokio::test]
async fn a_tool_call_message_is_sent_back_with_an_empty_text_not_null() {
    for calls in [
        Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())]),
        Step::StreamToolCalls(vec![("lookup".to_owned(), r#"{"query": "rust"}"#.to_owned())]),
    ] {
        let server = FakeOpenAi::script(vec![calls, Step::Answer("done".to_owned())]);
        let dir = tempfile::tempdir().expect("a temp dir");
        let setup = Setup::new(&server).tool("lookup", &["cat"], None);
        let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
        assert!(matches!(&reply, Reply::Output { text, .. } if text == "done"), "{reply:?}");
        let second = messages(&server.requests()[1].body).clone();
        assert_eq!(second[2]["content"], "", "{second:?}");
        assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "lookup");
        assert_eq!(second[3]["tool_call_id"], second[2]["tool_calls"][0]["id"]);
    }
}

#[tokio::test]
async fn tokens_of_a_failed_attempt_are_reported_with_the_failure() {
    let server = FakeOpenAi::script(vec![Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())])]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).tool("lookup", &["cat"], None).max_turns(3);
    let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
    assert_eq!(reply.tokens(), Some(Tokens { prompt: 30, completion: 15 }), "{reply:?}");
    assert!(matches!(reply, Reply::Failure { .. }));
    // An error after a turn keeps the turn's tokens.
    let server = FakeOpenAi::script(vec![
        Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())]),
        Step::Status { code: 400, body: "bad request".to_owned(), retry_after: None },
    ]);
    let reply = run(&Setup::new(&server).tool("lookup", &["cat"], None).runtime(), attempt("x", dir.path())).await;
    assert_eq!(reply.tokens(), Some(Tokens { prompt: 10, completion: 5 }), "{reply:?}");
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_is_its_own_error() {
    let server = FakeOpenAi::script(vec![Step::Truncated("{\"half\": ".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).agent(|_, generation| generation.max_tokens = Some(64));
    let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
    assert_eq!(reply.tokens(), Some(Tokens { prompt: 10, completion: 5 }));
    let (error, class) = failure(reply);
    assert_eq!(class, ErrorClass::Permanent);
    assert_eq!(error, "[llm::length] the answer was cut at 64 tokens (finish_reason `length`), so it is incomplete");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_goes_quiet_is_given_up_after_the_idle_timeout() {
    let server = FakeOpenAi::script(vec![Step::Hang]);
    let dir = tempfile::tempdir().expect("a temp dir");
    // No overall `timeout`: only the idle timeout can end the wait.
    let setup = Setup::new(&server).provider(|p| p.idle_timeout = Some(manifest::Duration::from_millis(200)));
    let (error, class) = failure(run(&setup.runtime(), attempt("x", dir.path())).await);
    assert_eq!(class, ErrorClass::Timeout);
    assert!(error.contains("sent nothing for 200ms (idle_timeout)"), "{error}");
    assert!(error.starts_with("[llm::idle] "), "the failure names its `runner explain` page: {error}");
    assert_eq!(server.requests().len(), 1, "a hung server is reported after one idle timeout");
}

#[tokio::test]
async fn a_slow_but_live_stream_is_read_to_its_end() {
    // Twenty pieces 50 ms apart take a second in all, five times the idle timeout of 200 ms:
    // the wait starts again with every event.
    let pieces: Vec<String> = (0..20).map(|i| format!("{i} ")).collect();
    let server = FakeOpenAi::script(vec![Step::SlowStream(pieces.clone(), Duration::from_millis(50))]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).provider(|p| p.idle_timeout = Some(manifest::Duration::from_millis(200)));
    let reply = run(&setup.runtime(), attempt("x", dir.path())).await;
    assert_eq!(reply, Reply::Output { text: pieces.concat(), tokens: Some(Tokens { prompt: 10, completion: 5 }) });
    assert_eq!(server.requests()[0].body["stream"], true);
}

#[tokio::test]
async fn a_stream_that_breaks_is_the_servers_failure_and_is_retried() {
    for broken in [Step::BrokenStream(Vec::new()), Step::BrokenStream(vec!["half an ans".to_owned()])] {
        let server = FakeOpenAi::script(vec![broken.clone(), Step::Answer("whole".to_owned())]);
        let dir = tempfile::tempdir().expect("a temp dir");
        let reply = run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await;
        assert!(matches!(&reply, Reply::Output { text, .. } if text == "whole"), "{broken:?}: {reply:?}");
        let server = FakeOpenAi::script(vec![broken.clone()]);
        let (error, class) = failure(run(&Setup::new(&server).runtime(), attempt("x", dir.path())).await);
        assert_eq!(class, ErrorClass::Transient);
        assert!(error.starts_with("[llm::retries] provider `local` failed while streaming its answer"), "{error}");
        assert_eq!(server.requests().len(), 3);
    }
}

#[tokio::test]
async fn a_provider_with_stream_false_sends_unstreamed_requests() {
    let server = FakeOpenAi::script(vec![Step::Answer("ok".to_owned())]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let reply =
        run(&Setup::new(&server).provider(|p| p.stream = Some(false)).runtime(), attempt("x", dir.path())).await;
    assert!(matches!(&reply, Reply::Output { text, .. } if text == "ok"), "{reply:?}");
    assert!(server.requests()[0].body.get("stream").is_none());
}

#[tokio::test]
async fn another_model_answering_is_noticed_once_per_pair() {
    let server = FakeOpenAi::script(vec![Step::As("tiny".to_owned(), Box::new(Step::Answer("ok".to_owned())))]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let agents = Setup::new(&server).agents();
    for _ in 0..2 {
        let reply = run(&agents.runtime("a"), attempt("x", dir.path())).await;
        assert!(matches!(&reply, Reply::Output { text, .. } if text == "ok"), "{reply:?}");
    }
    assert_eq!(agents.substitutions(), vec![("local".to_owned(), "m".to_owned(), "tiny".to_owned())]);
}

#[tokio::test]
async fn a_server_that_reports_no_usage_has_each_turns_tokens_counted_with_the_providers_tokenizer() {
    use model::tokens::{Tokenizer, count};
    let call = Step::Unmetered(Box::new(Step::ToolCalls(vec![("lookup".into(), r#"{"q":"rust"}"#.into())])));
    let answer = Step::Unmetered(Box::new(Step::Stream(vec!["Rust is".into(), " a language.".into()])));
    let server = FakeOpenAi::script(vec![call, answer]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup::new(&server).provider(|p| p.tokenizer = Some("cl100k_base".into())).tool(
        "lookup",
        &["sh", "-c", "echo found it"],
        None,
    );
    let reply = run(&setup.runtime(), attempt("What is Rust?", dir.path())).await;
    let counted = |text: &str| count(text, Tokenizer::Cl100k) as u64;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let mut prompt = 0;
    for request in &requests {
        for message in messages(&request.body) {
            prompt += counted(message["content"].as_str().unwrap_or_default());
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                prompt += counted(call["function"]["name"].as_str().unwrap_or_default());
                prompt += counted(call["function"]["arguments"].as_str().unwrap_or_default());
            }
        }
        for tool in request.body["tools"].as_array().into_iter().flatten() {
            let function = &tool["function"];
            prompt += counted(function["name"].as_str().unwrap_or_default());
            prompt += counted(function["description"].as_str().unwrap_or_default());
            prompt += counted(&function["parameters"].to_string());
        }
    }
    let completion = counted("lookup") + counted(r#"{"q":"rust"}"#) + counted("Rust is a language.");
    assert_eq!(
        reply,
        Reply::Output { text: "Rust is a language.".into(), tokens: Some(Tokens { prompt, completion }) }
    );
    assert!(prompt > 20 && completion > 5, "both sides are counted: {prompt} and {completion}");
}
