//! The critic on the plan corpus of `shared/corpus/` (real plans written by LLMs and by the
//! ptc_runner authors): every plan gets a report, plans with errors score 0, scores stay
//! within 0-10, and the findings the corpus README expects from the seed's PlanCritic are
//! there (under this critic's codes).
//!
//! The corpus lives outside the repository; without it these tests say so and pass.

mod corpus_plans;

use manifest::Loaded;
use manifest::critic::{Critique, Finding, Lint, critique};

/// The critic's report on a loaded plan, as `runner critic` makes it: a plan with errors
/// cannot run and gets the unrunnable report.
fn review(loaded: &Loaded) -> Critique {
    match (&loaded.plan, loaded.is_valid()) {
        (Some(plan), true) => critique(plan),
        _ => Critique::unrunnable(),
    }
}

/// Loads `ptc_runner-<name>.json` and reviews it, or `None` when the corpus is absent.
fn reviewed(name: &str) -> Option<Critique> {
    let loaded = corpus_plans::load(name, "critic corpus tests")?;
    assert!(loaded.is_valid(), "{name} is valid: {:?}", loaded.errors().map(|d| d.code()).collect::<Vec<_>>());
    Some(review(&loaded))
}

fn with_code<'c>(critique: &'c Critique, code: &str) -> Vec<&'c Finding> {
    critique.findings.iter().filter(|f| f.code() == format!("critic::{code}")).collect()
}

fn tasks_of(findings: &[&Finding]) -> Vec<String> {
    let mut tasks: Vec<String> = findings.iter().filter_map(|f| f.task.clone()).collect();
    tasks.sort();
    tasks
}

#[test]
fn every_corpus_plan_gets_a_report_with_scores_within_0_to_10() {
    let Some(files) = corpus_plans::corpus("critic corpus tests") else { return };
    assert!(!files.is_empty());
    let mut invalid = 0;
    for path in files {
        let loaded = manifest::load_file(&path);
        let report = review(&loaded);
        let name = path.display();
        for score in report.scores.dimensions.iter().chain([&report.scores.overall]) {
            assert!((0.0..=10.0).contains(score), "{name}: score {score}");
        }
        if loaded.is_valid() {
            assert!(!report.metrics.critical_path.is_empty(), "{name}: a valid plan has a critical path");
            assert!(report.scores.overall > 0.0, "{name}: a valid plan scores above 0 here");
            // The same plan reviewed twice gives the same report.
            assert_eq!(review(&loaded), report, "{name}");
        } else {
            invalid += 1;
            assert_eq!(report.scores.overall, 0.0, "{name}: a plan with errors scores 0");
            assert!(report.scores.dimensions.iter().all(|&d| d == 0.0), "{name}");
            assert!(report.findings.is_empty(), "{name}");
            // A plan object that loaded with errors does not get a better score from `critique`
            // when its graph cannot be built.
            if let Some(plan) = &loaded.plan
                && manifest::TaskGraph::build(plan).is_err()
            {
                assert_eq!(critique(plan).scores.overall, 0.0, "{name}");
            }
        }
    }
    // cycle-3, multiple-errors, missing-dep, repair1-no-tasks at least.
    assert!(invalid >= 4, "only {invalid} invalid plans");
}

#[test]
fn a_cycle_scores_0_through_critique_itself() {
    let Some(loaded) = corpus_plans::load("test-cycle-3", "critic corpus tests") else { return };
    assert!(!loaded.is_valid());
    let plan = loaded.plan.as_ref().expect("a cycle still parses to a plan");
    assert_eq!(critique(plan), Critique::unrunnable());
}

#[test]
fn the_flawed_parallel_plan_scores_below_9_with_a_missing_gate_and_optimism_bias() {
    let Some(report) = reviewed("e2e-flawed-parallel-no-gate") else { return };
    assert!(report.scores.overall < 9.0, "score {}", report.scores.overall);
    assert!(!report.findings.is_empty());
    // The seed's `missing_gate` is `wide_fan_in` here: `analyze` reads four raw outputs.
    assert_eq!(tasks_of(&with_code(&report, "wide_fan_in")), ["analyze"]);
    // The seed's `optimism_bias` ×4: "Search web…" ×3 and "Fetch API data".
    assert_eq!(tasks_of(&with_code(&report, "optimism_bias")), ["search1", "search2", "search3", "search4"]);
}

#[test]
fn twelve_parallel_tasks_are_a_parallel_explosion() {
    let Some(report) = reviewed("test-parallel-explosion-12") else { return };
    let explosions = with_code(&report, "parallel_explosion");
    assert_eq!(explosions.len(), 1);
    assert!(matches!(explosions[0].lint, Lint::ParallelExplosion { phase: 1, size: 12 }), "{:?}", explosions[0].lint);
    assert!(explosions[0].to_string().contains("12"), "{}", explosions[0]);
}

#[test]
fn the_ideal_stock_research_plan_has_optimism_bias_on_its_fetch_and_search_tasks() {
    let Some(report) = reviewed("prompt-example-stock-research") else { return };
    assert_eq!(tasks_of(&with_code(&report, "optimism_bias")), ["fetch_apple_price", "search_apple_news"]);
}

#[test]
fn unused_agents_are_found_in_q2run4_and_the_viewer_plan() {
    for (name, agent) in
        [("llm-operating-margin-q2run4", "analyst"), ("llm-capital-intensity-viewer-plan", "extract_values")]
    {
        let Some(report) = reviewed(name) else { return };
        let unused: Vec<&Lint> = with_code(&report, "unused_agent").iter().map(|f| &f.lint).collect();
        assert_eq!(unused, [&Lint::UnusedAgent { name: agent.into() }], "{name}");
    }
}

#[test]
fn the_france_livebook_has_a_redundant_edge_from_summary_to_step1() {
    let Some(report) = reviewed("livebook-france-synthesis") else { return };
    let redundant: Vec<&Lint> = with_code(&report, "redundant_edge").iter().map(|f| &f.lint).collect();
    assert_eq!(
        redundant,
        [&Lint::RedundantEdge { task: "summary".into(), dependency: "step1".into(), via: "step2".into() }]
    );
}

#[test]
fn task_ids_and_past_participles_are_not_evidence_of_an_outside_service() {
    // The viewer plan's `extract_*` tasks read `data/results ["search_capex" ...]`: a task id,
    // not a search. Their `search_*` parents do call the `search` tool.
    let Some(report) = reviewed("llm-capital-intensity-viewer-plan") else { return };
    let tasks = tasks_of(&with_code(&report, "optimism_bias"));
    assert!(tasks.iter().all(|t| t.starts_with("search_")), "{tasks:?}");
    assert_eq!(tasks.len(), 5, "{tasks:?}");
    // q2run3's `analyze_drivers` works "based on the fetched MD&A sections": already fetched.
    let Some(report) = reviewed("llm-operating-margin-q2run3") else { return };
    let tasks = tasks_of(&with_code(&report, "optimism_bias"));
    assert!(!tasks.contains(&"analyze_drivers".to_owned()), "{tasks:?}");
    assert!(tasks.iter().all(|t| t.starts_with("fetch_")), "{tasks:?}");
}
