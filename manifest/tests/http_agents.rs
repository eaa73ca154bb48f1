//! `http` agents: their fields are read and checked when the plan loads, with located errors,
//! and secrets are named by variable, never written out.

use manifest::plan::Runtime;

/// A plan whose agent `svc` has these fields (YAML flow mapping entries).
fn plan(agent: &str) -> String {
    format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions:\n    \
         svc: {{{agent}}}\n  workflow:\n    - {{id: t, agent: svc, input: x}}\n"
    )
}

fn load(agent: &str) -> manifest::Loaded {
    manifest::load_str("t.yaml", "t", &plan(agent), &|_| true)
}

#[test]
fn an_http_agent_reads_its_url_secrets_and_cap() {
    let loaded = load(
        "runtime: http, url: 'https://example.com/score', api_key_env: SCORER_KEY, \
         headers_env: {X-Team: SCORER_TEAM}, max_output_bytes: 2048, timeout: 30s",
    );
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let plan = loaded.plan.expect("the plan loads");
    let Runtime::Http { url, api_key_env, headers_env, max_output_bytes } = &plan.agents["svc"].runtime else {
        panic!("an http agent")
    };
    assert_eq!(url.value, "https://example.com/score");
    assert_eq!(api_key_env.as_ref().map(|v| v.value.as_str()), Some("SCORER_KEY"));
    assert_eq!(headers_env["X-Team"].value, "SCORER_TEAM");
    assert_eq!(*max_output_bytes, 2048);
    let mut secrets = plan.secret_variables();
    secrets.sort();
    assert_eq!(secrets, ["SCORER_KEY", "SCORER_TEAM"]);
}

#[test]
fn bad_http_fields_are_errors_at_their_place() {
    for (agent, code, path) in [
        ("runtime: http", "plan::missing_field", "spec.agent_definitions.svc"),
        ("runtime: http, url: 'ftp://example.com'", "plan::invalid_value", "spec.agent_definitions.svc.url"),
        (
            "runtime: http, url: 'http://x', headers_env: {'Bad Header': TOKEN}",
            "plan::invalid_value",
            "spec.agent_definitions.svc.headers_env.Bad Header",
        ),
        (
            "runtime: http, url: 'http://x', headers_env: {'': TOKEN}",
            "plan::invalid_value",
            "spec.agent_definitions.svc.headers_env.",
        ),
        ("runtime: http, url: 'http://x', method: GET", "plan::unknown_field", "spec.agent_definitions.svc.method"),
        ("runtime: command, command: [cat], url: 'http://x'", "plan::unknown_field", "spec.agent_definitions.svc.url"),
        ("runtime: mock, api_key_env: KEY", "plan::unknown_field", "spec.agent_definitions.svc.api_key_env"),
    ] {
        let loaded = load(agent);
        let error = loaded.errors().next().unwrap_or_else(|| panic!("`{agent}` is an error"));
        assert_eq!((error.code().as_str(), error.loc.path.to_string().as_str()), (code, path), "{agent}: {error}");
    }
}

#[test]
fn a_literal_secret_is_an_error_and_never_shown() {
    for (agent, path) in [
        ("runtime: http, url: 'http://x', api_key_env: sk-live-123", "spec.agent_definitions.svc.api_key_env"),
        (
            "runtime: http, url: 'http://x', headers_env: {X-Token: sk-live-123}",
            "spec.agent_definitions.svc.headers_env.X-Token",
        ),
        ("runtime: http, url: 'https://me:sk-live-123@example.com/s'", "spec.agent_definitions.svc.url"),
    ] {
        let loaded = load(agent);
        let error = loaded.errors().next().unwrap_or_else(|| panic!("`{agent}` is an error"));
        assert_eq!(
            (error.code().as_str(), error.loc.path.to_string().as_str()),
            ("plan::literal_secret", path),
            "{error}"
        );
        assert!(!error.to_string().contains("sk-live"), "{error}");
        assert!(!loaded.source.text.contains("sk-live"), "the source shown in snippets is masked");
    }
    let fine = load("runtime: http, url: 'https://example.com/s?who=a@b.c'");
    assert!(fine.errors().next().is_none(), "an `@` after the host is not a credential");
}

#[test]
fn a_secret_sent_over_plain_http_to_another_machine_is_a_critic_warning() {
    let codes = |agent: &str| -> Vec<String> {
        let plan = load(agent).plan.expect("the plan loads");
        manifest::critic::critique(&plan).findings.iter().map(|f| f.code()).collect()
    };
    let warned = "critic::plain_http_secret".to_owned();
    assert!(codes("runtime: http, url: 'http://scorer.example/s', headers_env: {X-Token: TOKEN}").contains(&warned));
    assert!(!codes("runtime: http, url: 'https://scorer.example/s', api_key_env: KEY").contains(&warned));
    assert!(!codes("runtime: http, url: 'http://127.0.0.1:9000/s', api_key_env: KEY").contains(&warned));
    assert!(!codes("runtime: http, url: 'http://scorer.example/s'").contains(&warned), "no secret, nothing to leak");
}
