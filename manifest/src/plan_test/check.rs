//! A scenario against its plan: every agent, task and tool it names must be the plan's (or, for
//! tasks, one its scripted planner adds on replan). A task of a child run is named
//! `TASK/CHILD_TASK`: TASK a `type: plan` task (its map, or one item of it) and CHILD_TASK a
//! task of its sub-plan, named the same way; or TASK a `type: expand` task, whose plan is
//! written at run time, and CHILD_TASK any name. Agents and tools of sub-plans count as the
//! plan's, since their scripts reach the child runs.

use std::collections::BTreeSet;

use super::{Outcome, PlanTest};
use crate::critic::Lint;
use crate::diagnostic::{Diagnostic, Problem, did_you_mean};
use crate::plan::{At, Plan, TaskKind, UndeclaredVar, Vars};

impl PlanTest {
    /// Located errors for every override, answer, review and expectation that names an agent,
    /// task or tool `plan` lacks, for vars the plan does not declare (when it declares any), for
    /// tool calls to tools with no scripted result, and for critic expectations that name no
    /// finding code.
    pub fn check_against(&self, plan: &Plan) -> Vec<Diagnostic> {
        let mut found = Vec::new();
        let (mut agents, mut tools) = (BTreeSet::new(), BTreeSet::new());
        named_in(plan, &mut agents, &mut tools);
        let agents: Vec<&str> = agents.into_iter().collect();
        let tools: Vec<&str> = tools.into_iter().collect();
        let planned = self.planned_tasks();
        let listed = |what: &'static str, name: &At<String>, known: &[&str]| {
            let help = || did_you_mean(&name.value, known.iter().copied());
            (!known.contains(&name.value.as_str())).then(|| unknown(plan, what, name, help()))
        };
        // Scripts, answers, reviews and task expectations may name the tasks of child runs
        // (`nested`); an event is the parent's log's, so it names the parent's tasks.
        let task = |name: &At<String>, nested: bool| {
            let known = task_named(plan, &planned, &name.value, nested).err()?;
            Some(unknown(plan, "task", name, did_you_mean(&name.value, known.iter().map(String::as_str))))
        };
        let overrides = &self.overrides;
        for (name, _) in &overrides.agents {
            found.extend(listed("agent", name, &agents));
        }
        for (name, _) in &overrides.tasks {
            found.extend(task(name, true));
        }
        for (name, _) in &overrides.tools {
            found.extend(listed("tool", name, &tools));
        }
        let scripted: Vec<&str> = overrides.tools.iter().map(|(name, _)| name.value.as_str()).collect();
        let scripts = overrides.agents.iter().chain(&overrides.tasks).flat_map(|(_, s)| &s.replies);
        for reply in scripts.chain(&overrides.planner) {
            if let Outcome::Tool { tool, .. } = &reply.outcome {
                found.extend(listed("tool", tool, &tools));
                found.extend(listed("scripted tool", tool, &scripted));
            }
        }
        for name in self.answers.iter().map(|(t, _)| t).chain(self.reviews.iter().map(|(t, ..)| t)) {
            found.extend(task(name, true));
        }
        for (name, _) in &self.expect.tasks {
            found.extend(task(name, true));
        }
        for (name, _) in &self.cached {
            found.extend(task(name, false));
        }
        for event in self.expect.events.iter().chain(&self.expect.order) {
            if let Some(name) = &event.task {
                found.extend(task(name, false));
            }
            if let Some(tool) = &event.tool {
                found.extend(listed("tool", tool, &tools));
            }
        }
        if let Some(declared) = &plan.vars {
            for (name, _) in &self.vars {
                if !declared.contains_key(&name.value) {
                    found.push(undeclared_var(plan, declared, name));
                }
            }
        }
        for code in self.expect.reported.iter().chain(&self.expect.not_reported) {
            if !Lint::CODES.contains(&code.value.as_str()) {
                let problem = Problem::UnknownFinding { code: code.value.clone() };
                let help = did_you_mean(&code.value, Lint::CODES);
                found.push(Diagnostic::error(problem, code.loc.clone()).maybe_help(help));
            }
        }
        found
    }

    /// The task ids the scripted planner's replies add, so scripts and expectations may name them.
    fn planned_tasks(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for reply in &self.overrides.planner {
            let value = match &reply.outcome {
                Outcome::Json(value) => value.clone(),
                Outcome::Output(text) => crate::find_json(text).map(|found| found.value).unwrap_or_default(),
                _ => continue,
            };
            collect_ids(&value, &mut ids);
        }
        ids
    }
}

