//! `runner critic` on the shipped examples: every plan in `examples/critic/` produces the
//! finding its file is named after, at the place the table below names; every lint has an
//! example; the reports keep their documented shapes (JSON, SARIF) and their formula; the
//! exit codes follow the documentation; the good examples score well.

use std::collections::{BTreeMap, BTreeSet};

mod shipped;

use serde_json::Value;
use shipped::{Located, located, plans_in, repo_root, runner, stem};

fn critic_examples() -> Vec<String> {
    plans_in("examples/critic")
}

/// Runs `runner critic PLAN ARGS...` and returns the exit code, stdout and stderr.
fn critic(plan: &str, args: &[&str]) -> (i32, String, String) {
    let output = runner().arg("critic").arg(plan).args(args).output().expect("runner runs");
    (
        output.status.code().expect("an exit code"),
        String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    )
}

/// Runs `runner critic --format json` and returns the exit code and the parsed report.
fn critic_json(plan: &str) -> (i32, Value) {
    let (code, stdout, _) = critic(plan, &["--format", "json"]);
    let report =
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{plan}: stdout is not JSON ({error}): {stdout}"));
    (code, report)
}

fn findings(report: &Value) -> &Vec<Value> {
    report["findings"].as_array().expect("`findings` is a list")
}

fn codes(report: &Value) -> Vec<&str> {
    findings(report).iter().map(|f| f["code"].as_str().expect("a code")).collect()
}

