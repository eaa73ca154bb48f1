//! Plans with `llm` agents, run by the real binary against a local fake OpenAI server
//! (`testkit::FakeOpenAi`): parallel searches, gates and reviews, verification retries,
//! clarifications across processes, rejections, replans, the token budget, the shipped triage
//! example, and that the API key never leaks into anything the runner writes or prints.
//!
//! Replies are routed by the request's system prompt (`ROLE <agent>`) and the start of its user
//! message, so tasks that run in parallel get the right answer whatever their order.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use std::collections::BTreeSet;

use llm_support::{
    KEY, Out, events_of, files_under, is_agent, llm_agent, llm_plan, runner, runner_with_key, tool_names, user,
};
use serde_json::{Value, json};
use support::Env;
use testkit::{COMPLETION_TOKENS, FakeOpenAi, PROMPT_TOKENS, Step};

fn answer(text: &str) -> Step {
    Step::Answer(text.to_owned())
}

fn status_step(code: u16, body: &str) -> Step {
    Step::Status { code, body: body.to_owned(), retry_after: None }
}

fn unexpected(body: &Value) -> Step {
    status_step(500, &format!("the fake server did not expect this request: {body}"))
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

fn task_keys(status: &Value) -> BTreeSet<String> {
    status["tasks"].as_object().map(|tasks| tasks.keys().cloned().collect()).unwrap_or_default()
}

/// The bodies of the recorded requests for which `pick` holds.
fn bodies(server: &FakeOpenAi, pick: impl Fn(&Value) -> bool) -> Vec<Value> {
    server.requests().into_iter().map(|r| r.body).filter(|b| pick(b)).collect()
}

// --- 1. research end to end ------------------------------------------------------------------

const RESEARCH_WORKFLOW: &str = r#"    - id: search_news
      agent: researcher
      input: "NEWS: find news from the last 12 months. Mission: {{ mission }}"
      parallel_group: research
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms, then: skip}
    - id: search_filings
      agent: analyst
      input: "FILINGS: find the latest annual revenue and its growth."
      parallel_group: research
      verification:
        type: schema_check
        schema:
          type: object
          properties:
            revenue: {type: string}
            growth: {type: string}
          required: [revenue, growth]
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms, then: skip}
    - id: search_competitors
      agent: researcher
      input: "COMPETITORS: name the three closest competitors."
      parallel_group: research
      on_failure: skip
    - id: synthesize
      type: synthesis_gate
      inputs: [search_news, search_filings, search_competitors]
      agent: editor
      max_output_tokens: 300
      on_failure: retry
    - id: approve
      type: human_review
      depends_on: [synthesize]
      prompt: Are these notes good enough to write the brief from?
    - id: write_brief
      agent: writer
      input: |
        WRITE: the brief for {{ mission }}
        {% if tasks.search_filings.status != "skipped" %}
        Revenue: {{ tasks.search_filings.output.revenue }} (growth {{ tasks.search_filings.output.growth }})
        {% endif %}
        Notes:
        {{ tasks.synthesize.output }}
      depends_on: [approve]
      critical: true
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms, then: fail}"#;

const GATE_NOTES: &str = "GATE-NOTES: XyzzyCorp grew 12% (https://news.example/1); rivals Foo and Bar.";
const BRIEF: &str = "# Brief\n## Summary\nXyzzyCorp grows.\n## Finances\nREV-42M\n## Risks\nFoo.";

