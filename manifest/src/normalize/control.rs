//! `control_logic`, and the seed-form gates it declares.

use std::collections::HashSet;

use crate::fields::{BUDGET, CONTROL, GATE, GROUP, STRATEGY};
use crate::node_path::NodePath;
use crate::plan::{At, Budget, ControlLogic, Extras, FailurePolicy, GroupLimit, Plan, Strategy, Task, TaskKind};
use crate::read::{Reader, words_of};
use crate::source::Loc;
use crate::text::Text;
use crate::tree::{Node, Value};

/// A gate written in `control_logic.synthesis_gates`, before it becomes a task.
pub(super) struct SeedGate {
    id: Option<At<Text>>,
    after: Vec<At<Text>>,
    agent: Option<At<Text>>,
    max_output_tokens: Option<u32>,
    loc: Loc,
}

/// Reads `control_logic`, collecting the seed-form gates it declares into `gates`.
pub(super) fn read_control(
    reader: &mut Reader,
    node: &Node,
    path: &NodePath,
    gates: &mut Vec<SeedGate>,
) -> ControlLogic {
    let mut control = ControlLogic::default();
    let Some(fields) = reader.fields(node, path, "control_logic", CONTROL.fields, &[]) else { return control };
    if let Some((entry, path)) = fields.get("strategy") {
        let strategies = words_of::<Strategy>(&STRATEGY);
        control.strategy = reader.word(entry, path, "strategy", &strategies, &[]).unwrap_or_default();
    }
    control.max_concurrency = reader.count_of(&fields, "max_concurrency");
    control.max_turns_per_phase = reader.count_of(&fields, "max_turns_per_phase");
    control.max_replans = reader.count_of(&fields, "max_replans").unwrap_or(control.max_replans);
    control.token_budget = reader.whole_of(&fields, "token_budget");
    control.context_budget = reader.whole_of(&fields, "context_budget");
    control.summary_budget = reader.whole_of(&fields, "summary_budget");
    control.error_char_limit = reader.whole_of(&fields, "error_char_limit").unwrap_or(control.error_char_limit);
    control.replan_on_empty_result = reader.boolean_of(&fields, "replan_on_empty_result").unwrap_or(false);
    control.allow_clarification = reader.boolean_of(&fields, "allow_clarification").unwrap_or(true);
    control.planner = reader.text_of(&fields, "planner");
    control.compactor = reader.text_of(&fields, "compactor");
    if let Some((entry, path)) = fields.get("budget")
        && let Some(budget) = reader.fields(entry.value, path, "`budget`", BUDGET.fields, &[])
    {
        let value =
            Budget { cost: reader.number_of(&budget, "cost"), duration: reader.duration_of(&budget, "duration") };
        control.budget = Some(At::new(value, Loc::new(entry.key.span(), path.clone())));
    }
    if let Some((entry, path)) = fields.get("parallel_groups") {
        for (name, node, item_path) in reader.named(entry, path, "parallel_groups") {
            let context = format!("parallel group `{}`", name.value);
            let Some(group) = reader.fields(node, &item_path, &context, GROUP.fields, &[]) else { continue };
            let max_concurrency = reader.count_of(&group, "max_concurrency");
            control.parallel_groups.insert(name.value, GroupLimit { max_concurrency });
        }
    }
    if let Some((entry, path)) = fields.get("synthesis_gates") {
        match &entry.value.value {
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    gates.extend(read_gate(reader, item, &path.index(i)));
                }
            }
            _ => reader.wrong_type(entry.value, path, "synthesis_gates", "a list of gates"),
        }
    }
    control
}

/// Reads one gate of `control_logic.synthesis_gates`.
fn read_gate(reader: &mut Reader, item: &Node, path: &NodePath) -> Option<SeedGate> {
    let gate = reader.fields(item, path, "a synthesis gate", GATE.fields, &[])?;
    Some(SeedGate {
        id: reader.text_of(&gate, "id"),
        after: reader
            .require(&gate, "after_tasks", "a synthesis gate")
            .map(|(e, p)| reader.strings(e, p, "a task id"))
            .unwrap_or_default(),
        agent: reader.text_of(&gate, "agent"),
        max_output_tokens: reader.count_of(&gate, "max_output_tokens"),
        loc: Loc::new(item.span(), path),
    })
}

/// Turns seed-form gates into gate tasks. A task that depended on every input of a gate
/// now depends on the gate instead, so it reads the condensed output, not the raw inputs.
pub(super) fn add_gates(plan: &mut Plan, gates: Vec<SeedGate>) {
    if gates.is_empty() {
        return;
    }
    let mut taken: HashSet<Text> = plan.tasks.iter().map(|t| t.id.value.clone()).collect();
    for (n, gate) in gates.into_iter().enumerate() {
        let id = gate.id.unwrap_or_else(|| {
            let mut candidate = format!("synthesis_gate_{}", n + 1);
            while taken.contains(candidate.as_bytes()) {
                candidate.push('_');
            }
            At::new(Text::from(candidate), gate.loc.clone())
        });
        taken.insert(id.value.clone());
        let after: HashSet<&str> = gate.after.iter().map(|a| a.value.as_str()).collect();
        if !after.is_empty() {
            for task in &mut plan.tasks {
                let reads_all = after.iter().all(|a| task.depends_on.iter().any(|d| d.value == *a));
                if reads_all && !after.contains(task.id.value.as_str()) {
                    task.depends_on.retain(|d| !after.contains(d.value.as_str()));
                    task.depends_on.push(At::new(id.value.clone(), gate.loc.clone()));
                }
            }
        }
        let mut task = Task {
            id,
            kind: TaskKind::SynthesisGate,
            agent: gate.agent,
            depends_on: gate.after.clone(),
            on_failure: At::new(FailurePolicy::default(), gate.loc.clone()),
            loc: gate.loc,
            ..Task::default()
        };
        task.set_extras(Extras { inputs: gate.after, max_output_tokens: gate.max_output_tokens, ..Extras::default() });
        plan.tasks.push(task);
    }
}
