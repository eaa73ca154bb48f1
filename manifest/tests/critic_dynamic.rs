//! The critic on dynamic plans: a map's tokens count once per item, in the run's estimate and in
//! the input of a task that reads the map whole; a task other than a synthesis gate that reads a
//! map whole is warned; a `when` that can never hold is warned at the `when`; and what only a
//! `when` or `for_each` reads is a dependency's use, not part of the task's input.

use manifest::critic::{Critique, Dimension, Finding, Lint, critique};
use manifest::{Loaded, load_str};

/// Loads an enveloped plan with a mock agent `m`, the given workflow lines (each indented as a
/// list item under `workflow:`) and `control_logic` lines.
fn load(workflow: &str, control: &str) -> Loaded {
    let text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions: {{m: {{runtime: mock}}}}\n  \
         workflow:\n{workflow}{control}"
    );
    load_str("t.yaml", "t", &text, &|_| true)
}

/// The critique of a plan that must be valid.
fn reviewed(loaded: &Loaded) -> Critique {
    let errors: Vec<String> = loaded.errors().map(|d| format!("{}: {d}", d.code())).collect();
    assert!(errors.is_empty(), "the plan is valid: {errors:#?}");
    critique(loaded.plan.as_ref().expect("a valid plan was read"))
}

fn with_code<'c>(critique: &'c Critique, code: &str) -> Vec<&'c Finding> {
    critique.findings.iter().filter(|f| f.code() == code).collect()
}

/// The text a finding points at.
fn at<'a>(loaded: &'a Loaded, finding: &Finding) -> &'a str {
    loaded.source.slice(finding.loc.span)
}

/// A map of three items (input `abcd`: one token) and a task reading `{{ READ }}` (24 bytes for
/// `tasks.pages.output`: six tokens).
fn pages_and(read: &str, for_each: &str) -> String {
    format!(
        "    - {{id: pages, agent: m, input: abcd, {for_each}on_failure: skip}}\n    \
         - {{id: summary, agent: m, input: \"{{{{ {read} }}}}\", depends_on: [pages], on_failure: skip}}\n"
    )
}

const THREE: &str = "for_each: [a, b, c], ";

#[test]
fn a_map_read_whole_costs_its_output_once_per_item() {
    // pages: (1 + 1000) x 3; summary: 6 + 3 x 1000 of input, 1000 of output.
    let map = reviewed(&load(&pages_and("tasks.pages.output", THREE), ""));
    assert_eq!(map.metrics.estimated_tokens, 3003 + 4006);
    // The same plan without `for_each`: every task once.
    let plain = reviewed(&load(&pages_and("tasks.pages.output", ""), ""));
    assert_eq!(plain.metrics.estimated_tokens, 1001 + 2006);
}

#[test]
fn a_map_over_an_expression_counts_max_items() {
    let workflow = "    - {id: src, agent: m, input: abcd, on_failure: skip}\n    \
         - {id: pages, agent: m, input: abcd, depends_on: [src], for_each: tasks.src.output.items, max_items: 7, on_failure: skip}\n    \
         - {id: summary, agent: m, input: \"{{ tasks.pages.output }}\", depends_on: [pages], on_failure: skip}\n";
    let critique = reviewed(&load(workflow, ""));
    // src once; pages 7 times, its items' input without src's output (only `for_each` reads it);
    // summary with seven outputs.
    assert_eq!(critique.metrics.estimated_tokens, 1001 + 7 * 1001 + (6 + 7000 + 1000));
}

#[test]
fn the_context_budget_counts_every_item_of_a_map_read_whole() {
    let control = "  control_logic: {context_budget: 2000}\n";
    let loaded = load(&pages_and("tasks.pages.output", THREE), control);
    let critique = reviewed(&loaded);
    let over = with_code(&critique, "critic::context_budget");
    assert_eq!(over.len(), 1, "{:#?}", critique.findings);
    assert_eq!(over[0].lint, Lint::ContextBudget { task: "summary".into(), estimate: 3006, budget: 2000 });
    assert!(over[0].label.contains("3 items of `pages`"), "{}", over[0].label);
    // One item read, or no map at all, fits.
    for workflow in [pages_and("tasks.pages.output[0]", THREE), pages_and("tasks.pages.output", "")] {
        let critique = reviewed(&load(&workflow, control));
        assert!(with_code(&critique, "critic::context_budget").is_empty(), "{workflow}: {:#?}", critique.findings);
    }
}

#[test]
fn a_task_reading_a_map_whole_is_warned_at_the_read_in_its_input() {
    let workflow = "    - {id: pages, agent: m, input: abcd, for_each: [a, b, c], on_failure: skip}\n    \
         - {id: summary, agent: m, input: \"All: {{ tasks.pages.output }}\", depends_on: [pages], \
         when: \"tasks.pages.output | length > 0\", on_failure: skip}\n";
    let loaded = load(workflow, "");
    let critique = reviewed(&loaded);
    let found = with_code(&critique, "critic::map_without_synthesis");
    assert_eq!(found.len(), 1, "{:#?}", critique.findings);
    assert_eq!(
        found[0].lint,
        Lint::MapWithoutSynthesis { task: "summary".into(), map: "pages".into(), items: Some(3) }
    );
    assert_eq!(found[0].dimension(), Some(Dimension::ContextBudget));
    assert_eq!(found[0].task.as_deref(), Some("summary"));
    assert_eq!(at(&loaded, found[0]), "tasks.pages", "at the read in the input, not the `when`");
    let offset = found[0].loc.span.offset();
    assert!(loaded.source.text[..offset].ends_with("All: {{ "), "in the input");
    assert_eq!(critique.scores.of_dimension(Dimension::ContextBudget), 8.0, "one warning in the dimension");
    assert!(found[0].to_string().contains("up to 3 items"), "{}", found[0]);
}

