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