#[test]
fn every_critic_example_is_a_valid_plan() {
    for plan in critic_examples() {
        let output = runner().args(["validate", &plan]).output().expect("runner runs");
        assert_eq!(output.status.code(), Some(0), "{plan}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

#[test]
fn every_critic_example_produces_the_finding_it_is_named_after() {
    for plan in critic_examples() {
        let (code, report) = critic_json(&plan);
        // A budget the plan cannot keep is the one finding that is an error.
        let errors = findings(&report).iter().any(|f| f["severity"] == "error");
        assert_eq!(errors, plan.ends_with("budget_not_kept.yaml"), "{plan}");
        assert_eq!(code, if errors { 2 } else { 0 }, "{plan} exits 0, or 2 with an error");
        let expected = format!("critic::{}", stem(&plan));
        assert!(codes(&report).contains(&expected.as_str()), "{plan}: expected {expected}, got {:?}", codes(&report));
    }
}

/// Every finding of every example, checked by hand against the file: (file stem, code, task,
/// line, column). Each example has exactly these findings and no others.
const EXPECTED: &[(&str, &str, Option<&str>, u64, u64)] = &[
    ("budget_not_kept", "budget_not_kept", None, 23, 5),
    ("cache_not_deterministic", "cache_not_deterministic", Some("haiku"), 24, 14),
    ("condition_never_holds", "condition_never_holds", Some("explain"), 19, 13),
    ("context_budget", "context_budget", Some("condense"), 19, 14),
    ("expand_without_bounds", "expand_without_bounds", Some("investigate"), 12, 11),
    ("critical_path_mismatch", "critical_path_mismatch", None, 10, 21),
    ("critical_without_fallback", "critical_without_fallback", Some("publish"), 17, 19),
    ("destructive_without_review", "destructive_without_review", Some("clean"), 28, 11),
    ("fail_aborts_run", "fail_aborts_run", Some("extras"), 17, 11),
    ("forced_chain", "forced_chain", Some("weather"), 17, 11),
    ("long_unverified_chain", "long_unverified_chain", Some("polish"), 27, 11),
    ("map_without_synthesis", "map_without_synthesis", Some("summary"), 18, 29),
    ("missing_max_turns", "missing_max_turns", None, 14, 5),
    ("optimism_bias", "critical_without_fallback", Some("lookup"), 14, 11),
    ("optimism_bias", "optimism_bias", Some("lookup"), 14, 11),
    ("output_format_coupling", "output_format_coupling", Some("report"), 19, 25),
    ("over_budget", "over_budget", None, 24, 5),
    ("parallel_explosion", "parallel_explosion", None, 13, 12),
    ("plain_http_secret", "plain_http_secret", None, 12, 20),
    ("redundant_edge", "redundant_edge", Some("final"), 25, 28),
    ("single_point_of_failure", "single_point_of_failure", Some("collect"), 13, 11),
    ("unlimited_group", "unlimited_group", None, 13, 73),
    ("unread_dependency", "unread_dependency", Some("render"), 20, 20),
    ("unreliable_agent", "unreliable_agent", Some("estimate"), 15, 14),
    ("unused_agent", "unused_agent", None, 12, 5),
    ("unused_provider", "unused_provider", None, 10, 5),
    ("unused_tool", "unused_tool", None, 10, 5),
    ("wide_fan_in", "wide_fan_in", Some("merge"), 16, 11),
];

#[test]
fn every_finding_of_every_example_is_where_the_table_says() {
    let mut expected: BTreeMap<String, Vec<Located>> = BTreeMap::new();
    for (file, code, task, line, column) in EXPECTED {
        expected.entry(format!("examples/critic/{file}.yaml")).or_default().push((
            format!("critic::{code}"),
            task.map(str::to_owned),
            *line,
            *column,
        ));
    }
    let plans = critic_examples();
    assert_eq!(plans, expected.keys().cloned().collect::<Vec<_>>(), "the table covers every example");
    for plan in plans {
        let (_, report) = critic_json(&plan);
        assert_eq!(located(&report), expected[&plan], "{plan}");
        for finding in findings(&report) {
            assert_eq!(finding["file"], plan.as_str(), "{plan}: the finding names its file");
        }
    }
}

/// The codes of the `Lint` enum, without their `critic::` prefix.
fn lint_codes() -> BTreeSet<String> {
    let codes: BTreeSet<String> = manifest::critic::Lint::CODES
        .iter()
        .map(|code| code.strip_prefix("critic::").expect("every lint code starts with critic::").to_owned())
        .collect();
    assert!(codes.len() >= 20, "found only {codes:?} in Lint::CODES");
    codes
}

#[test]
fn every_lint_has_an_example() {
    let examples: BTreeSet<String> = critic_examples().iter().map(|p| stem(p).to_owned()).collect();
    let lints = lint_codes();
    let missing: Vec<&String> = lints.iter().filter(|code| !examples.contains(*code)).collect();
    assert!(missing.is_empty(), "lints with no example in examples/critic/: {missing:?}");
    let unknown: Vec<&String> = examples.iter().filter(|e| !lints.contains(*e)).collect();
    assert!(unknown.is_empty(), "examples named after no lint: {unknown:?}");
}

/// Representative examples: a scored warning, a coupling at a template read, a plan with two
/// findings, notes (one line each), and the mission-analysis check.
const SNAPSHOTTED: &[&str] = &[
    "examples/critic/single_point_of_failure.yaml",
    "examples/critic/output_format_coupling.yaml",
    "examples/critic/optimism_bias.yaml",
    "examples/critic/unused_agent.yaml",
    "examples/critic/critical_path_mismatch.yaml",
    "examples/research.yaml",
];

fn snapshot_name(plan: &str) -> String {
    if plan.starts_with("examples/critic/") { stem(plan).to_owned() } else { format!("example_{}", stem(plan)) }
}

#[test]
fn human_reports_match_their_snapshots() {
    for plan in SNAPSHOTTED {
        let (code, stdout, stderr) = critic(plan, &[]);
        assert_eq!(code, 0, "{plan}");
        assert!(stderr.is_empty(), "{plan}: the human report goes to stdout, so `> file` keeps it: {stderr}");
        insta::assert_snapshot!(format!("critic_human_{}", snapshot_name(plan)), stdout);
    }
}

#[test]
fn markdown_reports_match_their_snapshots() {
    for plan in SNAPSHOTTED {
        let (code, stdout, _) = critic(plan, &["--format", "markdown"]);
        assert_eq!(code, 0, "{plan}");
        insta::assert_snapshot!(format!("critic_markdown_{}", snapshot_name(plan)), stdout);
    }
}

fn keys(value: &Value) -> BTreeSet<&str> {
    value.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn set<'a>(items: &[&'a str]) -> BTreeSet<&'a str> {
    items.iter().copied().collect()
}

const DIMENSIONS: [&str; 5] =
    ["single_point_of_failure", "output_format_coupling", "context_budget", "missing_fallbacks", "parallel_misses"];

#[test]
fn the_json_report_has_exactly_the_documented_shape() {
    let mut plans = critic_examples();
    plans.push("examples/research.yaml".into());
    let mut seen_findings = 0;
    for plan in &plans {
        let (_, report) = critic_json(plan);
        assert_eq!(
            keys(&report),
            set(&["plan", "score", "dimensions", "errors", "findings", "metrics", "forecast"]),
            "{plan}"
        );
        assert_eq!(
            keys(&report["forecast"]),
            set(&["tokens", "cost", "duration_ms", "unbounded", "unpriced"]),
            "{plan}"
        );
        for figure in ["tokens", "duration_ms"] {
            assert_eq!(keys(&report["forecast"][figure]), set(&["expected", "worst"]), "{plan}");
        }
        assert_eq!(keys(&report["dimensions"]), set(&DIMENSIONS), "{plan}");
        assert!(report["plan"].is_string() && report["score"].is_number(), "{plan}");
        assert!(report["errors"].as_array().expect("errors").is_empty(), "{plan}");
        assert_eq!(
            keys(&report["metrics"]),
            set(&[
                "resilience_score",
                "parallelism_ratio",
                "prompt_precision",
                "spof_count",
                "synthesis_coverage",
                "phases",
                "critical_path",
                "estimated_tokens",
            ]),
            "{plan}"
        );
        assert!(report["metrics"]["critical_path"].as_array().is_some_and(|p| !p.is_empty()), "{plan}");
        for finding in findings(&report) {
            seen_findings += 1;
            assert_eq!(
                keys(finding),
                set(&["code", "dimension", "severity", "task", "message", "help", "file", "line", "column", "path"]),
                "{plan}"
            );
            assert!(["error", "warning", "info"].contains(&finding["severity"].as_str().expect("severity")), "{plan}");
            let dimension = &finding["dimension"];
            assert!(dimension.is_null() || DIMENSIONS.contains(&dimension.as_str().expect("a name")), "{plan}");
            assert!(finding["message"].as_str().is_some_and(|m| !m.is_empty()), "{plan}");
            assert!(
                finding["help"].as_str().is_some_and(|h| !h.is_empty()),
                "{plan}: every finding says how to fix it"
            );
            assert!(finding["path"].is_string(), "{plan}");
        }
    }
    assert!(seen_findings >= plans.len() - 1);
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The formula of docs/critic.md, redone from the findings of the JSON report.
fn recomputed_scores(report: &Value) -> ([f64; 5], f64) {
    let mut dimensions = [10.0_f64; 5];
    let mut general = 0.0;
    for finding in findings(report) {
        let warning = finding["severity"] == "warning";
        match finding["dimension"].as_str() {
            Some(name) => {
                let index = DIMENSIONS.iter().position(|d| *d == name).expect("a known dimension");
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

#[test]
fn scores_follow_the_documented_formula() {
    for plan in
        ["examples/offline.yaml", "examples/critic/optimism_bias.yaml", "examples/critic/long_unverified_chain.yaml"]
    {
        let (_, report) = critic_json(plan);
        assert!(!findings(&report).is_empty(), "{plan} has findings to score");
        let (dimensions, overall) = recomputed_scores(&report);
        for (name, expected) in DIMENSIONS.iter().zip(dimensions) {
            let actual = report["dimensions"][name].as_f64().expect("a dimension score");
            assert!((actual - expected).abs() < 1e-9, "{plan}: {name} is {actual}, the formula gives {expected}");
        }
        let actual = report["score"].as_f64().expect("a score");
        assert!((actual - overall).abs() < 1e-9, "{plan}: score {actual}, the formula gives {overall}");
    }
}

#[test]
fn the_documented_example_of_the_formula_holds() {
    // One SPOF, one wide fan-in, five critical-without-fallback and four optimism-bias
    // warnings: dimensions 8, 10, 8, 0, 10, mean 7.2, less 4 × 0.5: 5.2 (docs/critic.md).
    let finding = |code: &str, dimension: Option<&str>| serde_json::json!({"code": code, "dimension": dimension, "severity": "warning"});
    let mut list = vec![
        finding("critic::single_point_of_failure", Some("single_point_of_failure")),
        finding("critic::wide_fan_in", Some("context_budget")),
    ];
    list.extend((0..5).map(|_| finding("critic::critical_without_fallback", Some("missing_fallbacks"))));
    list.extend((0..4).map(|_| finding("critic::optimism_bias", None)));
    let (dimensions, overall) = recomputed_scores(&serde_json::json!({ "findings": list }));
    assert_eq!(dimensions, [8.0, 10.0, 8.0, 0.0, 10.0]);
    assert_eq!(overall, 5.2);
}

#[test]
fn exit_code_is_0_for_a_plan_that_can_run() {
    let (code, _, stderr) = critic("examples/research.yaml", &[]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn exit_code_is_1_below_the_minimum_score() {
    let plan = "examples/offline.yaml";
    let (_, report) = critic_json(plan);
    let score = report["score"].as_f64().expect("a score");
    assert!(score < 9.9, "{plan} scores {score}");
    let (code, _, _) = critic(plan, &["--min-score", "9.9"]);
    assert_eq!(code, 1);
    let (code, _, _) = critic(plan, &["--min-score", "9.9", "--format", "json"]);
    assert_eq!(code, 1);
    // At or below its score, the plan passes.
    let (code, _, _) = critic(plan, &["--min-score", &score.to_string()]);
    assert_eq!(code, 0);
}

#[test]
fn exit_code_is_2_for_a_plan_with_errors_which_scores_0() {
    let (code, report) = critic_json("examples/invalid/cycle.yaml");
    assert_eq!(code, 2);
    assert_eq!(report["score"].as_f64(), Some(0.0));
    for dimension in DIMENSIONS {
        assert_eq!(report["dimensions"][dimension].as_f64(), Some(0.0), "{dimension}");
    }
    let errors = report["errors"].as_array().expect("errors");
    assert!(!errors.is_empty());
    assert!(errors.iter().any(|e| e["code"] == "plan::cycle"), "{errors:?}");
    assert!(findings(&report).is_empty());
    let (code, stdout, _) = critic("examples/invalid/cycle.yaml", &[]);
    assert_eq!(code, 2);
    assert!(stdout.contains("cannot run: score 0/10"), "{stdout}");
}

fn check_sarif(plan: &str) -> usize {
    let (_, stdout, _) = critic(plan, &["--format", "sarif"]);
    let sarif: Value = serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{plan}: not JSON ({error})"));
    assert_eq!(sarif["version"], "2.1.0", "{plan}");
    assert!(sarif["$schema"].as_str().is_some_and(|s| s.contains("sarif")), "{plan}");
    let runs = sarif["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{plan}");
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "runner", "{plan}");
    let rules = driver["rules"].as_array().expect("rules");
    let rule_ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().expect("a rule id")).collect();
    let distinct: BTreeSet<&str> = rule_ids.iter().copied().collect();
    assert_eq!(distinct.len(), rule_ids.len(), "{plan}: one rule per code");
    for rule in rules {
        assert!(rule["help"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{plan}: {rule}");
    }
    let results = runs[0]["results"].as_array().expect("results");
    let mut used = BTreeSet::new();
    for result in results {
        let rule_id = result["ruleId"].as_str().expect("a ruleId");
        assert!(distinct.contains(rule_id), "{plan}: {rule_id} has no rule");
        used.insert(rule_id);
        assert!(["error", "warning", "note"].contains(&result["level"].as_str().expect("a level")), "{plan}");
        assert!(result["message"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{plan}");
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], plan, "{plan}");
        assert!(location["region"]["startLine"].as_u64().is_some_and(|l| l >= 1), "{plan}");
        assert!(location["region"]["startColumn"].as_u64().is_some_and(|c| c >= 1), "{plan}");
    }
    assert_eq!(used, distinct, "{plan}: every rule is used by a result");
    results.len()
}

#[test]
fn sarif_has_one_rule_per_code_and_located_results() {
    for plan in critic_examples() {
        let (_, report) = critic_json(&plan);
        assert_eq!(check_sarif(&plan), findings(&report).len(), "{plan}: one result per finding");
    }
    check_sarif("examples/research.yaml");
    // A plan with errors: one result per error, at level `error`.
    assert!(check_sarif("examples/invalid/cycle.yaml") >= 1);
    let (_, stdout, _) = critic("examples/invalid/cycle.yaml", &["--format", "sarif"]);
    let sarif: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(sarif["runs"][0]["results"].as_array().expect("results").iter().all(|r| r["level"] == "error"));
}

#[test]
fn sarif_regions_agree_with_the_json_report() {
    for plan in critic_examples() {
        let (_, report) = critic_json(&plan);
        let (_, stdout, _) = critic(&plan, &["--format", "sarif"]);
        let sarif: Value = serde_json::from_str(&stdout).expect("JSON");
        let results = sarif["runs"][0]["results"].as_array().expect("results");
        for (finding, result) in findings(&report).iter().zip(results) {
            assert_eq!(result["ruleId"], finding["code"], "{plan}");
            let region = &result["locations"][0]["physicalLocation"]["region"];
            assert_eq!(region["startLine"], finding["line"], "{plan}");
            assert_eq!(region["startColumn"], finding["column"], "{plan}");
        }
    }
}

/// The shipped examples that show good plans.
const GOOD_EXAMPLES: &[&str] = &[
    "examples/research.yaml",
    "examples/triage.yaml",
    "examples/sequential.yaml",
    "examples/review.yaml",
    "examples/offline.yaml",
    "examples/repo-report.yaml",
];

#[test]
fn the_good_examples_score_at_least_8() {
    let mut checked = 0;
    for plan in GOOD_EXAMPLES {
        if !repo_root().join(plan).exists() {
            eprintln!("skipping {plan}: not present");
            continue;
        }
        checked += 1;
        let (code, report) = critic_json(plan);
        assert_eq!(code, 0, "{plan}");
        let score = report["score"].as_f64().expect("a score");
        let summary: Vec<String> = findings(&report).iter().map(|f| format!("{} {}", f["code"], f["task"])).collect();
        assert!(score >= 8.0, "{plan} scores {score}: {summary:#?}");
    }
    assert!(checked >= 4);
}

/// A fan-out plan of `tasks` mock tasks: one root, the middle depending on it, one sink
/// depending on the middle.
fn fan_out(tasks: usize) -> String {
    let mut plan = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: fan}\nspec:\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n    - {id: t0, agent: noop, input: x}\n",
    );
    for i in 1..tasks - 1 {
        plan.push_str(&format!("    - {{id: t{i}, agent: noop, input: x, depends_on: [t0]}}\n"));
    }
    let middle: Vec<String> = (1..tasks - 1).map(|i| format!("t{i}")).collect();
    plan.push_str(&format!("    - {{id: sink, agent: noop, input: x, depends_on: [{}]}}\n", middle.join(", ")));
    plan
}

#[test]
fn repeated_findings_are_grouped_in_the_human_report_and_all_kept_in_json() {
    let scratch = tempfile::tempdir().expect("a temp dir");
    let path = scratch.path().join("fan.yaml");
    std::fs::write(&path, fan_out(2_000)).expect("write the plan");
    let path = path.to_str().expect("a UTF-8 path");
    let (_, report) = critic_json(path);
    let unread = codes(&report).iter().filter(|c| **c == "critic::unread_dependency").count();
    assert_eq!(unread, 2 * 1_998, "JSON keeps every finding");
    let (_, human, _) = critic(path, &[]);
    assert!(human.lines().count() < 200, "{} lines:\n{human}", human.lines().count());
    assert_eq!(human.matches("but never reads its output").count(), 3, "three drawn in full:\n{human}");
    assert!(
        human.contains("… and 3,993 more `critic::unread_dependency` warnings at t4, t5, t6, t7, t8, t9, t10, t11, t12, t13 and 1,986 other places"),
        "{human}"
    );
    assert!(human.contains("metrics:"), "the score table follows:\n{human}");
}

#[test]
fn apply_shows_the_grouped_review_and_points_at_critic_for_the_rest() {
    let scratch = tempfile::tempdir().expect("a temp dir");
    let path = scratch.path().join("fan.yaml");
    std::fs::write(&path, fan_out(300)).expect("write the plan");
    let (_, report) = critic_json(path.to_str().expect("a UTF-8 path"));
    let output = runner()
        .args(["apply", "--dry-run"])
        .arg(&path)
        .env("RUNNER_HOME", scratch.path().join("home"))
        .output()
        .expect("runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("but never reads its output").count(), 3, "{stdout}");
    let pointer = format!("`runner critic {}` lists all {} findings", path.display(), findings(&report).len());
    assert!(stdout.contains(&pointer), "no `{pointer}` in:\n{stdout}");
}

/// The findings of the JSON report as the critic's whole findings (`manifest::critic::critique`)
/// give them, built here without the report's code; `plan` is a path from the workspace root,
/// as `runner` is given it.
fn expected_findings(file: &str) -> Vec<Value> {
    let loaded = manifest::load_file(&repo_root().join(file));
    let (plan, graph) = loaded.valid().expect("a valid plan");
    let source = &loaded.source;
    let vars = plan.run_vars(std::iter::empty()).unwrap_or_default();
    let budget = engine::forecast::budget::findings(plan, &engine::forecast::forecast(plan, graph, &vars));
    let mut findings = manifest::critic::critique(plan).findings;
    findings.extend(budget);
    findings.sort_by_key(|f| f.loc.span.offset());
    findings
        .iter()
        .map(|f| {
            let (line, column) = source.line_column(f.loc.span.offset());
            serde_json::json!({
                "code": f.code(),
                "dimension": f.dimension().map(|d| d.as_str()),
                "severity": f.severity.as_str(),
                "task": f.task,
                "message": f.to_string(),
                "help": f.help,
                "file": file,
                "line": line,
                "column": column,
                "path": f.loc.path.to_string(),
            })
        })
        .collect()
}

/// Layers of `width` tasks, each reading the outputs of three tasks of the layer before (one
/// field of one of them), so that coupling, wide fan-in and unread dependencies repeat.
fn layered_with_reads(layers: usize, width: usize) -> String {
    let mut plan = String::from(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: layers}\nspec:\n  agent_definitions:\n    noop: {runtime: mock, default: ok}\n  workflow:\n",
    );
    for layer in 0..layers {
        for i in 0..width {
            let id = format!("l{layer}_{i}");
            if layer == 0 {
                plan.push_str(&format!("    - {{id: {id}, agent: noop, input: x}}\n"));
                continue;
            }
            let parent = |k: usize| format!("l{}_{}", layer - 1, (i + k) % width);
            let input = format!(
                "\"{{{{ tasks.{}.output.title }}}} {{{{ tasks.{}.output }}}} {{{{ tasks.{}.output }}}}\"",
                parent(0),
                parent(1),
                parent(2)
            );
            let depends = [parent(0), parent(1), parent(2), parent(3)].join(", ");
            plan.push_str(&format!("    - {{id: {id}, agent: noop, input: {input}, depends_on: [{depends}]}}\n"));
        }
    }
    plan
}

#[test]
fn the_json_report_carries_every_finding_of_the_critic_whole() {
    let scratch = tempfile::tempdir().expect("a temp dir");
    let mut plans = critic_examples();
    for (name, text) in [("fan.yaml", fan_out(300)), ("layers.yaml", layered_with_reads(6, 20))] {
        let path = scratch.path().join(name);
        std::fs::write(&path, text).expect("write the plan");
        plans.push(path.to_str().expect("a UTF-8 path").to_owned());
    }
    let mut codes_seen = BTreeSet::new();
    for plan in &plans {
        let (_, report) = critic_json(plan);
        let expected = expected_findings(plan);
        assert_eq!(findings(&report), &expected, "{plan}");
        codes_seen.extend(codes(&report).into_iter().map(str::to_owned));
    }
    for code in ["unread_dependency", "redundant_edge", "fail_aborts_run", "output_format_coupling", "wide_fan_in"] {
        assert!(codes_seen.contains(&format!("critic::{code}")), "no {code} among {codes_seen:?}");
    }
}
