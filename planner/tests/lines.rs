//! Plans a line at a time: the splitter over every way a stream can cut an answer, the
//! assembler's verdict for each kind of bad line, resuming from accepted lines, and
//! `author_lines` against a fake OpenAI server.

use std::sync::{Arc, Mutex};

use model::Endpoint;
use planner::author::{Outcome, Request, Windows};
use planner::lines::{
    Assembler, LineError, LineEvent, LineProblem, LinesAuthored, MAX_LINE_BYTES, MAX_LINES, Splitter, Verdict,
    author_lines,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use testkit::{FakeOpenAi, Step};

const HEADER: &str = r#"{"plan": {"mission": "Brief tea buyers.", "agents": {"researcher": {"runtime": "mock"}, "writer": {"runtime": "mock"}}}}"#;

fn task(id: &str, agent: &str, depends_on: &[&str]) -> String {
    json!({"task": {"id": id, "agent": agent, "input": format!("Do {id}."), "depends_on": depends_on}}).to_string()
}

/// Every line the splitter gives out for `pieces`, errors as their codes.
fn split(pieces: &[&str]) -> Vec<String> {
    let mut splitter = Splitter::new();
    let mut out: Vec<Result<String, LineError>> = pieces.iter().flat_map(|piece| splitter.push(piece)).collect();
    out.extend(splitter.finish());
    out.into_iter().map(|line| line.unwrap_or_else(|error| error.code())).collect()
}

/// The lines as values, to compare texts that differ only in white space.
fn values(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|line| serde_json::from_str(line).unwrap_or(Value::String(line.clone()))).collect()
}

const STREAM: &str = "```json\n{\"plan\": {\"mission\": \"Thé für Käufer 日本 🍵\", \"agents\": {\"r\": {\"runtime\": \"mock\"}}}}\n\n{\"task\": {\"id\": \"a\", \"agent\": \"r\", \"input\": \"say \\\"{hi}\\\" \\\\ ünd }\"}}\r\n{\"task\": {\"id\": \"b\", \"agent\": \"r\", \"input\": \"🍵 [x]\", \"depends_on\": [\"a\"]}}\n```\n";

#[test]
fn every_split_point_gives_the_same_lines() {
    let whole = split(&[STREAM]);
    assert_eq!(whole.len(), 3, "{whole:?}");
    assert_eq!(values(&whole)[0]["plan"]["mission"], "Thé für Käufer 日本 🍵");
    assert_eq!(values(&whole)[1]["task"]["input"], "say \"{hi}\" \\ ünd }");
    let bounds: Vec<usize> = STREAM.char_indices().map(|(i, _)| i).chain([STREAM.len()]).collect();
    for &cut in &bounds {
        assert_eq!(split(&[&STREAM[..cut], &STREAM[cut..]]), whole, "cut at byte {cut}");
    }
    // One character per piece, as a slow stream delivers.
    let chars: Vec<String> = STREAM.chars().map(String::from).collect();
    let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(split(&pieces), whole);
}

#[test]
fn the_constrained_object_streams_its_header_and_each_task_as_they_close() {
    let answer = "{\n  \"plan\": {\"mission\": \"m\", \"agents\": {\"r\": {\"runtime\": \"mock\"}}},\n  \"tasks\": [\n    {\n      \"id\": \"a\", \"agent\": \"r\", \"input\": \"x ] }\"\n    },\n    {\"id\": \"b\", \"agent\": \"r\", \"input\": \"y\", \"depends_on\": [\"a\"]}\n  ]\n}\n";
    let lines = split(&[answer]);
    assert_eq!(
        values(&lines),
        [
            json!({"plan": {"mission": "m", "agents": {"r": {"runtime": "mock"}}}}),
            json!({"task": {"id": "a", "agent": "r", "input": "x ] }"}}),
            json!({"task": {"id": "b", "agent": "r", "input": "y", "depends_on": ["a"]}}),
        ]
    );
    // The first task is out as soon as its object closes, before the second one starts.
    let first_closed = answer.find("    },").expect("the first task's end") + "    }".len();
    let mut splitter = Splitter::new();
    let out = splitter.push(&answer[..first_closed]);
    assert_eq!(out.len(), 2, "{out:?}");
    for &cut in &[1, 17, first_closed, answer.len() - 3] {
        assert_eq!(split(&[&answer[..cut], &answer[cut..]]), lines, "cut at {cut}");
    }
    // On one line, as a server that does not pretty-print writes it.
    let compact: Value = serde_json::from_str(answer).expect("the answer is JSON");
    assert_eq!(values(&split(&[&compact.to_string()])), values(&lines));
}

