//! An llm agent's conversation survives a crash: runner killed at 20 points of a seven-turn
//! conversation (while the model is asked, as a tool starts, as a tool ends) and resumed never
//! asks the model again for a recorded turn, never runs a tool again whose result is recorded,
//! and never runs a destructive tool twice; nor does a `runner worker` killed in the middle of
//! the conversation, whose replacement goes on from the turns it recorded. A destructive call
//! waits for a person's approval across processes, with its arguments shown; a rejection lets
//! the model go on.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use llm_support::{KEY, KEY_VAR, Out, llm_plan, runner_with_key};
use serde_json::{Value, json};
use support::Env;
use testkit::{FakeOpenAi, Step};

/// Turns that call a tool; the one after them answers.
const TOOL_TURNS: u32 = 7;

/// A tool: marks `start NAME TURN` in `tools.log`, does its work, marks `end NAME TURN`. When
/// `kill.txt` names this mark and count (`start 3`: the third start), it kills runner there.
const TOOL: &str = r#"
import json, os, signal, sys, time
name = sys.argv[1]
turn = json.loads(sys.stdin.read() or "{}").get("turn")
here = os.path.dirname(os.path.abspath(__file__))
log = os.path.join(here, "tools.log")
def mark(what):
    with open(log, "a") as f:
        f.write(f"{what} {name} {turn}\n")
        f.flush()
        os.fsync(f.fileno())
    with open(log) as f:
        count = sum(1 for line in f if line.startswith(what + " "))
    try:
        kill = open(os.path.join(here, "kill.txt")).read().split()
    except FileNotFoundError:
        kill = []
    if kill == [what, str(count)]:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(2)
        sys.exit(1)
mark("start")
mark("end")
print(f"{name} did turn {turn}")
"#;

/// Which tool turn `turn` calls: `note` (safe) on odd turns, `wipe` (destructive) on even.
fn tool_of(turn: u32) -> &'static str {
    if turn % 2 == 1 { "note" } else { "wipe" }
}

/// The turn a request asks for: one more than the answers it already holds.
fn turn_of(body: &Value) -> u32 {
    let answers = body["messages"].as_array().map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    answers as u32 + 1
}

/// Where the first process is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// While the model is asked for the request with this index (from 0).
    Request(i64),
    /// When the nth tool process starts (after its call is recorded, before its work).
    ToolStart(u32),
    /// When the nth tool process has done its work, before its result is recorded.
    ToolEnd(u32),
}

/// The server, the pid it kills on [`Kill::Request`], and the plan in a fresh folder.
struct Scenario {
    env: Env,
    server: FakeOpenAi,
    pid: Arc<AtomicU32>,
    kill_request: Arc<AtomicI64>,
}

impl Scenario {
    fn new(approval: &str) -> Self {
        let pid = Arc::new(AtomicU32::new(0));
        let kill_request = Arc::new(AtomicI64::new(-1));
        let (victim, at) = (Arc::clone(&pid), Arc::clone(&kill_request));
        let server = FakeOpenAi::start(move |body, n| {
            if at.load(Ordering::SeqCst) == n as i64 {
                let pid = victim.load(Ordering::SeqCst).to_string();
                let _ = std::process::Command::new("kill").args(["-9", &pid]).status();
                return Step::Hang;
            }
            let turn = turn_of(body);
            if turn > TOOL_TURNS {
                return Step::Answer(format!("done after {TOOL_TURNS} tool turns"));
            }
            Step::ToolCalls(vec![(tool_of(turn).to_owned(), json!({"turn": turn}).to_string())])
        });
        let env = Env::new();
        let script = env.write("tool.py", TOOL);
        let script = script.display();
        let plan = llm_plan(
            "talk",
            &server.base_url(),
            "    w: {runtime: llm, provider: fake, tools: [note, wipe], max_turns: 10}",
            "    - {id: t, agent: w, input: \"clean up\"}",
            "",
        )
        .replace(
            "  agent_definitions:",
            &format!(
                "  tools:\n    note: {{command: [python3, \"{script}\", note]}}\n    \
             wipe: {{command: [python3, \"{script}\", wipe], destructive: true{approval}}}\n  agent_definitions:"
            ),
        )
        .replace("base_url: \"", "stream: false, base_url: \"");
        env.write("plan.yaml", &plan);
        Scenario { env, server, pid, kill_request }
    }

    fn runner(&self, args: &[&str]) -> Out {
        runner_with_key(&self.env, KEY, args)
    }

