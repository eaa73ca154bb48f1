//! Validation of dynamic plans: `when` and `for_each` compile and read only what templates may,
//! a map over run-time data is bounded by `max_items`, `item` and `index` are read only inside
//! a map, declared `spec.vars` are the only vars read, and ids of map items are refused.

use manifest::plan::Read;
use manifest::{Diagnostic, Loaded, load_str, splice};

/// Loads an enveloped plan with a mock agent `m`, the given `spec` lines before the workflow,
/// and the given workflow lines (each indented as a list item under `workflow:`).
fn load(spec: &str, workflow: &str) -> Loaded {
    let text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions: {{m: {{runtime: mock}}}}\n\
         {spec}  workflow:\n{workflow}"
    );
    load_str("t.yaml", "t", &text, &|_| true)
}

fn errors(loaded: &Loaded) -> Vec<&Diagnostic> {
    loaded.errors().collect()
}

fn codes(loaded: &Loaded) -> Vec<String> {
    loaded.errors().map(Diagnostic::code).collect()
}

/// The text an error's location points at.
fn at<'a>(loaded: &'a Loaded, diagnostic: &Diagnostic) -> &'a str {
    loaded.source.slice(diagnostic.loc.span)
}

/// The one error of a plan, asserting there is exactly one with this code.
fn only_error<'a>(loaded: &'a Loaded, code: &str) -> &'a Diagnostic {
    let errors = errors(loaded);
    assert_eq!(codes(loaded), [code], "{errors:#?}");
    errors[0]
}

fn reads<'a>(loaded: &'a Loaded, id: &str) -> &'a [Read] {
    let plan = loaded.plan.as_ref().expect("the plan was read");
    &plan.tasks.iter().find(|t| t.id.value == id).expect("the task exists").reads
}

const TRIAGE: &str = "    - {id: triage, agent: m, input: go}\n";

#[test]
fn a_when_that_reads_upstream_outputs_loads_and_records_its_reads() {
    let loaded = load(
        "",
        &format!(
            "{TRIAGE}    - id: web\n      agent: m\n      input: search\n      depends_on: [triage]\n      \
             when: \"{{{{ tasks.triage.output.kind == 'web' }}}}\"\n"
        ),
    );
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let reads = reads(&loaded, "web");
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!((reads[0].task.as_str(), reads[0].field.as_deref()), ("triage", Some("kind")));
    assert_eq!(loaded.source.slice(reads[0].loc.span), "tasks.triage");
}

#[test]
fn a_when_that_does_not_parse_is_an_error_at_its_value() {
    let loaded = load("", "    - {id: a, agent: m, input: go, when: \"vars.x ==\"}\n");
    let error = only_error(&loaded, "plan::expression_syntax");
    assert_eq!(at(&loaded, error), "\"vars.x ==\"");
    assert_eq!(error.loc.path, "spec.workflow[0].when");
    assert!(error.to_string().contains("the `when` of task `a`"), "{error}");
}

#[test]
fn a_when_reading_a_task_that_is_not_upstream_is_the_template_error() {
    let loaded = load("", &format!("{TRIAGE}    - {{id: web, agent: m, input: go, when: tasks.triage.output}}\n"));
    let error = only_error(&loaded, "plan::template_not_ancestor");
    assert_eq!(at(&loaded, error), "tasks.triage");
    assert_eq!(error.help.as_deref(), Some("add `triage` to `depends_on` of `web`"));
}

#[test]
fn a_when_reading_an_unknown_name_is_refused_with_a_suggestion() {
    let loaded = load("", "    - {id: a, agent: m, input: go, when: \"misson == 'x'\"}\n");
    let error = only_error(&loaded, "plan::template_unknown_variable");
    assert_eq!(at(&loaded, error), "misson");
    assert_eq!(error.help.as_deref(), Some("did you mean `mission`?"));
}

