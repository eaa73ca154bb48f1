//! Replanning: a planner's replacement for a failed task is read, spliced in where the task was
//! and validated as the loader validates a plan.

use manifest::plan::{Plan, Strategy};
use manifest::splice::splice;
use manifest::{Severity, Span, Spliced, load_str};
use proptest::prelude::*;

const PLAN: &str = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: research}
spec:
  agent_definitions:
    researcher: {runtime: mock}
    writer: {runtime: mock}
    planner: {runtime: mock}
  workflow:
    - id: search
      agent: researcher
      input: Find recent news.
      on_failure: replan
    - id: summarise
      agent: researcher
      input: "Summarise {{ tasks.search.output }}"
      depends_on: [search]
    - id: write
      agent: writer
      input: "Write the brief from {{ tasks.summarise.output }}"
      depends_on: [summarise]
  control_logic:
    planner: planner
"#;

fn plan(text: &str) -> Plan {
    let loaded = load_str("plan.yaml", "plan", text, &|_| true);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.plan.expect("a valid plan")
}

fn ids(spliced: &Spliced) -> Vec<&str> {
    spliced.plan.as_ref().expect("a plan").tasks.iter().map(|t| t.id.value.as_str()).collect()
}

fn codes(spliced: &Spliced) -> Vec<String> {
    spliced.errors().map(|d| d.code()).collect()
}

const TWO_TASKS: &str = r#"{"workflow": [
  {"id": "fetch_sources", "agent": "researcher", "input": "List three news sites."},
  {"id": "search", "agent": "researcher", "depends_on": ["fetch_sources"],
   "input": "Search {{ tasks.fetch_sources.output }}"}
]}"#;

#[test]
fn replacement_takes_the_failed_tasks_place() {
    let spliced = splice(&plan(PLAN), &["search"], "search", TWO_TASKS);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(spliced.added, ["fetch_sources", "search"]);
    assert_eq!(ids(&spliced), ["fetch_sources", "search", "summarise", "write"]);
    let graph = spliced.graph.as_ref().expect("a graph");
    let new_plan = spliced.plan.as_ref().expect("a plan");
    let summarise = graph.index_of("summarise").expect("kept");
    let search = graph.index_of("search").expect("new");
    assert_eq!(graph.parents(summarise).collect::<Vec<_>>(), [search]);
    assert!(graph.is_ancestor(graph.index_of("fetch_sources").expect("new"), summarise));
    // New tasks are bare-form tasks: critical unless they can be skipped.
    assert!(new_plan.tasks[0].critical);
    assert_eq!(spliced.problems(), "");
}

#[test]
fn replacement_in_a_fence_with_prose_around_is_read() {
    let answer = format!(
        "Sure! The search failed because the site was down, so here is a new approach:\n\n```json\n{TWO_TASKS}\n```\n\nLet me know if [anything] else is needed."
    );
    let spliced = splice(&plan(PLAN), &["search"], "search", &answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(spliced.added, ["fetch_sources", "search"]);
    let id = &spliced.plan.as_ref().expect("a plan").tasks[0].id;
    assert_eq!(spliced.source.slice(id.loc.span), "\"fetch_sources\"", "spans point into the whole answer");
}

#[test]
fn replacement_in_prose_without_a_fence_is_read() {
    let answer = format!("Here [is] the revised plan: {TWO_TASKS} Hope {{this}} helps.");
    let spliced = splice(&plan(PLAN), &["search"], "search", &answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(spliced.added, ["fetch_sources", "search"]);
}

#[test]
fn bare_array_of_tasks_is_read() {
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "Search the archive instead."}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(ids(&spliced), ["search", "summarise", "write"]);
}

#[test]
fn aliases_in_the_replacement_are_notes() {
    let answer = r#"{"tasks": [
      {"name": "search", "worker": "researcher", "query": "Search again."},
      {"name": "check", "worker": "researcher", "requires": "search", "query": "Check it.", "colour": "red"}
    ]}"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(ids(&spliced), ["search", "check", "summarise", "write"]);
    let notes = spliced.diagnostics.iter().filter(|d| d.severity == Severity::Info).count();
    assert!(notes >= 6, "{:?}", spliced.diagnostics);
    let unknown = spliced.diagnostics.iter().find(|d| d.code() == "plan::unknown_field").expect("a warning");
    assert_eq!(unknown.severity, Severity::Warning);
    assert!(spliced.in_replacement(unknown));
}

