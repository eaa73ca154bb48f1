//! Plans with an `http` agent, run by the real binary against a local server
//! (`testkit::FakeOpenAi`, which records each POST and answers with scripted statuses and
//! bodies): the body is the task's output, a 5xx is retried, a 404 is not, and the key named by
//! `api_key_env` is sent but never written or printed.

mod support;

use support::{Env, plan};
use testkit::{AUTHORIZATION_ECHO, FakeOpenAi, Step};

const KEY_VAR: &str = "RUNNER_TEST_HTTP_KEY";
const KEY: &str = "sk-http-canary-5150";

/// A plan whose one task POSTs a JSON input to `url` and may try twice.
fn http_plan(url: &str) -> String {
    let agents =
        format!("    scorer:\n      runtime: http\n      url: {url}\n      api_key_env: {KEY_VAR}\n      timeout: 30s");
    let workflow = r#"    - id: score
      agent: scorer
      input: '{"text": "rate me"}'
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms}"#;
    plan("http", &agents, workflow)
}

fn status(code: u16, body: &str) -> Step {
    Step::Status { code, body: body.to_owned(), retry_after: None }
}

/// Every file under `root`.
fn files_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() { folders.push(path) } else { files.push(path) }
        }
    }
    files
}

#[test]
fn the_body_is_the_output_a_server_error_is_retried_and_the_key_stays_secret() {
    let server =
        FakeOpenAi::script(vec![status(503, &format!("busy, {AUTHORIZATION_ECHO}")), Step::Raw("score: 7".into())]);
    let env = Env::new();
    let url = format!("{}/chat/completions", server.base_url());
    env.write("plan.yaml", &http_plan(&url));

    let output = env
        .runner()
        .env(KEY_VAR, KEY)
        .args(["apply", "plan.yaml", "--yes", "--run-id", "h1"])
        .output()
        .expect("runner runs");
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{printed}");

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[0].body, serde_json::json!({"text": "rate me"}));
    assert_eq!(requests[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let status = env.status("h1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["score"]["attempts"], 2);
    assert_eq!(status["tasks"]["score"]["output"], "score: 7");

    assert!(!printed.contains(KEY), "the key was printed: {printed}");
    let failed: Vec<_> = env.records("h1").into_iter().filter(|r| r["type"] == "TaskFailed").collect();
    let error = failed[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("503") && error.contains("busy, Bearer [redacted]"), "{error}");
    for file in files_under(env.dir()) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned();
        assert!(!text.contains(KEY), "the key was written to {}", file.display());
    }
}

#[test]
fn a_client_error_is_not_retried() {
    let server = FakeOpenAi::script(vec![status(404, "no such scorer")]);
    let env = Env::new();
    env.write("plan.yaml", &http_plan(&format!("{}/chat/completions", server.base_url())));

    let output = env
        .runner()
        .env(KEY_VAR, KEY)
        .args(["apply", "plan.yaml", "--yes", "--run-id", "h2"])
        .output()
        .expect("runner runs");
    assert_ne!(output.status.code(), Some(0));
    assert_eq!(server.requests().len(), 1);
    let status = env.status("h2");
    assert_eq!(status["status"], "failed");
    assert_eq!(status["tasks"]["score"]["attempts"], 1);
    let failed: Vec<_> = env.records("h2").into_iter().filter(|r| r["type"] == "TaskFailed").collect();
    let error = failed[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("404") && error.contains("no such scorer"), "{error}");
}

#[test]
fn apply_refuses_a_plan_whose_key_variable_is_unset_naming_it() {
    let server = FakeOpenAi::script(vec![Step::Raw("never".into())]);
    let env = Env::new();
    env.write("plan.yaml", &http_plan(&format!("{}/chat/completions", server.base_url())));

    let output = env
        .runner()
        .env_remove(KEY_VAR)
        .args(["apply", "plan.yaml", "--yes", "--run-id", "h3"])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(KEY_VAR) && stderr.contains("http agent `scorer`"), "{stderr}");
    assert!(server.requests().is_empty());
    assert!(!env.log("h3").exists(), "no run was created");
}

#[test]
fn validate_and_critic_accept_an_http_agent() {
    let env = Env::new();
    env.write("plan.yaml", &http_plan("https://scores.example.com/v1/score"));
    let validated = env.runner().args(["validate", "plan.yaml"]).output().expect("runner runs");
    assert_eq!(validated.status.code(), Some(0), "{}", String::from_utf8_lossy(&validated.stdout));
    let critic = env.runner().args(["critic", "plan.yaml", "--format", "json"]).output().expect("runner runs");
    assert_eq!(critic.status.code(), Some(0), "{}", String::from_utf8_lossy(&critic.stderr));
    let report: serde_json::Value = serde_json::from_slice(&critic.stdout).expect("the critic prints JSON");
    assert!(report.is_object(), "{report}");
    let schedule =
        env.runner().args(["apply", "plan.yaml", "--dry-run"]).env(KEY_VAR, KEY).output().expect("runner runs");
    assert_eq!(schedule.status.code(), Some(0), "{}", String::from_utf8_lossy(&schedule.stderr));
}