    /// `runner apply`, killed at `kill`; fails unless it was killed.
    fn apply_killed(&self, kill: Kill) {
        match kill {
            Kill::Request(n) => self.kill_request.store(n, Ordering::SeqCst),
            Kill::ToolStart(n) => drop(self.env.write("kill.txt", &format!("start {n}"))),
            Kill::ToolEnd(n) => drop(self.env.write("kill.txt", &format!("end {n}"))),
        }
        let status = self.apply_within(&["--run-id", "r"], &format!("{kill:?}: runner was not killed"));
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "{kill:?}: runner ended without being killed: {status}");
        self.kill_request.store(-1, Ordering::SeqCst);
        let _ = std::fs::remove_file(self.env.dir().join("kill.txt"));
    }

    /// `runner apply plan.yaml --yes ARGS` as a process whose pid the server may kill; its exit
    /// status, or a failure saying `late` when it has not ended within 60 s.
    fn apply_within(&self, args: &[&str], late: &str) -> std::process::ExitStatus {
        let mut child = self
            .env
            .runner_process()
            .env(KEY_VAR, KEY)
            .args(["apply", "plan.yaml", "--yes"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("runner starts");
        self.pid.store(child.id(), Ordering::SeqCst);
        ended(&mut child, late)
    }

    /// Resumes the run until it ends, rejecting each call that waits for approval; returns
    /// how many were rejected.
    fn finish(&self, kill: Kill) -> usize {
        let mut rejected = 0;
        for _ in 0..4 {
            let resumed = self.runner(&["resume", "r"]);
            match resumed.code {
                Some(0) => return rejected,
                Some(3) => {
                    let status = self.runner(&["status", "r"]);
                    assert!(status.all().contains("wipe"), "{kill:?}: the waiting call is shown: {status}");
                    let reject = self.runner(&["reject", "r", "t", "--comment", "it may have run already"]);
                    assert_eq!(reject.code, Some(0), "{reject}");
                    rejected += 1;
                }
                _ => panic!("{kill:?}: {resumed}"),
            }
        }
        panic!("{kill:?}: the run did not end after four resumes");
    }

    /// `tools.log`'s marks, counted by `(mark, tool, turn)`.
    fn marks(&self, what: &str, turn: u32) -> usize {
        let log = std::fs::read_to_string(self.env.dir().join("tools.log")).unwrap_or_default();
        let line = format!("{what} {} {turn}", tool_of(turn));
        log.lines().filter(|l| *l == line).count()
    }

    fn records(&self) -> Vec<Value> {
        self.env.records("r")
    }
}

#[test]
fn killed_anywhere_in_a_conversation_runner_repeats_no_recorded_turn_or_tool_result() {
    let mut points: Vec<Kill> = (0..8).map(Kill::Request).collect();
    points.extend((1..=6).map(Kill::ToolStart));
    points.extend((1..=6).map(Kill::ToolEnd));
    assert_eq!(points.len(), 20);
    for kill in points {
        let scenario = Scenario::new(", approval: never");
        scenario.apply_killed(kill);
        let recorded_turns_before = scenario.records().iter().filter(|r| r["type"] == "ModelTurn").count();
        let rejected = scenario.finish(kill);
        let records = scenario.records();
        let last = records.last().expect("the log has records");
        assert_eq!(last["type"], "RunCompleted", "{kill:?}: {last}");
        assert_eq!(last["status"], "succeeded", "{kill:?}: {last}");

        // The model: every turn asked once, except the one whose request was cut by the kill.
        let requests = scenario.server.requests();
        let mut asked = vec![0usize; TOOL_TURNS as usize + 2];
        for request in &requests {
            asked[turn_of(&request.body) as usize] += 1;
        }
        for turn in 1..=TOOL_TURNS + 1 {
            let cut = matches!(kill, Kill::Request(n) if n as u32 + 1 == turn);
            let expected = if cut { 2 } else { 1 };
            assert_eq!(
                asked[turn as usize], expected,
                "{kill:?}: requests for turn {turn} ({recorded_turns_before} recorded before the kill)"
            );
        }
        let turns: Vec<u64> =
            records.iter().filter(|r| r["type"] == "ModelTurn").map(|r| r["turn"].as_u64().unwrap_or(0)).collect();
        assert_eq!(turns, (1..=u64::from(TOOL_TURNS) + 1).collect::<Vec<_>>(), "{kill:?}: each turn recorded once");

        // The tools: a safe one runs again only when the kill cut it; a destructive one never
        // runs twice (a call it may have made asks a person, who rejects it here).
        for turn in 1..=TOOL_TURNS {
            let cut = matches!(kill, Kill::ToolStart(n) | Kill::ToolEnd(n) if n == turn);
            let starts = scenario.marks("start", turn);
            match tool_of(turn) {
                "wipe" => assert_eq!(starts, 1, "{kill:?}: the destructive tool of turn {turn} started {starts} times"),
                _ => assert_eq!(starts, if cut { 2 } else { 1 }, "{kill:?}: the safe tool of turn {turn}"),
            }
        }
        let cut_wipe = matches!(kill, Kill::ToolStart(n) | Kill::ToolEnd(n) if tool_of(n) == "wipe");
        assert_eq!(rejected, usize::from(cut_wipe), "{kill:?}: only a cut destructive call asks");
    }
}

#[test]
fn a_destructive_call_waits_for_a_person_across_processes_and_a_rejection_lets_the_model_go_on() {
    let scenario = Scenario::new("");
    let applied = scenario.runner(&["apply", "plan.yaml", "--yes", "--run-id", "r"]);
    assert_eq!(applied.code, Some(3), "the run pauses at the first destructive call: {applied}");
    let status = scenario.runner(&["status", "r"]);
    assert!(status.all().contains("wants to call `wipe` with {\"turn\":2}"), "{status}");
    assert!(status.all().contains("runner approve r t"), "{status}");
    assert_eq!(scenario.marks("start", 2), 0, "nothing ran before the approval");

    // Approved: the call runs once, and the conversation goes on to the next destructive call.
    assert_eq!(scenario.runner(&["approve", "r", "t"]).code, Some(0));
    let resumed = scenario.runner(&["resume", "r"]);
    assert_eq!(resumed.code, Some(3), "{resumed}");
    assert_eq!(scenario.marks("start", 2), 1);

    // Rejected: the tool does not run, and the model reads why in the call's result.
    let rejected = scenario.runner(&["reject", "r", "t", "--comment", "not on Fridays"]);
    assert_eq!(rejected.code, Some(0), "{rejected}");
    let resumed = scenario.runner(&["resume", "r"]);
    assert_eq!(resumed.code, Some(3), "the next destructive call asks again: {resumed}");
    assert!(resumed.all().contains("waits for approval to call `wipe`"), "{resumed}");
    assert_eq!(scenario.marks("start", 4), 0, "a rejected call never runs");
    let told = scenario.server.requests().iter().any(|r| {
        r.body["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| m["role"] == "tool" && m["content"].as_str().is_some_and(|c| c.contains("not on Fridays")))
        })
    });
    assert!(told, "the model was told of the rejection");

    // The log shows the conversation indented under its task.
    let logs = scenario.runner(&["logs", "r"]);
    assert!(logs.stdout.lines().any(|l| l.contains("   ModelTurn t attempt")), "{logs}");
    assert!(
        logs.stdout.lines().any(|l| l.contains("   ToolApprovalDecided t wipe rejected: \"not on Fridays\"")),
        "{logs}"
    );

    // `--approve-tool` approves in advance: a new run goes through without a pause.
    let approved = scenario.runner(&["apply", "plan.yaml", "--yes", "--run-id", "r2", "--approve-tool", "wipe"]);
    assert_eq!(approved.code, Some(0), "{approved}");
    let unknown = scenario.runner(&["apply", "plan.yaml", "--yes", "--approve-tool", "nope"]);
    assert_eq!(unknown.code, Some(2), "{unknown}");
    assert!(unknown.stderr.contains("no such tool"), "{unknown}");
}

