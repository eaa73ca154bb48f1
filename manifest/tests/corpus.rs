//! The plan corpus of `shared/corpus/` (real plans written by LLMs and by the ptc_runner
//! authors, in the bare seed form): the malformed ones fail with the located error the corpus
//! README expects, every other one loads, and the normalisations it lists hold.
//!
//! The corpus lives outside the repository; without it these tests say so and pass.

mod corpus_plans;

use manifest::plan::{Action, TaskKind};
use manifest::{Diagnostic, Loaded, Plan, Severity};

/// Loads `ptc_runner-<name>.json`, or `None` when the corpus is absent.
fn load(name: &str) -> Option<Loaded> {
    corpus_plans::load(name, "corpus tests")
}

fn errors(loaded: &Loaded) -> Vec<&Diagnostic> {
    loaded.errors().collect()
}

fn codes(diagnostics: &[&Diagnostic]) -> Vec<String> {
    diagnostics.iter().map(|d| d.code()).collect()
}

/// The 1-based line and column a diagnostic points at.
fn line_column(loaded: &Loaded, diagnostic: &Diagnostic) -> (usize, usize) {
    loaded.source.line_column(diagnostic.loc.span.offset())
}

fn plan(loaded: &Loaded) -> &Plan {
    loaded.plan.as_ref().expect("the plan was read")
}

const MALFORMED: &[&str] = &[
    "llm-operating-margin-q2run4-repair1-no-tasks",
    "guide-stock-compare-missing-dep",
    "test-cycle-3",
    "test-multiple-errors",
];

#[test]
fn every_well_formed_corpus_plan_is_valid() {
    let Some(files) = corpus_plans::corpus("corpus tests") else { return };
    assert_eq!(files.len(), 20, "the corpus README lists 20 plans");
    for file in files {
        let name =
            file.file_stem().expect("a file stem").to_string_lossy().trim_start_matches("ptc_runner-").to_owned();
        let loaded = manifest::load_file(&file);
        if MALFORMED.contains(&name.as_str()) {
            assert!(!loaded.is_valid(), "{name} is malformed and must not load as valid");
        } else {
            assert!(loaded.is_valid(), "{name} should be valid: {:#?}", errors(&loaded));
            assert!(!plan(&loaded).tasks.is_empty(), "{name} has tasks");
        }
    }
}

#[test]
fn a_plan_with_only_agents_is_an_empty_workflow() {
    let Some(loaded) = load("llm-operating-margin-q2run4-repair1-no-tasks") else { return };
    let errors = errors(&loaded);
    assert_eq!(codes(&errors), ["plan::empty_workflow"]);
    assert_eq!(line_column(&loaded, errors[0]), (1, 1), "the whole document: it has no task list to point at");
    assert!(loaded.plan.as_ref().is_none_or(|plan| plan.tasks.is_empty()));
}

#[test]
fn a_gate_reading_a_missing_task_names_it_where_it_is_written() {
    let Some(loaded) = load("guide-stock-compare-missing-dep") else { return };
    let errors = errors(&loaded);
    assert_eq!(codes(&errors), ["plan::unknown_gate_input"]);
    let error = errors[0];
    assert_eq!(error.to_string(), "synthesis gate `compare` reads unknown task `fetch_msft`");
    assert_eq!(loaded.source.slice(error.loc.span), "\"fetch_msft\"");
    assert_eq!(error.loc.path, "tasks[1].depends_on[1]");
    assert_eq!(line_column(&loaded, error), (20, 36));
}

#[test]
fn a_three_task_cycle_names_every_member() {
    let Some(loaded) = load("test-cycle-3") else { return };
    let errors = errors(&loaded);
    assert_eq!(codes(&errors), ["plan::cycle"]);
    let error = errors[0];
    assert_eq!(error.to_string(), "dependency cycle between `a`, `b`, `c`");
    match &error.problem {
        manifest::Problem::Cycle { members } => assert_eq!(members, &["a", "b", "c"]),
        other => panic!("expected a cycle, got {other:?}"),
    }
    assert_eq!(error.related.len(), 3, "one label per edge of the cycle");
    assert!(loaded.graph.is_none(), "a cyclic plan has no graph");
}

#[test]
fn several_mistakes_are_all_reported_in_one_pass() {
    let Some(loaded) = load("test-multiple-errors") else { return };
    let mut codes = codes(&errors(&loaded));
    codes.sort();
    assert_eq!(codes, ["plan::duplicate_task", "plan::unknown_agent", "plan::unknown_dependency"]);
    let messages: Vec<String> = loaded.errors().map(ToString::to_string).collect();
    assert!(messages.contains(&"duplicate task id `a`".to_owned()), "{messages:?}");
    assert!(messages.contains(&"task `a` uses unknown agent `nonexistent`".to_owned()), "{messages:?}");
    assert!(messages.contains(&"task `a` depends on unknown task `missing`".to_owned()), "{messages:?}");
}