#[test]
fn answers_are_read_by_the_shared_rule() {
    // A fence labelled for another language is skipped, not read as the replacement.
    let answer = format!("The old task was:\n```python\nsearch(site)\n```\nThe new one:\n```json\n{TWO_TASKS}\n```");
    assert_eq!(splice(&plan(PLAN), &["search"], "search", &answer).added, ["fetch_sources", "search"]);
    // A fence inside a JSON string is no fence.
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "Answer in ```json\n{}\n``` fences."}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    // Two candidate replacements in prose are ambiguous, as for every reader of answers.
    let answer = format!("Either {TWO_TASKS} or {TWO_TASKS}");
    let spliced = splice(&plan(PLAN), &["search"], "search", &answer);
    assert_eq!(codes(&spliced), ["plan::replacement_not_json"]);
    assert!(spliced.problems().contains("more than one JSON object or list"), "{}", spliced.problems());
}

#[test]
fn yaml_is_read_when_the_answer_holds_no_json() {
    let yaml = "- id: search\n  agent: researcher\n  input: Search {{ mission }} again.\n  depends_on: []\n";
    for answer in [yaml.to_owned(), format!("Here you go:\n```yaml\n{yaml}```\nGood luck.")] {
        let spliced = splice(&plan(PLAN), &["search"], "search", &answer);
        assert!(spliced.is_valid(), "{answer}: {}", spliced.problems());
        assert_eq!(ids(&spliced), ["search", "summarise", "write"]);
    }
    let spliced = splice(&plan(PLAN), &["search"], "search", "```yaml\n- id: [unclosed\n```");
    assert_eq!(codes(&spliced), ["plan::replacement_not_json"]);
}

#[test]
fn invalid_json_is_an_error_not_a_panic() {
    let spliced = splice(&plan(PLAN), &["search"], "search", r#"{"workflow": [{"id": "a", "agent": }"#);
    assert!(!spliced.is_valid());
    assert_eq!(codes(&spliced), ["plan::replacement_not_json"]);
    assert!(spliced.plan.is_none());

    let spliced = splice(&plan(PLAN), &["search"], "search", "I am sorry, I cannot replan this task.");
    assert_eq!(codes(&spliced), ["plan::replacement_not_json"]);
    assert!(spliced.problems().contains("plan::replacement_not_json"));
}

#[test]
fn empty_workflow_is_an_error() {
    for answer in [r#"{"workflow": []}"#, "[]", r#"{"plan": "none"}"#] {
        let spliced = splice(&plan(PLAN), &["search"], "search", answer);
        assert!(!spliced.is_valid(), "{answer}");
        assert!(codes(&spliced).contains(&"plan::empty_workflow".to_owned()), "{answer}: {:?}", spliced.diagnostics);
    }
}

#[test]
fn reusing_a_kept_id_is_a_duplicate_in_the_replacement() {
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "Again."},
                     {"id": "write", "agent": "writer", "input": "Write early."}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(!spliced.is_valid());
    assert_eq!(codes(&spliced), ["plan::duplicate_task"]);
    let duplicate = spliced.errors().next().expect("an error");
    // The kept `write` comes later in the workflow, but the mistake is in the replacement.
    assert!(spliced.in_replacement(duplicate));
    assert_eq!(spliced.source.slice(duplicate.loc.span), "\"write\"");
    assert!(duplicate.related.is_empty());
    assert!(duplicate.help.as_deref().is_some_and(|h| h.contains("another id")));
}

#[test]
fn unknown_agent_suggests_the_closest() {
    let answer = r#"{"workflow": [{"id": "search", "agent": "reseacher", "input": "Again."}]}"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert_eq!(codes(&spliced), ["plan::unknown_agent"]);
    let error = spliced.errors().next().expect("an error");
    assert_eq!(error.help.as_deref(), Some("did you mean `researcher`?"));
    assert_eq!(error.loc.path, "replacement.workflow[0].agent");
    assert_eq!(spliced.source.slice(error.loc.span), "\"reseacher\"");
}

#[test]
fn cycle_among_new_tasks_is_an_error() {
    let answer = r#"[{"id": "a", "agent": "researcher", "input": "A", "depends_on": ["search"]},
                     {"id": "search", "agent": "researcher", "input": "S", "depends_on": ["a"]}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(!spliced.is_valid());
    assert!(spliced.graph.is_none());
    assert_eq!(codes(&spliced), ["plan::cycle"]);
    let cycle = spliced.errors().next().expect("an error");
    assert!(spliced.in_replacement(cycle));
    assert_eq!(cycle.related.len(), 2);
    for (span, _) in &cycle.related {
        assert!(["\"search\"", "\"a\""].contains(&spliced.source.slice(*span)));
    }
}

#[test]
fn cycle_through_a_kept_task_names_it() {
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "S", "depends_on": ["write"]}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert_eq!(codes(&spliced), ["plan::cycle"]);
    let cycle = spliced.errors().next().expect("an error");
    assert!(spliced.in_replacement(cycle), "located at the new task");
    assert!(cycle.help.as_deref().is_some_and(|h| h.contains("`summarise`") && h.contains("`write`")));
}

