//! A mock agent's responses: every outcome, stated token usage, and the mistakes an author makes
//! reported at their place.

use manifest::plan::{MockOutcome, MockResponse, Runtime, Usage};

const HEAD: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: m}\nspec:\n  agent_definitions:\n    \
                    stub:\n      runtime: mock\n      responses:\n        a: ";
const TAIL: &str = "\n  workflow:\n    - {id: a, agent: stub, input: A.}\n";

fn load(responses: &str) -> manifest::Loaded {
    manifest::load_str("m.yaml", "m", &format!("{HEAD}{responses}{TAIL}"), &|_| false)
}

#[test]
fn every_outcome_and_stated_usage_is_read() {
    let loaded =
        load("[done, {fail: boom}, {transient: HTTP 503, tokens: {prompt: 7, completion: 2}}, {clarify: which?}]");
    let (plan, _) = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    let Runtime::Mock { responses, .. } = &plan.agents["stub"].runtime else { panic!("a mock agent") };
    let usage = Some(Usage { prompt: 7, completion: 2 });
    assert_eq!(
        responses["a"],
        [
            MockOutcome::Output("done".into()).into(),
            MockOutcome::Fail("boom".into()).into(),
            MockResponse { outcome: MockOutcome::Transient("HTTP 503".into()), tokens: usage },
            MockOutcome::Clarify("which?".into()).into(),
        ]
    );
}

#[test]
fn a_response_gives_exactly_one_outcome_and_both_counts() {
    for (responses, wanted) in [
        ("{output: a, fail: b}", "give exactly one of `output`, `fail`, `transient` or `clarify`"),
        ("{tokens: {prompt: 1, completion: 1}}", "give exactly one of `output`, `fail`, `transient` or `clarify`"),
        ("{output: a, tokens: {prompt: 1}}", "completion"),
        ("{output: a, tokens: {prompt: -1, completion: 1}}", "prompt"),
    ] {
        let loaded = load(responses);
        let errors: Vec<String> = loaded.errors().map(|d| format!("{} {}", d.code(), d.problem)).collect();
        assert!(errors.iter().any(|e| e.contains(wanted)), "{responses}: {errors:?}");
        let line = loaded.errors().map(|d| loaded.source.line_column(d.loc.span.offset()).0).next();
        assert_eq!(line, Some(9), "{responses}: located in the response");
    }
}
