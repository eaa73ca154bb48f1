//! Runs scored against their forecasts, against the fake model server with scripted token
//! usage: the first run's expected tokens come within a factor of 2, the second's (learning
//! from the first) within 15%, and no worst case is ever below what a run took; `status` and
//! `forecast --accuracy` show forecast against actual; a spend over `budget.cost` stops
//! dispatching; a budget the plan cannot keep is an error at its line.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use llm_support::{KEY_VAR, is_agent, runner};
use serde_json::Value;
use support::Env;
use testkit::{FakeOpenAi, Step};

/// Characters a token stands for in the fake server's usage, as in English text.
const CHARS_PER_TOKEN: usize = 4;

/// An answer of about `tokens` tokens.
fn text_of(tokens: usize) -> String {
    "lorem ipsum dolor sit amet ".repeat(tokens * CHARS_PER_TOKEN / 27 + 1)[..tokens * CHARS_PER_TOKEN].to_owned()
}

/// A server that answers each agent with a text of its own length and reports the usage a real
/// server would: the prompt's characters over four, and the answer's.
fn metered_server() -> FakeOpenAi {
    FakeOpenAi::start(|body, _| {
        let answer = if is_agent(body, "researcher") {
            text_of(180)
        } else if is_agent(body, "editor") {
            text_of(250)
        } else {
            text_of(120)
        };
        let prompt: usize = body["messages"]
            .as_array()
            .map(|messages| messages.iter().filter_map(|m| m["content"].as_str()).map(str::len).sum())
            .unwrap_or(0);
        let (prompt, completion) = ((prompt / CHARS_PER_TOKEN) as u64, (answer.len() / CHARS_PER_TOKEN) as u64);
        Step::Metered(prompt, completion, Box::new(Step::Answer(answer)))
    })
}

/// Three researchers in parallel, an editor reading them, a writer reading the editor; the
/// provider has a window, a price and the agents a timeout, so every worst case is bounded.
fn research_plan(base_url: &str, control: &str) -> String {
    format!(
        r#"apiVersion: runner/v1
kind: Plan
metadata: {{name: scored}}
spec:
  providers:
    fake:
      base_url: "{base_url}"
      api_key_env: {KEY_VAR}
      model: fake-model
      context_window: 4000
      price: {{input_per_mtok: 3, output_per_mtok: 15, currency: USD}}
  agent_definitions:
    researcher: {{runtime: llm, provider: fake, system_prompt: "ROLE researcher", max_turns: 1, timeout: 30s}}
    editor: {{runtime: llm, provider: fake, system_prompt: "ROLE editor", max_turns: 1, timeout: 30s}}
    writer: {{runtime: llm, provider: fake, system_prompt: "ROLE writer", max_turns: 1, timeout: 30s}}
  workflow:
    - {{id: news, agent: researcher, input: "Find the news of the quarter.", max_output_tokens: 300}}
    - {{id: filings, agent: researcher, input: "Find the revenue in the filings.", max_output_tokens: 300}}
    - {{id: rivals, agent: researcher, input: "Name the three closest competitors.", max_output_tokens: 300}}
    - id: brief
      agent: editor
      input: "Merge: {{{{ tasks.news.output }}}} {{{{ tasks.filings.output }}}} {{{{ tasks.rivals.output }}}}"
      depends_on: [news, filings, rivals]
      max_output_tokens: 400
    - {{id: memo, agent: writer, input: "Write a memo from {{{{ tasks.brief.output }}}}", depends_on: [brief], max_output_tokens: 200}}
{control}"#
    )
}

/// Applies the plan and returns the run id and its status document.
fn apply(env: &Env, plan: &str, run: &str) -> Value {
    let out = runner(env, &["apply", plan, "--yes", "--run-id", run]);
    assert_eq!(out.code, Some(0), "{out}");
    env.status(run)
}

fn ratio(expected: &Value, actual: &Value) -> f64 {
    expected.as_f64().expect("a number") / actual.as_f64().expect("a number")
}

#[test]
fn the_second_runs_expected_tokens_come_within_15_percent_and_the_first_within_a_factor_of_two() {
    let env = Env::new();
    let server = metered_server();
    env.write("plan.yaml", &research_plan(&server.base_url(), ""));

    let first = apply(&env, "plan.yaml", "first");
    let tokens = &first["forecast"]["tokens"];
    let (prompt, completion) =
        (first["tokens"]["prompt"].as_u64().unwrap(), first["tokens"]["completion"].as_u64().unwrap());
    assert_eq!(tokens["actual"].as_u64(), Some(prompt + completion), "{first:#}");
    let r = ratio(&tokens["expected"], &tokens["actual"]);
    println!("first run: expected/actual tokens {r:.3}");
    assert!((0.5..=2.0).contains(&r), "the first run, from the defaults alone: expected/actual {r}: {tokens}");
    assert!(tokens["worst"].as_u64().unwrap() >= tokens["actual"].as_u64().unwrap(), "{tokens}");
    // Its cost: the run's tokens at the recorded price.
    let cost = &first["forecast"]["cost"];
    let priced = (prompt as f64 * 3.0 + completion as f64 * 15.0) / 1e6;
    assert!((cost["actual"].as_f64().unwrap() - priced).abs() < 1e-12, "{cost} vs {priced}");
    assert_eq!(first["forecast"]["currency"], "USD");

    // The second run learns from the first.
    let second = apply(&env, "plan.yaml", "second");
    let tokens = &second["forecast"]["tokens"];
    let r = ratio(&tokens["expected"], &tokens["actual"]);
    println!("second run: expected/actual tokens {r:.3}");
    assert!((0.85..=1.15).contains(&r), "the second run, from the first's history: expected/actual {r}: {tokens}");
    let r = ratio(&second["forecast"]["cost"]["expected"], &second["forecast"]["cost"]["actual"]);
    assert!((0.85..=1.15).contains(&r), "{second:#}");
    // The critic says where its figures come from.
    let critic = runner(&env, &["critic", "plan.yaml"]);
    assert!(critic.stdout.contains("learn from the 2 latest run(s)"), "{critic}");
    let defaults = runner(&env, &["critic", "plan.yaml", "--no-history"]);
    assert!(!defaults.stdout.contains("latest run(s)"), "{defaults}");

    let human = runner(&env, &["status", "second"]);
    assert!(human.stdout.contains("forecast vs actual:") && human.stdout.contains("USD actual;"), "{human}");

    let accuracy = runner(&env, &["forecast", "--accuracy", "--format", "json"]);
    assert_eq!(accuracy.code, Some(0), "{accuracy}");
    let report: Value = serde_json::from_str(&accuracy.stdout).expect("JSON");
    assert_eq!(report["runs"].as_array().map(Vec::len), Some(2), "{report:#}");
    assert_eq!(report["tokens"]["worst_exceeded"], 0, "{report:#}");
    assert_eq!(report["cost"]["worst_exceeded"], 0, "{report:#}");
    assert!(report["tokens"]["mean_error"].as_f64().unwrap() < 1.0, "{report:#}");
    let human = runner(&env, &["forecast", "--accuracy"]);
    assert!(human.stdout.contains("worst case exceeded in 0"), "{human}");
}

