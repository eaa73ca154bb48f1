//! Failure policies, verification, gates, budgets, people and resumption, end to end through the driver with mock agents
//! and the in-memory store: exact final statuses and event sequences.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use engine::driver::{Driver, DriverError};
use engine::event::ErrorClass;
use engine::{Command, EngineError, Event, Handler, Outcome, Record, RunState, RunStatus, Scope, Start, TaskStatus};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

fn plan(yaml: &str) -> Arc<manifest::Plan> {
    let loaded = manifest::load_str("t.yaml", "t", yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

/// A plan with one mock agent `m` (echo by default) whose scripts are `responses`.
fn mock_plan(responses: &str, workflow: &str, control: &str) -> Arc<manifest::Plan> {
    plan(&format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  mission: test\n  agent_definitions:\n    \
         m: {{runtime: mock, default: echo, responses: {responses}}}\n    \
         slow: {{runtime: mock, latency: 10s}}\n  workflow:\n{workflow}\n  control_logic: {control}\n"
    ))
}

fn events(store: &TestStore) -> Vec<Event> {
    store.records().into_iter().map(|r| r.event).collect()
}

/// One line per event, short enough to compare whole sequences.
fn trace(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            Event::TaskDispatched { task, attempt, .. } => format!("TaskDispatched {task}#{attempt}"),
            Event::TaskSucceeded { task, attempt, .. } => format!("TaskSucceeded {task}#{attempt}"),
            Event::TaskFailed { task, attempt, .. } => format!("TaskFailed {task}#{attempt}"),
            // The backoff, not the delay: the jitter is random.
            Event::RetryScheduled { task, attempt, backoff_ms: Some(backoff), .. } => {
                format!("RetryScheduled {task}#{attempt} {backoff}ms")
            }
            Event::ReviewDecided { task, approved, .. } => format!("ReviewDecided {task} {approved}"),
            Event::RunCompleted { status, .. } => format!("RunCompleted {}", status.as_str()),
            other => match other.task() {
                Some(task) => format!("{} {task}", other.name()),
                None => other.name().to_owned(),
            },
        })
        .collect()
}

/// Drives the run in `store` with `first` until it ends or pauses; five (virtual, when the
/// clock is paused) seconds is a liveness bound.
async fn drive(store: &TestStore, first: Command) -> Result<RunState, DriverError> {
    let records = store.records();
    let driver = Driver::new("run".into(), store.clone(), &records, std::env::temp_dir());
    tokio::time::timeout(Duration::from_secs(5), driver.run(first, CancellationToken::new()))
        .await
        .expect("the run neither ended nor paused")
}

async fn start(store: &TestStore, plan: &Arc<manifest::Plan>) -> RunState {
    drive(store, Command::Start(Start::plan(Arc::clone(plan)))).await.expect("the run is driven")
}

fn status(state: &RunState, id: &str) -> TaskStatus {
    state.tasks[state.index_of(id).expect("the task exists")].status
}

fn completed_summary(events: &[Event]) -> &str {
    match events.last() {
        Some(Event::RunCompleted { summary, .. }) => summary,
        other => panic!("the log does not end with RunCompleted: {other:?}"),
    }
}

fn assert_folds(store: &TestStore, state: &RunState) {
    assert_eq!(&RunState::fold(&events(store)), state, "the log folds to the live state");
}

#[tokio::test(start_paused = true)]
async fn fail_fails_the_run_and_cancels_running_siblings() {
    let plan = mock_plan(
        "{a: [{fail: boom}]}",
        "    - {id: a, agent: m, input: x, on_failure: fail}\n    - {id: b, agent: slow, input: why}\n    \
         - {id: c, agent: m, input: z, depends_on: [a]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    assert_eq!(
        trace(&log),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskDispatched b#1",
            "TaskFailed a#1",
            "TaskFailed b#1",
            "RunCompleted failed"
        ],
        "the cancelled sibling's end is recorded, so no task is left running in a finished run"
    );
    assert!(completed_summary(&log).contains("task `a` failed: boom"), "{}", completed_summary(&log));
    assert_eq!(status(&state, "a"), TaskStatus::Failed);
    assert_eq!(status(&state, "b"), TaskStatus::Failed);
    let b = state.index_of("b").expect("b exists");
    assert_eq!(state.tasks[b].error(), Some("cancelled: the run failed"));
    assert_eq!(state.running(), 0);
    assert_eq!(status(&state, "c"), TaskStatus::Pending, "c never runs");
    assert_folds(&store, &state);

    // The sibling's result arriving after the end changes nothing.
    let mut late = state.clone();
    let command =
        Command::Succeeded { task: "b".into(), attempt: 1, output: "late".into(), tokens: None, duration_ms: 1 };
    assert_eq!(late.process(command), Ok(vec![]));
    let command = Command::Failed {
        task: "b".into(),
        attempt: 1,
        error: "late".into(),
        class: ErrorClass::Agent,
        tokens: None,
        jitter: 0.0,
    };
    assert_eq!(late.process(command), Ok(vec![]));
    assert_eq!(late, state);
}

