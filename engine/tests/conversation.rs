//! An llm task's conversation in the state machine: model turns and tool calls recorded as
//! they happen, a conversation going on after a crash or a pause, tool approvals, tokens
//! counted per turn, and the live state always the fold of the log.

use std::sync::Arc;

use engine::conversation::{CallState, ToolCallRecord};
use engine::event::{ModelTurn, ToolApprovalDecided, ToolCallFinished, ToolCallStarted};
use engine::{Command, Event, Handler, RunState, RunStatus, Start, TaskStatus, Tokens};
use proptest::prelude::*;

/// A plan whose one task `t` runs on llm agent `a` with tools `ls` (safe), `rm`
/// (destructive) and `ask` (`approval: always`); `extra` is added to the agent's fields and
/// `control` to the plan's.
fn plan(extra: &str, control: &str) -> Arc<manifest::Plan> {
    let yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: tools}}\nspec:\n  \
         providers: {{default: {{base_url: 'http://127.0.0.1:9/v1', model: m}}}}\n  \
         tools:\n    ls: {{command: [ls]}}\n    rm: {{command: [rm], destructive: true}}\n    \
         ask: {{command: [echo], approval: always}}\n  \
         agent_definitions:\n    a: {{runtime: llm, tools: [ls, rm, ask]{extra}}}\n  \
         {control}workflow:\n    - {{id: t, agent: a, input: go}}\n"
    );
    let loaded = manifest::load_str("tools.yaml", "tools", &yaml, &|_| true);
    assert!(loaded.diagnostics.iter().all(|d| !d.is_error()), "{:?}", loaded.diagnostics);
    Arc::new(loaded.plan.expect("the plan loads"))
}

fn start(plan: &Arc<manifest::Plan>, approved: &[&str]) -> (RunState, Vec<Event>) {
    let mut state = RunState::new();
    let start =
        Start { approved_tools: approved.iter().map(|t| (*t).to_owned()).collect(), ..Start::plan(plan.clone()) };
    let events = state.process(Command::Start(start)).expect("the run starts");
    (state, events)
}

fn call(id: &str, tool: &str) -> ToolCallRecord {
    ToolCallRecord { id: id.into(), name: tool.into(), arguments: format!("{{\"id\":\"{id}\"}}") }
}

fn turn(attempt: u32, turn: u32, calls: &[ToolCallRecord], tokens: u64) -> Command {
    Command::ModelTurn(ModelTurn {
        task: "t".into(),
        attempt,
        turn,
        content: Some(format!("turn {turn}")),
        tool_calls: calls.to_vec(),
        tokens: Some(Tokens { prompt: tokens, completion: 0 }),
        finish_reason: Some(if calls.is_empty() { "stop" } else { "tool_calls" }.into()),
    })
}

fn call_tool(attempt: u32, turn: u32, call: &ToolCallRecord) -> Command {
    Command::CallTool { task: "t".into(), attempt, turn, call: call.clone(), reason: "because".into() }
}

fn result(attempt: u32, call: &ToolCallRecord) -> Command {
    Command::ToolResult(ToolCallFinished {
        task: "t".into(),
        attempt,
        call_id: call.id.clone(),
        tool: call.name.clone(),
        ok: true,
        output: format!("{} done", call.id),
    })
}

fn names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::name).collect()
}

/// Processes `command` on `state`, adding its events to `log`; returns its events' names.
fn step(state: &mut RunState, log: &mut Vec<Event>, command: Command) -> Vec<&'static str> {
    let events = state.process(command).expect("the command is taken");
    let names = names(&events);
    log.extend(events);
    names
}

