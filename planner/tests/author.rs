//! The LLM plan author against a fake OpenAI server over real HTTP.

use std::sync::{Arc, Mutex};

use model::Endpoint;
use planner::author::{Authored, Outcome, PROMPT_VERSION, Request, author};
use serde_json::{Value, json};
use testkit::{AUTHORIZATION_ECHO, FakeOpenAi, Step};

const KEY: &str = "sk-test-key-4711";

fn endpoint(server: &FakeOpenAi) -> Endpoint {
    let provider = manifest::plan::Provider {
        kind: "openai".to_owned(),
        base_url: server.base_url(),
        timeout: Some(manifest::Duration::from_millis(10_000)),
        ..Default::default()
    };
    Endpoint::for_provider("test", &provider, Some(KEY.to_owned())).expect("an HTTP client")
}

fn request(models: &[&str]) -> Request {
    Request {
        text: "Write a brief about tea.".to_owned(),
        name: "brief".to_owned(),
        template: None,
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        candidates: 1,
        stream: false,
        temperature: 0.2,
        schema_dialect: None,
        runs_as_written: false,
    }
}

async fn run(server: &FakeOpenAi, request: &Request) -> Authored {
    author(request, &endpoint(server), &mut |_| {}).await
}

/// The text of the last message of request `n` the server received.
fn last_message(server: &FakeOpenAi, n: usize) -> String {
    let body = &server.requests()[n].body;
    let messages = body["messages"].as_array().expect("messages");
    messages.last().expect("a message")["content"].as_str().expect("a text").to_owned()
}

fn manifest(tasks: Value) -> String {
    json!({
        "apiVersion": "runner/v1",
        "kind": "Plan",
        "metadata": {"name": "brief"},
        "spec": {
            "mission": "Write a brief about tea.",
            "agent_definitions": {"worker": {"runtime": "mock"}},
            "workflow": tasks,
        }
    })
    .to_string()
}

fn score(text: &str) -> (f64, usize) {
    let loaded = manifest::load_str("x.json", "x", text, &|_| false);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    let plan = loaded.plan.expect("a valid plan");
    (manifest::critic::critique(&plan).scores.overall, plan.tasks.len())
}

fn good() -> String {
    manifest(json!([
        {"id": "search_a", "agent": "worker", "input": "Find A about {{ mission }}", "parallel_group": "research", "on_failure": {"action": "retry", "then": "skip"}},
        {"id": "search_b", "agent": "worker", "input": "Find B about {{ mission }}", "parallel_group": "research", "on_failure": {"action": "retry", "then": "skip"}},
        {"id": "merge", "type": "synthesis_gate", "inputs": ["search_a", "search_b"], "agent": "worker", "on_failure": "retry"},
        {"id": "write", "agent": "worker", "input": "Write from {{ tasks.merge.output }}", "depends_on": ["merge"], "critical": true, "on_failure": {"action": "retry", "then": "fail"}}
    ]))
}

fn bad() -> String {
    manifest(json!([
        {"id": "a", "agent": "worker", "input": "Find things.", "critical": true},
        {"id": "b", "agent": "worker", "input": "Use {{ tasks.a.output.facts }}", "depends_on": ["a"], "critical": true},
        {"id": "c", "agent": "worker", "input": "Write {{ tasks.b.output }} and {{ tasks.a.output }}", "depends_on": ["a", "b"], "critical": true}
    ]))
}

fn short() -> String {
    manifest(json!([
        {"id": "search", "agent": "worker", "input": "Find facts about {{ mission }}", "on_failure": "retry"},
        {"id": "write", "agent": "worker", "input": "Write from {{ tasks.search.output }}", "depends_on": ["search"], "critical": true, "on_failure": "retry"}
    ]))
}

fn long() -> String {
    manifest(json!([
        {"id": "search", "agent": "worker", "input": "Find facts about {{ mission }}", "on_failure": "retry"},
        {"id": "check", "agent": "worker", "input": "Check {{ tasks.search.output }}", "depends_on": ["search"], "on_failure": "retry"},
        {"id": "write", "agent": "worker", "input": "Write from {{ tasks.check.output }}", "depends_on": ["check"], "critical": true, "on_failure": "retry"}
    ]))
}