fn research_server() -> FakeOpenAi {
    FakeOpenAi::start(|body, _| {
        let text = user(body);
        // The first two searches wait for each other, so two are in flight together by count;
        // the third arrives after one of them ends (the group runs two at a time).
        let slow = |step: Step| Step::Together(2, Box::new(step));
        if is_agent(body, "editor") {
            answer(GATE_NOTES)
        } else if is_agent(body, "writer") {
            answer(BRIEF)
        } else if is_agent(body, "analyst") {
            slow(answer(r#"{"revenue": "REV-42M", "growth": "12%", "sources": ["https://filings.example/10k"]}"#))
        } else if is_agent(body, "researcher") && text.starts_with("NEWS:") {
            slow(answer("- NEWS-FINDING-1 (https://news.example/1)"))
        } else if is_agent(body, "researcher") && text.starts_with("COMPETITORS:") {
            slow(answer("- COMPETITOR-FINDING-2: Foo, Bar, Baz (https://market.example)"))
        } else {
            unexpected(body)
        }
    })
}

#[test]
fn research_plan_runs_end_to_end_through_a_review_across_processes() {
    let server = research_server();
    let env = Env::new();
    let agents = ["researcher", "analyst", "editor", "writer"].map(llm_agent).join("\n");
    let control = "    strategy: eager\n    max_concurrency: 4\n    parallel_groups: {research: {max_concurrency: 2}}\n    \
                   token_budget: 200000";
    env.write("research.yaml", &llm_plan("company-research", &server.base_url(), &agents, RESEARCH_WORKFLOW, control));

    let applied = runner(&env, &["apply", "research.yaml", "--yes", "--run-id", "r1"]);
    assert_eq!(applied.code, Some(3), "paused at the review: {applied}");
    assert!(applied.stdout.contains("runner approve r1 approve"), "{applied}");

    // Three searches (at most two at a time), then the gate; nothing after the review yet.
    let before = server.requests();
    assert_eq!(before.len(), 4, "{before:#?}");
    assert_eq!(server.max_in_flight(), 2, "the research group runs two searches at a time");
    assert!(before.iter().all(|r| !is_agent(&r.body, "writer")));
    for request in &before {
        assert_eq!(request.authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
        assert_eq!(request.body["model"], "fake-model");
    }
    let analyst = bodies(&server, |b| is_agent(b, "analyst"));
    assert_eq!(analyst.len(), 1);
    assert_eq!(analyst[0]["response_format"]["type"], "json_schema", "a schema is sent in the provider's dialect");
    assert_eq!(analyst[0]["response_format"]["json_schema"]["name"], "search_filings");
    let gate = bodies(&server, |b| is_agent(b, "editor"));
    assert_eq!(gate.len(), 1);
    let gate_input = user(&gate[0]);
    for finding in ["NEWS-FINDING-1", "REV-42M", "COMPETITOR-FINDING-2", "300 tokens"] {
        assert!(gate_input.contains(finding), "the gate's request has `{finding}`: {gate_input}");
    }
    let status = env.status("r1");
    assert_eq!(status["status"], "paused");
    assert_eq!(status["tasks"]["approve"]["status"], "paused");
    assert_eq!(status["tasks"]["synthesize"]["output"], GATE_NOTES);

    let approved = runner(&env, &["approve", "r1", "approve"]);
    assert_eq!(approved.code, Some(0), "{approved}");
    let resumed = runner(&env, &["resume", "r1"]);
    assert_eq!(resumed.code, Some(0), "{resumed}");

    let writer = bodies(&server, |b| is_agent(b, "writer"));
    assert_eq!(writer.len(), 1);
    let writer_input = user(&writer[0]);
    assert!(writer_input.contains(GATE_NOTES), "the writer reads the gate's output: {writer_input}");
    assert!(writer_input.contains("Revenue: REV-42M (growth 12%)"), "{writer_input}");
    assert!(!writer_input.contains("NEWS-FINDING-1"), "the writer reads the gate, not the raw searches");

    let llm_tasks = set(&["search_news", "search_filings", "search_competitors", "synthesize", "write_brief"]);
    let succeeded = events_of(&env, "r1", "TaskSucceeded");
    let with_tokens: BTreeSet<String> = succeeded
        .iter()
        .filter(|r| r["tokens"] == json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}))
        .map(|r| r["task"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(with_tokens, llm_tasks, "each llm task's success carries its usage: {succeeded:#?}");

    let requests = server.requests().len() as u64;
    assert_eq!(requests, 5);
    let status = env.status("r1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tokens"]["prompt"], PROMPT_TOKENS * requests);
    assert_eq!(status["tokens"]["completion"], COMPLETION_TOKENS * requests);
    assert_eq!(status["tasks"]["write_brief"]["output"], BRIEF);
    assert_eq!(status["tasks"]["approve"]["status"], "succeeded");
}

// --- 2. verification --------------------------------------------------------------------------

#[test]
fn a_failed_schema_check_is_retried_with_its_reason_in_the_prompt() {
    let server = FakeOpenAi::start(|_, n| if n == 0 { answer("{}") } else { answer(r#"{"x": 1}"#) });
    let env = Env::new();
    let workflow = r#"    - id: t
      agent: a
      input: "EXTRACT: the figure x"
      verification: {type: schema_check, schema: {type: object, properties: {x: {type: integer}}, required: [x]}}
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms}"#;
    env.write("plan.yaml", &llm_plan("verify", &server.base_url(), &llm_agent("a"), workflow, ""));

    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "v1"]);
    assert_eq!(applied.code, Some(0), "{applied}");

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]});
    assert_eq!(requests[0].body["response_format"]["json_schema"]["schema"], schema);
    assert!(user(&requests[0].body).contains("JSON Schema"), "the first prompt states the schema");

    let failed = events_of(&env, "v1", "VerificationFailed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["task"], "t");
    assert_eq!(failed[0]["attempt"], 1);
    let reason = failed[0]["reason"].as_str().unwrap_or_default();
    assert!(!reason.is_empty() && reason.contains('x'), "the reason names the missing field: {reason}");
    let second = user(&requests[1].body);
    assert!(second.contains(reason), "the retry's prompt has the reason `{reason}`: {second}");
    assert!(!user(&requests[0].body).contains(reason));

    let status = env.status("v1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["t"]["attempts"], 2);
    assert_eq!(status["tasks"]["t"]["output"], r#"{"x": 1}"#);
}

// --- 3. clarification -------------------------------------------------------------------------

fn asking_server() -> FakeOpenAi {
    FakeOpenAi::start(|body, _| {
        let text = user(body);
        if text.starts_with("REVENUE:") {
            if text.contains("Clarification: ") {
                answer("revenue for the asked year: 42M")
            } else {
                Step::ToolCalls(vec![("ask_user".to_owned(), r#"{"question": "Which fiscal year?"}"#.to_owned())])
            }
        } else if text.starts_with("SUMMARY:") {
            answer("summary done")
        } else {
            unexpected(body)
        }
    })
}

const ASKING_WORKFLOW: &str = r#"    - {id: a, agent: analyst, input: "REVENUE: report the revenue"}
    - {id: b, agent: analyst, input: "SUMMARY: {{ tasks.a.output }}", depends_on: [a]}"#;

#[test]
fn ask_user_pauses_and_the_answer_from_another_process_reaches_the_model() {
    let server = asking_server();
    let env = Env::new();
    env.write("plan.yaml", &llm_plan("ask", &server.base_url(), &llm_agent("analyst"), ASKING_WORKFLOW, ""));

    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "q1"]);
    assert_eq!(applied.code, Some(3), "{applied}");
    assert!(applied.stdout.contains("Which fiscal year?"), "{applied}");
    assert!(applied.stdout.contains("runner answer q1 a"), "{applied}");
    let first = server.requests();
    assert_eq!(first.len(), 1);
    assert!(tool_names(&first[0].body).contains(&"ask_user".to_owned()), "ask_user is offered: {:?}", first[0].body);
    let status = env.status("q1");
    assert_eq!(status["status"], "paused");
    assert_eq!(status["tasks"]["a"]["question"], "Which fiscal year?");
    let asked = events_of(&env, "q1", "ClarificationRequested");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["question"], "Which fiscal year?");

    let answered = runner(&env, &["answer", "q1", "a", "fiscal 2025"]);
    assert_eq!(answered.code, Some(0), "{answered}");
    assert_eq!(server.requests().len(), 1, "answering alone sends nothing");
    let resumed = runner(&env, &["resume", "q1"]);
    assert_eq!(resumed.code, Some(0), "{resumed}");

    let again = bodies(&server, |b| user(b).starts_with("REVENUE:"));
    assert_eq!(again.len(), 2);
    let text = user(&again[1]);
    assert!(text.contains("Clarification: fiscal 2025"), "the resumed request has the answer: {text}");
    assert_eq!(events_of(&env, "q1", "ClarificationProvided").len(), 1);
    let status = env.status("q1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["tasks"]["a"]["output"], "revenue for the asked year: 42M");
    assert_eq!(status["tasks"]["b"]["output"], "summary done");
}

#[test]
fn without_allow_clarification_ask_user_is_not_offered() {
    let server = FakeOpenAi::script(vec![answer("42M")]);
    let env = Env::new();
    let workflow = r#"    - {id: a, agent: analyst, input: "REVENUE: report the revenue"}"#;
    let control = "    allow_clarification: false";
    env.write("plan.yaml", &llm_plan("noask", &server.base_url(), &llm_agent("analyst"), workflow, control));
    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "n1"]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(!tool_names(&requests[0].body).contains(&"ask_user".to_owned()), "{:?}", requests[0].body);
}

// --- 4. rejection -----------------------------------------------------------------------------

#[test]
fn a_rejected_review_fails_the_run_and_says_why() {
    let server = FakeOpenAi::start(|body, _| {
        let text = user(body);
        if text.starts_with("DRAFT:") {
            answer("a two-line draft")
        } else if text.starts_with("PUBLISH:") {
            answer("published")
        } else {
            unexpected(body)
        }
    });
    let env = Env::new();
    let workflow = r#"    - {id: draft, agent: writer, input: "DRAFT: write it"}
    - {id: review, type: human_review, depends_on: [draft], prompt: "Publish this?"}
    - {id: publish, agent: writer, input: "PUBLISH: {{ tasks.draft.output }}", depends_on: [review]}"#;
    env.write("plan.yaml", &llm_plan("reject", &server.base_url(), &llm_agent("writer"), workflow, ""));

    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "j1"]);
    assert_eq!(applied.code, Some(3), "{applied}");
    assert!(applied.stdout.contains("runner reject j1 review"), "{applied}");
    let rejected = runner(&env, &["reject", "j1", "review", "--comment", "too thin"]);
    assert_eq!(rejected.code, Some(0), "{rejected}");
    let resumed = runner(&env, &["resume", "j1"]);
    assert_eq!(resumed.code, Some(1), "{resumed}");

    let decided = events_of(&env, "j1", "ReviewDecided");
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["approved"], false);
    assert_eq!(decided[0]["comment"], "too thin");
    let completed = events_of(&env, "j1", "RunCompleted");
    assert_eq!(completed.len(), 1, "{completed:#?}");
    assert_eq!(completed[0]["status"], "failed");
    let summary = completed[0]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("rejected") && summary.contains("too thin"), "{summary}");
    let status = env.status("j1");
    assert_eq!(status["status"], "failed");
    assert!(status["tasks"]["review"]["error"].as_str().unwrap_or_default().contains("too thin"), "{status:#}");
    assert!(bodies(&server, |b| user(b).starts_with("PUBLISH:")).is_empty(), "publish never ran");
    assert_eq!(server.requests().len(), 1);
}

