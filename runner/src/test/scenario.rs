//! A scenario file made ready to run: the test read, its plan loaded (or planned from its
//! request) and the overrides checked against the plan; or the diagnostics that say why not.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use manifest::plan_test::{PlanTest, Subject, load_test_file};
use manifest::{Diagnostic, Loaded, Plan, Problem, TaskGraph};

use crate::diagnostics::render_human;
use crate::plan::PlanArgs;
use crate::provenance::PlanDir;

/// How a scenario's `request:` becomes a plan.
pub struct Planning {
    /// A model to ask, as `runner plan --provider --model` would; `None` for the
    /// deterministic planner.
    pub model: Option<PlanArgs>,
    /// Record the model's prompts and answers under RUNNER_HOME (`--keep`).
    pub keep: bool,
}

/// A scenario ready to run.
pub struct Scenario {
    /// What it says.
    pub test: PlanTest,
    /// The plan under test.
    pub plan: Arc<Plan>,
    /// Its graph.
    pub graph: Arc<TaskGraph>,
    /// The plan file, absolute (the scenario file for a `request:`), recorded as the run's source.
    pub source: PathBuf,
    /// The folder the plan's commands run in: the plan file's, as under `runner apply`.
    pub workdir: PathBuf,
    /// The codes of the critic's findings on the plan.
    pub findings: Vec<String>,
}

/// A scenario file that cannot run: its name and the rendered diagnostics.
pub struct Invalid {
    /// The scenario file.
    pub path: PathBuf,
    /// Its diagnostics, rendered for a terminal.
    pub report: String,
}

/// Reads a scenario file and what it tests; `None` when `filter` leaves the scenario out,
/// found before its request is planned.
pub fn prepare(
    path: &Path,
    color: bool,
    planning: &Planning,
    filter: Option<&str>,
) -> Result<Option<Scenario>, Invalid> {
    let invalid = |report: String| Invalid { path: path.to_path_buf(), report };
    let loaded = load_test_file(path, &engine::script::VOCABULARY);
    let Some(test) = loaded.valid().cloned() else {
        return Err(invalid(render_human(&loaded.diagnostics, &loaded.source, color)));
    };
    if filter.is_some_and(|f| !test.name.contains(f)) {
        return Ok(None);
    }
    // As `runner apply` does: the plan's absolute path is the run's source, and its folder the
    // one commands run in (a scenario's plan may live in another folder).
    let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let folder = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut source = absolute(path);
    let (plan_loaded, at) = match &test.subject {
        Some(Subject::Plan(file)) => {
            let plan_path = folder.join(&file.value);
            source = absolute(&plan_path);
            (manifest::load_file(&plan_path), file)
        }
        Some(Subject::Request(request)) => match planned(&request.value, &test.name, planning) {
            Ok(loaded) => (loaded, request),
            Err(error) => {
                let problem = Problem::RequestUnplanned { reason: format!("{error:#}") };
                return Err(invalid(render_human(
                    &[Diagnostic::error(problem, request.loc.clone())],
                    &loaded.source,
                    color,
                )));
            }
        },
        None => return Err(invalid(render_human(&loaded.diagnostics, &loaded.source, color))),
    };
    let Some((plan, graph)) = plan_loaded.valid() else {
        let errors = plan_loaded.errors().count().max(1);
        let problem = Problem::PlanInvalid { path: at.value.clone(), errors };
        let mut report = render_human(&[Diagnostic::error(problem, at.loc.clone())], &loaded.source, color);
        report.push_str(&crate::diagnostics::render_loaded(&plan_loaded, color));
        return Err(invalid(report));
    };
    let problems = test.check_against(plan);
    if !problems.is_empty() {
        return Err(invalid(render_human(&problems, &loaded.source, color)));
    }
    // As `runner critic` reports them, the budget's findings (from the documented defaults) too.
    let mut findings: Vec<String> =
        manifest::critic::critique_graph(plan, graph).findings.iter().map(|f| f.code()).collect();
    if plan.control.budget.is_some() {
        let vars = plan.run_vars(std::iter::empty()).unwrap_or_default();
        let forecast = engine::forecast::forecast(plan, graph, &vars);
        findings.extend(engine::forecast::budget::findings(plan, &forecast).iter().map(|f| f.code()));
    }
    Ok(Some(Scenario {
        plan: Arc::new(plan.clone()),
        graph: Arc::new(graph.clone()),
        workdir: source.parent().map_or_else(|| absolute(&folder), Path::to_path_buf),
        source,
        findings,
        test,
    }))
}

/// The plan `runner plan` writes for a request (by the deterministic planner or the model
/// `planning` names), loaded; an error when the model asks questions instead of planning.
fn planned(request: &str, name: &str, planning: &Planning) -> anyhow::Result<Loaded> {
    let bindings = planner::deterministic::Bindings::default();
    let outcome = match &planning.model {
        None => crate::plan::deterministic(request, name, &bindings, None),
        Some(args) => {
            let id = crate::home::new_run_id(name);
            let dir = if planning.keep { PlanDir::create(&id, Vec::new())? } else { PlanDir::unkept() };
            dir.write("request.txt", request)?;
            let mut outcome = crate::plan::author::write(args, request, name, None, &bindings, &dir)?;
            outcome.provenance.id = id;
            outcome.provenance.created = engine::clock::now();
            outcome.provenance.request = request.to_owned();
            dir.write("plan.yaml", &outcome.yaml)?;
            dir.finish(&outcome.provenance)?;
            outcome
        }
    };
    if outcome.yaml.is_empty() {
        anyhow::bail!("the model asked questions instead of planning: {}", outcome.provenance.questions.join(" / "));
    }
    Ok(manifest::load_str(&format!("the plan for `{name}`"), name, &outcome.yaml, &|_| false))
}
