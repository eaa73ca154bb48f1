//! The forecast before a run: `runner critic` states tokens, money and time (expected and at
//! worst); the time is the makespan the run's own scheduling gives, the same as `runner test`'s
//! virtual time and close to a real `apply`'s; `runner models PLAN` shows the prices.

mod support;

use serde_json::Value;
use support::Env;

/// The agents of [`forty`] and their latencies in milliseconds.
const LATENCIES: [(&str, u64); 4] = [("a", 120), ("b", 200), ("c", 310), ("d", 90)];

/// The agent of task `i` of [`forty`].
fn agent(i: usize) -> (&'static str, u64) {
    LATENCIES[(i * 7 + i / 8) % 4]
}

/// 40 mock tasks in layers of 8 (each after two of the layer before), on four agents of
/// different latencies, at most 3 at once and at most 1 at once in group `slow`.
fn forty() -> String {
    let latencies = LATENCIES;
    let mut text =
        String::from("apiVersion: runner/v1\nkind: Plan\nmetadata: {name: forty}\nspec:\n  agent_definitions:\n");
    for (name, ms) in latencies {
        text.push_str(&format!("    {name}: {{runtime: mock, latency: {ms}ms, default: ok}}\n"));
    }
    text.push_str("  workflow:\n");
    for i in 0..40 {
        let agent = agent(i).0;
        let after = if i < 8 {
            String::new()
        } else {
            let layer = (i / 8 - 1) * 8;
            format!(", depends_on: [t{}, t{}]", layer + i % 8, layer + (i * 3 + 1) % 8)
        };
        let group = if i % 5 == 0 { ", parallel_group: slow" } else { "" };
        text.push_str(&format!("    - {{id: t{i}, agent: {agent}, input: x{i}{after}{group}}}\n"));
    }
    text.push_str("  control_logic:\n    max_concurrency: 3\n    parallel_groups:\n      slow: {max_concurrency: 1}\n");
    text
}

fn json(env: &Env, args: &[&str]) -> Value {
    let out = env.runner().args(args).output().expect("runner runs");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?} prints JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// Milliseconds since the epoch of a record's `at`.
fn at_ms(record: &Value) -> i64 {
    let at = record["at"].as_str().expect("an `at`");
    let time = at.split('T').nth(1).expect("a time").trim_end_matches('Z');
    let parts: Vec<f64> = time.split(':').map(|p| p.parse().expect("a number")).collect();
    ((parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]) * 1000.0).round() as i64
}

#[test]
fn the_duration_forecast_is_the_plan_tests_makespan_and_close_to_a_real_run() {
    let env = Env::new();
    env.write("plan.yaml", &forty());
    env.write(
        "plan.test.yaml",
        "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: timing}\nspec:\n  plan: plan.yaml\n  expect: {status: succeeded}\n",
    );
    let critic = json(&env, &["critic", "plan.yaml", "--format", "json"]);
    let forecast = critic["forecast"]["duration_ms"]["expected"].as_u64().expect("an expected duration");
    // Mock tasks take their latency; nothing bounds them further, so the worst is the same.
    assert_eq!(critic["forecast"]["duration_ms"]["worst"], forecast, "{:#}", critic["forecast"]);
    let sum: u64 = (0..40).map(|i| agent(i).1).sum();
    assert!(forecast < sum && forecast * 3 >= sum, "a makespan under the limit of 3, not a sum: {forecast} of {sum}");

    let tested = json(&env, &["test", "plan.test.yaml", "--format", "json"]);
    let scenario = &tested["scenarios"][0];
    assert_eq!(scenario["makespan_ms"], forecast, "the plan test's virtual time: {tested:#}");

    let applied = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "real"]).output().expect("runs");
    assert_eq!(applied.status.code(), Some(0), "{}", String::from_utf8_lossy(&applied.stderr));
    let records = env.records("real");
    let took = at_ms(records.last().expect("records")) - at_ms(&records[0]);
    let off = (took - forecast as i64).abs() as f64 / forecast as f64;
    assert!(off <= 0.10, "the real run took {took} ms against {forecast} ms forecast ({:.1}% off)", off * 100.0);
}