// --- 5-6. replanning --------------------------------------------------------------------------

const REPLAN_WORKFLOW: &str = r#"    - {id: seed, agent: worker, input: "SEED: start"}
    - {id: flaky_fetch, agent: worker, input: "FLAKY: fetch after {{ tasks.seed.output }}", depends_on: [seed], on_failure: replan}
    - {id: old_report, agent: worker, input: "OLDREPORT: {{ tasks.flaky_fetch.output }}", depends_on: [flaky_fetch]}"#;

const REPLAN_ERROR: &str = r#"{"error": {"message": "UNSUPPORTED-MODEL-FEATURE", "type": "invalid_request_error"}}"#;

/// A server whose `worker` fails `FLAKY:` with a 400 and whose `planner` answers `replacement`.
fn replan_server(replacement: &'static str) -> FakeOpenAi {
    FakeOpenAi::start(move |body, _| {
        let text = user(body);
        if is_agent(body, "planner") {
            answer(replacement)
        } else if text.starts_with("SEED:") {
            answer("seed-out")
        } else if text.starts_with("FLAKY:") {
            status_step(400, REPLAN_ERROR)
        } else if text.starts_with("ALTFETCH:") {
            answer("alt-out")
        } else if text.starts_with("NEWREPORT:") {
            answer("report-out")
        } else {
            unexpected(body)
        }
    })
}