#[test]
fn one_item_a_gate_or_a_plain_task_is_not_a_whole_read() {
    for read in ["tasks.pages.output[0]", "tasks.pages.output.0", "tasks.pages.output | length"] {
        let critique = reviewed(&load(&pages_and(read, THREE), ""));
        assert!(with_code(&critique, "critic::map_without_synthesis").is_empty(), "{read}: {:#?}", critique.findings);
        // One output counted, as for a plain task: 6 (or 7) tokens of text and 1000.
        assert!(critique.metrics.estimated_tokens < 3003 + 2100, "{read}: {}", critique.metrics.estimated_tokens);
    }
    let gated = "    - {id: pages, agent: m, input: abcd, for_each: [a, b, c], on_failure: skip}\n    \
         - {id: merge, type: synthesis_gate, inputs: [pages], agent: m, input: \"{{ tasks.pages.output }}\", max_output_tokens: 300, on_failure: skip}\n    \
         - {id: summary, agent: m, input: \"{{ tasks.merge.output }}\", depends_on: [merge], on_failure: skip}\n";
    let critique = reviewed(&load(gated, ""));
    assert!(with_code(&critique, "critic::map_without_synthesis").is_empty(), "{:#?}", critique.findings);
    let plain = reviewed(&load(&pages_and("tasks.pages.output", ""), ""));
    assert!(with_code(&plain, "critic::map_without_synthesis").is_empty(), "{:#?}", plain.findings);
}

/// A plan whose task `b` depends on `a` and has `when: WHEN`.
fn conditional(when: &str) -> Loaded {
    let workflow = format!(
        "    - {{id: a, agent: m, input: x, on_failure: skip}}\n    \
         - id: b\n      agent: m\n      input: \"{{{{ tasks.a.output }}}}\"\n      depends_on: [a]\n      when: {when}\n      on_failure: skip\n"
    );
    load(&workflow, "")
}

#[test]
fn conditions_that_never_hold_are_warned_at_the_when() {
    for (when, condition, status) in [
        ("\"false\"", "false", None),
        ("\"1 > 2\"", "1 > 2", None),
        ("\"{{ [] | length > 0 }}\"", "[] | length > 0", None),
        ("'tasks.a.status == \"failed\"'", "tasks.a.status == \"failed\"", Some("failed")),
        ("\"'done' == tasks.a.status or tasks.a.output\"", "'done' == tasks.a.status", Some("done")),
    ] {
        let loaded = conditional(when);
        let critique = reviewed(&loaded);
        let found = with_code(&critique, "critic::condition_never_holds");
        assert_eq!(found.len(), 1, "{when}: {:#?}", critique.findings);
        let expected = Lint::ConditionNeverHolds {
            task: "b".into(),
            condition: condition.into(),
            status: status.map(str::to_owned),
        };
        assert_eq!(found[0].lint, expected, "{when}");
        assert_eq!(at(&loaded, found[0]), when, "at the `when` value");
        assert_eq!(found[0].dimension(), None, "a general check");
        assert!(found[0].help.is_some(), "{when}");
    }
}

#[test]
fn conditions_that_can_hold_are_not_warned() {
    for when in [
        "\"true\"",
        "vars.deep",
        "\"vars is defined\"",
        "'tasks.a.status == \"skipped\"'",
        "'tasks.a.status == \"succeeded\"'",
        "'tasks.a.status != \"failed\"'",
        "'tasks.a.output.status == \"done\"'",
        "'tasks.a.output.kind == \"web\"'",
    ] {
        let critique = reviewed(&conditional(when));
        assert!(with_code(&critique, "critic::condition_never_holds").is_empty(), "{when}: {:#?}", critique.findings);
    }
}

#[test]
fn a_dependency_only_a_condition_or_a_map_reads_is_not_unread() {
    let workflow = "    - {id: a, agent: m, input: x, on_failure: skip}\n    \
         - {id: b, agent: m, input: go, depends_on: [a], when: 'tasks.a.status == \"skipped\"', on_failure: skip}\n    \
         - {id: c, agent: m, input: go, depends_on: [a], when: \"1 > 2\", on_failure: skip}\n";
    let critique = reviewed(&load(workflow, ""));
    let unread: Vec<_> = with_code(&critique, "critic::unread_dependency").iter().map(|f| f.task.clone()).collect();
    assert_eq!(unread, [Some("c".to_owned())], "only `c` never uses `a`: {:#?}", critique.findings);
}

#[test]
fn what_only_a_condition_reads_is_not_in_the_input_estimate() {
    let workflow = "    - {id: a, agent: m, input: abcd, on_failure: skip}\n    \
         - {id: b, agent: m, input: abcd, depends_on: [a], when: 'tasks.a.output.kind == \"web\"', on_failure: skip}\n";
    let critique = reviewed(&load(workflow, ""));
    assert_eq!(critique.metrics.estimated_tokens, 1001 + 1001, "b's agent is not given a's output");
}