#[test]
fn a_safe_call_runs_at_once_and_its_tokens_count_once() {
    let (mut state, mut log) = start(&plan("", ""), &[]);
    let ls = call("c1", "ls");
    assert_eq!(step(&mut state, &mut log, turn(1, 1, std::slice::from_ref(&ls), 10)), ["ModelTurn"]);
    assert_eq!(state.tokens.prompt, 10, "a turn's tokens count as it is recorded");
    assert_eq!(step(&mut state, &mut log, call_tool(1, 1, &ls)), ["ToolCallStarted"]);
    assert_eq!(step(&mut state, &mut log, result(1, &ls)), ["ToolCallFinished"]);
    assert_eq!(state.conversations["t"].call("c1"), Some(&CallState::Finished("c1 done".into())));
    step(&mut state, &mut log, turn(1, 2, &[], 5));
    let done = Command::Succeeded {
        task: "t".into(),
        attempt: 1,
        output: "ok".into(),
        tokens: Some(Tokens { prompt: 15, completion: 0 }),
        duration_ms: 1,
    };
    step(&mut state, &mut log, done);
    assert_eq!(state.tokens.prompt, 15, "the attempt's total adds only what its turns did not count");
    assert!(state.conversations.is_empty(), "the conversation ends with its attempt");
    assert_eq!(state.status, RunStatus::Finished(engine::Outcome::Succeeded));
    assert_eq!(RunState::fold(&log), state);
}

#[test]
fn a_destructive_call_waits_for_approval_and_runs_once_approved() {
    let (mut state, mut log) = start(&plan("", ""), &[]);
    let rm = call("c1", "rm");
    step(&mut state, &mut log, turn(1, 1, std::slice::from_ref(&rm), 10));
    let asked = step(&mut state, &mut log, call_tool(1, 1, &rm));
    assert_eq!(asked, ["ToolApprovalRequested", "RunPaused"]);
    assert_eq!(state.tasks[0].status, TaskStatus::Paused);
    assert_eq!(state.conversations["t"].waiting.as_ref().map(|w| w.tool.as_str()), Some("rm"));
    // The attempt ended with the request: whatever it reports now is ignored.
    assert_eq!(state.process(call_tool(1, 1, &rm)), Ok(vec![]));
    let decided = step(&mut state, &mut log, Command::Decide { task: "t".into(), approved: true, comment: None });
    assert_eq!(decided, ["ToolApprovalDecided"]);
    let resumed = step(&mut state, &mut log, Command::Continue);
    assert_eq!(resumed, ["RunResumed", "TaskDispatched"]);
    // Attempt 2 goes on from the conversation: the approved call runs.
    assert_eq!(step(&mut state, &mut log, call_tool(2, 1, &rm)), ["ToolCallStarted"]);
    assert_eq!(step(&mut state, &mut log, result(2, &rm)), ["ToolCallFinished"]);
    assert_eq!(state.tasks[0].failures, 0, "waiting for a person used up no retry");
    assert_eq!(RunState::fold(&log), state);
}

#[test]
fn a_rejected_call_is_answered_with_the_rejection_instead_of_running() {
    let (mut state, mut log) = start(&plan("", ""), &[]);
    let rm = call("c1", "rm");
    step(&mut state, &mut log, turn(1, 1, std::slice::from_ref(&rm), 10));
    step(&mut state, &mut log, call_tool(1, 1, &rm));
    let reject = Command::Decide { task: "t".into(), approved: false, comment: Some("not that folder".into()) };
    step(&mut state, &mut log, reject);
    step(&mut state, &mut log, Command::Continue);
    assert_eq!(step(&mut state, &mut log, call_tool(2, 1, &rm)), ["ToolCallFinished"]);
    let Some(Event::ToolCallFinished(finished)) = log.last() else { panic!("a result: {log:?}") };
    assert!(!finished.ok);
    let output = &finished.output;
    assert!(output.contains("rejected") && output.contains("not that folder"), "{output}");
    assert!(!log.iter().any(|e| matches!(e, Event::ToolCallStarted(_))), "the tool never ran");
    assert_eq!(RunState::fold(&log), state);
}