#[test]
fn kept_task_left_dangling_is_an_unknown_dependency() {
    let answer = r#"[{"id": "search_archive", "agent": "researcher", "input": "Search the archive."}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(!spliced.is_valid());
    assert_eq!(codes(&spliced), ["plan::unknown_dependency"]);
    let error = spliced.errors().next().expect("an error");
    assert!(!spliced.in_replacement(error), "the location is in the original manifest");
    assert_eq!(error.loc.path, "spec.workflow[1].depends_on[0]");
    assert!(error.help.as_deref().is_some_and(|h| h.contains("give one of the new tasks the id `search`")));
}

#[test]
fn problems_name_codes_and_tasks() {
    let answer = r#"[{"id": "search_archive", "agent": "reseacher", "input": "Search."}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    let problems = spliced.problems();
    assert!(problems.contains("plan::unknown_agent"), "{problems}");
    assert!(problems.contains("plan::unknown_dependency"), "{problems}");
    assert!(problems.contains("new task `search_archive`, at replacement[0].agent"), "{problems}");
    assert!(problems.contains("kept task `summarise`"), "{problems}");
    assert!(problems.contains("help: did you mean `researcher`?"), "{problems}");
    assert!(!problems.contains('\u{1b}'), "no ANSI");
    assert_eq!(problems.lines().filter(|l| l.starts_with("- plan::")).count(), 2, "{problems}");
}

#[test]
fn template_reading_a_task_that_is_not_upstream_is_an_error() {
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "Redo {{ tasks.write.output }}"}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(codes(&spliced).contains(&"plan::template_not_ancestor".to_owned()), "{:?}", spliced.diagnostics);
    let error = spliced.errors().find(|d| d.code() == "plan::template_not_ancestor").expect("an error");
    assert_eq!(spliced.source.slice(error.loc.span), "tasks.write", "narrowed to the reference");
}

#[test]
fn kept_task_reading_a_new_task_that_is_not_upstream_is_explained() {
    // `write` reads `search` through `summarise`; the replacement gives `search` back but drops
    // `summarise`, and gives its id to a task that does not lead from `search`.
    let text =
        PLAN.replace("Write the brief from {{ tasks.summarise.output }}", "Write from {{ tasks.search.output }}");
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "S"},
                     {"id": "summarise", "agent": "researcher", "input": "Summarise what you know."}]"#;
    let spliced = splice(&plan(&text), &["search", "summarise"], "search", answer);
    assert_eq!(codes(&spliced), ["plan::template_not_ancestor"], "{}", spliced.problems());
    let problems = spliced.problems();
    assert!(problems.contains("kept task `write`"), "{problems}");
    assert!(problems.contains("make `search` lead to one of the tasks `write` depends on (`summarise`)"), "{problems}");
}

#[test]
fn new_task_reading_a_kept_task_downstream_points_only_into_the_replacement() {
    // `write` is kept and runs after `search`; the new `search` reads it. The label at `write`'s
    // definition would point into the plan, not the replacement the snippet is drawn from.
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "{{ tasks.write.output }}"}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    let error = spliced.errors().find(|d| d.code() == "plan::template_not_ancestor").expect("not upstream");
    assert!(spliced.in_replacement(error));
    assert!(within(error.loc.span, &spliced.source.text), "{error:?}");
    assert!(error.related.iter().all(|(span, _)| within(*span, &spliced.source.text)), "{error:?}");
}

#[test]
fn new_task_without_template_gets_its_dependencies_outputs() {
    let answer = r#"[{"id": "search", "agent": "researcher", "input": "Search more."},
                     {"id": "refine", "agent": "researcher", "input": "Refine.", "depends_on": ["search"]}]"#;
    let spliced = splice(&plan(PLAN), &["search"], "search", answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    let refine = &spliced.plan.as_ref().expect("a plan").tasks[1];
    assert!(refine.input.as_ref().expect("an input").value.contains("{{ tasks.search.output }}"));
    assert!(spliced.diagnostics.iter().any(|d| d.code() == "plan::implicit_inputs"));
}

#[test]
fn sequential_plan_is_chained_again_in_its_new_order() {
    let original = plan(
        r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: chain}
spec:
  agent_definitions: {worker: {runtime: mock}, planner: {runtime: mock}}
  workflow:
    - {id: a, agent: worker, input: A}
    - {id: b, agent: worker, input: B, on_failure: replan}
    - {id: c, agent: worker, input: C}
  control_logic: {strategy: sequential, planner: planner}
"#,
    );
    assert_eq!(original.control.strategy, Strategy::Sequential);
    let answer = r#"[{"id": "x", "agent": "worker", "input": "X"}, {"id": "y", "agent": "worker", "input": "Y"}]"#;
    let spliced = splice(&original, &["b"], "b", answer);
    assert!(spliced.is_valid(), "{}", spliced.problems());
    assert_eq!(ids(&spliced), ["a", "x", "y", "c"]);
    let tasks = &spliced.plan.as_ref().expect("a plan").tasks;
    let chain: Vec<Option<&str>> = tasks.iter().map(|t| t.chained_after.as_deref()).collect();
    assert_eq!(chain, [None, Some("a"), Some("x"), Some("y")]);
    let depends: Vec<&str> = tasks[3].depends_on.iter().map(|d| d.value.as_str()).collect();
    assert_eq!(depends, ["y"], "the link to the removed `b` is gone");
}

