//! The model client on its own against a fake OpenAI server over real HTTP: streaming, retries,
//! error classification, the key kept out of errors, and a server's catalog.

use std::time::Duration;

use machine::event::ErrorClass;
use manifest::plan::Provider;
use model::protocol::{ChatRequest, Message, Sampling, Usage};
use model::{Endpoint, LlmError, catalog};
use serde_json::json;
use testkit::{AUTHORIZATION_ECHO, FakeOpenAi, Step};

const KEY: &str = "sk-model-test-2c7d";

fn endpoint(server: &FakeOpenAi) -> Endpoint {
    let provider = Provider {
        kind: "openai".to_owned(),
        base_url: server.base_url(),
        timeout: Some(manifest::Duration::from_millis(10_000)),
        ..Provider::default()
    };
    Endpoint::for_provider("local", &provider, Some(KEY.to_owned())).expect("an HTTP client")
}

fn messages() -> Vec<Message> {
    vec![Message::User { content: "Say hello.".to_owned() }]
}

fn request(messages: &[Message]) -> ChatRequest<'_> {
    ChatRequest { model: "m", messages, tools: &[], tool_choice: None, response_format: None, format: None }
}

#[tokio::test]
async fn a_stream_is_handed_on_piece_by_piece_with_its_usage() {
    let server = FakeOpenAi::script(vec![Step::Stream(vec!["Hel".to_owned(), "lo".to_owned()])]);
    let messages = messages();
    let mut pieces = Vec::new();
    let (text, usage) = endpoint(&server)
        .complete_streaming(&request(&messages), Sampling::default(), &mut |piece: &str| pieces.push(piece.to_owned()))
        .await
        .expect("a streamed answer");
    assert_eq!((text.as_str(), pieces), ("Hello", vec!["Hel".to_owned(), "lo".to_owned()]));
    let usage = usage.expect("the usage of the last chunk");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (Some(10), Some(5)));
    let sent = &server.requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_eq!(sent.authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
}

#[tokio::test]
async fn a_rate_limit_is_retried_and_the_answer_read() {
    let server = FakeOpenAi::script(vec![
        Step::Status { code: 429, body: "slow down".to_owned(), retry_after: Some(0) },
        Step::Answer("ok".to_owned()),
    ]);
    let messages = messages();
    let sampling = Sampling { temperature: Some(0.0), max_tokens: Some(7), seed: Some(3) };
    let response = endpoint(&server).complete_with(&request(&messages), sampling).await.expect("an answer");
    assert_eq!(response.choices[0].message.content.as_deref(), Some("ok"));
    assert_eq!(response.usage, Some(Usage { prompt_tokens: Some(10), completion_tokens: Some(5) }));
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[1].body["max_tokens"].clone(), sent[1].body["seed"].clone()), (json!(7), json!(3)));
    assert!(sent[1].body.get("stream").is_none(), "an unstreamed request says nothing of streams");
}

#[tokio::test]
async fn server_errors_are_given_up_after_three_tries() {
    let server = FakeOpenAi::script(vec![Step::Status { code: 503, body: "busy".to_owned(), retry_after: Some(0) }]);
    let messages = messages();
    let error = endpoint(&server).complete_with(&request(&messages), Sampling::default()).await.unwrap_err();
    assert!(
        matches!(&error, LlmError::Exhausted { tries: 3, last } if matches!(**last, LlmError::Http { status: 503, .. }))
    );
    assert_eq!(error.class(), ErrorClass::Transient);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_never_quotes_the_key() {
    let body = format!("bad request from {AUTHORIZATION_ECHO}");
    let server = FakeOpenAi::script(vec![Step::Status { code: 400, body, retry_after: None }]);
    let messages = messages();
    let error = endpoint(&server).answer(&request(&messages), Sampling::default()).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, LlmError::Http { status: 400, .. }), "{error:?}");
    assert!(!text.contains(KEY) && text.contains("Bearer [redacted]"), "{text}");
    assert_eq!(error.class(), ErrorClass::Permanent);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_breaks_before_any_text_is_tried_again() {
    let server = FakeOpenAi::script(vec![Step::BrokenStream(Vec::new()), Step::Stream(vec!["fine".to_owned()])]);
    let messages = messages();
    let answer = endpoint(&server).answer(&request(&messages), Sampling::default()).await.expect("the second try");
    assert_eq!(answer.message.content.as_deref(), Some("fine"));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn the_endpoint_never_shows_its_key() {
    let server = FakeOpenAi::script(Vec::new());
    let shown = format!("{:?}", endpoint(&server));
    assert!(!shown.contains(KEY) && shown.contains("[redacted]"), "{shown}");
}

#[tokio::test]
async fn a_servers_catalog_gives_each_models_window() {
    let server = FakeOpenAi::script(Vec::new());
    let unlisted = catalog::list("local", &server.base_url(), Some(KEY), Duration::from_secs(10)).await.unwrap_err();
    assert!(matches!(unlisted, LlmError::Http { status: 404, .. }), "{unlisted:?}");
    server.serve_models(json!({"data": [{"id": "m", "max_model_len": 4096}, {"id": "n"}]}));
    let served = catalog::list("local", &server.base_url(), Some(KEY), Duration::from_secs(10)).await.expect("a list");
    assert_eq!(served.get("m").and_then(|m| m.context_window), Some((4096, "max_model_len")));
    assert_eq!(served.get("n").map(|m| m.context_window), Some(None));
}
