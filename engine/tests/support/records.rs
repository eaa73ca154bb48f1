//! Records for the store tests: a log of run `r1` that starts with a `RunCreated` and goes on
//! with dispatches, whichever store holds it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use engine::event::RunCreated;
use engine::{Event, Record};

/// A record of run `r1` with a fixed time.
pub fn record(seq: u64, event: Event) -> Record {
    Record { seq, at: "2026-11-22T12:45:03.456Z".into(), run_id: "r1".into(), event }
}

/// The `RunCreated` every log starts with (seq 1).
pub fn created() -> Record {
    static PLAN: OnceLock<Arc<manifest::Plan>> = OnceLock::new();
    let plan = PLAN.get_or_init(|| {
        let text = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: t}\nspec:\n  agent_definitions: {m: {runtime: mock}}\n  \
                    workflow:\n    - {id: a, agent: m, input: x}\n";
        let plan = manifest::load_str("t.yaml", "t", text, &|_| true).plan.expect("the plan loads");
        Arc::new(serde_json::from_value(serde_json::to_value(&plan).expect("encodes")).expect("decodes"))
    });
    record(
        1,
        Event::RunCreated(Box::new(RunCreated {
            schema: engine::event::SCHEMA_VERSION,
            plan: Arc::clone(plan),
            plan_sha256: "ab".repeat(32).into(),
            vars: BTreeMap::new(),
            strategy: manifest::plan::Strategy::Eager,
            source: None,
            retry_of: None,
            parent: None,
            trace: None,
            approved_tools: Vec::new(),
            growing: None,
            cache_reuse: Default::default(),
            forecast: None,
        })),
    )
}

/// A dispatch of the plan's task `a` at `seq` (its attempt `seq - 1`): a log holds only tasks
/// of its plan.
pub fn dispatched(seq: u64) -> Record {
    let attempt = u32::try_from(seq.saturating_sub(1)).unwrap_or(u32::MAX);
    record(seq, Event::TaskDispatched { task: "a".into(), attempt, input: format!("input {seq}").into() })
}