#[test]
fn second_replan_uses_its_own_root() {
    let first = splice(&plan(PLAN), &["search"], "search", TWO_TASKS);
    let spliced_plan = first.plan.clone().expect("a plan");
    let answer = r#"[{"id": "search", "agent": "reseacher", "input": "Third try."}]"#;
    let second = splice(&spliced_plan, &["search"], "search", answer);
    assert_eq!(second.source.name, "replacement_2");
    let error = second.errors().next().expect("an error");
    assert!(second.in_replacement(error));
    assert!(error.loc.path.to_string().starts_with("replacement_2[0]"));
}

#[test]
fn unknown_position_is_reported() {
    let spliced = splice(&plan(PLAN), &[], "nowhere", r#"[{"id": "x", "agent": "researcher", "input": "x"}]"#);
    assert_eq!(codes(&spliced), ["plan::invalid_value"]);
}

fn within(span: Span, text: &str) -> bool {
    span.offset().checked_add(span.len()).is_some_and(|end| end <= text.len())
        && text.is_char_boundary(span.offset())
        && text.is_char_boundary(span.offset() + span.len())
}

/// What every splice must satisfy: an invalid result has an error, and every diagnostic in the
/// replacement lies inside its text.
fn check(spliced: &Spliced) -> Result<(), TestCaseError> {
    if !spliced.is_valid() {
        prop_assert!(spliced.errors().next().is_some(), "invalid without an error: {:?}", spliced.diagnostics);
    }
    for diagnostic in spliced.diagnostics.iter().filter(|d| spliced.in_replacement(d)) {
        prop_assert!(within(diagnostic.loc.span, &spliced.source.text), "{:?}", diagnostic);
        for (span, _) in &diagnostic.related {
            prop_assert!(within(*span, &spliced.source.text), "{:?}", diagnostic);
        }
    }
    let _ = spliced.problems();
    Ok(())
}

#[test]
fn hostile_answers_never_panic() {
    let original = plan(PLAN);
    let deep_list = "[".repeat(100_000);
    let deep_object = "{\"workflow\": ".repeat(5_000);
    let closed = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let huge = format!("{{\"workflow\": [{{\"id\": \"{}\", \"agent\": \"researcher\"}}]}}", "x".repeat(2_000_000));
    let many = format!("[{}]", vec![r#"{"id": "t", "agent": "researcher", "input": "i"}"#; 20_000].join(","));
    let answers = [
        "",
        " ",
        "```",
        "```json",
        "```json\n```",
        "{",
        "}",
        "[",
        "]]]]{{{{",
        "\"\\",
        "null",
        "42",
        "[1, 2, 3]",
        "[null]",
        r#"{"workflow": null}"#,
        r#"{"workflow": "one"}"#,
        r#"{"workflow": [[]]}"#,
        r#"{"workflow": [{"id": ["x"]}]}"#,
        r#"{"workflow": [{"id": "x", "depends_on": {"a": 1}}]}"#,
        "- id: a\n  agent: researcher\n  input: yaml answer\n",
        "&a [*a]",
        "é{ü[ß\"",
        &deep_list,
        &deep_object,
        &closed,
        &huge,
        &many,
    ];
    for answer in answers {
        let spliced = splice(&original, &["search", "summarise"], "search", answer);
        check(&spliced).unwrap_or_else(|e| panic!("{e} for an answer of {} bytes", answer.len()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_answers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        check(&splice(&plan(PLAN), &["search"], "search", &text))?;
    }

    #[test]
    fn jsonish_answers_never_panic(pieces in prop::collection::vec(prop::sample::select(vec![
        "{", "}", "[", "]", ",", ":", "\"workflow\"", "\"tasks\"", "\"id\"", "\"search\"", "\"agent\"",
        "\"researcher\"", "\"depends_on\"", "\"write\"", "\"input\"", "\"{{ tasks.write.output }}\"",
        "```json\n", "```", "prose ", "\n", "null", "1", "\"\\", "- ",
    ]), 0..60)) {
        let text: String = pieces.concat();
        check(&splice(&plan(PLAN), &["search"], "search", &text))?;
    }
}