#[test]
fn a_line_broken_off_is_given_out_as_written_and_the_next_line_still_reads() {
    let lines =
        split(&["{\"task\": {\"id\": \"a\", \"input\": \"say \"hi\" now\"}}\n", "{\"task\": {\"id\": \"b\"}}\n"]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("{\"task\": {\"id\": \"a\""), "{lines:?}");
    assert_eq!(values(&lines)[1], json!({"task": {"id": "b"}}));
    let unclosed = split(&["{\"task\": {\"id\": \"a\"\n{\"task\": {\"id\": \"b\"}}\n"]);
    assert_eq!(unclosed.len(), 2, "{unclosed:?}");
    assert_eq!(values(&unclosed)[1], json!({"task": {"id": "b"}}));
    // A last brace missing: the member is whole, and taken as the line it was meant to be.
    let short = split(&["{\"task\": {\"id\": \"a\"}\n{\"task\": {\"id\": \"b\"}}\n{\"task\": {\"id\": \"c\"}"]);
    assert_eq!(
        values(&short),
        [json!({"task": {"id": "a"}}), json!({"task": {"id": "b"}}), json!({"task": {"id": "c"}})]
    );
    // A line of one member is given out exactly as written.
    assert_eq!(split(&["{ \"task\" :{\"id\":\"a\"} }\n"]), ["{ \"task\" :{\"id\":\"a\"} }"]);
    assert_eq!(split(&["Here is the plan:\n", "{\"task\": {}}"]), ["Here is the plan:", "{\"task\": {}}"]);
    assert_eq!(
        split(&["{\"task\": {\"id\": \"cut"]),
        ["{\"task\": {\"id\": \"cut"],
        "what is left when the answer ends"
    );
}

#[test]
fn a_line_too_long_and_lines_past_the_limit_are_errors_not_panics() {
    let long = format!("{{\"task\": {{\"input\": \"{}\"}}}}\n", "x".repeat(MAX_LINE_BYTES));
    assert_eq!(split(&[&long, "{\"task\": {}}\n"]), ["author::line_too_long", "{\"task\": {}}"]);
    let many = "{\"task\": {}}\n".repeat(MAX_LINES + 5);
    let lines = split(&[&many]);
    assert_eq!(lines.len(), MAX_LINES + 1);
    assert_eq!(lines.last().map(String::as_str), Some("author::line_limit"));
}

proptest! {
    /// Whatever the text and wherever the stream cuts it, the splitter never panics and gives
    /// out the same lines.
    #[test]
    fn any_text_cut_anywhere_splits_alike(
        text in proptest::collection::vec(prop_oneof![
            Just("{"), Just("}"), Just("["), Just("]"), Just("\""), Just(":"), Just(","), Just("\\"),
            Just("\n"), Just(" "), Just("a"), Just("é"), Just("🍵"), Just("\"tasks\""), Just("```"),
        ], 0..80).prop_map(|parts| parts.concat()),
        cut in 0usize..400,
    ) {
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let cut = bounds[cut % bounds.len()];
        prop_assert_eq!(split(&[&text[..cut], &text[cut..]]), split(&[&text]));
    }
}