fn replan_plan(server: &FakeOpenAi) -> String {
    let agents = [llm_agent("worker"), llm_agent("planner")].join("\n");
    llm_plan("replan", &server.base_url(), &agents, REPLAN_WORKFLOW, "    planner: planner\n    max_replans: 1")
}

#[test]
fn a_replan_splices_the_planners_tasks_in_place_of_the_failed_ones() {
    let replacement = r#"{"workflow": [
        {"id": "alt_fetch", "agent": "worker", "input": "ALTFETCH: {{ tasks.seed.output }}", "depends_on": ["seed"]},
        {"id": "new_report", "agent": "worker", "input": "NEWREPORT: {{ tasks.alt_fetch.output }}", "depends_on": ["alt_fetch"]}
    ]}"#;
    let server = replan_server(replacement);
    let env = Env::new();
    env.write("plan.yaml", &replan_plan(&server));

    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "p1"]);
    assert_eq!(applied.code, Some(0), "{applied}");

    let planner = bodies(&server, |b| is_agent(b, "planner"));
    assert_eq!(planner.len(), 1);
    let prompt = user(&planner[0]);
    assert!(prompt.contains("flaky_fetch") && prompt.contains("UNSUPPORTED-MODEL-FEATURE"), "{prompt}");
    assert!(prompt.contains("seed-out"), "the planner sees the outputs so far: {prompt}");
    assert_eq!(planner[0]["response_format"]["type"], "json_schema");
    assert_eq!(bodies(&server, |b| user(b).starts_with("FLAKY:")).len(), 1, "a 400 is not retried");
    assert!(bodies(&server, |b| user(b).starts_with("OLDREPORT:")).is_empty());

    let replanned = events_of(&env, "p1", "Replanned");
    assert_eq!(replanned.len(), 1, "{replanned:#?}");
    assert_eq!(replanned[0]["task"], "flaky_fetch");
    let removed: BTreeSet<String> = strings(&replanned[0]["removed"]).into_iter().collect();
    assert_eq!(removed, set(&["flaky_fetch", "old_report"]));
    assert_eq!(strings(&replanned[0]["added"]), ["alt_fetch", "new_report"]);
    assert_eq!(events_of(&env, "p1", "ReplanRequested").len(), 1);

    let graph = runner(&env, &["graph", "p1"]);
    assert_eq!(graph.code, Some(0), "{graph}");
    for id in ["seed", "alt_fetch", "new_report"] {
        assert!(graph.stdout.contains(id), "the run's graph has `{id}`: {graph}");
    }
    for id in ["flaky_fetch", "old_report"] {
        assert!(!graph.stdout.contains(id), "the run's graph lost `{id}`: {graph}");
    }

    let status = env.status("p1");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["replans"], 1);
    assert_eq!(task_keys(&status), set(&["seed", "alt_fetch", "new_report"]));
    assert_eq!(status["tasks"]["seed"]["attempts"], 1, "a kept task is not run again");
    assert_eq!(status["tasks"]["new_report"]["output"], "report-out");
    let human = runner(&env, &["status", "p1"]);
    assert!(human.stdout.contains("alt_fetch") && human.stdout.contains("new_report"), "{human}");

    // A retry runs the plan as replanned: everything succeeded, so everything is reused.
    let asked = server.requests().len();
    let retried = runner(&env, &["retry", "p1", "--run-id", "p1b"]);
    assert_eq!(retried.code, Some(0), "{retried}");
    let reused: BTreeSet<String> = events_of(&env, "p1b", "TaskReused").iter().map(|r| r["task"].to_string()).collect();
    assert_eq!(reused, ["\"alt_fetch\"", "\"new_report\"", "\"seed\""].into_iter().map(String::from).collect());
    assert_eq!(server.requests().len(), asked, "nothing ran again");
}

