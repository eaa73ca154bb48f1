//! Reading plan tests: every reply form, and the mistakes a scenario author makes reported at
//! their place with the plan's diagnostics.

use manifest::plan_test::{Outcome, OutputCheck, Reply, Subject, Usage, Vocabulary};

const HEAD: &str = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: t}\nspec:\n";

/// The run log's words these scenarios name; the real lists are `machine`'s, which the caller
/// hands in.
const VOCABULARY: Vocabulary =
    Vocabulary { events: &["TaskSkipped", "Replanned"], task_statuses: &["succeeded", "failed"] };

fn load_test_str(name: &str, text: &str) -> manifest::plan_test::LoadedTest {
    manifest::plan_test::load_test_str(name, text, &VOCABULARY)
}

fn errors(spec: &str) -> Vec<(String, String, usize)> {
    let text = format!("{HEAD}{spec}");
    let loaded = load_test_str("t.test.yaml", &text);
    loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.code(), d.problem.to_string(), loaded.source.line_column(d.loc.span.offset()).0))
        .collect()
}

#[test]
fn every_reply_form_is_read() {
    let spec = "  plan: p.yaml\n  overrides:\n    agents:\n      a:\n        latency: 2s\n        replies:\n          \
                - text\n          - {output: out}\n          - {json: {count: 1}}\n          - {fail: boom}\n          \
                - {transient: '503'}\n          - {clarify: which?}\n          - {tool: search, arguments: {q: x}}\n          \
                - {output: counted, tokens: {prompt: 1200, completion: 300}}\n";
    let loaded = load_test_str("t.test.yaml", &format!("{HEAD}{spec}"));
    let test = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    assert!(matches!(&test.subject, Some(Subject::Plan(p)) if p.value == "p.yaml"));
    let (name, script) = &test.overrides.agents[0];
    assert_eq!(name.value, "a");
    assert_eq!(script.latency.map(|l| l.to_std().as_secs()), Some(2));
    let replies = &script.replies;
    assert_eq!(replies[0], Outcome::Output("text".into()).into());
    assert_eq!(replies[1], Outcome::Output("out".into()).into());
    assert_eq!(replies[2], Outcome::Json(serde_json::json!({"count": 1})).into());
    assert_eq!(replies[3], Outcome::Fail("boom".into()).into());
    assert_eq!(replies[4], Outcome::Transient("503".into()).into());
    assert_eq!(replies[5], Outcome::Clarify("which?".into()).into());
    assert!(
        matches!(&replies[6].outcome, Outcome::Tool { tool, arguments } if tool.value == "search" && arguments["q"] == "x")
    );
    let usage = Some(Usage { prompt: 1200, completion: 300 });
    assert_eq!(replies[7], Reply { outcome: Outcome::Output("counted".into()), tokens: usage });
    assert_eq!(replies[0].tokens, None);
}

#[test]
fn output_checks_are_read_in_order() {
    let spec = "  plan: p.yaml\n  expect:\n    tasks:\n      a:\n        output: {equals: x, contains: w, matches: z, \
                pointer: /n, value: 1}\n";
    let loaded = load_test_str("t.test.yaml", &format!("{HEAD}{spec}"));
    let test = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    let checks: Vec<&OutputCheck> = test.expect.tasks[0].1.output.iter().map(|c| &c.value).collect();
    assert_eq!(checks.len(), 4);
    assert_eq!(checks[3], &OutputCheck::Pointer("/n".into(), serde_json::json!(1)));
}

#[test]
fn a_scenario_without_a_subject_or_with_two_is_an_error() {
    assert_eq!(errors("  vars: {}\n")[0].0, "plan::missing_field");
    let both = errors("  plan: p.yaml\n  request: do it\n");
    assert_eq!(both[0].0, "plan::invalid_value");
    assert_eq!(both[0].2, 6, "reported at `request`");
}

#[test]
fn reply_mistakes_are_errors_at_the_reply() {
    let two = errors("  plan: p.yaml\n  overrides:\n    tasks:\n      a:\n        replies: [{fail: x, output: y}]\n");
    assert_eq!(two[0].0, "plan::invalid_value");
    assert!(two[0].1.contains("exactly one"), "{two:?}");
    let arguments =
        errors("  plan: p.yaml\n  overrides:\n    tasks:\n      a:\n        replies: [{fail: x, arguments: {}}]\n");
    assert!(arguments[0].1.contains("`arguments` belong to a `tool` reply"), "{arguments:?}");
}

#[test]
fn the_kind_must_be_plan_test_and_unknown_fields_are_errors() {
    let text = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec: {plan: p.yaml, overides: {}}\n";
    let loaded = load_test_str("t.test.yaml", text);
    let codes: Vec<String> = loaded.diagnostics.iter().map(|d| d.code()).collect();
    assert_eq!(codes, ["plan::unsupported_version", "plan::unknown_field"]);
}

#[test]
fn names_the_plan_lacks_are_located_errors_with_suggestions() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: p}\nspec:\n  agent_definitions:\n    \
                writer: {runtime: mock}\n  workflow:\n    - {id: draft, agent: writer, input: x}\n";
    let plan = manifest::load_str("p.yaml", "p", plan, &|_| true).plan.expect("the plan loads");
    let spec = "  plan: p.yaml\n  overrides:\n    agents:\n      writter: {replies: [x]}\n    tools:\n      \
                search: {result: []}\n  answers: {draft: sure}\n  expect:\n    tasks: {drafts: {status: failed}}\n";
    let text = format!("{HEAD}{spec}");
    let loaded = load_test_str("t.test.yaml", &text);
    let test = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    let found: Vec<(String, Option<String>, usize)> = test
        .check_against(&plan)
        .iter()
        .map(|d| (d.problem.to_string(), d.help.clone(), loaded.source.line_column(d.loc.span.offset()).0))
        .collect();
    assert_eq!(
        found,
        [
            ("plan `p` has no agent `writter`".into(), Some("did you mean `writer`?".into()), 8),
            ("plan `p` has no tool `search`".into(), None, 10),
            ("plan `p` has no task `drafts`".into(), Some("did you mean `draft`?".into()), 13),
        ]
    );
}

#[test]
fn event_types_and_task_statuses_come_from_the_callers_vocabulary() {
    let spec = "  plan: p.yaml\n  expect:\n    tasks: {a: {status: replaced}, b: {status: failed}}\n    \
                events: [{type: Replanned}]\n";
    let loaded = load_test_str("t.test.yaml", &format!("{HEAD}{spec}"));
    let test = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    assert_eq!(test.expect.events[0].kind, "Replanned");
    let unknown =
        errors("  plan: p.yaml\n  expect:\n    tasks: {a: {status: paused}}\n    events: [{type: Replaned}]\n");
    let found: Vec<(&str, usize)> = unknown.iter().map(|(code, _, line)| (code.as_str(), *line)).collect();
    assert_eq!(found, [("plan::invalid_value", 7), ("plan::invalid_value", 8)], "{unknown:?}");
    assert!(unknown[0].1.contains("`paused` is not one of succeeded, failed, replaced"), "{unknown:?}");
    assert!(unknown[1].1.contains("`Replaned` is not one of TaskSkipped, Replanned"), "{unknown:?}");
}