#[test]
fn a_for_each_expression_follows_the_same_rules() {
    let loaded = load(
        "",
        &format!("{TRIAGE}    - {{id: each, agent: m, input: go, for_each: tasks.triage.output, max_items: 3}}\n"),
    );
    assert_eq!(codes(&loaded), ["plan::template_not_ancestor"]);
    let loaded = load("", "    - {id: each, agent: m, input: go, for_each: \"{{ [1, 2\"}\n");
    assert_eq!(codes(&loaded), ["plan::expression_syntax"]);
}

#[test]
fn a_map_over_run_time_data_needs_max_items() {
    let map = "    - {id: each, agent: m, input: \"{{ item }}\", depends_on: [triage], for_each: \"{{ tasks.triage.output.urls }}\"";
    let loaded = load("", &format!("{TRIAGE}{map}}}\n"));
    let error = only_error(&loaded, "plan::unbounded_map");
    assert_eq!(at(&loaded, error), "\"{{ tasks.triage.output.urls }}\"");
    assert_eq!(error.loc.path, "spec.workflow[1].for_each");
    assert!(error.to_string().contains("run-time data"), "{error}");
    assert!(error.help.as_deref().is_some_and(|h| h.contains("more than N items fails the task")), "{error:?}");
    assert_eq!(reads(&loaded, "each")[0].task, "triage", "the critic sees what the list is made of");

    let bounded = load("", &format!("{TRIAGE}{map}, max_items: 20}}\n"));
    assert!(bounded.is_valid(), "{:#?}", errors(&bounded));
    // A list from the plan's own vars is known before the run starts.
    let from_vars = load("", "    - {id: each, agent: m, input: \"{{ item }}\", for_each: vars.urls}\n");
    assert!(from_vars.is_valid(), "{:#?}", errors(&from_vars));
}

#[test]
fn a_written_list_longer_than_max_items_is_an_error() {
    let loaded = load("", "    - {id: each, agent: m, input: \"{{ item }}\", for_each: [a, b, c], max_items: 2}\n");
    let error = only_error(&loaded, "plan::too_many_items");
    assert_eq!(at(&loaded, error), "[", "where the list starts");
    assert_eq!(error.loc.path, "spec.workflow[0].for_each");
    assert_eq!(error.to_string(), "task `each` maps over 3 items, more than its `max_items` of 2");
    assert_eq!(error.related.len(), 1);
    assert_eq!(loaded.source.slice(error.related[0].0), "2", "the bound it breaks");
    let fits = load("", "    - {id: each, agent: m, input: \"{{ item }}\", for_each: [a, b], max_items: 2}\n");
    assert!(fits.is_valid(), "{:#?}", errors(&fits));
}

#[test]
fn max_items_without_for_each_is_an_error_at_its_value() {
    let loaded = load("", "    - id: a\n      agent: m\n      input: \"max_items: 3 of them\"\n      max_items: 3\n");
    let error = only_error(&loaded, "plan::invalid_value");
    assert_eq!(at(&loaded, error), "3");
    assert_eq!(loaded.source.line_column(error.loc.span.offset()), (10, 18));
    assert_eq!(error.loc.path, "spec.workflow[0].max_items");
    assert!(error.to_string().contains("has no `for_each`"), "{error}");
}

#[test]
fn a_review_cannot_be_mapped() {
    let loaded = load("", "    - {id: ok, type: human_review, prompt: fine?, for_each: [a, b]}\n");
    let error = only_error(&loaded, "plan::invalid_value");
    assert_eq!(error.loc.path, "spec.workflow[0].for_each");
    assert!(error.to_string().contains("human_review"), "{error}");
}