#[test]
fn a_replacement_still_invalid_after_one_repair_fails_the_run() {
    let server =
        replan_server(r#"{"workflow": [{"id": "retry_fetch", "agent": "ghost", "input": "again", "depends_on": []}]}"#);
    let env = Env::new();
    env.write("plan.yaml", &replan_plan(&server));

    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "p2"]);
    assert_eq!(applied.code, Some(1), "{applied}");

    let planner = bodies(&server, |b| is_agent(b, "planner"));
    assert_eq!(planner.len(), 2, "asked once, then once more with the problems");
    let (first, second) = (user(&planner[0]), user(&planner[1]));
    assert!(!first.contains("It has these problems"), "{first}");
    assert!(second.contains("It has these problems") && second.contains("ghost"), "{second}");
    assert!(second.contains("You are the planner of a running workflow"), "the repair repeats the prompt: {second}");
    assert!(second.contains("retry_fetch"), "the repair quotes the invalid answer: {second}");
    assert_eq!(planner[1]["response_format"]["type"], "json_schema");

    let failed = events_of(&env, "p2", "ReplanFailed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["task"], "flaky_fetch");
    assert!(failed[0]["reason"].as_str().unwrap_or_default().contains("ghost"), "{failed:#?}");
    assert!(events_of(&env, "p2", "Replanned").is_empty());
    let status = env.status("p2");
    assert_eq!(status["status"], "failed");
    assert_eq!(status["replans"], 0);
    assert!(bodies(&server, |b| user(b).starts_with("OLDREPORT:")).is_empty());
}

// --- 7. token budget --------------------------------------------------------------------------

/// Runs `a` (15 tokens of usage) then `b`, whose input alone fits a budget of 50 (about 41
/// tokens) but not on top of what `a` used.
fn budget_run(critical: bool) -> (Env, FakeOpenAi, Out) {
    let server = FakeOpenAi::script(vec![answer("ok")]);
    let env = Env::new();
    // 38 words of one token each: about 41 tokens with the rest of the input.
    let padding = " alpha".repeat(38);
    let workflow = format!(
        "    - {{id: a, agent: w, input: \"A: go\"}}\n    - {{id: b, agent: w, input: \"B: {{{{ tasks.a.output }}}} {padding}\", depends_on: [a], critical: {critical}}}"
    );
    env.write("plan.yaml", &llm_plan("budget", &server.base_url(), &llm_agent("w"), &workflow, "    token_budget: 50"));
    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "b1"]);
    (env, server, applied)
}

