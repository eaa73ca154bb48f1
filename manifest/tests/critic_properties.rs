//! Properties of the critic on random valid plans: random DAGs (dependencies only on earlier
//! tasks) of plain tasks, gates and human reviews, with random failure policies, templates
//! reading ancestors' outputs, fields and statuses, parallel groups and limits, schema checks
//! and strategies. `critique` never panics, every score is within 0-10, the overall score is
//! the documented formula of the findings, and the review is deterministic.

use std::fmt::Write as _;

use manifest::Severity;
use manifest::critic::{Critique, Dimension, critique};
use proptest::prelude::*;

/// One random task, as indices and choices; [`render`] turns a list of them into YAML.
#[derive(Debug, Clone)]
struct TaskSpec {
    kind: u8,
    agent: u8,
    deps: Vec<prop::sample::Index>,
    reads: Vec<(prop::sample::Index, u8)>,
    policy: u8,
    critical: bool,
    group: Option<u8>,
    verification: Option<u8>,
    max_output_tokens: Option<u16>,
}

fn task_spec() -> impl Strategy<Value = TaskSpec> {
    (
        0u8..6,
        0u8..4,
        prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4), 0..4),
        0u8..6,
        any::<bool>(),
        prop::option::of(0u8..3),
        prop::option::of(0u8..3),
        prop::option::of(1u16..3000),
    )
        .prop_map(|(kind, agent, deps, reads, policy, critical, group, verification, max_output_tokens)| {
            TaskSpec { kind, agent, deps, reads, policy, critical, group, verification, max_output_tokens }
        })
}

#[derive(Debug, Clone)]
struct PlanSpec {
    tasks: Vec<TaskSpec>,
    strategy: u8,
    max_concurrency: Option<u8>,
    group_limits: [Option<u8>; 3],
    context_budget: Option<u16>,
    llm_max_turns: Option<u8>,
    reliability: Option<u8>,
    critical_path: Vec<prop::sample::Index>,
}

fn plan_spec() -> impl Strategy<Value = PlanSpec> {
    (
        prop::collection::vec(task_spec(), 1..25),
        0u8..3,
        prop::option::of(1u8..20),
        [prop::option::of(1u8..5), prop::option::of(1u8..5), prop::option::of(1u8..5)],
        prop::option::of(100u16..20_000),
        prop::option::of(1u8..10),
        prop::option::of(0u8..=10),
        prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    )
        .prop_map(
            |(
                tasks,
                strategy,
                max_concurrency,
                group_limits,
                context_budget,
                llm_max_turns,
                reliability,
                critical_path,
            )| {
                PlanSpec {
                    tasks,
                    strategy,
                    max_concurrency,
                    group_limits,
                    context_budget,
                    llm_max_turns,
                    reliability,
                    critical_path,
                }
            },
        )
}

const FIELDS: [&str; 3] = ["title", "score", "items"];