#[test]
fn item_and_index_are_read_only_inside_a_map() {
    let inside = load(
        "",
        "    - id: each\n      agent: m\n      input: \"{{ index }}: {{ item.url }}\"\n      when: \"item.url != ''\"\n      \
         for_each: [{url: a}]\n",
    );
    assert!(inside.is_valid(), "{:#?}", errors(&inside));

    let outside = load("", "    - {id: a, agent: m, input: \"Read the items: {{ item.url }}\"}\n");
    let error = only_error(&outside, "plan::item_outside_map");
    assert_eq!(at(&outside, error), "item.url", "the name, not the word `items` before it");
    assert!(error.to_string().contains("only set inside a map (a task with `for_each`)"), "{error}");

    // The list a map's items come from is known before any item.
    let in_for_each = load("", "    - {id: a, agent: m, input: go, for_each: \"item.urls\"}\n");
    assert_eq!(codes(&in_for_each), ["plan::item_outside_map"]);
    let in_when = load("", "    - {id: a, agent: m, input: go, when: index}\n");
    assert_eq!(codes(&in_when), ["plan::item_outside_map"]);
}

#[test]
fn items_carried_into_a_replanned_plan_may_read_item() {
    let loaded = load(
        "  control_logic: {planner: m}\n",
        "    - {id: each, agent: m, input: \"{{ item }}\", for_each: [a, b]}\n    \
         - {id: last, agent: m, input: go, depends_on: [each], on_failure: replan}\n",
    );
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let mut plan = loaded.plan.expect("the plan was read");
    let mut item = plan.tasks[0].clone();
    item.id.value = "each[0]".into();
    item.extras_mut().for_each = None;
    let mut stray = item.clone();
    stray.id.value = "other[0]".into();
    plan.tasks.insert(1, item);
    plan.tasks.insert(2, stray);
    let spliced = splice(&plan, &["last"], "last", r#"{"workflow": [{"id": "again", "agent": "m", "input": "go"}]}"#);
    let errors: Vec<(String, String)> = spliced.errors().map(|d| (d.code(), d.to_string())).collect();
    assert_eq!(
        errors,
        [(
            "plan::item_outside_map".to_owned(),
            "the input of task `other[0]` reads `item`, which is only set inside a map (a task with `for_each`)"
                .to_owned()
        )],
        "`each[0]` is an item of the map `each`; `other` is no map"
    );
}

#[test]
fn declared_vars_are_the_only_vars_read() {
    let declared = "  vars: {topic: rust, depth: 2}\n";
    let loaded = load(
        declared,
        "    - {id: a, agent: m, input: \"{{ vars.topic }} and {{ vars.topics }}\", when: vars.deph > 1}\n",
    );
    let errors = errors(&loaded);
    assert_eq!(codes(&loaded), ["plan::undeclared_var", "plan::undeclared_var"], "{errors:#?}");
    assert_eq!(at(&loaded, errors[0]), "vars.topics", "the undeclared one, not the first `vars`");
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `topic`?"));
    assert_eq!(at(&loaded, errors[1]), "vars.deph");
    assert_eq!(errors[1].help.as_deref(), Some("did you mean `depth`?"));
    assert!(errors[1].to_string().contains("the `when` of task `a`"), "{}", errors[1]);

    let for_each = load(declared, "    - {id: a, agent: m, input: \"{{ item }}\", for_each: vars.pages}\n");
    assert_eq!(codes(&for_each), ["plan::undeclared_var"]);

    let undeclared = load("", "    - {id: a, agent: m, input: \"{{ vars.anything }}\", when: vars.other}\n");
    assert!(undeclared.is_valid(), "a plan that declares no vars reads any: {:#?}", self::errors(&undeclared));
}

#[test]
fn an_id_naming_a_map_item_is_refused_where_it_is_written() {
    let loaded = load("", "    - {id: \"search[0]\", agent: m, input: go}\n");
    let error = only_error(&loaded, "plan::invalid_value");
    assert_eq!(at(&loaded, error), "\"search[0]\"");
    assert_eq!(error.loc.path, "spec.workflow[0].id");
    assert!(error.to_string().contains("item of the map `search`"), "{error}");
    for fine in ["search[x]", "search[]", "list[0]s"] {
        let loaded = load("", &format!("    - {{id: \"{fine}\", agent: m, input: go}}\n"));
        assert!(loaded.is_valid(), "{fine}: {:#?}", errors(&loaded));
    }
}