fn assert_exhausted(env: &Env, server: &FakeOpenAi, outcome: &str) {
    assert_eq!(server.requests().len(), 1, "b is never sent");
    let exhausted = events_of(env, "b1", "BudgetExhausted");
    assert_eq!(exhausted.len(), 1, "{:#?}", env.records("b1"));
    let reason = exhausted[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("50") && reason.contains('b'), "{reason}");
    assert!(events_of(env, "b1", "TaskDispatched").iter().all(|r| r["task"] != "b"));
    let status = env.status("b1");
    assert_eq!(status["status"], outcome);
    assert_eq!(status["tokens"], json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}));
    assert_eq!(status["exhausted"].as_str(), Some(reason));
    assert_eq!(status["tasks"]["a"]["status"], "succeeded");
    assert_eq!(status["tasks"]["b"]["status"], "skipped");
    let human = runner(env, &["status", "b1"]);
    assert!(human.stdout.contains("budget") && human.stdout.contains("50"), "{human}");
}

#[test]
fn the_token_budget_stops_a_critical_task_and_fails_the_run() {
    let (env, server, applied) = budget_run(true);
    assert_eq!(applied.code, Some(1), "{applied}");
    assert_exhausted(&env, &server, "failed");
}

#[test]
fn the_token_budget_stopping_only_non_critical_work_makes_the_run_partial() {
    let (env, server, applied) = budget_run(false);
    assert_eq!(applied.code, Some(5), "{applied}");
    assert_exhausted(&env, &server, "partial");
}

#[test]
fn tokens_of_a_failed_attempt_count_in_the_total_and_against_the_budget() {
    // `a` fails (its answer is cut at max_tokens, which no retry mends) after using 15 tokens;
    // `b`'s input fits a budget of 50 on its own, but not on top of them.
    let server = FakeOpenAi::script(vec![Step::Truncated("cut".to_owned())]);
    let env = Env::new();
    let padding = " alpha".repeat(38);
    let workflow = format!(
        "    - {{id: a, agent: w, input: \"A: go\", on_failure: skip}}\n    - {{id: b, agent: w, input: \"B: {padding}\", depends_on: [a]}}"
    );
    env.write("plan.yaml", &llm_plan("budget", &server.base_url(), &llm_agent("w"), &workflow, "    token_budget: 50"));
    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "b1"]);
    assert_eq!(applied.code, Some(5), "{applied}");
    assert_eq!(server.requests().len(), 1, "b is never sent");
    let failed = events_of(&env, "b1", "TaskFailed");
    assert_eq!(failed[0]["tokens"], json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}));
    assert!(failed[0]["error"].as_str().unwrap_or_default().contains("cut at 4096 tokens"), "{failed:?}");
    assert_eq!(events_of(&env, "b1", "BudgetExhausted").len(), 1, "{:#?}", env.records("b1"));
    let status = env.status("b1");
    assert_eq!(status["tokens"], json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}));
    let human = runner(&env, &["status", "b1"]);
    let total = (PROMPT_TOKENS + COMPLETION_TOKENS).to_string();
    assert!(human.stdout.contains(&total), "{human}");
}

#[test]
fn an_attempt_that_runs_out_of_time_still_reports_the_tokens_it_used() {
    // One turn calls a tool (15 tokens), then the server hangs until the task's timeout.
    let server = FakeOpenAi::script(vec![Step::ToolCalls(vec![("lookup".to_owned(), "{}".to_owned())]), Step::Hang]);
    let env = Env::new();
    let agents = "    w: {runtime: llm, provider: fake, system_prompt: \"ROLE w\", tools: [lookup], max_turns: 3}";
    let workflow = "    - {id: a, agent: w, input: \"A\", timeout: 1s}";
    let plan = llm_plan("slow", &server.base_url(), agents, workflow, "").replacen(
        "  agent_definitions:",
        "  tools:\n    lookup:\n      description: Looks up\n      command: [cat]\n  agent_definitions:",
        1,
    );
    env.write("plan.yaml", &plan);
    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "t1"]);
    assert_eq!(applied.code, Some(1), "{applied}");
    let failed = events_of(&env, "t1", "TaskFailed");
    assert!(failed[0]["error"].as_str().unwrap_or_default().contains("timed out after 1s"), "{failed:?}");
    assert_eq!(failed[0]["tokens"], json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}));
    assert_eq!(env.status("t1")["tokens"], json!({"prompt": PROMPT_TOKENS, "completion": COMPLETION_TOKENS}));
}