#[test]
fn with_no_worker_that_takes_llm_attempts_a_tool_using_agent_stays_with_the_coordinator_and_its_calls_still_ask() {
    let Some(db) = testkit::pg::TestDatabase::new("tool_agent_stays_with_the_coordinator") else { return };
    let scenario = Scenario::new("");
    // No worker runs: were the llm attempt queued for one, the run would wait for ever.
    let late = "the run waited for a worker: the llm attempt was queued instead of run by its coordinator";
    let status = scenario.apply_within(&["--run-id", "r", "--store", &db.url, "--no-local-work"], late);
    assert_eq!(status.code(), Some(3), "the destructive call waits for a person");
    let status = scenario.runner(&["status", "r", "--store", &db.url]);
    assert!(status.all().contains("wants to call `wipe` with {\"turn\":2}"), "{status}");
    assert_eq!(scenario.marks("start", 2), 0, "nothing ran before the approval");
    assert_eq!(scenario.marks("start", 1), 1, "the safe call ran once, in the coordinator");
}

/// `runner ARGS --store URL` with the API key and short leases, output dropped.
fn cluster_process(scenario: &Scenario, url: &str, args: &[&str]) -> std::process::Child {
    scenario
        .env
        .runner_process()
        .env(KEY_VAR, KEY)
        .env("RUNNER_LEASE_MS", "1500")
        .args(args)
        .args(["--store", url])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner starts")
}