fn outcomes(authored: &Authored) -> Vec<(String, bool, &'static str)> {
    authored
        .attempts
        .iter()
        .map(|a| {
            let kind = match a.outcome {
                Outcome::ParseFailed(_) => "parse_failed",
                Outcome::Invalid(_) => "invalid",
                Outcome::Valid { .. } => "valid",
                Outcome::Questions(_) => "questions",
                Outcome::Failed(_) => "failed",
            };
            (a.model.clone(), a.repair, kind)
        })
        .collect()
}

#[tokio::test]
async fn clean_plan_is_accepted_on_the_first_answer() {
    let server = FakeOpenAi::script(vec![Step::Answer(good())]);
    let authored = run(&server, &request(&["model-a"])).await;

    assert_eq!(authored.fallback, None);
    let manifest: Value = serde_json::from_str(authored.manifest.as_deref().unwrap()).unwrap();
    assert_eq!(manifest["metadata"]["name"], "brief");
    assert_eq!(authored.plan_score, Some(10.0));
    assert_eq!(authored.chosen, Some(0));
    assert_eq!(outcomes(&authored), [("model-a".to_owned(), false, "valid")]);
    let attempt = &authored.attempts[0];
    assert_eq!(attempt.outcome, Outcome::Valid { score: 10.0, tasks: 4 });
    assert_eq!(
        attempt.tokens,
        Some(machine::Tokens { prompt: testkit::PROMPT_TOKENS, completion: testkit::COMPLETION_TOKENS })
    );
    assert!(attempt.prompt.contains(PROMPT_VERSION) && attempt.prompt.contains("Write a brief about tea."));

    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "model-a");
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(body.get("stream").is_none());
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][0]["content"].as_str().unwrap().contains("\"$schema\""));
}

#[tokio::test]
async fn plan_in_a_code_fence_with_prose_around_it_is_read() {
    let answer =
        format!("Here is the plan you asked for:\n\n```json\n{}\n```\n\nLet me know if it needs changes.", good());
    let server = FakeOpenAi::script(vec![Step::Answer(answer)]);
    let authored = run(&server, &request(&["model-a"])).await;

    assert_eq!(outcomes(&authored), [("model-a".to_owned(), false, "valid")]);
    assert!(authored.manifest.is_some());
}

#[tokio::test]
async fn invalid_json_is_repaired_on_the_second_try() {
    let broken = "{\"apiVersion\": \"runner/v1\" \"kind\": \"Plan\"}";
    let server = FakeOpenAi::script(vec![Step::Answer(broken.to_owned()), Step::Answer(good())]);
    let authored = run(&server, &request(&["model-a"])).await;

    assert_eq!(
        outcomes(&authored),
        [("model-a".to_owned(), false, "parse_failed"), ("model-a".to_owned(), true, "valid")]
    );
    assert_eq!(authored.chosen, Some(1));
    let repair = last_message(&server, 1);
    assert!(repair.contains("the JSON does not parse") && repair.contains("line 1"), "{repair}");
    let messages = &server.requests()[1].body["messages"];
    assert_eq!(messages[2], json!({"role": "assistant", "content": broken}));
    assert!(authored.attempts[1].prompt.contains("does not parse"));
}

#[tokio::test]
async fn cycle_is_repaired_with_the_diagnostic_in_the_prompt() {
    let cycle = manifest(json!([
        {"id": "a", "agent": "worker", "input": "x", "depends_on": ["b"]},
        {"id": "b", "agent": "worker", "input": "y", "depends_on": ["a"]}
    ]));
    let server = FakeOpenAi::script(vec![Step::Answer(cycle), Step::Answer(good())]);
    let authored = run(&server, &request(&["model-a"])).await;

    assert_eq!(outcomes(&authored), [("model-a".to_owned(), false, "invalid"), ("model-a".to_owned(), true, "valid")]);
    let Outcome::Invalid(problems) = &authored.attempts[0].outcome else { unreachable!() };
    assert!(problems.contains("plan::cycle"), "{problems}");
    assert!(last_message(&server, 1).contains("plan::cycle"));
    assert!(authored.manifest.is_some());
}

#[tokio::test]
async fn a_model_that_never_plans_falls_to_the_next_one() {
    let server = FakeOpenAi::start(|body, _| match body["model"].as_str() {
        Some("model-b") => Step::Answer(good()),
        _ => Step::Answer("I would rather not.".to_owned()),
    });
    let authored = run(&server, &request(&["model-a", "model-b", "model-c"])).await;

    assert_eq!(
        outcomes(&authored),
        [
            ("model-a".to_owned(), false, "parse_failed"),
            ("model-a".to_owned(), true, "parse_failed"),
            ("model-b".to_owned(), false, "valid"),
        ]
    );
    assert_eq!(authored.chosen, Some(2));
    assert_eq!(authored.fallback, None);
}

