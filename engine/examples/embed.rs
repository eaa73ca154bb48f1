//! Embedding the engine without its driver: the program owns the run state and drives it
//! through [`engine::Handler`] the way a service on a message bus would. Commands go in,
//! events come out; each `TaskDispatched` is "delivered" to an agent (here a local function),
//! whose answer comes back as `Command::Succeeded`. At the end the live state must equal the
//! fold of the events it produced, which is what makes the log the source of truth.
//!
//! Run it with `cargo run -p engine --example embed`.

use std::collections::VecDeque;
use std::sync::Arc;

use engine::{Command, Event, Handler, RunState, Start};

/// A small plan: two independent drafts, then a task that joins them.
const PLAN: &str = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: embedded}
spec:
  mission: Greet the world twice and join the greetings.
  agent_definitions:
    local: {runtime: command, command: [cat]}
  workflow:
    - {id: hello, agent: local, input: "hello"}
    - {id: world, agent: local, input: "world"}
    - id: join
      agent: local
      input: "{{ tasks.hello.output }}, {{ tasks.world.output }}!"
      depends_on: [hello, world]
"#;

/// The "agent": whatever the program wants to run for a task; here it upper-cases its input.
fn agent(task: &str, input: &str) -> String {
    match task {
        "join" => input.to_owned(),
        _ => input.to_uppercase(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let loaded = manifest::load_str("embedded.yaml", "embedded", PLAN, &|_| true);
    let errors: Vec<String> = loaded.errors().map(ToString::to_string).collect();
    let plan = loaded.plan.filter(|_| errors.is_empty()).ok_or_else(|| errors.join("; "))?;

    let mut state = RunState::new();
    let mut log: Vec<Event> = Vec::new();
    // The "bus": commands waiting to be handled, in arrival order.
    let mut inbox = VecDeque::from([Command::Start(Start::plan(Arc::new(plan)))]);
    while let Some(command) = inbox.pop_front() {
        let events = state.process(command)?;
        for event in events {
            println!("{:>22} {}", event.name(), describe(&event));
            if let Event::TaskDispatched { task, attempt, input } = &event {
                // A real deployment would publish the dispatch and get the result later,
                // from another process; the state machine does not care when it arrives.
                let output = agent(task, input);
                inbox.push_back(Command::Succeeded {
                    task: task.clone(),
                    attempt: *attempt,
                    output,
                    tokens: None,
                    duration_ms: 0,
                });
            }
            log.push(event);
        }
    }

    println!("status: {}", state.status.as_str());
    if let Some(join) = state.index_of("join") {
        println!("join: {}", state.tasks[join].output.as_deref().unwrap_or_default());
    }
    assert_eq!(RunState::fold(&log), state, "the live state is the fold of its events");
    assert!(state.status.is_final());
    Ok(())
}

/// One line about an event, for the printout.
fn describe(event: &Event) -> String {
    match event {
        Event::RunCreated(created) => {
            let plan = &created.plan;
            format!("plan {} ({} tasks, {})", plan.name, plan.tasks.len(), created.strategy.as_str())
        }
        Event::TaskDispatched { task, attempt, input } => format!("{task}#{attempt} input {input:?}"),
        Event::TaskSucceeded { task, attempt, output, .. } => format!("{task}#{attempt} output {output:?}"),
        Event::RunCompleted { status, summary } => format!("{}: {summary}", status.as_str()),
        other => other.task().unwrap_or_default().to_owned(),
    }
}