#[test]
fn another_model_answering_is_warned_about_once_per_run() {
    let server = FakeOpenAi::script(vec![Step::As("tiny-model".to_owned(), Box::new(answer("ok")))]);
    let env = Env::new();
    let workflow = "    - {id: a, agent: w, input: \"A\"}\n    - {id: b, agent: w, input: \"B\", depends_on: [a]}";
    env.write("plan.yaml", &llm_plan("swap", &server.base_url(), &llm_agent("w"), workflow, ""));
    let applied = runner(&env, &["apply", "plan.yaml", "--yes", "--run-id", "s1"]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let warning = "provider `fake` answered a request for model `fake-model` with model `tiny-model`";
    assert_eq!(applied.stderr.matches(warning).count(), 1, "{applied}");
}

// --- 8. the API key -----------------------------------------------------------------------------

const CANARY: &str = "sk-test-LEAKCANARY-12345";

#[test]
fn the_api_key_appears_in_no_file_and_no_output_even_when_the_server_echoes_it() {
    let server = FakeOpenAi::start(|body, _| {
        let text = user(body);
        let answered_tool = body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if text.starts_with("E400:") {
            status_step(400, r#"{"error": "bad key {{authorization}}"}"#)
        } else if text.starts_with("RAW:") {
            Step::Raw("this is not JSON: {{authorization}}".to_owned())
        } else if text.starts_with("ANSWER:") {
            answer("the key I was sent is {{authorization}}")
        } else if text.starts_with("ASK:") && !text.contains("Clarification:") {
            Step::ToolCalls(vec![("ask_user".to_owned(), r#"{"question": "is {{authorization}} yours?"}"#.to_owned())])
        } else if text.starts_with("ASK:") {
            answer("thanks")
        } else if text.starts_with("ENV:") && !answered_tool {
            Step::ToolCalls(vec![("show_env".to_owned(), "{}".to_owned())])
        } else if text.starts_with("ENV:") {
            answer("environment seen")
        } else {
            unexpected(body)
        }
    });
    let env = Env::new();
    let agents = "    worker: {runtime: llm, provider: fake, system_prompt: \"ROLE worker\", tools: [show_env], max_turns: \
                  3}\n    printenv: {runtime: command, command: [env]}";
    let workflow = r#"    - {id: echo400, agent: worker, input: "E400: hi", on_failure: skip}
    - {id: echoraw, agent: worker, input: "RAW: hi", on_failure: skip}
    - {id: echoanswer, agent: worker, input: "ANSWER: hi"}
    - {id: asks, agent: worker, input: "ASK: hi"}
    - {id: envtool, agent: worker, input: "ENV: hi"}
    - {id: after, agent: worker, input: "ANSWER: {{ tasks.echoanswer.output }}", depends_on: [echoanswer]}
    - {id: envagent, agent: printenv, input: "x", verification: {type: command, command: [sh, -c, "env >&2; exit 1"]}, on_failure: skip}"#;
    let mut plan = llm_plan("leak", &server.base_url(), agents, workflow, "");
    plan = plan.replacen(
        "  agent_definitions:",
        "  tools:\n    show_env:\n      description: Prints the environment\n      command: [env]\n  agent_definitions:",
        1,
    );
    env.write("plan.yaml", &plan);

    let mut outs = Vec::new();
    let mut run = |args: &[&str]| {
        let out = runner_with_key(&env, CANARY, args);
        outs.push(out.clone());
        out
    };
    let dry = run(&["apply", "plan.yaml", "--dry-run"]);
    assert_eq!(dry.code, Some(0), "{dry}");
    let applied = run(&["apply", "plan.yaml", "--yes", "--run-id", "k1"]);
    assert_eq!(applied.code, Some(3), "paused for the question: {applied}");
    for args in [
        &["status", "k1"][..],
        &["status", "k1", "--format", "json"],
        &["logs", "k1"],
        &["events", "k1"],
        &["runs"],
        &["graph", "k1"],
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(0), "{out}");
    }
    let answered = run(&["answer", "k1", "asks", "yes"]);
    assert_eq!(answered.code, Some(0), "{answered}");
    let resumed = run(&["resume", "k1"]);
    assert_eq!(resumed.code, Some(5), "three tasks were skipped: {resumed}");
    for args in [
        &["status", "k1"][..],
        &["status", "k1", "--format", "json"],
        &["logs", "k1"],
        &["events", "k1"],
        &["critic", "plan.yaml"],
        &["critic", "plan.yaml", "--format", "json"],
        &["validate", "plan.yaml"],
        &["graph", "plan.yaml"],
    ] {
        let out = run(args);
        assert!(matches!(out.code, Some(0 | 1)), "{out}");
    }

    // The key was really used, and the server really echoed it.
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.authorization.as_deref() == Some(format!("Bearer {CANARY}").as_str())));
    let events = outs.iter().find(|o| o.args == ["events", "k1"]).map(|o| o.stdout.clone()).unwrap_or_default();
    assert!(events.contains("[redacted]"), "the echoed key reached the runner and was redacted: {events}");
    let skipped = events_of(&env, "k1", "TaskSkipped");
    let failed = events_of(&env, "k1", "TaskFailed");
    assert!(skipped.iter().any(|r| r["task"] == "envagent"), "the verification printing env failed: {skipped:#?}");
    for task in ["echo400", "echoraw"] {
        assert!(skipped.iter().any(|r| r["task"] == task), "{skipped:#?}");
        let error = failed.iter().find(|r| r["task"] == task).map(|r| r["error"].to_string()).unwrap_or_default();
        assert!(error.contains("[redacted]"), "the echo in the body of `{task}`'s error is redacted: {error}");
    }
    let succeeded = events_of(&env, "k1", "TaskSucceeded");
    let output = succeeded.iter().find(|r| r["task"] == "echoanswer").map(|r| r["output"].to_string());
    assert!(output.is_some_and(|o| o.contains("[redacted]")), "{succeeded:#?}");
    let asked = events_of(&env, "k1", "ClarificationRequested");
    assert!(asked.iter().any(|r| r["question"] == "is Bearer [redacted] yours?"), "{asked:#?}");

    let mut leaks = Vec::new();
    for out in &outs {
        if out.all().contains(CANARY) {
            leaks.push(format!("output of {out}"));
        }
    }
    let files = files_under(env.dir());
    assert!(files.iter().any(|f| f.ends_with("runs/k1/events.jsonl")), "{files:?}");
    for file in files {
        let bytes = std::fs::read(&file).unwrap_or_default();
        if String::from_utf8_lossy(&bytes).contains(CANARY) {
            leaks.push(format!("file {}", file.display()));
        }
    }
    for request in &requests {
        if request.body.to_string().contains(CANARY) {
            leaks.push(format!("a request body sent to the server (a tool saw the key?): {}", request.body));
        }
    }
    assert!(env.home().join("runs").join("k1").exists());
    assert!(leaks.is_empty(), "the API key leaked into:\n{}", leaks.join("\n\n"));
}

// --- 9. the shipped triage example ----------------------------------------------------------

#[test]
fn the_triage_example_runs_as_shipped_against_a_local_server() {
    let server = FakeOpenAi::start(|body, _| {
        let system = llm_support::role(body);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let tool_result = messages.iter().rev().find(|m| m["role"] == "tool").map(|m| m["content"].to_string());
        if system.contains("on-call engineer") {
            match tool_result {
                None => Step::ToolCalls(vec![(
                    "grep_log".to_owned(),
                    r#"{"file": "data/app.log", "contains": "ERROR"}"#.to_owned(),
                )]),
                Some(lines) => answer(&format!("Errors found: {lines}")),
            }
        } else if system.contains("classify incidents") {
            answer(r#"{"severity": "high", "component": "db", "summary": "pool exhausted, deadlock"}"#)
        } else if system.contains("review root-cause") {
            answer(r#"{"pass": true, "reason": "every claim cites a line"}"#)
        } else if system.contains("incident reports") {
            answer("## Impact\nCheckout failed.\n## Root cause\nDeadlock on orders.")
        } else {
            unexpected(body)
        }
    });
    let env = Env::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let plan = std::fs::read_to_string(root.join("triage.yaml"))
        .expect("the example")
        .replace("http://localhost:11434/v1", &server.base_url());
    env.write("triage.yaml", &plan);
    std::fs::create_dir_all(env.dir().join("tools")).expect("tools/");
    std::fs::create_dir_all(env.dir().join("data")).expect("data/");
    for file in ["tools/grep_log.py", "data/app.log"] {
        std::fs::copy(root.join(file), env.dir().join(file)).expect("copied");
    }
    let applied = runner(&env, &["apply", "triage.yaml", "--yes", "--run-id", "t1"]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let tool_message = server
        .requests()
        .iter()
        .filter_map(|r| r.body["messages"].as_array().cloned())
        .flatten()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(tool_message.contains("deadlock detected on table orders"), "the tool read the log: {tool_message}");
    let report = bodies(&server, |b| llm_support::role(b).contains("incident reports"));
    assert_eq!(report.len(), 1);
    let summary = user(&report[0]);
    assert!(summary.contains("## classify") && summary.contains("severity"), "the report reads the summary: {summary}");
    let status = env.status("t1");
    assert_eq!(status["status"], "succeeded");
    assert!(status["tokens"]["prompt"].as_u64().unwrap_or(0) > 0);
}