#[test]
fn after_a_crash_a_started_safe_call_runs_again_but_a_destructive_one_asks() {
    let (mut state, mut log) = start(&plan("", ""), &["rm"]);
    let (ls, rm) = (call("c1", "ls"), call("c2", "rm"));
    step(&mut state, &mut log, turn(1, 1, &[ls.clone(), rm.clone()], 10));
    assert_eq!(step(&mut state, &mut log, call_tool(1, 1, &ls)), ["ToolCallStarted"]);
    // `--approve-tool rm`: no approval asked the first time.
    assert_eq!(step(&mut state, &mut log, call_tool(1, 1, &rm)), ["ToolCallStarted"]);
    // The process dies with both calls started and no result.
    let mut state = RunState::fold(&log);
    step(&mut state, &mut log, Command::Continue);
    assert_eq!(state.conversations["t"].last_turn(), 1, "the recorded turn survives the crash");
    assert_eq!(step(&mut state, &mut log, call_tool(2, 1, &ls)), ["ToolCallStarted"], "a safe call may run twice");
    let asked = step(&mut state, &mut log, call_tool(2, 1, &rm));
    let expected = ["ToolApprovalRequested", "RunPaused"];
    assert_eq!(
        asked, expected,
        "a destructive call that may have run asks a person first, even when approved in advance"
    );
    assert_eq!(RunState::fold(&log), state);
}

#[test]
fn the_agent_allow_list_and_the_run_approve_without_asking_but_always_asks() {
    for (extra, approved, tool, asks) in [
        ("", &[][..], "rm", true),
        (", allow_tools: [rm]", &[][..], "rm", false),
        ("", &["rm"][..], "rm", false),
        ("", &[][..], "ls", false),
        ("", &[][..], "ask", true),
        (", allow_tools: [ask]", &[][..], "ask", false),
    ] {
        let (mut state, mut log) = start(&plan(extra, ""), approved);
        let c = call("c1", tool);
        step(&mut state, &mut log, turn(1, 1, std::slice::from_ref(&c), 1));
        let names = step(&mut state, &mut log, call_tool(1, 1, &c));
        assert_eq!(names[0] == "ToolApprovalRequested", asks, "{tool} with {extra:?} {approved:?}: {names:?}");
    }
}

#[test]
fn turns_recorded_before_a_crash_count_against_the_token_budget() {
    let (mut state, mut log) = start(&plan("", "control_logic: {token_budget: 100}\n  "), &[]);
    step(&mut state, &mut log, turn(1, 1, &[call("c1", "ls")], 150));
    let mut state = RunState::fold(&log);
    let resumed = step(&mut state, &mut log, Command::Continue);
    assert!(resumed.contains(&"BudgetExhausted"), "{resumed:?}");
    assert!(!resumed.contains(&"TaskDispatched"), "{resumed:?}");
    assert_eq!(state.tokens.prompt, 150);
}

#[test]
fn a_stale_attempt_records_nothing() {
    let (mut state, mut log) = start(&plan("", ""), &[]);
    step(&mut state, &mut log, turn(1, 1, &[call("c1", "ls")], 1));
    step(&mut state, &mut log, Command::Continue);
    assert_eq!(state.process(turn(1, 2, &[], 1)), Ok(vec![]));
    assert_eq!(state.process(call_tool(1, 1, &call("c1", "ls"))), Ok(vec![]));
    assert_eq!(state.process(result(1, &call("c1", "ls"))), Ok(vec![]));
}