#[tokio::test]
async fn when_every_model_fails_the_result_says_to_fall_back() {
    let cycle = manifest(json!([{"id": "a", "agent": "worker", "input": "x", "depends_on": ["a"]}]));
    let server = FakeOpenAi::start(move |body, _| match body["model"].as_str() {
        Some("model-a") => Step::Answer("no".to_owned()),
        Some("model-b") => Step::Answer(cycle.clone()),
        _ => Step::Status { code: 400, body: "model not found".to_owned(), retry_after: None },
    });
    let authored = run(&server, &request(&["model-a", "model-b", "model-c", "model-d"])).await;

    assert_eq!(
        outcomes(&authored),
        [
            ("model-a".to_owned(), false, "parse_failed"),
            ("model-a".to_owned(), true, "parse_failed"),
            ("model-b".to_owned(), false, "invalid"),
            ("model-b".to_owned(), true, "invalid"),
            ("model-c".to_owned(), false, "failed"),
        ]
    );
    assert_eq!(authored.manifest, None);
    assert_eq!(authored.chosen, None);
    let reason = authored.fallback.unwrap();
    assert!(reason.contains("no model wrote a valid plan"), "{reason}");
    assert!(reason.contains("`model-a`") && reason.contains("no JSON object"), "{reason}");
    assert!(reason.contains("`model-b`") && reason.contains("plan::self_dependency"), "{reason}");
    assert!(reason.contains("`model-c`") && reason.contains("HTTP 400"), "{reason}");
    assert!(!reason.contains("model-d"));
}

#[tokio::test]
async fn no_model_means_fall_back_at_once() {
    let server = FakeOpenAi::script(vec![Step::Answer(good())]);
    let authored = run(&server, &request(&[])).await;
    assert!(authored.fallback.is_some());
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn best_scoring_candidate_is_chosen() {
    let answers = [bad(), good(), bad()];
    // Each answer waits for all three requests, so they are in flight together by count.
    let server = FakeOpenAi::start(move |_, n| Step::Together(3, Box::new(Step::Answer(answers[n % 3].clone()))));
    let mut request = request(&["model-a"]);
    request.candidates = 3;
    let authored = run(&server, &request).await;

    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.max_in_flight(), 3, "candidates are asked for concurrently");
    assert!(score(&bad()).0 < score(&good()).0);
    assert_eq!(authored.plan_score, Some(score(&good()).0));
    assert_eq!(authored.manifest.as_deref().map(score), Some(score(&good())));
    let chosen = &authored.attempts[authored.chosen.unwrap()];
    assert_eq!(chosen.outcome, Outcome::Valid { score: 10.0, tasks: 4 });
    let mut candidates: Vec<usize> = authored.attempts.iter().map(|a| a.candidate).collect();
    candidates.sort_unstable();
    assert_eq!(candidates, [0, 1, 2]);
}

#[tokio::test]
async fn equal_scores_go_to_the_plan_with_fewer_tasks() {
    let answers = [good(), short(), long()];
    let server = FakeOpenAi::start(move |_, n| Step::Answer(answers[n % 3].clone()));
    let mut request = request(&["model-a"]);
    request.candidates = 3;
    let authored = run(&server, &request).await;

    assert_eq!(score(&good()).0, score(&short()).0);
    assert_eq!(score(&long()).0, score(&short()).0);
    assert_eq!(authored.manifest.as_deref().map(score), Some(score(&short())));
    assert_eq!(authored.attempts[authored.chosen.unwrap()].outcome, Outcome::Valid { score: 10.0, tasks: 2 });
}

#[tokio::test]
async fn questions_come_back_instead_of_a_plan() {
    let server = FakeOpenAi::script(vec![Step::Answer(
        r#"{"questions": ["Which tea market?", "Who reads the brief?"]}"#.to_owned(),
    )]);
    let authored = run(&server, &request(&["model-a", "model-b"])).await;

    assert_eq!(authored.questions, ["Which tea market?", "Who reads the brief?"]);
    assert_eq!(authored.manifest, None);
    assert_eq!(authored.fallback, None);
    assert_eq!(server.requests().len(), 1, "questions end the search");
}