/// `name` is not a `what` of `plan`: the error at the name, with `help` when a name is close.
fn unknown(plan: &Plan, what: &'static str, name: &At<String>, help: Option<String>) -> Diagnostic {
    let problem = Problem::UnknownTarget { what, name: name.value.clone(), plan: plan.name.clone() };
    Diagnostic::error(problem, name.loc.clone()).maybe_help(help)
}

/// The names of the agents and tools of `plan` and of its sub-plans, at any depth.
fn named_in<'a>(plan: &'a Plan, agents: &mut BTreeSet<&'a str>, tools: &mut BTreeSet<&'a str>) {
    agents.extend(plan.agents.keys().map(String::as_str));
    tools.extend(plan.tools.keys().map(String::as_str));
    for child in plan.subplans.values() {
        named_in(child, agents, tools);
    }
}

/// Whether `name` is a task of `plan`: one of its tasks, one its scripted planner adds
/// (`planned`), an item `ID[INDEX]` of one of its maps, or, when `nested`, a task of a child
/// run (`TASK/CHILD_TASK`). When it is not, the names it could have meant at its level.
fn task_named(plan: &Plan, planned: &[String], name: &str, nested: bool) -> Result<(), Vec<String>> {
    let own = |id: &str| plan.tasks.iter().find(|t| t.id.value.as_str() == id);
    // An item of a map (`read[2]`) is a task once the map expands.
    let task = |id: &str| match crate::template::map_of_item(id).and_then(own) {
        Some(map) if map.extras().for_each.is_some() => Some(map),
        _ => own(id),
    };
    if task(name).is_some() || planned.iter().any(|p| p == name) {
        return Ok(());
    }
    let ids = || plan.tasks.iter().map(|t| t.id.value.to_string()).chain(planned.iter().cloned()).collect();
    let Some((head, rest)) = name.split_once('/').filter(|_| nested) else { return Err(ids()) };
    let Some(parent) = task(head) else { return Err(ids()) };
    match parent.kind {
        TaskKind::Expand => Ok(()),
        TaskKind::Plan => {
            let child = parent.extras().plan.as_ref().and_then(|path| plan.subplans.get(&path.value));
            let Some(child) = child else { return Err(ids()) };
            task_named(child, planned, rest, true)
                .map_err(|known| known.into_iter().map(|id| format!("{head}/{id}")).collect())
        }
        _ => Err(ids()),
    }
}

/// A scenario's value for a variable its plan does not declare: the error at the name, with
/// the help `--var` gets on the command line.
fn undeclared_var(plan: &Plan, declared: &Vars, name: &At<String>) -> Diagnostic {
    let declared = declared.keys().cloned().collect();
    let help = UndeclaredVar { plan: plan.name.clone(), name: name.value.clone(), declared }.help();
    let problem = Problem::UnknownTarget { what: "variable", name: name.value.clone(), plan: plan.name.clone() };
    Diagnostic::error(problem, name.loc.clone()).help(help)
}