#[tokio::test(start_paused = true)]
async fn skip_lets_dependents_run_and_they_see_the_skipped_status() {
    let plan = mock_plan(
        "{a: [{fail: boom}]}",
        "    - {id: a, agent: m, input: x, on_failure: skip}\n    \
         - {id: b, agent: m, input: \"a is {{ tasks.a.status }}\", depends_on: [a]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "TaskSkipped a",
            "TaskDispatched b#1",
            "TaskSucceeded b#1",
            "RunCompleted partial"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Partial));
    assert_eq!(status(&state, "a"), TaskStatus::Skipped);
    let b = &state.tasks[state.index_of("b").expect("b")];
    assert_eq!(b.output.as_deref(), Some("a is skipped"));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn retry_succeeds_on_the_second_attempt() {
    let plan = mock_plan(
        "{a: [{fail: flaky}, {output: fine}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 100ms}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(
        trace(&events(&store)),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "RetryScheduled a#2 100ms",
            "RetryDue a",
            "TaskDispatched a#2",
            "TaskSucceeded a#2",
            "RunCompleted succeeded"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.tasks[0].output.as_deref(), Some("fine"));
    assert_eq!(state.tasks[0].attempts, 2);
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn retry_delays_double_up_to_max_backoff() {
    let plan = mock_plan(
        "{a: [{fail: one}, {fail: two}, {fail: three}, {output: four}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 4, backoff: 100ms, \
         max_backoff: 250ms}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let delays: Vec<(u32, u64, Option<u64>)> = events(&store)
        .iter()
        .filter_map(|e| match e {
            Event::RetryScheduled { attempt, delay_ms, backoff_ms, .. } => Some((*attempt, *delay_ms, *backoff_ms)),
            _ => None,
        })
        .collect();
    let backoffs: Vec<(u32, Option<u64>)> = delays.iter().map(|&(attempt, _, backoff)| (attempt, backoff)).collect();
    assert_eq!(backoffs, [(2, Some(100)), (3, Some(200)), (4, Some(250))]);
    // "Equal jitter": each wait is between half and all of its backoff.
    for (_, delay, backoff) in delays {
        let backoff = backoff.expect("a version-2 RetryScheduled records its backoff");
        assert!((backoff - backoff / 2..=backoff).contains(&delay), "{delay} ms for a backoff of {backoff} ms");
    }
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.tasks[0].attempts, 4);
}

#[tokio::test(start_paused = true)]
async fn retry_exhausted_then_skip_makes_the_run_partial() {
    let plan = mock_plan(
        "{a: [{fail: down}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms, then: skip}}\n    \
         - {id: b, agent: m, input: \"after {{ tasks.a.status }}\", depends_on: [a]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(
        trace(&events(&store)),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "RetryScheduled a#2 1ms",
            "RetryDue a",
            "TaskDispatched a#2",
            "TaskFailed a#2",
            "TaskSkipped a",
            "TaskDispatched b#1",
            "TaskSucceeded b#1",
            "RunCompleted partial"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Partial));
    assert_eq!(status(&state, "a"), TaskStatus::Skipped);
    assert_eq!(status(&state, "b"), TaskStatus::Succeeded);
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn retry_exhausted_then_fail_fails_the_run() {
    let plan = mock_plan(
        "{a: [{fail: down}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms, then: fail}}\n    \
         - {id: b, agent: m, input: why, depends_on: [a]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(
        trace(&events(&store)),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "RetryScheduled a#2 1ms",
            "RetryDue a",
            "TaskDispatched a#2",
            "TaskFailed a#2",
            "RunCompleted failed"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    assert_eq!(status(&state, "a"), TaskStatus::Failed);
    assert_eq!(status(&state, "b"), TaskStatus::Pending);
}

#[tokio::test(start_paused = true)]
async fn a_replan_splices_in_the_planners_tasks_in_place_of_the_failed_one_and_its_tail() {
    let replacement = r#"'{"workflow": [{"id": "a2", "agent": "m", "input": "second try"}, {"id": "b2", "agent": "m", "input": "after {{ tasks.a2.output }}", "depends_on": ["a2"]}]}'"#;
    let plan = mock_plan(
        &format!("{{a: [{{fail: wrong}}], a.replan: {replacement}}}"),
        "    - {id: keep, agent: m, input: k}\n    - {id: a, agent: m, input: x, depends_on: [keep], on_failure: replan}\n    \
         - {id: b, agent: m, input: yy, depends_on: [a]}",
        "{planner: m}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:?}", trace(&log));
    let replanned = log.iter().find_map(|e| match e {
        Event::Replanned(r) => Some((r.task.clone(), r.removed.clone(), r.added.clone())),
        _ => None,
    });
    assert_eq!(
        replanned,
        Some(("a".to_owned(), vec!["a".to_owned(), "b".to_owned()], vec!["a2".to_owned(), "b2".to_owned()]))
    );
    let ids: Vec<&str> = state.plan.tasks.iter().map(|t| t.id.value.as_str()).collect();
    assert_eq!(ids, ["keep", "a2", "b2"]);
    assert_eq!(state.tasks[state.index_of("b2").expect("b2")].output.as_deref(), Some("after second try"));
    assert_eq!(state.replans, 1);
    assert_eq!(RunState::fold(&log), state, "the fold of the log equals the live state");
}

#[tokio::test(start_paused = true)]
async fn a_replacement_that_stays_invalid_after_one_repair_fails_the_task() {
    let bad = r#"'{"workflow": [{"id": "a2", "agent": "nobody", "input": "x"}]}'"#;
    let plan = mock_plan(
        &format!("{{a: [{{fail: wrong}}], a.replan: {bad}}}"),
        "    - {id: a, agent: m, input: x, on_failure: replan}\n    - {id: b, agent: m, input: yy}",
        "{planner: m}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    let reason = log.iter().find_map(|e| match e {
        Event::ReplanFailed { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let reason = reason.expect("the replan failed");
    assert!(reason.contains("after one repair") && reason.contains("unknown_agent"), "{reason}");
    assert_eq!(status(&state, "a"), TaskStatus::Failed);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    assert!(completed_summary(&log).contains("replanning failed"), "{}", completed_summary(&log));
}

#[tokio::test(start_paused = true)]
async fn replanning_past_max_replans_fails_the_run_saying_why() {
    let again = r#"'{"workflow": [{"id": "a2", "agent": "m", "input": "x", "on_failure": "replan"}]}'"#;
    let plan = mock_plan(
        &format!("{{a: [{{fail: wrong}}], a2: [{{fail: again}}], a.replan: {again}}}"),
        "    - {id: a, agent: m, input: x, on_failure: replan}",
        "{planner: m, max_replans: 1}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    assert_eq!(state.replans, 1);
    let log = events(&store);
    let summary = completed_summary(&log);
    assert!(summary.contains("a2") && summary.contains("max_replans"), "{summary}");
}

#[tokio::test(start_paused = true)]
async fn a_critical_task_that_exhausts_its_retries_fails_the_run() {
    let plan = mock_plan(
        "{a: [{fail: down}]}",
        "    - {id: a, agent: m, input: x, critical: true, on_failure: {action: retry, max_attempts: 2, backoff: 1ms}}\n    \
         - {id: b, agent: m, input: why}",
        "{max_concurrency: 1}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    assert_eq!(status(&state, "a"), TaskStatus::Failed);
    assert_eq!(state.tasks[0].attempts, 2);
    assert!(completed_summary(&log).contains("critical task `a` failed"), "{}", completed_summary(&log));
}

#[tokio::test(start_paused = true)]
async fn a_clarification_pauses_only_its_task_and_the_answer_goes_into_the_next_attempt() {
    let plan = mock_plan(
        "{a: [{clarify: Which year?}, {output: done}]}",
        "    - {id: a, agent: m, input: report}\n    - {id: b, agent: m, input: other}\n    \
         - {id: c, agent: m, input: \"after {{ tasks.b.output }}\", depends_on: [b]}\n    \
         - {id: d, agent: m, input: \"after {{ tasks.a.output }}\", depends_on: [a]}",
        "{max_concurrency: 1}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(
        trace(&events(&store)),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "ClarificationRequested a",
            "TaskDispatched b#1",
            "TaskSucceeded b#1",
            "TaskDispatched c#1",
            "TaskSucceeded c#1",
            "RunPaused"
        ]
    );
    assert_eq!(state.status, RunStatus::Paused);
    assert_eq!(status(&state, "a"), TaskStatus::Paused);
    assert_eq!(status(&state, "d"), TaskStatus::Pending);
    assert_eq!(state.tasks[0].question(), Some("Which year?"));
    assert_folds(&store, &state);

    let before = store.records().len();
    let state = drive(&store, Command::Answer { task: "a".into(), text: "2024".into() }).await.expect("answered");
    assert_eq!(trace(&events(&store)[before..]), ["ClarificationProvided a"], "a paused run only records the answer");
    assert_eq!(state.status, RunStatus::Paused);

    let before = store.records().len();
    let state = drive(&store, Command::Continue).await.expect("continued");
    let log = events(&store);
    assert_eq!(
        trace(&log[before..]),
        [
            "RunResumed",
            "TaskDispatched a#2",
            "TaskSucceeded a#2",
            "TaskDispatched d#1",
            "TaskSucceeded d#1",
            "RunCompleted succeeded"
        ]
    );
    let Event::TaskDispatched { input, .. } = &log[before + 1] else { unreachable!() };
    assert_eq!(&**input, "report\n\nClarification: 2024");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_clarification_in_an_early_phase_pauses_a_phased_run() {
    let plan = mock_plan(
        "{a: [{clarify: Which year?}, {output: done}]}",
        "    - {id: a, agent: m, input: report}\n    - {id: b, agent: m, input: other}\n    \
         - {id: c, agent: m, input: next, depends_on: [b]}",
        "{strategy: phased}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Paused, "{:?}", trace(&log));
    assert!(!log.iter().any(|e| matches!(e, Event::TaskDispatched { task, .. } if task == "c")), "c is a later phase");

    drive(&store, Command::Answer { task: "a".into(), text: "2024".into() }).await.expect("answered");
    let state = drive(&store, Command::Continue).await.expect("continued");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:?}", trace(&events(&store)));
    assert_folds(&store, &state);
}

const REVIEW: &str = "    - {id: draft, agent: m, input: the draft}\n    \
    - {id: review, type: human_review, depends_on: [draft], prompt: \"Publish {{ tasks.draft.output }}?\", POLICY}\n    \
    - {id: publish, agent: m, input: \"published\", depends_on: [review]}";

#[tokio::test(start_paused = true)]
async fn an_approved_review_lets_dependents_run() {
    let plan = mock_plan("{}", &REVIEW.replace("POLICY", "on_failure: fail"), "{}");
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        ["RunCreated", "TaskDispatched draft#1", "TaskSucceeded draft#1", "ReviewRequested review", "RunPaused"]
    );
    let Event::ReviewRequested { prompt, outputs, .. } = &log[3] else { unreachable!() };
    assert_eq!(prompt, "Publish the draft?");
    assert_eq!(outputs, &BTreeMap::from([("draft".to_owned(), "the draft".to_owned())]));
    assert_eq!(state.status, RunStatus::Paused);

    let before = log.len();
    drive(&store, Command::Decide { task: "review".into(), approved: true, comment: None }).await.expect("decided");
    assert_eq!(trace(&events(&store)[before..]), ["ReviewDecided review true"]);
    let before = before + 1;
    let state = drive(&store, Command::Continue).await.expect("continued");
    assert_eq!(
        trace(&events(&store)[before..]),
        ["RunResumed", "TaskDispatched publish#1", "TaskSucceeded publish#1", "RunCompleted succeeded"]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_review_applies_its_failure_policy() {
    for (policy, outcome, publish) in [
        ("on_failure: fail", Outcome::Failed, TaskStatus::Pending),
        ("on_failure: skip", Outcome::Partial, TaskStatus::Succeeded),
    ] {
        let plan = mock_plan("{}", &REVIEW.replace("POLICY", policy), "{}");
        let store = TestStore::new("run");
        start(&store, &plan).await;
        let decide = Command::Decide { task: "review".into(), approved: false, comment: Some("tone".into()) };
        let mut state = drive(&store, decide).await.expect("decided");
        if !state.status.is_final() {
            state = drive(&store, Command::Continue).await.expect("continued");
        }
        let log = events(&store);
        assert_eq!(state.status, RunStatus::Finished(outcome), "{policy}: {:?}", trace(&log));
        assert_eq!(status(&state, "publish"), publish, "{policy}");
        let failed = log.iter().find_map(|e| match e {
            Event::TaskFailed { task, error, .. } if task == "review" => Some(error.clone()),
            _ => None,
        });
        assert_eq!(failed.as_deref(), Some("rejected: tone"), "{policy}");
        assert_folds(&store, &state);
    }
}

#[tokio::test]
async fn cancel_ends_the_run_and_later_commands_are_refused() {
    let plan = mock_plan("{}", "    - {id: a, agent: slow, input: x}\n    - {id: b, agent: m, input: why}", "{}");
    let store = TestStore::new("run");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let driver = Driver::new("run".into(), store.clone(), &[], std::env::temp_dir()).observe(Box::new(
        move |record: Record, _: &RunState| {
            if matches!(&record.event, Event::TaskSucceeded { task, .. } if task == "b") {
                trigger.cancel();
            }
        },
    ));
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), cancel);
    let state = tokio::time::timeout(Duration::from_secs(5), run).await.expect("cancel is prompt").expect("driven");
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Cancelled);
    assert!(matches!(log.last(), Some(Event::RunCancelled { .. })), "{:?}", trace(&log));
    assert!(!log.iter().any(|e| matches!(e, Event::TaskSucceeded { task, .. } if task == "a")));
    assert_folds(&store, &state);

    let finished = EngineError::Finished { status: "cancelled" };
    let mut later = state.clone();
    assert_eq!(later.process(Command::Continue), Err(finished.clone()));
    assert_eq!(later.process(Command::Cancel { reason: "again".into() }), Err(finished.clone()));
    assert_eq!(later.process(Command::Answer { task: "a".into(), text: "x".into() }), Err(finished.clone()));
    let decide = Command::Decide { task: "a".into(), approved: true, comment: None };
    assert_eq!(later.process(decide), Err(finished.clone()));
    let result =
        Command::Succeeded { task: "a".into(), attempt: 1, output: "late".into(), tokens: None, duration_ms: 1 };
    assert_eq!(later.process(result), Ok(vec![]), "a late result is ignored");
    assert_eq!(later, state);
    match drive(&store, Command::Continue).await {
        Err(DriverError::Refused(error)) => assert_eq!(error, finished),
        other => panic!("a cancelled run was continued: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_template_reading_a_missing_json_field_fails_without_retrying() {
    let plan = mock_plan(
        "{a: '{\"title\": \"T\"}'}",
        "    - {id: a, agent: m, input: x}\n    \
         - {id: b, agent: m, input: \"{{ tasks.a.output.missing }}\", depends_on: [a], \
         on_failure: {action: retry, max_attempts: 3, backoff: 1ms}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskSucceeded a#1",
            "TaskDispatched b#1",
            "TaskFailed b#1",
            "RunCompleted failed"
        ]
    );
    let Event::TaskFailed { error, .. } = &log[4] else { unreachable!() };
    assert!(error.starts_with("cannot render the input"), "{error}");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
}

#[tokio::test(start_paused = true)]
async fn continue_after_a_crash_redispatches_only_the_unfinished_task() {
    let plan = mock_plan(
        "{}",
        "    - {id: a, agent: m, input: one}\n    - {id: b, agent: m, input: two, depends_on: [a]}\n    \
         - {id: c, agent: m, input: three, depends_on: [b]}",
        "{}",
    );
    // The log of a run that crashed while b's first attempt was in flight.
    let mut machine = RunState::new();
    let mut log = machine.process(Command::Start(Start::plan(Arc::clone(&plan)))).expect("started");
    let done = Command::Succeeded { task: "a".into(), attempt: 1, output: "one".into(), tokens: None, duration_ms: 1 };
    log.extend(machine.process(done).expect("a done"));
    assert_eq!(trace(&log), ["RunCreated", "TaskDispatched a#1", "TaskSucceeded a#1", "TaskDispatched b#1"]);
    let store = TestStore::new("run");
    let records: Vec<Record> = log
        .into_iter()
        .zip(1..)
        .map(|(event, seq)| Record { seq, at: "2026-01-01T00:00:00.000Z".into(), run_id: "run".into(), event })
        .collect();
    engine::store::EventStore::append(&store, records).await.expect("stored");

    let state = drive(&store, Command::Continue).await.expect("continued");
    assert_eq!(
        trace(&events(&store)[4..]),
        [
            "RunResumed",
            "TaskDispatched b#2",
            "TaskSucceeded b#2",
            "TaskDispatched c#1",
            "TaskSucceeded c#1",
            "RunCompleted succeeded"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.tasks[0].attempts, 1, "a finished before the crash and never runs again");
    let seqs: Vec<u64> = store.records().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn reused_outputs_are_recorded_and_never_dispatched() {
    let plan = mock_plan(
        "{}",
        "    - {id: a, agent: m, input: fresh}\n    \
         - {id: b, agent: m, input: \"got {{ tasks.a.output }}\", depends_on: [a]}",
        "{}",
    );
    let start = Start {
        retry_of: Some("run-0".into()),
        reuse: BTreeMap::from([("a".to_owned(), "old".to_owned())]),
        ..Start::plan(Arc::clone(&plan))
    };
    let store = TestStore::new("run");
    let state = drive(&store, Command::Start(start)).await.expect("driven");
    let log = events(&store);
    assert_eq!(
        trace(&log),
        ["RunCreated", "TaskReused a", "TaskDispatched b#1", "TaskSucceeded b#1", "RunCompleted succeeded"]
    );
    assert!(matches!(&log[0], Event::RunCreated(created) if created.retry_of.as_deref() == Some("run-0")));
    assert_eq!(state.tasks[1].output.as_deref(), Some("got old"));
    assert_eq!(state.tasks[0].attempts, 0);
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn phased_runs_phase_by_phase_and_one_unit_at_a_time() {
    let mut workflow = String::from(
        "    - {id: slow, agent: s100, input: x}\n    - {id: g1, agent: s10, input: x, parallel_group: grp}\n    \
         - {id: g2, agent: s10, input: x, parallel_group: grp}\n    - {id: c1, agent: s10, input: x}\n",
    );
    for k in 2..=10 {
        workflow.push_str(&format!("    - {{id: c{k}, agent: s10, input: x, depends_on: [c{}]}}\n", k - 1));
    }
    workflow.push_str("    - {id: last, agent: s10, input: x, depends_on: [slow, c10, g1, g2]}\n");
    let plan = plan(&format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  agent_definitions:\n    \
         s100: {{runtime: mock, latency: 100ms}}\n    s10: {{runtime: mock, latency: 10ms}}\n  workflow:\n{workflow}  \
         control_logic: {{strategy: phased}}\n"
    ));
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let log = events(&store);
    let level = |id: &str| state.graph.level(state.index_of(id).expect("known"));
    let mut finished = std::collections::HashSet::new();
    let mut running: Vec<String> = Vec::new();
    for event in &log {
        match event {
            Event::TaskDispatched { task, .. } => {
                let phase = level(task);
                for (i, t) in state.plan.tasks.iter().enumerate() {
                    if state.graph.level(i) < phase {
                        assert!(
                            finished.contains(t.id.value.as_str()),
                            "{task} (phase {phase}) before {} ended",
                            t.id.value
                        );
                    }
                }
                running.push(task.clone());
                let groups: Vec<Option<String>> = running
                    .iter()
                    .map(|r| {
                        state.plan.tasks[state.index_of(r).expect("known")]
                            .extras()
                            .parallel_group
                            .clone()
                            .map(|g| g.value)
                    })
                    .collect();
                let one_unit = running.len() == 1 || groups.iter().all(|g| g.is_some() && *g == groups[0]);
                assert!(one_unit, "{running:?} run together");
            }
            Event::TaskSucceeded { task, .. } => {
                running.retain(|r| r != task);
                finished.insert(task.clone());
            }
            _ => {}
        }
    }
    let dispatched: Vec<&str> = log
        .iter()
        .filter_map(|e| match e {
            Event::TaskDispatched { task, .. } => Some(task.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(dispatched[..4], ["slow", "g1", "g2", "c1"], "phase 0 in list order, the group together");
    assert_eq!(dispatched.last(), Some(&"last"));
}

#[tokio::test(start_paused = true)]
async fn sequential_goes_on_after_a_task_skipped_before_it_reached_an_agent() {
    let plan = mock_plan(
        "{z: '{\"title\": \"T\"}'}",
        "    - {id: z, agent: m, input: x}\n    \
         - {id: a, agent: m, input: \"{{ tasks.z.output.nope }}\", depends_on: [z], on_failure: skip}\n    \
         - {id: b, agent: m, input: last}",
        "{strategy: sequential}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(
        trace(&events(&store)),
        [
            "RunCreated",
            "TaskDispatched z#1",
            "TaskSucceeded z#1",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "TaskSkipped a",
            "TaskDispatched b#1",
            "TaskSucceeded b#1",
            "RunCompleted partial"
        ]
    );
    assert_eq!(state.status, RunStatus::Finished(Outcome::Partial));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_review_does_not_stall_a_sequential_run() {
    let plan =
        mock_plan("{}", "    - {id: check, type: human_review, prompt: go?}\n    - {id: a, agent: m, input: x}", "{}");
    let store = TestStore::new("run");
    let start = Start { strategy: Some(manifest::plan::Strategy::Sequential), ..Start::plan(plan) };
    let state = drive(&store, Command::Start(start)).await.expect("driven");
    assert_eq!(
        trace(&events(&store)),
        ["RunCreated", "ReviewRequested check", "TaskDispatched a#1", "TaskSucceeded a#1", "RunPaused"]
    );
    assert_eq!(state.status, RunStatus::Paused);
    drive(&store, Command::Decide { task: "check".into(), approved: true, comment: None }).await.expect("decided");
    let state = drive(&store, Command::Continue).await.expect("continued");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:?}", trace(&events(&store)));
}

#[tokio::test(start_paused = true)]
async fn approving_the_last_review_while_paused_lets_the_run_complete() {
    let plan = mock_plan(
        "{}",
        "    - {id: draft, agent: m, input: text}\n    \
         - {id: review, type: human_review, depends_on: [draft], prompt: fine?}",
        "{}",
    );
    let store = TestStore::new("run");
    assert_eq!(start(&store, &plan).await.status, RunStatus::Paused);
    drive(&store, Command::Decide { task: "review".into(), approved: true, comment: None }).await.expect("decided");
    let before = store.records().len();
    let state = drive(&store, Command::Continue).await.expect("continued");
    assert_eq!(trace(&events(&store)[before..]), ["RunResumed", "RunCompleted succeeded"]);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_failed_verification_is_a_failed_attempt_whose_reason_goes_into_the_retry() {
    let plan = mock_plan(
        r#"{t: ["not json", '{"x": 1}']}"#,
        "    - id: t\n      agent: m\n      input: give x\n      verification: {type: schema_check, schema: {type: object, \
         required: [x]}}\n      on_failure: {action: retry, max_attempts: 2, backoff: 10ms}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:?}", trace(&log));
    let reason = log.iter().find_map(|e| match e {
        Event::VerificationFailed { attempt: 1, reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let reason = reason.expect("the first output failed its check");
    assert!(reason.contains("not valid JSON"), "{reason}");
    let second = log.iter().find_map(|e| match e {
        Event::TaskDispatched { attempt: 2, input, .. } => Some(input.clone()),
        _ => None,
    });
    let second = second.expect("a second attempt");
    assert!(second.starts_with("give x") && second.contains(&reason), "{second}");
    assert_eq!(state.tasks[0].output.as_deref(), Some(r#"{"x": 1}"#));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_gate_output_never_exceeds_its_cap_and_the_compaction_is_recorded() {
    let long = "The 2025 revenue of XyzzyCorp was 12.5 million dollars, up 8 percent. ".repeat(40);
    let plan = mock_plan(
        &format!("{{a: '{long}', b: '{long}'}}"),
        "    - {id: a, agent: m, input: x}\n    - {id: b, agent: m, input: x}\n    \
         - {id: g, type: synthesis_gate, inputs: [a, b], max_output_tokens: 60}\n    \
         - {id: w, agent: m, input: '{{ tasks.g.output }}', depends_on: [g]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let gate = state.tasks[state.index_of("g").expect("g")].output.clone().expect("the gate's output");
    assert!(model::tokens::count(&gate, model::tokens::Tokenizer::O200k) <= 60, "{gate}");
    assert!(gate.contains("12.5 million"), "{gate}");
    let compaction = events(&store).into_iter().find_map(|e| match e {
        Event::ContextCompacted(c) if c.scope == Scope::Gate => Some((c.task, c.by, c.tokens_before, c.tokens_after)),
        _ => None,
    });
    let (task, by, before, after) = compaction.expect("the gate's compaction is recorded");
    assert_eq!((task.as_str(), by.as_str()), ("g", "extractive"));
    assert!(before > 60 && after <= 60, "{before} -> {after}");
    assert_eq!(state.tasks[state.index_of("w").expect("w")].output.as_deref(), Some(&*gate));
}

#[tokio::test(start_paused = true)]
async fn each_task_sees_a_context_summary_that_holds_the_outputs_before_it() {
    let plan = mock_plan(
        "{a: 'Revenue was 12.5 million in 2025.', b: 'Growth was 8 percent.'}",
        "    - {id: a, agent: m, input: x}\n    - {id: b, agent: m, input: x, depends_on: [a]}\n    \
         - {id: c, agent: m, input: 'So far: {{ context_summary }}', depends_on: [b]}",
        "{summary_budget: 200}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let input = state.tasks[2].input.clone().expect("c ran");
    assert!(input.contains("## a") && input.contains("12.5 million") && input.contains("## b"), "{input}");
    assert!(input.contains("8 percent"), "{input}");
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_spent_token_budget_stops_dispatching_and_fails_the_run_saying_why() {
    let plan = mock_plan(
        "{}",
        "    - {id: a, agent: m, input: short}\n    - {id: b, agent: m, input: '{{ tasks.a.output }} and a long \
         enough input to go past the budget', depends_on: [a], critical: true}",
        "{token_budget: 6}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed), "{:?}", trace(&log));
    assert_eq!(status(&state, "a"), TaskStatus::Succeeded);
    assert_eq!(status(&state, "b"), TaskStatus::Skipped);
    let reason = state.exhausted.clone().expect("the budget ran out");
    assert!(reason.contains("token budget") && reason.contains("`b`"), "{reason}");
    assert!(completed_summary(&log).contains("token budget"));
    assert!(!log.iter().any(|e| matches!(e, Event::TaskDispatched { task, .. } if task == "b")));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn a_phase_out_of_turns_ends_the_run_partial_when_only_non_critical_work_is_left() {
    let plan = mock_plan(
        "{a: [{fail: once}, ok]}",
        "    - {id: a, agent: m, input: x, critical: false, on_failure: {action: retry, max_attempts: 3, backoff: \
         10ms, then: skip}}\n    - {id: b, agent: m, input: yy}",
        "{max_turns_per_phase: 2}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Partial), "{:?}", trace(&log));
    assert_eq!(status(&state, "b"), TaskStatus::Succeeded);
    assert_eq!(status(&state, "a"), TaskStatus::Skipped);
    let reason = state.exhausted.clone().expect("the phase ran out of turns");
    assert!(reason.contains("max_turns_per_phase"), "{reason}");
}

#[tokio::test(start_paused = true)]
async fn a_compactor_agent_rewrites_the_context_summary_after_each_task() {
    let plan = plan(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions:\n    \
         work: {runtime: mock, latency: 50ms}\n    \
         squeeze: {runtime: mock, responses: {a.summary: 'A in short', b.summary: 'A and B in short'}}\n  \
         workflow:\n    - {id: a, agent: work, input: first}\n    - {id: b, agent: work, input: second, depends_on: [a]}\n    \
         - {id: c, agent: work, input: 'Summary: {{ context_summary }}', depends_on: [b]}\n  \
         control_logic: {compactor: squeeze}\n",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(state.tasks[2].input.as_deref(), Some("Summary: A and B in short"));
    let by: Vec<(String, String)> = events(&store)
        .into_iter()
        .filter_map(|e| match e {
            Event::ContextCompacted(c) if c.scope == Scope::Summary => Some((c.task, c.by)),
            _ => None,
        })
        .collect();
    assert_eq!(by[..2], [("a".to_owned(), "squeeze".to_owned()), ("b".to_owned(), "squeeze".to_owned())]);
}

#[tokio::test(start_paused = true)]
async fn an_answered_question_does_not_use_up_a_retry() {
    let plan = mock_plan(
        "{a: [{clarify: Which year?}, {fail: flaky}, {output: done}]}",
        "    - {id: a, agent: m, input: report, on_failure: {action: retry, max_attempts: 2, backoff: 10ms}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    assert_eq!(state.status, RunStatus::Paused);
    drive(&store, Command::Answer { task: "a".into(), text: "2024".into() }).await.expect("answered");
    let state = drive(&store, Command::Continue).await.expect("continued");
    let log = events(&store);
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:?}", trace(&log));
    assert_eq!((state.tasks[0].attempts, state.tasks[0].failures), (3, 1));
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn retry_on_transient_sends_an_agents_failure_straight_to_then() {
    let plan = mock_plan(
        "{a: [{fail: wrong}, {output: fine}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 1ms, then: skip, \
         retry_on: transient}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        ["RunCreated", "TaskDispatched a#1", "TaskFailed a#1", "TaskSkipped a", "RunCompleted partial"],
        "a failure of the agent itself is not transient, so it is not retried"
    );
    assert!(matches!(&log[2], Event::TaskFailed { class: ErrorClass::Agent, retryable: false, .. }), "{:?}", log[2]);
    assert_eq!(state.tasks[0].attempts, 1);
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn retry_on_transient_retries_a_timeout() {
    let plan = mock_plan(
        "{}",
        "    - {id: a, agent: slow, input: x, timeout: 1s, on_failure: {action: retry, max_attempts: 2, backoff: 1ms, \
         then: skip, retry_on: transient}}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        [
            "RunCreated",
            "TaskDispatched a#1",
            "TaskFailed a#1",
            "RetryScheduled a#2 1ms",
            "RetryDue a",
            "TaskDispatched a#2",
            "TaskFailed a#2",
            "TaskSkipped a",
            "RunCompleted partial"
        ]
    );
    assert!(matches!(&log[2], Event::TaskFailed { class: ErrorClass::Timeout, retryable: true, .. }), "{:?}", log[2]);
    assert_folds(&store, &state);
}

#[tokio::test(start_paused = true)]
async fn every_result_names_the_seq_of_its_dispatch() {
    let plan = mock_plan(
        "{a: [{fail: flaky}, {output: fine}]}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms}}\n    \
         - {id: b, agent: m, input: z, depends_on: [a]}",
        "{}",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let records = store.records();
    let links: Vec<(String, Option<u64>)> = records
        .iter()
        .filter_map(|r| match &r.event {
            Event::TaskSucceeded { dispatched_seq, .. } | Event::TaskFailed { dispatched_seq, .. } => {
                Some((trace(std::slice::from_ref(&r.event)).remove(0), *dispatched_seq))
            }
            _ => None,
        })
        .collect();
    let seq_of = |line: &str| records.iter().find(|r| trace(std::slice::from_ref(&r.event))[0] == line).map(|r| r.seq);
    assert_eq!(
        links,
        [
            ("TaskFailed a#1".to_owned(), seq_of("TaskDispatched a#1")),
            ("TaskSucceeded a#2".to_owned(), seq_of("TaskDispatched a#2")),
            ("TaskSucceeded b#1".to_owned(), seq_of("TaskDispatched b#1")),
        ]
    );
    assert!(links.iter().all(|(_, seq)| seq.is_some()));
    assert_eq!(state.seq, records.len() as u64, "the state counts the events it applied");
    assert_folds(&store, &state);
}

#[test]
fn the_jitter_a_failure_carries_cuts_up_to_half_the_backoff() {
    let plan = mock_plan(
        "{}",
        "    - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 4, backoff: 1s}}",
        "{}",
    );
    let mut state = RunState::new();
    state.process(Command::Start(Start::plan(plan))).expect("it starts");
    let mut waits = Vec::new();
    for (attempt, jitter) in [(1, 0.0), (2, 0.5), (3, 0.999)] {
        let failed = Command::Failed {
            task: "a".into(),
            attempt,
            error: "e".into(),
            class: ErrorClass::Agent,
            tokens: None,
            jitter,
        };
        let events = state.process(failed).expect("the failure is taken");
        waits.extend(events.into_iter().filter_map(|event| match event {
            Event::RetryScheduled { delay_ms, backoff_ms, .. } => Some((delay_ms, backoff_ms)),
            _ => None,
        }));
        state.process(Command::TimerFired { task: "a".into() }).expect("the timer fires");
    }
    assert_eq!(waits, [(1000, Some(1000)), (1500, Some(2000)), (2002, Some(4000))]);
}

#[tokio::test]
async fn a_command_agents_non_zero_exit_is_not_transient() {
    let plan = plan(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  mission: test\n  agent_definitions:\n    \
         bad: {runtime: command, command: [sh, -c, 'exit 3']}\n  workflow:\n    \
         - {id: a, agent: bad, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 1ms, then: skip, \
         retry_on: transient}}\n",
    );
    let store = TestStore::new("run");
    let state = start(&store, &plan).await;
    let log = events(&store);
    assert_eq!(
        trace(&log),
        ["RunCreated", "TaskDispatched a#1", "TaskFailed a#1", "TaskSkipped a", "RunCompleted partial"]
    );
    assert!(
        matches!(
            &log[2],
            Event::TaskFailed { class: ErrorClass::Agent, retryable: false, dispatched_seq: Some(2), .. }
        ),
        "{:?}",
        log[2]
    );
    assert_folds(&store, &state);
}