#[tokio::test]
async fn streaming_hands_on_pieces_in_order_and_plans_from_the_whole() {
    let plan = good();
    let pieces: Vec<String> =
        plan.as_bytes().chunks(37).map(|chunk| String::from_utf8(chunk.to_vec()).unwrap()).collect();
    assert!(pieces.len() > 5);
    let server = FakeOpenAi::script(vec![Step::Stream(pieces.clone())]);
    let mut request = request(&["model-a"]);
    request.stream = true;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let authored = author(&request, &endpoint(&server), &mut |piece| sink.lock().unwrap().push(piece.to_owned())).await;

    assert_eq!(*seen.lock().unwrap(), pieces);
    assert_eq!(server.requests()[0].body["stream"], true);
    assert_eq!(authored.attempts[0].raw, plan);
    assert_eq!(authored.attempts[0].outcome, Outcome::Valid { score: 10.0, tasks: 4 });
    assert_eq!(
        authored.attempts[0].tokens,
        Some(machine::Tokens { prompt: testkit::PROMPT_TOKENS, completion: testkit::COMPLETION_TOKENS })
    );
    assert!(authored.manifest.is_some());
}

#[tokio::test]
async fn streamed_repair_also_streams() {
    let server = FakeOpenAi::script(vec![
        Step::Stream(vec!["{\"spec\": {\"workflow\": [".to_owned()]),
        Step::Stream(vec![good()]),
    ]);
    let mut request = request(&["model-a"]);
    request.stream = true;
    let mut seen = Vec::new();
    let authored = author(&request, &endpoint(&server), &mut |piece| seen.push(piece.to_owned())).await;

    assert_eq!(seen.len(), 2);
    let Outcome::ParseFailed(reason) = &authored.attempts[0].outcome else { unreachable!() };
    assert!(reason.contains("stops mid-object"), "{reason}");
    assert!(last_message(&server, 1).contains("stops mid-object"));
    assert!(authored.manifest.is_some());
}

#[tokio::test]
async fn a_stream_that_breaks_off_is_a_failed_request_not_a_parse_failure() {
    let server = FakeOpenAi::script(vec![Step::BrokenStream(Vec::new())]);
    let mut request = request(&["model-a"]);
    request.stream = true;
    let authored = author(&request, &endpoint(&server), &mut |_| {}).await;
    let Outcome::Failed(error) = &authored.attempts[0].outcome else {
        panic!("expected a failed request, got {:?}", authored.attempts[0].outcome)
    };
    assert!(error.contains("failed while streaming"), "{error}");
    assert_eq!(server.requests().len(), 3, "a broken stream is retried like a server error");
}

#[tokio::test]
async fn the_key_never_appears_in_any_record() {
    let echoing = manifest(
        json!([{"id": "a", "agent": "worker", "input": format!("Use {AUTHORIZATION_ECHO}"), "on_failure": "retry"}]),
    );
    let server = FakeOpenAi::start(move |body, n| match (body["model"].as_str(), n) {
        (Some("model-a"), _) => {
            Step::Status { code: 401, body: format!("bad key {AUTHORIZATION_ECHO}"), retry_after: None }
        }
        (Some("model-b"), 1) => Step::Answer(format!("not json {AUTHORIZATION_ECHO}")),
        (Some("model-b"), _) => Step::Answer(echoing.clone()),
        _ => Step::Stream(vec![AUTHORIZATION_ECHO.to_owned()]),
    });
    let authored = run(&server, &request(&["model-a", "model-b"])).await;
    assert_eq!(server.requests()[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(outcomes(&authored).len(), 3);
    assert!(authored.manifest.as_deref().unwrap().contains("[redacted]"));
    let everything = serde_json::to_string(&authored).unwrap() + &format!("{authored:?}");
    assert!(everything.contains("[redacted]"));
    assert!(!everything.contains(KEY), "{everything}");

    let mut request = request(&["model-c"]);
    request.stream = true;
    let mut seen = String::new();
    let authored = author(&request, &endpoint(&server), &mut |piece| seen.push_str(piece)).await;
    assert_eq!(seen, "Bearer [redacted]".repeat(2), "the answer and its repair");
    let everything = serde_json::to_string(&authored).unwrap();
    assert!(!everything.contains(KEY) && authored.fallback.is_some());
}

#[test]
fn authoring_can_run_on_a_spawned_task() {
    fn is_send<T: Send>(_: &T) {}
    let request = request(&[]);
    let server = FakeOpenAi::script(vec![]);
    let endpoint = endpoint(&server);
    let mut sink = |_: &str| {};
    is_send(&author(&request, &endpoint, &mut sink));
}
