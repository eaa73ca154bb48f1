//! Scripted runs: a plan test's overrides answer for every agent (an `llm` agent never reaches
//! its server), and on a paused clock the records carry virtual time from the given epoch.

use std::sync::Arc;

use engine::clock::Clock;
use engine::driver::Driver;
use engine::script::Scripts;
use engine::{Command, Event, Outcome, RunStatus, Start};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

const PLAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  providers:\n    \
                    nowhere: {base_url: 'http://127.0.0.1:9/v1', model: m}\n  agent_definitions:\n    \
                    model: {runtime: llm, provider: nowhere}\n    stub: {runtime: mock, default: fixed}\n  \
                    workflow:\n    - {id: ask, agent: model, input: question, on_failure: {action: retry, \
                    max_attempts: 2, backoff: 1m}}\n    - {id: after, agent: stub, input: x, depends_on: [ask]}\n";

const SCENARIO: &str = "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {name: s}\nspec:\n  plan: p.yaml\n  \
                        overrides:\n    agents:\n      model:\n        latency: 10s\n        replies: [{fail: \
                        down}, answer]\n";

#[tokio::test(start_paused = true)]
async fn scripted_agents_answer_in_virtual_time_from_the_epoch() {
    let plan = Arc::new(manifest::load_str("p.yaml", "p", PLAN, &|_| true).plan.expect("the plan loads"));
    let test = manifest::plan_test::load_test_str("s.test.yaml", SCENARIO, &engine::script::VOCABULARY)
        .test
        .expect("the scenario reads");
    let scripts = Scripts::new(&plan, &test.overrides);
    let store = TestStore::new("run");
    let driver = Driver::new("run".into(), store.clone(), &[], std::env::temp_dir())
        .with_clock(Clock::virtual_from(0))
        .with_jitter_seed(7);
    let start = Start { plan: Arc::clone(&plan), ..Start::default() };
    let state = scripts.install(driver, None).run(Command::Start(start), CancellationToken::new()).await.expect("runs");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let records = store.records();
    let outputs: Vec<(&str, &str)> = records
        .iter()
        .filter_map(|r| match &r.event {
            Event::TaskSucceeded { task, output, .. } => Some((task.as_str(), &**output)),
            _ => None,
        })
        .collect();
    // The llm agent's script answers; the mock agent without a script keeps its own default.
    assert_eq!(outputs, [("ask", "answer"), ("after", "fixed")]);
    assert_eq!(&*records[0].at, "1970-01-01T00:00:00.000Z");
    let last = &*records.last().expect("records").at;
    // 10 s, a backoff of 30-60 s, and 10 s again: virtual time, not the test's.
    assert!(last > "1970-01-01T00:00:50.000Z" && last <= "1970-01-01T00:01:20.000Z", "{last}");
}
