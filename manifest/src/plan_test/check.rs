//! A scenario against its plan: every agent, task and tool it names must be the plan's (or, for
//! tasks, one its scripted planner adds on replan).

use std::collections::BTreeSet;

use super::{Outcome, PlanTest};
use crate::critic::Lint;
use crate::diagnostic::{Diagnostic, Problem, did_you_mean};
use crate::plan::{At, Plan, UndeclaredVar, Vars};

impl PlanTest {
    /// Located errors for every override, answer, review and expectation that names an agent,
    /// task or tool `plan` lacks, for vars the plan does not declare (when it declares any), for
    /// tool calls to tools with no scripted result, and for critic expectations that name no
    /// finding code.
    pub fn check_against(&self, plan: &Plan) -> Vec<Diagnostic> {
        let mut found = Vec::new();
        let agents: Vec<&str> = plan.agents.keys().map(String::as_str).collect();
        let tools: Vec<&str> = plan.tools.keys().map(String::as_str).collect();
        let mut tasks: BTreeSet<String> = plan.tasks.iter().map(|t| t.id.value.to_string()).collect();
        tasks.extend(self.planned_tasks());
        let tasks: Vec<&str> = tasks.iter().map(String::as_str).collect();
        // An item of a map (`read[2]`) is a task once the map expands.
        let maps: Vec<&str> =
            plan.tasks.iter().filter(|t| t.extras().for_each.is_some()).map(|t| t.id.value.as_str()).collect();
        let is_item = |what: &str, name: &str| {
            what == "task" && crate::template::map_of_item(name).is_some_and(|map| maps.contains(&map))
        };
        let mut check = |what: &'static str, name: &At<String>, known: &[&str]| {
            if !known.contains(&name.value.as_str()) && !is_item(what, &name.value) {
                let problem = Problem::UnknownTarget { what, name: name.value.clone(), plan: plan.name.clone() };
                let help = did_you_mean(&name.value, known.iter().copied());
                found.push(Diagnostic::error(problem, name.loc.clone()).maybe_help(help));
            }
        };
        let overrides = &self.overrides;
        for (name, _) in &overrides.agents {
            check("agent", name, &agents);
        }
        for (name, _) in &overrides.tasks {
            check("task", name, &tasks);
        }
        for (name, _) in &overrides.tools {
            check("tool", name, &tools);
        }
        let scripted: Vec<&str> = overrides.tools.iter().map(|(name, _)| name.value.as_str()).collect();
        let scripts = overrides.agents.iter().chain(&overrides.tasks).flat_map(|(_, s)| &s.replies);
        for reply in scripts.chain(&overrides.planner) {
            if let Outcome::Tool { tool, .. } = &reply.outcome {
                check("tool", tool, &tools);
                check("scripted tool", tool, &scripted);
            }
        }
        for name in self.answers.iter().map(|(t, _)| t).chain(self.reviews.iter().map(|(t, ..)| t)) {
            check("task", name, &tasks);
        }
        for (name, _) in &self.expect.tasks {
            check("task", name, &tasks);
        }
        for event in self.expect.events.iter().chain(&self.expect.order) {
            if let Some(task) = &event.task {
                check("task", task, &tasks);
            }
            if let Some(tool) = &event.tool {
                check("tool", tool, &tools);
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