fn rejected(verdict: Verdict) -> LineProblem {
    match verdict {
        Verdict::Rejected(problem) => problem,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn accepted(assembler: &mut Assembler, number: usize, line: &str) -> Verdict {
    let verdict = assembler.take(number, line);
    assert!(matches!(verdict, Verdict::Header | Verdict::Task { .. }), "line {number}: {verdict:?}");
    verdict
}

#[test]
fn each_bad_line_is_rejected_with_its_code_line_and_task() {
    let mut assembler = Assembler::new("brief", None);
    let cases = [
        ("not json", "author::line_parse"),
        ("[1, 2]", "author::line_parse"),
        (r#"{"step": {}}"#, "author::line_kind"),
        (r#"{"plan": {}, "task": {}}"#, "author::line_kind"),
    ];
    for (line, code) in cases {
        assert_eq!(rejected(assembler.take(1, line)).code, code, "{line}");
    }
    assert_eq!(rejected(assembler.take(1, &task("a", "researcher", &[]))).code, "author::line_order");
    assert_eq!(rejected(assembler.take(1, r#"{"plan": {"mission": "m", "tasks": []}}"#)).code, "author::line_header");
    assert_eq!(rejected(assembler.take(1, r#"{"plan": {"name": "x"}}"#)).code, "author::line_header");
    let shell =
        r#"{"plan": {"mission": "m", "agents": {"sh": {"runtime": "command", "command": ["rm", "-rf", "/"]}}}}"#;
    let problem = rejected(assembler.take(1, shell));
    assert_eq!(problem.code, "author::unknown_command", "{problem}");
    accepted(&mut assembler, 1, HEADER);
    assert_eq!(rejected(assembler.take(2, HEADER)).code, "author::line_order");
    assert_eq!(rejected(assembler.take(2, r#"{"questions": ["Which?"]}"#)).code, "author::line_order");
    accepted(&mut assembler, 2, &task("search", "researcher", &[]));
    let problem = rejected(assembler.take(3, &task("search", "writer", &[])));
    assert_eq!((problem.code.as_str(), problem.task.as_deref()), ("author::line_duplicate", Some("search")));
    assert!(problem.message.contains("line 2"), "{problem}");
    assert_eq!(rejected(assembler.take(3, r#"{"task": {"agent": "writer"}}"#)).code, "author::line_task_id");
    assert_eq!(
        rejected(assembler.take(3, r#"{"task": {"id": "a b", "agent": "writer"}}"#)).code,
        "author::line_task_id"
    );
    let problem = rejected(assembler.take(3, &task("edit", "editor", &[])));
    assert_eq!(problem.code, "author::line_agent");
    assert!(problem.message.contains("researcher, writer"), "{problem}");
    let problem = rejected(assembler.take(4, &task("write", "writer", &["serach"])));
    assert_eq!(
        problem.to_string(),
        "line 4 (task `write`): author::line_dependency: task `write` depends on `serach`, which no earlier line defines; a task may depend only on tasks of earlier lines"
    );
    let problem = rejected(assembler.take(5, &task("polish", "writer", &["write"])));
    assert_eq!(problem.code, "author::line_upstream_dropped", "{problem}");
    assert!(problem.message.contains("line 4"), "{problem}");
    let reads_later = json!({"task": {"id": "draft", "agent": "writer", "input": "{{ tasks.summary.output }}"}});
    let problem = rejected(assembler.take(6, &reads_later.to_string()));
    assert_eq!(problem.task.as_deref(), Some("draft"));
    assert!(problem.code.starts_with("plan::"), "the loader's own code: {problem}");
    let reads_unlinked = json!({"task": {"id": "draft", "agent": "writer", "input": "{{ tasks.search.output }}"}});
    assert_eq!(rejected(assembler.take(6, &reads_unlinked.to_string())).code, "plan::template_not_ancestor");
    let sub_plan = json!({"task": {"id": "sub", "type": "plan", "plan": "x.yaml"}});
    assert_eq!(rejected(assembler.take(6, &sub_plan.to_string())).code, "author::sub_plan");
    let bad_field = json!({"task": {"id": "odd", "agent": "writer", "input": "x", "retries": 3}});
    let problem = rejected(assembler.take(6, &bad_field.to_string()));
    assert!(problem.message.contains("spec.workflow[1]"), "located at the new task: {problem}");
    assert_eq!(assembler.tasks(), 1, "no rejected line was kept");
    assert_eq!(assembler.accepted().len(), 2);
}

#[test]
fn questions_come_only_instead_of_a_plan() {
    let mut assembler = Assembler::new("brief", None);
    assert_eq!(assembler.take(1, r#"{"questions": []}"#), Verdict::Rejected(LineProblem {
        line: 1,
        task: None,
        code: "author::line_kind".to_owned(),
        message: "a line is `{\"plan\": {...}}`, `{\"task\": {...}}` or `{\"questions\": [...]}`, not `questions` that are not a non-empty list of texts".to_owned(),
    }));
    assert_eq!(
        assembler.take(1, r#"{"questions": [" Which market? "]}"#),
        Verdict::Questions(vec!["Which market?".to_owned()])
    );
    assert!(assembler.accepted().is_empty());
}

/// A template with a destructive tool that does not ask before each call, and its agent.
fn destructive_template() -> manifest::Plan {
    let text = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: t}
spec:
  providers:
    local: {kind: openai, base_url: "http://localhost:1/v1", model: m}
  tools:
    wipe: {description: Delete the cache, command: [rm, -r, cache], destructive: true}
  agent_definitions:
    cleaner: {runtime: llm, provider: local, tools: [wipe], allow_tools: [wipe], max_turns: 4}
  workflow:
    - {id: a, agent: cleaner, input: x}
"#;
    manifest::load_str("t.yaml", "t", text, &|_| false).plan.expect("the template loads")
}

#[test]
fn blocking_refuses_a_destructive_task_with_no_review_before_it() {
    let template = destructive_template();
    let header = r#"{"plan": {"mission": "Clean up."}}"#;
    let clean = json!({"task": {"id": "clean", "agent": "cleaner", "input": "Clean the cache."}}).to_string();
    let mut lenient = Assembler::new("clean", Some(&template));
    accepted(&mut lenient, 1, header);
    let Verdict::Task { plan, id } = accepted(&mut lenient, 2, &clean) else { unreachable!() };
    assert_eq!(id, "clean");
    assert!(plan.tools.contains_key("wipe") && plan.providers.contains_key("local"), "what the agent uses comes along");
    let mut blocking = Assembler::new("clean", Some(&template)).blocking(true);
    accepted(&mut blocking, 1, header);
    let problem = rejected(blocking.take(2, &clean));
    assert_eq!((problem.code.as_str(), problem.line), ("author::line_blocked", 2), "{problem}");
    let review = json!({"task": {"id": "confirm", "type": "human_review", "prompt": "Clean the cache?"}});
    accepted(&mut blocking, 2, &review.to_string());
    let reviewed = json!({"task": {"id": "clean", "agent": "cleaner", "input": "Clean.", "depends_on": ["confirm"]}});
    accepted(&mut blocking, 3, &reviewed.to_string());
}

#[test]
fn a_task_may_name_a_template_agent_without_copying_it() {
    let template = destructive_template();
    let mut assembler = Assembler::new("t", Some(&template));
    accepted(&mut assembler, 1, r#"{"plan": {"mission": "m", "agents": {"helper": {"runtime": "mock"}}}}"#);
    let problem = rejected(assembler.take(2, &task("x", "nobody", &[])));
    assert!(problem.message.contains("cleaner, helper"), "{problem}");
    accepted(&mut assembler, 2, &task("x", "helper", &[]));
    let manifest = assembler.manifest_json();
    assert_eq!(manifest["metadata"]["name"], "t");
    assert!(manifest["spec"].get("tools").is_none(), "no unused tool: {manifest}");
    assert_eq!(manifest["spec"]["agent_definitions"].as_object().map(|a| a.len()), Some(1));
}

#[test]
fn resume_rebuilds_from_accepted_lines_and_numbers_go_on() {
    let lines = [HEADER.to_owned(), task("search", "researcher", &[]), task("write", "writer", &["search"])];
    let mut assembler = Assembler::resume("brief", None, &lines).expect("the lines were accepted before");
    assert_eq!(assembler.tasks(), 2);
    assert_eq!(assembler.accepted(), &lines);
    let problem = rejected(assembler.take(4, &task("search", "writer", &[])));
    assert!(problem.message.contains("line 2"), "{problem}");
    let Verdict::Task { plan, .. } = accepted(&mut assembler, 4, &task("review", "writer", &["write"])) else {
        unreachable!()
    };
    assert_eq!(plan.tasks.iter().map(|t| t.id.value.as_str()).collect::<Vec<_>>(), ["search", "write", "review"]);
    let broken = [HEADER.to_owned(), task("write", "writer", &["search"])];
    let problem = Assembler::resume("brief", None, &broken).expect_err("a dangling dependency");
    assert_eq!((problem.line, problem.code.as_str()), (2, "author::line_dependency"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever lines arrive, in whatever order, every accepted prefix loads valid and holds
    /// exactly the tasks accepted so far.
    #[test]
    fn every_accepted_prefix_loads(picks in proptest::collection::vec((0usize..6, 0usize..6, 0usize..3), 1..12)) {
        let ids = ["a", "b", "c", "d", "e", "f"];
        let mut assembler = Assembler::new("brief", None);
        let mut kept: Vec<String> = Vec::new();
        accepted(&mut assembler, 1, HEADER);
        for (n, (id, dep, agent)) in picks.into_iter().enumerate() {
            let agent = ["researcher", "writer", "ghost"][agent];
            let depends: Vec<&str> = if dep == id { Vec::new() } else { vec![ids[dep]] };
            match assembler.take(n + 2, &task(ids[id], agent, &depends)) {
                Verdict::Task { plan, id: taken } => {
                    kept.push(taken);
                    let text = serde_json::to_string(&assembler.manifest_json()).expect("a value encodes");
                    let loaded = manifest::load_str("p.json", "brief", &text, &|_| false);
                    prop_assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
                    let names: Vec<&str> = plan.tasks.iter().map(|t| t.id.value.as_str()).collect();
                    prop_assert_eq!(names, kept.iter().map(String::as_str).collect::<Vec<_>>());
                }
                Verdict::Rejected(problem) => prop_assert!(problem.code.starts_with("author::line_"), "{}", problem),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(assembler.tasks(), kept.len());
    }
}

fn endpoint(server: &FakeOpenAi) -> Endpoint {
    let provider = manifest::plan::Provider {
        kind: "openai".to_owned(),
        base_url: server.base_url(),
        timeout: Some(manifest::Duration::from_millis(10_000)),
        ..Default::default()
    };
    Endpoint::for_provider("test", &provider, Some("sk-test-key-4711".to_owned())).expect("an HTTP client")
}

fn request(stream: bool) -> Request {
    Request {
        text: "Brief tea buyers.".to_owned(),
        name: "brief".to_owned(),
        models: vec!["model-a".to_owned()],
        candidates: 1,
        stream,
        temperature: 0.2,
        ..Request::default()
    }
}

/// Runs `author_lines` and returns the result and every event, each as a short text.
async fn write(server: &FakeOpenAi, stream: bool, prefix: &[String]) -> (LinesAuthored, Vec<String>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let mut on_line = move |event: LineEvent| {
        let text = match event {
            LineEvent::Accepted { line, verdict: Verdict::Task { id, .. }, .. } => format!("{line} task {id}"),
            LineEvent::Accepted { line, verdict, .. } => format!("{line} {verdict:?}"),
            LineEvent::Rejected(problem) => format!("{} rejected {}", problem.line, problem.code),
            LineEvent::Repaired { line, .. } => format!("{line} repaired"),
            LineEvent::Dropped(problem) => format!("{} dropped {}", problem.line, problem.code),
        };
        seen.lock().expect("the events").push(text);
    };
    let authored = author_lines(&request(stream), &Windows::default(), &endpoint(server), prefix, &mut on_line).await;
    let events = events.lock().expect("the events").clone();
    (authored, events)
}

#[tokio::test]
async fn streamed_lines_are_taken_as_they_come_and_a_bad_one_is_repaired() {
    let pieces = vec![
        format!("{HEADER}\n"),
        format!("{}\n", task("search", "researcher", &[])),
        format!("{}\n", task("write", "writer", &["serach"])),
        format!("{}\n", task("polish", "writer", &["write"])),
        format!("{}\n", task("notes", "nobody", &[])),
    ];
    let server = FakeOpenAi::script(vec![
        Step::Stream(pieces),
        Step::Answer(format!("Sure:\n{}", task("write", "writer", &["search"]))),
        Step::Answer("no idea".to_owned()),
    ]);
    let (authored, events) = write(&server, true, &[]).await;
    assert_eq!(
        events,
        [
            "1 Header",
            "2 task search",
            "3 rejected author::line_dependency",
            "4 rejected author::line_upstream_dropped",
            "5 rejected author::line_agent",
            "3 repaired",
            "4 repaired",
            "5 dropped author::line_agent",
        ]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the answer and one repair per line that needs one");
    assert_eq!(requests[0].body["stream"], true);
    assert!(requests[0].body.get("response_format").is_none(), "JSON mode would allow one object only");
    let repair = requests[1].body["messages"][2]["content"].as_str().unwrap_or_default().to_owned();
    assert!(
        repair.contains("Line 3") && repair.contains("author::line_dependency") && repair.contains("serach"),
        "{repair}"
    );
    assert!(repair.contains(HEADER), "the accepted lines are the context: {repair}");
    let workflow = authored.manifest.as_ref().expect("a manifest")["spec"]["workflow"].clone();
    let ids: Vec<&str> = workflow.as_array().into_iter().flatten().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids, ["search", "write", "polish"]);
    assert_eq!(authored.problems.len(), 1);
    assert_eq!(authored.problems[0].to_string().split(':').next(), Some("line 5 (task `notes`)"));
    assert!(authored.plan_score.is_some_and(|s| s > 0.0));
    assert!(authored.failed.is_none());
    assert_eq!(authored.accepted.len(), 4);
    assert!(matches!(authored.attempts[0].outcome, Outcome::Valid { tasks: 1, .. }), "{:?}", authored.attempts[0]);
    assert!(authored.attempts[1].repair && authored.attempts[2].repair);
}

#[tokio::test]
async fn a_whole_answer_is_taken_line_by_line_and_a_broken_stream_keeps_its_lines() {
    let answer =
        format!("```\n{HEADER}\n{}\n{}\n```", task("search", "researcher", &[]), task("write", "writer", &["search"]));
    let server = FakeOpenAi::script(vec![Step::Answer(answer)]);
    let (authored, events) = write(&server, false, &[]).await;
    assert_eq!(events, ["1 Header", "2 task search", "3 task write"]);
    assert!(server.requests()[0].body.get("stream").is_none_or(|s| s == false));
    assert_eq!(authored.accepted.len(), 3);

    let pieces = vec![
        format!("{HEADER}\n"),
        format!("{}\n", task("search", "researcher", &[])),
        "{\"task\": {\"id\": \"wr".to_owned(),
    ];
    let server = FakeOpenAi::script(vec![Step::BrokenStream(pieces)]);
    let (authored, events) = write(&server, true, &[]).await;
    assert_eq!(events, ["1 Header", "2 task search"]);
    let why = authored.failed.as_deref().expect("it says why");
    assert!(why.starts_with("the request failed midway"), "{why}");
    assert_eq!(authored.accepted.len(), 2, "the lines accepted stay");
    assert!(authored.manifest.is_some());
    assert_eq!(server.requests().len(), 1, "no repair after a failed request");
}

#[tokio::test]
async fn going_on_from_a_prefix_quotes_it_and_numbers_after_it() {
    let prefix = vec![HEADER.to_owned(), task("search", "researcher", &[])];
    let server = FakeOpenAi::script(vec![Step::Answer(task("write", "writer", &["search"]))]);
    let (authored, events) = write(&server, false, &prefix).await;
    assert_eq!(events, ["3 task write"]);
    let user = server.requests()[0].body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    assert!(user.contains(&prefix[1]) && user.contains("Write only the lines that follow"), "{user}");
    assert_eq!(authored.accepted.len(), 3);
}

#[tokio::test]
async fn questions_end_the_plan_and_a_model_that_writes_nothing_gives_way_to_the_next() {
    let server = FakeOpenAi::script(vec![Step::Answer("{\"questions\": [\"Which market?\"]}".to_owned())]);
    let (authored, events) = write(&server, false, &[]).await;
    assert_eq!(authored.questions, ["Which market?"]);
    assert_eq!(events.len(), 1);
    assert!(authored.manifest.is_none() && authored.failed.is_none());

    let server = FakeOpenAi::script(vec![Step::Answer("I cannot plan that.".to_owned())]);
    let (authored, _) = write(&server, false, &[]).await;
    let why = authored.failed.expect("no task");
    assert!(why.starts_with("no model wrote a task"), "{why}");
    assert_eq!(server.requests().len(), 1, "prose is no line to repair");
}

#[tokio::test]
async fn a_schema_dialect_asks_for_the_one_object_form_and_a_repair_held_to_one_task_line() {
    let answer = json!({
        "plan": {"mission": "m", "agents": {"researcher": {"runtime": "mock"}}},
        "tasks": [{"id": "a", "agent": "researcher", "input": "x"}, {"id": "b", "agent": "researcher", "input": "y", "depends_on": ["zz"]}],
    });
    let server = FakeOpenAi::script(vec![
        Step::Answer(answer.to_string()),
        Step::Answer(
            json!({"task": {"id": "b", "agent": "researcher", "input": "y", "depends_on": ["a"]}}).to_string(),
        ),
    ]);
    let request = Request { schema_dialect: Some(model::dialect::SchemaDialect::Ollama), ..request(false) };
    let authored = author_lines(&request, &Windows::default(), &endpoint(&server), &[], &mut |_| {}).await;
    assert_eq!(authored.accepted.len(), 3, "{authored:?}");
    let requests = server.requests();
    assert_eq!(requests[0].body["format"], planner::lines::schema::line_schema(None));
    assert!(requests[0].body.get("response_format").is_none());
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("Answer with exactly one JSON object"), "{system}");
    // The repair is held to one task line whose dependencies are the tasks taken so far.
    let repair = &requests[1].body["format"];
    assert_eq!(repair, &planner::lines::schema::task_line_schema(None, &["a".to_owned()]), "{repair}");
    assert!(requests[1].body.get("response_format").is_none());
}