/// The enveloped YAML text of a random plan. Every dependency and read goes to an earlier task,
/// every read task is a dependency (so an ancestor), and critical tasks never `skip`.
fn render(spec: &PlanSpec) -> String {
    let mut out = String::from("apiVersion: runner/v1\nkind: Plan\nmetadata:\n  name: random\nspec:\n");
    out.push_str("  mission: Test the critic.\n");
    if !spec.critical_path.is_empty() {
        let ids: Vec<String> = spec.critical_path.iter().map(|i| format!("t{}", i.index(spec.tasks.len()))).collect();
        let _ = writeln!(out, "  mission_analysis:\n    critical_path: [{}]", ids.join(", "));
    }
    out.push_str("  providers:\n    local:\n      base_url: http://localhost:11434/v1\n      model: m\n");
    out.push_str("      context_window: 8000\n");
    out.push_str("  tools:\n    web_search:\n      description: Search the web\n      command: [echo]\n");
    out.push_str("    wipe:\n      description: Delete files\n      command: [echo]\n      destructive: true\n");
    out.push_str("  agent_definitions:\n");
    out.push_str("    mocker:\n      runtime: mock\n");
    out.push_str("    shell:\n      runtime: command\n      command: [cat]\n");
    out.push_str("    thinker:\n      runtime: llm\n      provider: local\n");
    out.push_str("      system_prompt: You are a tester. Return JSON. Never guess.\n      tools: [web_search]\n");
    if let Some(turns) = spec.llm_max_turns {
        let _ = writeln!(out, "      max_turns: {turns}");
    }
    if let Some(weight) = spec.reliability {
        let _ = writeln!(out, "      reliability_weight: {}", f64::from(weight) / 10.0);
    }
    out.push_str("    cleaner:\n      runtime: llm\n      provider: local\n      tools: [wipe]\n      max_turns: 2\n");
    out.push_str("    spare:\n      runtime: mock\n");
    out.push_str("  workflow:\n");
    for (i, task) in spec.tasks.iter().enumerate() {
        let mut deps: Vec<usize> = if i == 0 { Vec::new() } else { task.deps.iter().map(|d| d.index(i)).collect() };
        deps.sort_unstable();
        deps.dedup();
        // 0-3: a task; 4: a gate (needs an input); 5: a human review.
        let kind = match task.kind {
            4 if !deps.is_empty() => "synthesis_gate",
            5 => "human_review",
            _ => "task",
        };
        let _ = writeln!(out, "    - id: t{i}");
        if kind != "task" {
            let _ = writeln!(out, "      type: {kind}");
        }
        match kind {
            "synthesis_gate" => {
                let inputs: Vec<String> = deps.iter().map(|d| format!("t{d}")).collect();
                let _ = writeln!(out, "      inputs: [{}]", inputs.join(", "));
                let _ = writeln!(out, "      max_output_tokens: {}", task.max_output_tokens.unwrap_or(500));
            }
            "human_review" => {
                let _ = writeln!(out, "      prompt: \"Approve {}?\"", reads(task, &deps));
            }
            _ => {
                let agent = ["mocker", "shell", "thinker", "cleaner"][usize::from(task.agent)];
                let _ = writeln!(out, "      agent: {agent}");
                let _ = writeln!(out, "      input: \"Work on {}\"", reads(task, &deps));
                if let Some(tokens) = task.max_output_tokens {
                    let _ = writeln!(out, "      max_output_tokens: {tokens}");
                }
            }
        }
        if !deps.is_empty() {
            let ids: Vec<String> = deps.iter().map(|d| format!("t{d}")).collect();
            let _ = writeln!(out, "      depends_on: [{}]", ids.join(", "));
        }
        let critical = task.critical && kind == "task";
        if critical {
            out.push_str("      critical: true\n");
        }
        let policy = match (task.policy, critical) {
            (0, _) => None,
            (1, _) => Some("fail"),
            (2, false) => Some("skip"),
            (3, _) => Some("retry"),
            (4, false) => Some("{action: retry, max_attempts: 2, then: skip}"),
            _ => Some("{action: retry, max_attempts: 3, backoff: 1s, then: fail}"),
        };
        if let Some(policy) = policy {
            let _ = writeln!(out, "      on_failure: {policy}");
        }
        if let Some(group) = task.group {
            let _ = writeln!(out, "      parallel_group: g{group}");
        }
        if let (Some(v), "task") = (task.verification, kind) {
            let required: Vec<&str> = FIELDS[..=usize::from(v)].to_vec();
            let properties: Vec<String> = required.iter().map(|f| format!("{f}: {{}}")).collect();
            let _ = writeln!(
                out,
                "      verification: {{type: schema_check, schema: {{type: object, required: [{}], properties: {{{}}}}}}}",
                required.join(", "),
                properties.join(", ")
            );
        }
    }
    out.push_str("  control_logic:\n");
    let _ = writeln!(out, "    strategy: {}", ["eager", "phased", "sequential"][usize::from(spec.strategy)]);
    if let Some(max) = spec.max_concurrency {
        let _ = writeln!(out, "    max_concurrency: {max}");
    }
    if let Some(budget) = spec.context_budget {
        let _ = writeln!(out, "    context_budget: {budget}");
    }
    let limits: Vec<String> = spec
        .group_limits
        .iter()
        .enumerate()
        .filter_map(|(g, limit)| limit.map(|l| format!("g{g}: {{max_concurrency: {l}}}")))
        .collect();
    if !limits.is_empty() {
        let _ = writeln!(out, "    parallel_groups: {{{}}}", limits.join(", "));
    }
    out
}