#[test]
fn steps_with_action_become_tasks_with_input() {
    let Some(loaded) = load("test-steps-key") else { return };
    assert!(loaded.is_valid());
    let tasks = &plan(&loaded).tasks;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].id.value, "s1");
    assert_eq!(tasks[0].input.as_ref().map(|i| i.value.as_str()), Some("fetch data"));
    assert_eq!(plan(&loaded).agent_of(&tasks[0]), Some("default"));
}

#[test]
fn nested_plan_steps_with_description_become_tasks_with_input() {
    let Some(loaded) = load("test-nested-plan-steps") else { return };
    assert!(loaded.is_valid());
    let tasks = &plan(&loaded).tasks;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].id.value, "p1");
    assert_eq!(tasks[0].input.as_ref().map(|i| i.value.as_str()), Some("step one"));
}

#[test]
fn requires_is_read_as_depends_on() {
    let Some(loaded) = load("test-requires-key") else { return };
    assert!(loaded.is_valid());
    let tasks = &plan(&loaded).tasks;
    let t2 = tasks.iter().find(|t| t.id.value == "t2").expect("a task t2");
    let depends_on: Vec<&str> = t2.depends_on.iter().map(|d| d.value.as_str()).collect();
    assert_eq!(depends_on, ["t1"]);
    let alias = loaded
        .diagnostics
        .iter()
        .find(|d| matches!(&d.problem, manifest::Problem::Alias { written, .. } if written == "requires"))
        .expect("the alias is noted");
    assert_eq!(alias.severity, Severity::Info);
    assert_eq!(alias.to_string(), "`requires` read as `depends_on`");
    assert_eq!(loaded.source.slice(alias.loc.span), "\"requires\"");
}

#[test]
fn results_templates_are_rewritten_to_task_outputs() {
    let Some(loaded) = load("livebook-france-synthesis") else { return };
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let tasks = &plan(&loaded).tasks;
    let input = |id: &str| {
        let task = tasks.iter().find(|t| t.id.value == id).unwrap_or_else(|| panic!("a task {id}"));
        task.input.as_ref().map(|i| i.value.clone()).unwrap_or_default()
    };
    assert_eq!(input("step2"), "What is the population of {{tasks.step1.output.capital}}? Return as {population: int}");
    assert!(input("summary").contains("{{tasks.step1.output.capital}}"), "{}", input("summary"));
    assert!(input("summary").contains("{{tasks.step2.output.population}}"), "{}", input("summary"));
    assert!(!input("summary").contains("results."), "{}", input("summary"));
}

#[test]
fn an_unknown_task_type_loads_as_a_plain_task_with_a_warning() {
    let Some(loaded) = load("llm-operating-margin-q2run3") else { return };
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let warning = loaded
        .diagnostics
        .iter()
        .find(|d| d.code() == "plan::unsupported" && loaded.source.slice(d.loc.span).contains("computation_gate"))
        .expect("a warning at `computation_gate`");
    assert_eq!(warning.severity, Severity::Warning);
    assert_eq!(warning.loc.path, "tasks[6].type");
    let task = &plan(&loaded).tasks[6];
    assert_eq!(task.kind, TaskKind::Task, "{} should be a plain task", task.id.value);
}

#[test]
fn a_human_review_type_is_kept() {
    let Some(loaded) = load("e2e-human-review") else { return };
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let tasks = &plan(&loaded).tasks;
    let kinds: Vec<(&str, TaskKind)> = tasks.iter().map(|t| (t.id.value.as_str(), t.kind)).collect();
    assert_eq!(kinds, [("research", TaskKind::Task), ("verify", TaskKind::HumanReview), ("report", TaskKind::Task)]);
    let verify = &tasks[1];
    assert!(verify.agent.is_none(), "a person reviews, not an agent");
    assert!(
        verify.extras().prompt.as_ref().is_some_and(|p| p.value.starts_with("Please verify")),
        "the bare form's input is the reviewer's question: {:?}",
        verify.extras().prompt
    );
}

#[test]
fn default_failure_policy_is_fail() {
    let Some(loaded) = load("e2e-flawed-parallel-no-gate") else { return };
    assert!(loaded.is_valid(), "{:#?}", errors(&loaded));
    let plan = plan(&loaded);
    assert!(plan.tasks.iter().filter(|t| t.critical).count() >= 4, "four critical searches");
    assert!(plan.tasks.iter().all(|t| t.on_failure.value.action == Action::Fail));
}