#[test]
fn a_spend_over_the_cost_budget_stops_dispatching() {
    let env = Env::new();
    let server = metered_server();
    // One researcher's request costs about 0.0029 USD (about 40 prompt and 180 completion
    // tokens); the budget is passed after the first task.
    let control = "  control_logic:\n    strategy: sequential\n    budget: {cost: 0.001}\n";
    env.write("plan.yaml", &research_plan(&server.base_url(), control));
    // The budget has a stop at run time (every provider has a price), so the critic does not
    // call it an error, only over what the run is expected to cost.
    let critic = runner(&env, &["critic", "plan.yaml", "--format", "json"]);
    let report: Value = serde_json::from_str(&critic.stdout).expect("JSON");
    let codes: Vec<&str> = report["findings"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str()).collect();
    assert!(codes.contains(&"critic::over_budget") && !codes.contains(&"critic::budget_not_kept"), "{codes:?}");

    let out = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "capped"]);
    assert_ne!(out.code, Some(0), "{out}");
    let status = env.status("capped");
    assert!(status["exhausted"].as_str().unwrap_or("").contains("the cost budget is spent"), "{status:#}");
    assert_eq!(server.requests().len(), 1, "nothing is dispatched once the spend passes the budget");
    assert_eq!(status["tasks"]["news"]["status"], "succeeded");
    assert_eq!(status["tasks"]["filings"]["status"], "skipped", "{status:#}");
}

#[test]
fn a_budget_the_plan_cannot_keep_is_an_error_at_its_line() {
    let env = Env::new();
    // A duration budget below the worst case (three attempts of up to 30 s): nothing stops a run
    // at a duration, so it is an error; the cost has a stop.
    let control = "  control_logic:\n    budget: {cost: 5, duration: 1m}\n";
    let plan = research_plan("http://127.0.0.1:9/v1", control)
        .replace("max_output_tokens: 300}", "max_output_tokens: 300, on_failure: {action: retry, max_attempts: 3}}");
    env.write("plan.yaml", &plan);
    let line = plan.lines().position(|l| l.contains("budget:")).unwrap() + 1;
    let critic = runner(&env, &["critic", "plan.yaml", "--format", "json"]);
    assert_eq!(critic.code, Some(2), "{critic}");
    let report: Value = serde_json::from_str(&critic.stdout).expect("JSON");
    let errors: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["code"] == "critic::budget_not_kept").collect();
    assert_eq!(errors.len(), 1, "{report:#}");
    assert_eq!(errors[0]["severity"], "error");
    assert_eq!(errors[0]["line"].as_u64(), Some(line as u64), "{:#}", errors[0]);
    assert!(
        errors[0]["message"].as_str().unwrap().contains("duration can pass its budget of 1m 00s"),
        "{:#}",
        errors[0]
    );
    // apply refuses it before recording anything.
    let apply = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "refused"]);
    assert_eq!(apply.code, Some(2), "{apply}");
    assert!(apply.stderr.contains("cannot keep its `control_logic.budget`"), "{apply}");
    assert!(!env.home().join("runs/refused").exists());

    // A provider with no price: the run cannot count its spend, so `cost` has no stop.
    let unpriced = research_plan("http://127.0.0.1:9/v1", "  control_logic:\n    budget: {cost: 5}\n")
        .replace("      price: {input_per_mtok: 3, output_per_mtok: 15, currency: USD}\n", "");
    env.write("unpriced.yaml", &unpriced);
    let critic = runner(&env, &["critic", "unpriced.yaml"]);
    assert_eq!(critic.code, Some(2), "{critic}");
    assert!(
        critic.stdout.contains("critic::budget_not_kept") && critic.stdout.contains("no `price` for provider `fake`"),
        "{critic}"
    );
    // Within its budget, a plan has no budget finding.
    env.write(
        "fine.yaml",
        &research_plan("http://127.0.0.1:9/v1", "  control_logic:\n    budget: {cost: 5, duration: 10m}\n"),
    );
    let critic = runner(&env, &["critic", "fine.yaml"]);
    assert_eq!(critic.code, Some(0), "{critic}");
    assert!(
        !critic.stdout.contains("critic::over_budget") && !critic.stdout.contains("critic::budget_not_kept"),
        "{critic}"
    );
}