/// Template text reading some of a task's dependencies: whole outputs, fields or statuses.
fn reads(task: &TaskSpec, deps: &[usize]) -> String {
    if deps.is_empty() {
        return "the mission {{ mission }}".into();
    }
    let mut text = String::new();
    for (index, what) in &task.reads {
        let dep = deps[index.index(deps.len())];
        let read = match what {
            0 => format!("{{{{ tasks.t{dep}.output }}}}"),
            1 => format!("{{{{ tasks.t{dep}.status }}}}"),
            field => format!("{{{{ tasks.t{dep}.output.{} }}}}", FIELDS[usize::from(*field) - 1]),
        };
        let _ = write!(text, "{read} ");
    }
    text
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The documented formula, redone from the findings.
fn formula(report: &Critique) -> ([f64; 5], f64) {
    let mut dimensions = [10.0_f64; 5];
    let mut general = 0.0;
    for finding in &report.findings {
        let warning = finding.severity != Severity::Info;
        match finding.dimension() {
            Some(d) => {
                let index = Dimension::ALL.iter().position(|x| *x == d).expect("a dimension");
                dimensions[index] -= if warning { 2.0 } else { 0.5 };
            }
            None => general += if warning { 0.5 } else { 0.1 },
        }
    }
    for score in &mut dimensions {
        *score = round1(score.max(0.0));
    }
    let mean = dimensions.iter().sum::<f64>() / 5.0;
    (dimensions, round1((mean - general).clamp(0.0, 10.0)))
}

/// Whether every path from a root to a sink goes through `task`: no other root reaches another
/// sink without it. By search from the other roots, task by task.
fn on_every_path(graph: &manifest::TaskGraph, task: usize) -> bool {
    let mut seen = vec![false; graph.len()];
    let mut stack: Vec<usize> = graph.roots().into_iter().filter(|&r| r != task).collect();
    while let Some(at) = stack.pop() {
        if std::mem::replace(&mut seen[at], true) {
            continue;
        }
        if graph.children(at).next().is_none() {
            return false;
        }
        stack.extend(graph.children(at).filter(|&c| c != task));
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn implied_parents_are_the_parents_another_parent_descends_from(spec in plan_spec()) {
        let text = render(&spec);
        let loaded = manifest::load_str("random.yaml", "random", &text, &|_| true);
        let graph = loaded.graph.as_ref().expect("the generator makes valid plans");
        for task in 0..graph.len() {
            let parents: Vec<usize> = graph.parents(task).collect();
            let pairwise: std::collections::HashSet<usize> = parents
                .iter()
                .copied()
                .filter(|&d| parents.iter().any(|&e| e != d && graph.is_ancestor(d, e)))
                .collect();
            prop_assert_eq!(graph.implied_parents(task), pairwise, "task {}\n{}", task, text);
        }
    }

    #[test]
    fn single_points_of_failure_are_the_tasks_every_root_to_sink_path_crosses(spec in plan_spec()) {
        let text = render(&spec);
        let loaded = manifest::load_str("random.yaml", "random", &text, &|_| true);
        let (plan, graph) = loaded.valid().expect("the generator makes valid plans");
        let expected: Vec<&str> = (0..graph.len())
            .filter(|&t| on_every_path(graph, t))
            .map(|t| &plan.tasks[t])
            .filter(|task| !task.on_failure.value.has_fallback() && task.kind != manifest::plan::TaskKind::HumanReview)
            .map(|task| task.id.value.as_str())
            .collect();
        let report = critique(plan);
        let mut found: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.code() == "critic::single_point_of_failure")
            .filter_map(|f| f.task.as_deref())
            .collect();
        found.sort_by_key(|id| plan.tasks.iter().position(|t| t.id.value == *id));
        prop_assert_eq!(found, expected, "{}", text);
    }

    #[test]
    fn redundant_edges_are_the_dependencies_another_parent_descends_from(spec in plan_spec()) {
        let text = render(&spec);
        let loaded = manifest::load_str("random.yaml", "random", &text, &|_| true);
        let (plan, graph) = loaded.valid().expect("the generator makes valid plans");
        let mut expected = Vec::new();
        for (i, task) in plan.tasks.iter().enumerate() {
            for dep in &task.depends_on {
                let Some(d) = graph.index_of(&dep.value) else { continue };
                if task.chained_after.as_deref() != Some(dep.value.as_str())
                    && graph.parents(i).any(|e| e != d && graph.is_ancestor(d, e))
                {
                    expected.push((task.id.value.to_string(), dep.value.to_string()));
                }
            }
        }
        let mut found: Vec<(String, String)> = critique(plan)
            .findings
            .into_iter()
            .filter_map(|f| match f.lint {
                manifest::critic::Lint::RedundantEdge { task, dependency, .. } => Some((task, dependency)),
                _ => None,
            })
            .collect();
        expected.sort();
        found.sort();
        prop_assert_eq!(found, expected, "{}", text);
    }

    #[test]
    fn critique_of_a_random_valid_plan_is_bounded_follows_the_formula_and_is_deterministic(spec in plan_spec()) {
        let text = render(&spec);
        let loaded = manifest::load_str("random.yaml", "random", &text, &|_| true);
        let errors: Vec<String> = loaded.errors().map(|d| format!("{}: {d}", d.code())).collect();
        prop_assert!(loaded.is_valid(), "the generator made an invalid plan: {errors:?}\n{text}");
        let plan = loaded.plan.as_ref().expect("a valid plan");
        let report = critique(plan);
        for score in report.scores.dimensions.iter().chain([&report.scores.overall]) {
            prop_assert!((0.0..=10.0).contains(score), "score {score}");
        }
        let (dimensions, overall) = formula(&report);
        prop_assert_eq!(report.scores.dimensions, dimensions);
        prop_assert_eq!(report.scores.overall, overall);
        prop_assert!(report.findings.iter().all(|f| f.code().starts_with("critic::") && f.help.is_some()));
        prop_assert!(report.findings.iter().all(|f| f.loc.span.offset() <= text.len()));
        prop_assert_eq!(report.metrics.phases, loaded.graph.as_ref().expect("a graph").phases().len());
        for ratio in [report.metrics.resilience_score, report.metrics.parallelism_ratio, report.metrics.prompt_precision, report.metrics.synthesis_coverage] {
            prop_assert!((0.0..=1.0).contains(&ratio), "ratio {ratio}");
        }
        // The compact review tells each finding's code, severity, dimension, task and place
        // without making it, and agrees with the finding made whole; findings are in source order.
        let review = manifest::critic::review(plan, loaded.graph.as_ref().expect("a graph"));
        prop_assert_eq!(review.len(), report.findings.len());
        for (i, finding) in report.findings.iter().enumerate() {
            prop_assert_eq!(review.code(i), finding.code());
            prop_assert_eq!(review.severity(i), finding.severity);
            prop_assert_eq!(review.dimension(i), finding.dimension());
            prop_assert_eq!(review.task(i), finding.task.as_deref());
            prop_assert_eq!(review.offset(i), finding.loc.span.offset());
        }
        prop_assert!(report.findings.windows(2).all(|pair| pair[0].loc.span.offset() <= pair[1].loc.span.offset()));
        // Deterministic: the same plan, critiqued again or loaded again, gives the same report.
        prop_assert_eq!(&critique(plan), &report);
        let again = manifest::load_str("random.yaml", "random", &text, &|_| true);
        prop_assert_eq!(&critique(again.plan.as_ref().expect("a valid plan")), &report);
    }
}