/// Two llm agents on a priced provider with a 1,000-token window: `t` retried up to 3 times,
/// then `u`; each attempt at most 10 s.
const PRICED: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: priced}\nspec:\n  providers:\n    \
    default: {base_url: \"http://127.0.0.1:9/v1\", model: m, context_window: 1000, max_tokens: 100, \
    price: {input_per_mtok: 1, output_per_mtok: 2}}\n  agent_definitions:\n    \
    a: {runtime: llm, timeout: 10s}\n    b: {runtime: llm, timeout: 10s}\n  workflow:\n    \
    - {id: t, agent: a, input: first, on_failure: {action: retry, max_attempts: 3, backoff: 1s}}\n    \
    - {id: u, agent: b, input: \"then {{ tasks.t.output }}\", depends_on: [t]}\n";

#[test]
fn a_priced_plan_states_its_cost_and_its_worst_case_counts_every_attempt() {
    let env = Env::new();
    env.write("plan.yaml", PRICED);
    let report = json(&env, &["critic", "plan.yaml", "--format", "json"]);
    let forecast = &report["forecast"];
    // Every request at the whole window: three attempts of `t` and one of `u`.
    assert_eq!(forecast["tokens"]["worst"], 4000, "{forecast:#}");
    assert_eq!(forecast["cost"]["currency"], "USD", "{forecast:#}");
    let worst = forecast["cost"]["worst"].as_f64().expect("a worst cost");
    assert!((worst - 0.008).abs() < 1e-9, "4,000 tokens at the dearer price, 2 a million: {worst}");
    let expected = forecast["cost"]["expected"].as_f64().expect("an expected cost");
    assert!(expected > 0.0 && expected < worst, "{forecast:#}");
    // Three attempts of 10 s with backoffs of 1 s and 2 s, then 10 s; expected: two requests of
    // 2 s and 100 tokens at 20 ms each.
    assert_eq!(forecast["duration_ms"]["worst"], 43_000, "{forecast:#}");
    assert_eq!(forecast["duration_ms"]["expected"], 8_000, "{forecast:#}");
    assert_eq!(forecast["unbounded"], serde_json::json!([]), "{forecast:#}");

    let human = env.runner().args(["critic", "plan.yaml"]).output().expect("runs");
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("cost                ") && human.contains("0.0080 USD at worst"), "{human}");
    let markdown = env.runner().args(["critic", "plan.yaml", "--format", "markdown"]).output().expect("runs");
    assert!(String::from_utf8_lossy(&markdown.stdout).contains("| cost | "), "the markdown report has the cost");
    let sarif = json(&env, &["critic", "plan.yaml", "--format", "sarif"]);
    assert_eq!(sarif["runs"][0]["properties"]["forecast"]["tokens"]["worst"], 4000);

    // apply shows it before asking (here, with --dry-run, before doing nothing).
    let dry = env.runner().args(["apply", "plan.yaml", "--dry-run"]).env("OPENAI_API_KEY", "x").output().expect("runs");
    let dry = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.contains("forecast:") && dry.contains("43.0 s at worst"), "{dry}");

    // `runner forecast` gives each task's figures: `t`'s three attempts, `u`'s one.
    let tasks = json(&env, &["forecast", "plan.yaml", "--format", "json"]);
    assert_eq!(tasks["tokens"], forecast["tokens"], "the same forecast as the critic's");
    let worst: Vec<(String, Value)> = tasks["tasks"]
        .as_array()
        .expect("a list of tasks")
        .iter()
        .map(|t| (t["task"].as_str().unwrap_or_default().to_owned(), t["tokens"]["worst"].clone()))
        .collect();
    assert_eq!(worst, [("t".to_owned(), Value::from(3000)), ("u".to_owned(), Value::from(1000))]);
    let human = env.runner().args(["forecast", "plan.yaml"]).output().expect("runs");
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("forecast:") && human.lines().any(|l| l.starts_with("t ") && l.contains("3,000")),
        "{human}"
    );

    let models = env.runner().args(["models", "plan.yaml"]).output().expect("runs");
    let models = String::from_utf8_lossy(&models.stdout);
    assert!(models.contains("default") && models.contains("1 USD / 2 USD") && models.contains("1000"), "{models}");
}

#[test]
fn a_plan_without_prices_or_limits_says_what_it_cannot_bound() {
    let env = Env::new();
    let bare = PRICED
        .replace(", price: {input_per_mtok: 1, output_per_mtok: 2}", "")
        .replace("context_window: 1000, ", "")
        .replace(", timeout: 10s}", "}");
    env.write("plan.yaml", &bare);
    assert!(!bare.contains("price:") && !bare.contains("timeout") && !bare.contains("context_window"), "{bare}");
    let report = json(&env, &["critic", "plan.yaml", "--format", "json"]);
    let forecast = &report["forecast"];
    assert_eq!(forecast["cost"], Value::Null, "{forecast:#}");
    assert_eq!(forecast["unpriced"], serde_json::json!(["default"]), "{forecast:#}");
    assert_eq!(forecast["tokens"]["worst"], Value::Null, "{forecast:#}");
    assert_eq!(forecast["duration_ms"]["worst"], Value::Null, "{forecast:#}");
    let reasons = forecast["unbounded"].to_string();
    assert!(reasons.contains("no `context_window`") && reasons.contains("no `timeout`"), "{reasons}");
}