/// Every string under an `id` key in a JSON value.
fn collect_ids(value: &serde_json::Value, ids: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                match item {
                    serde_json::Value::String(id) if key == "id" => ids.push(id.clone()),
                    _ => collect_ids(item, ids),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| collect_ids(item, ids)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::plan::Plan;
    use crate::plan_test::{Vocabulary, load_test_str};

    const VOCABULARY: Vocabulary = Vocabulary { events: &["TaskSucceeded"], task_statuses: &["succeeded"] };

    fn plan(name: &str, spec: &str) -> Plan {
        let text = format!("apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: {name}}}\nspec:\n{spec}");
        let loaded = crate::load_str(&format!("{name}.yaml"), name, &text, &|_| true);
        loaded.plan.unwrap_or_else(|| panic!("{name} loads: {:?}", loaded.diagnostics))
    }

    /// A parent with a sub-plan task, a map of them and an `expand` task; the child has its own
    /// sub-plan (`inner.yaml`) and its own agent.
    fn parent() -> Plan {
        let inner = plan(
            "inner",
            "  agent_definitions: {m: {runtime: mock}}\n  workflow:\n    - {id: deep, agent: m, input: x}\n",
        );
        let mut child = plan(
            "child",
            "  agent_definitions: {analyst: {runtime: mock}}\n  workflow:\n    - {id: check, agent: analyst, input: x}\n    \
             - {id: nest, type: plan, plan: inner.yaml}\n",
        );
        child.subplans.insert("inner.yaml".into(), Arc::new(inner));
        let mut parent = plan(
            "parent",
            "  vars: {items: [a, b]}\n  agent_definitions: {m: {runtime: mock}}\n  workflow:\n    \
             - {id: sub, type: plan, plan: child.yaml}\n    \
             - {id: each, type: plan, plan: child.yaml, for_each: vars.items}\n    \
             - {id: grow, type: expand, agent: m}\n    - {id: plain, agent: m, input: x}\n",
        );
        parent.subplans.insert("child.yaml".into(), Arc::new(child));
        parent
    }

    /// The problems and help of a scenario whose `spec` follows `plan: parent.yaml`.
    fn problems(spec: &str) -> Vec<(String, Option<String>)> {
        let text =
            format!("apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: t}}\nspec:\n  plan: parent.yaml\n{spec}");
        let loaded = load_test_str("t.test.yaml", &text, &VOCABULARY);
        let test = loaded.valid().unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
        test.check_against(&parent()).iter().map(|d| (d.problem.to_string(), d.help.clone())).collect()
    }

    #[test]
    fn tasks_of_sub_plans_maps_items_nested_children_and_expanded_plans_are_known() {
        let spec = "  overrides:\n    agents: {analyst: {replies: [x]}}\n    tasks:\n      sub/check: {replies: [x]}\n      \
                    each/check: {replies: [x]}\n      \"each[1]/check\": {replies: [x]}\n      sub/nest/deep: {replies: [x]}\n      \
                    grow/anything: {replies: [x]}\n  answers: {\"each[0]/check\": \"sure\"}\n  reviews: {sub/nest/deep: {approve: true}}\n  \
                    expect:\n    tasks: {sub/check: {status: succeeded}, grow/written: {status: succeeded}}\n";
        assert_eq!(problems(spec), []);
    }

    #[test]
    fn a_child_task_the_sub_plan_lacks_is_an_error_with_the_childs_names_as_help() {
        let spec = "  overrides:\n    tasks:\n      sub/chek: {replies: [x]}\n      sub/nest/deap: {replies: [x]}\n      \
                    plain/check: {replies: [x]}\n";
        assert_eq!(
            problems(spec),
            [
                ("plan `parent` has no task `sub/chek`".into(), Some("did you mean `sub/check`?".into())),
                ("plan `parent` has no task `sub/nest/deap`".into(), Some("did you mean `sub/nest/deep`?".into())),
                ("plan `parent` has no task `plain/check`".into(), None),
            ]
        );
    }

    #[test]
    fn events_name_the_parents_own_tasks_only() {
        let spec =
            "  expect:\n    events: [{type: TaskSucceeded, task: sub/check}, {type: TaskSucceeded, task: sub}]\n";
        assert_eq!(problems(spec), [("plan `parent` has no task `sub/check`".into(), None)]);
    }
}
