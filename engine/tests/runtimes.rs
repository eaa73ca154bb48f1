//! Runtimes are found by name in the driver's registry, so an embedder can register its own.

use std::sync::Arc;

use engine::driver::Driver;
use engine::runtime::{AgentRuntime, Attempt, Pending, Registry, Reply, Setup};
use engine::{Command, Outcome, RunStatus, Start};
use tokio_util::sync::CancellationToken;

mod support;
use support::TestStore;

/// Answers with the input in capitals, signed with the agent's name.
struct Shout(String);

impl AgentRuntime for Shout {
    fn run(&self, attempt: Attempt, _cancel: CancellationToken) -> Pending {
        let text = format!("{} ({})", attempt.input.to_uppercase(), self.0);
        Box::pin(async move { Reply::Output { text, tokens: None } })
    }
}

fn shout(setup: &Setup<'_>) -> Arc<dyn AgentRuntime> {
    Arc::new(Shout(setup.name.to_owned()))
}

#[tokio::test]
async fn a_registered_constructor_builds_the_runtime_of_agents_naming_it() {
    let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions:\n    \
                loud: {runtime: mock}\n  workflow:\n    - {id: a, agent: loud, input: hello}\n";
    let plan = Arc::new(manifest::load_str("t.yaml", "t", yaml, &|_| true).plan.expect("the plan loads"));
    let driver = Driver::new("r".into(), TestStore::new("r"), &[], std::env::temp_dir())
        .with_runtimes(Registry::builtin().with("mock", shout));
    let state =
        driver.run(Command::Start(Start::plan(plan)), CancellationToken::new()).await.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let a = state.index_of("a").expect("a exists");
    assert_eq!(state.tasks[a].output.as_deref(), Some("HELLO (loud)"));
}

/// Panics on its first poll after a yield, as a runtime with a bug would.
struct Broken;

impl AgentRuntime for Broken {
    fn run(&self, attempt: Attempt, _cancel: CancellationToken) -> Pending {
        Box::pin(async move {
            tokio::task::yield_now().await;
            if attempt.task == "b" {
                panic!("a runtime bug");
            }
            Reply::Output { text: "fine".into(), tokens: None }
        })
    }
}

#[tokio::test]
async fn an_attempt_that_panics_fails_its_task_instead_of_leaving_the_run_waiting() {
    let yaml = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions:\n    \
                m: {runtime: mock}\n  workflow:\n    - {id: a, agent: m, input: one}\n    - {id: b, agent: m, input: \
                two, on_failure: skip}\n    - {id: c, agent: m, input: three, depends_on: [b]}\n";
    let plan = Arc::new(manifest::load_str("t.yaml", "t", yaml, &|_| true).plan.expect("the plan loads"));
    let driver = Driver::new("r".into(), TestStore::new("r"), &[], std::env::temp_dir())
        .with_runtimes(Registry::builtin().with("mock", |_: &Setup<'_>| Arc::new(Broken) as Arc<dyn AgentRuntime>));
    let run = driver.run(Command::Start(Start::plan(plan)), CancellationToken::new());
    let state = tokio::time::timeout(std::time::Duration::from_secs(30), run)
        .await
        .expect("the run ends rather than waiting for the attempt that panicked")
        .expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Partial));
    let b = &state.tasks[state.index_of("b").expect("b exists")];
    assert_eq!(b.status, engine::TaskStatus::Skipped);
    let error = b.error().unwrap_or_default();
    assert!(error.contains("inside runner (a bug): a runtime bug"), "{error}");
    let c = &state.tasks[state.index_of("c").expect("c exists")];
    assert_eq!(c.status, engine::TaskStatus::Succeeded, "a dependent of a skipped task runs");
}
