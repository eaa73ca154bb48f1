//! The log's lines, pinned: each event reads back from its JSON and writes the same bytes, field
//! for field and in the same order, whatever shape it has in memory.

use machine::event::Record;

/// A minimal plan's JSON, as a `RunCreated` records it.
fn plan_json() -> String {
    let text = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: p}\nspec:\n  agent_definitions:\n    a: {runtime: mock}\n  workflow:\n    - {id: t, agent: a, input: x}\n";
    let loaded = manifest::load_str("p.yaml", "p", text, &|_| true);
    serde_json::to_string(&loaded.plan.expect("the plan is valid")).expect("a plan serialises")
}

fn lines() -> Vec<String> {
    let head = r#"{"seq":7,"at":"2026-11-27T10:00:00.000Z","run_id":"run-1","type":"#;
    let events = [
        format!(
            r#""RunCreated","schema":4,"plan":{},"plan_sha256":"ab12","vars":{{"k":"v"}},"strategy":"eager","source":"/p.yaml","retry_of":"run-0","trace":"00-1-2-01","approved_tools":["grep"]}}"#,
            plan_json()
        ),
        format!(
            r#""RunCreated","schema":4,"plan":{},"plan_sha256":"ab12","vars":{{}},"strategy":"phased"}}"#,
            plan_json()
        ),
        r#""TaskDispatched","task":"t","attempt":1,"input":"x"}"#.to_string(),
        r#""TaskSucceeded","task":"t","attempt":1,"dispatched_seq":6,"output":"y","tokens":{"prompt":3,"completion":4},"duration_ms":12}"#.to_string(),
        r#""TaskFailed","task":"t","attempt":2,"error":"boom","dispatched_seq":6,"class":"transient","retryable":true}"#.to_string(),
        r#""ModelTurn","task":"t","attempt":1,"turn":2,"content":"hi","tool_calls":[{"id":"c1","name":"grep","arguments":"{}"}],"tokens":{"prompt":1,"completion":2},"finish_reason":"tool_calls"}"#.to_string(),
        r#""ModelTurn","task":"t","attempt":1,"turn":1}"#.to_string(),
        r#""ToolCallStarted","task":"t","attempt":1,"turn":2,"call_id":"c1","tool":"grep","arguments":"{\"q\":1}"}"#.to_string(),
        r#""ToolCallFinished","task":"t","attempt":1,"call_id":"c1","tool":"grep","ok":false,"output":"none"}"#.to_string(),
        r#""ToolApprovalRequested","task":"t","attempt":1,"call_id":"c1","tool":"rm","arguments":"{}","reason":"clean up"}"#.to_string(),
        r#""ToolApprovalDecided","task":"t","call_id":"c1","tool":"rm","approved":false,"comment":"no"}"#.to_string(),
        r#""ContextCompacted","task":"t","scope":"summary","by":"extractive","tokens_before":90,"tokens_after":30,"summary":"s","tokens":{"prompt":5,"completion":6}}"#.to_string(),
        r#""ContextCompacted","task":"t","scope":"gate","by":"writer","tokens_before":9,"tokens_after":3}"#.to_string(),
        format!(
            r#""Replanned","task":"t","removed":["t"],"added":["u","v"],"plan":{},"score":7.5,"tokens":{{"prompt":1,"completion":1}}}}"#,
            plan_json()
        ),
        r#""RunResumed"}"#.to_string(),
        r#""RunCompleted","status":"partial","summary":"done"}"#.to_string(),
    ];
    events.iter().map(|event| format!("{head}{event}")).collect()
}

#[test]
fn every_event_writes_back_the_line_it_was_read_from() {
    for line in lines() {
        let record: Record = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(serde_json::to_string(&record).expect("a record serialises"), line);
    }
}