/// One step of a random conversation.
#[derive(Debug, Clone)]
enum Move {
    /// The model answers, calling tools (by index into ls, rm, ask) or not.
    Turn(Vec<u8>),
    /// The next unanswered call is asked for, and run if it may.
    Call,
    /// The process dies: the state is folded from the log and the run resumed.
    Crash,
    /// Somebody decides on a waiting call.
    Decide(bool),
    /// The attempt ends with an output.
    Finish,
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    let one = prop_oneof![
        3 => prop::collection::vec(0u8..3, 0..3).prop_map(Move::Turn),
        4 => Just(Move::Call),
        1 => Just(Move::Crash),
        1 => any::<bool>().prop_map(Move::Decide),
        1 => Just(Move::Finish),
    ];
    prop::collection::vec(one, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever the turns, calls, crashes and decisions: the live state is the fold of the
    /// log, a finished call never starts again, a destructive call never starts twice without
    /// a person's approval in between, and the run's tokens are those of its turns.
    #[test]
    fn conversations_keep_their_invariants(moves in moves()) {
        let tools = ["ls", "rm", "ask"];
        let (mut state, mut log) = start(&plan("", ""), &[]);
        let mut next_id = 0;
        for m in moves {
            if state.status.is_final() {
                break;
            }
            let attempt = state.tasks[0].attempts;
            let running = state.tasks[0].status == TaskStatus::Running;
            let conversation = state.conversations.get("t").cloned().unwrap_or_default();
            let unanswered = conversation.turns.last().and_then(|t| {
                t.tool_calls.iter().find(|c| !matches!(conversation.call(&c.id), Some(CallState::Finished(_)))).cloned()
            });
            let command = match m {
                Move::Turn(calls) if running && unanswered.is_none() => {
                    let calls: Vec<ToolCallRecord> = calls.iter().map(|&i| {
                        next_id += 1;
                        call(&format!("c{next_id}"), tools[i as usize])
                    }).collect();
                    turn(attempt, conversation.last_turn() + 1, &calls, 3)
                }
                Move::Call if running => match unanswered {
                    Some(c) => {
                        let turn = conversation.last_turn();
                        let events = state.process(call_tool(attempt, turn, &c)).expect("taken");
                        let started = events.iter().any(|e| matches!(e, Event::ToolCallStarted(_)));
                        log.extend(events);
                        if !started {
                            continue;
                        }
                        result(attempt, &c)
                    }
                    None => continue,
                },
                Move::Crash => {
                    prop_assert_eq!(&RunState::fold(&log), &state);
                    state = RunState::fold(&log);
                    Command::Continue
                }
                Move::Decide(approved) if state.tasks[0].status == TaskStatus::Paused => {
                    Command::Decide { task: "t".into(), approved, comment: None }
                }
                Move::Finish if running && unanswered.is_none() => Command::Succeeded {
                    task: "t".into(),
                    attempt,
                    output: "done".into(),
                    tokens: None,
                    duration_ms: 0,
                },
                _ => continue,
            };
            if let Ok(events) = state.process(command) {
                log.extend(events);
            }
            if state.status == RunStatus::Paused && state.tasks[0].status != TaskStatus::Paused {
                log.extend(state.process(Command::Continue).expect("a paused run resumes"));
            }
        }
        prop_assert_eq!(&RunState::fold(&log), &state);
        let turns: u64 = log.iter().map(|e| match e {
            Event::ModelTurn(turn) => turn.tokens.map_or(0, |t| t.prompt),
            _ => 0,
        }).sum();
        prop_assert_eq!(state.tokens.prompt, turns);
        let mut finished = std::collections::HashSet::new();
        let mut started_since_approval = std::collections::HashMap::new();
        for event in &log {
            match event {
                Event::ToolCallStarted(event) => {
                    let ToolCallStarted { call_id, tool, .. } = &**event;
                    prop_assert!(!finished.contains(call_id), "{call_id} started after it finished");
                    if tool == "rm" {
                        let again = started_since_approval.insert(call_id.clone(), true);
                        prop_assert_ne!(again, Some(true), "{} started twice without approval", call_id);
                    }
                }
                Event::ToolCallFinished(event) => {
                    let ToolCallFinished { call_id, .. } = &**event;
                    finished.insert(call_id.clone());
                }
                Event::ToolApprovalDecided(event) => {
                    let ToolApprovalDecided { call_id, .. } = &**event;
                    started_since_approval.insert(call_id.clone(), false);
                }
                _ => {}
            }
        }
    }
}
