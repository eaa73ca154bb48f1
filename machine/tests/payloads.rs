//! Commands that carry their event's payload: a model turn, a tool result, a compaction and a
//! replan are recorded as the very payload the command brought, and not at all when they come
//! too late.

mod support;

use std::sync::Arc;

use machine::conversation::ToolCallRecord;
use machine::event::{ContextCompacted, ModelTurn, Replanned, ToolCallFinished, ToolCallStarted};
use machine::{Command, Event, Handler, Scope, Start, Tokens};
use manifest::Plan;
use support::RunState;

const PLAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  mission: test\n  \
                    agent_definitions:\n    m: {runtime: mock}\n  workflow:\n    \
                    - {id: a, agent: m, input: x, on_failure: replan}\n  control_logic: {planner: m}\n";

fn plan(yaml: &str) -> Arc<Plan> {
    let loaded = manifest::load_str("t.yaml", "t", yaml, &|_| true);
    Arc::new(loaded.plan.unwrap_or_else(|| panic!("the plan loads: {:?}", loaded.diagnostics)))
}

/// A run whose task `a` runs its first attempt.
fn started() -> RunState {
    let mut state = RunState::new();
    let events = state.process(Command::Start(Start::plan(plan(PLAN)))).expect("the run starts");
    assert_eq!(events.last().map(Event::name), Some("TaskDispatched"));
    state
}

fn turn() -> ModelTurn {
    ModelTurn {
        task: "a".into(),
        attempt: 1,
        turn: 1,
        content: Some("calling".into()),
        tool_calls: vec![ToolCallRecord { id: "c1".into(), name: "ls".into(), arguments: "{}".into() }],
        tokens: Some(Tokens { prompt: 10, completion: 2 }),
        finish_reason: Some("tool_calls".into()),
    }
}

fn finished() -> ToolCallFinished {
    ToolCallFinished {
        task: "a".into(),
        attempt: 1,
        call_id: "c1".into(),
        tool: "ls".into(),
        ok: true,
        output: "x".into(),
    }
}

fn compacted() -> ContextCompacted {
    ContextCompacted {
        task: "a".into(),
        scope: Scope::Gate,
        by: "extractive".into(),
        tokens_before: 90,
        tokens_after: 40,
        summary: None,
        tokens: Some(Tokens { prompt: 5, completion: 1 }),
    }
}

#[test]
fn each_command_records_its_payload_as_its_event() {
    let mut state = started();
    let call = turn().tool_calls[0].clone();
    let started = ToolCallStarted {
        task: "a".into(),
        attempt: 1,
        turn: 1,
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
    };
    let cases = [
        (Command::ModelTurn(turn()), Event::ModelTurn(Box::new(turn()))),
        (
            Command::CallTool { task: "a".into(), attempt: 1, turn: 1, call, reason: String::new() },
            Event::ToolCallStarted(Box::new(started)),
        ),
        (Command::ToolResult(finished()), Event::ToolCallFinished(Box::new(finished()))),
        (Command::Compacted(compacted()), Event::ContextCompacted(Box::new(compacted()))),
    ];
    for (command, expected) in cases {
        let name = format!("{command:?}");
        assert_eq!(state.process(command).expect("the command is taken"), [expected], "{name}");
    }
}

#[test]
fn a_replan_records_its_payload_and_a_cyclic_one_fails_with_its_tokens() {
    let mut state = started();
    let failed = Command::Failed {
        task: "a".into(),
        attempt: 1,
        error: "boom".into(),
        class: machine::event::ErrorClass::Permanent,
        tokens: None,
        jitter: 0.0,
    };
    let events = state.process(failed).expect("the failure is taken");
    assert_eq!(events.last().map(Event::name), Some("ReplanRequested"));
    let tokens = Some(Tokens { prompt: 7, completion: 3 });
    let cyclic = plan(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  mission: test\n  agent_definitions:\n    \
         m: {runtime: mock}\n  workflow:\n    - {id: b, agent: m, input: x, depends_on: [c]}\n    \
         - {id: c, agent: m, input: x, depends_on: [b]}\n",
    );
    let replanned = |plan: Arc<Plan>| Replanned {
        task: "a".into(),
        removed: vec!["a".into()],
        added: vec!["b".into(), "c".into()],
        plan,
        score: 7.5,
        tokens,
    };
    let mut copy = state.clone();
    let events = copy.process(Command::Replanned(replanned(Arc::clone(&cyclic)))).expect("the replan is taken");
    assert_eq!(
        events.first(),
        Some(&Event::ReplanFailed {
            task: "a".into(),
            reason: "the replacement's dependencies form a cycle".into(),
            tokens
        })
    );
    let good = plan(&PLAN.replace("on_failure: replan", "on_failure: skip").replace("id: a", "id: b"));
    let events = state.process(Command::Replanned(replanned(Arc::clone(&good)))).expect("the replan is taken");
    assert_eq!(events.first(), Some(&Event::Replanned(Box::new(replanned(good)))));
}

#[test]
fn results_for_an_attempt_no_longer_current_record_nothing() {
    let mut state = started();
    let stale = |attempt| {
        [
            Command::ModelTurn(ModelTurn { attempt, ..turn() }),
            Command::ToolResult(ToolCallFinished { attempt, ..finished() }),
        ]
    };
    for command in stale(2) {
        assert_eq!(state.process(command).expect("a stale result is taken"), []);
    }
    // A result for a call that never started is not recorded either.
    assert_eq!(state.process(Command::ToolResult(finished())).expect("it is taken"), []);
}