/// Waits for `child` to end, at most 60 s; fails with `what` otherwise.
fn ended(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the child can be polled") {
            return status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what}: not within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_worker_killed_mid_conversation_is_replaced_and_only_the_request_it_cut_is_asked_again() {
    // While the model is asked for turn 4; as the safe tool of turn 3 starts; as that of turn 5
    // has done its work, before its result is recorded.
    for (i, kill) in [Kill::Request(3), Kill::ToolStart(3), Kill::ToolEnd(5)].into_iter().enumerate() {
        let Some(db) = testkit::pg::TestDatabase::new(&format!("worker_killed_mid_conversation_{i}")) else { return };
        let scenario = Scenario::new(", approval: never");
        let url = db.url.clone();
        // The tables exist, and the first worker is up, before the coordinator dispatches:
        // the conversation is a worker's from its first turn.
        scenario.env.runner().args(["runs", "--store", &url]).assert().success();
        let mut first = cluster_process(&scenario, &url, &["worker"]);
        let started = Instant::now();
        while db.column("SELECT count(*) FROM runner_workers") != [Some("1".to_owned())] {
            assert!(started.elapsed() < Duration::from_secs(30), "{kill:?}: the worker did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        scenario.pid.store(first.id(), Ordering::SeqCst);
        match kill {
            Kill::Request(n) => scenario.kill_request.store(n, Ordering::SeqCst),
            Kill::ToolStart(n) => drop(scenario.env.write("kill.txt", &format!("start {n}"))),
            Kill::ToolEnd(n) => drop(scenario.env.write("kill.txt", &format!("end {n}"))),
        }
        let apply = ["apply", "plan.yaml", "--yes", "--run-id", "r", "--no-local-work"];
        let mut coordinator = cluster_process(&scenario, &url, &apply);
        let status = ended(&mut first, &format!("{kill:?}: the worker was not killed"));
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "{kill:?}: the worker ended without being killed: {status}");
        let _ = std::fs::remove_file(scenario.env.dir().join("kill.txt"));
        let mut second = cluster_process(&scenario, &url, &["worker"]);
        let status = ended(&mut coordinator, &format!("{kill:?}: the run did not end"));
        let _ = second.kill();
        let _ = second.wait();
        assert_eq!(status.code(), Some(0), "{kill:?}: the run succeeds");

        // The model: every turn asked once, except the one whose request the kill cut.
        let mut asked = vec![0usize; TOOL_TURNS as usize + 2];
        for request in &scenario.server.requests() {
            asked[turn_of(&request.body) as usize] += 1;
        }
        for turn in 1..=TOOL_TURNS + 1 {
            let cut = matches!(kill, Kill::Request(n) if n as u32 + 1 == turn);
            assert_eq!(asked[turn as usize], if cut { 2 } else { 1 }, "{kill:?}: requests for turn {turn}");
        }
        let records: Vec<Value> = db
            .column("SELECT record FROM runner_events WHERE run_id = 'r' ORDER BY seq")
            .into_iter()
            .flatten()
            .filter_map(|text| serde_json::from_str(&text).ok())
            .collect();
        let turns: Vec<u64> =
            records.iter().filter(|r| r["type"] == "ModelTurn").map(|r| r["turn"].as_u64().unwrap_or(0)).collect();
        assert_eq!(turns, (1..=u64::from(TOOL_TURNS) + 1).collect::<Vec<_>>(), "{kill:?}: each turn recorded once");
        let dispatched = records.iter().filter(|r| r["type"] == "TaskDispatched").count();
        assert_eq!(dispatched, 1, "{kill:?}: the second worker went on with the same attempt");

        // The tools: the safe one the kill cut runs again, nothing else does.
        for turn in 1..=TOOL_TURNS {
            let cut = matches!(kill, Kill::ToolStart(n) | Kill::ToolEnd(n) if n == turn);
            let starts = scenario.marks("start", turn);
            assert_eq!(starts, if cut { 2 } else { 1 }, "{kill:?}: the tool of turn {turn} started {starts} times");
        }
    }
}
