//! A scenario file made ready to run: the test read, its plan loaded (or planned from its
//! request) and the overrides checked against the plan; or the diagnostics that say why not.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use manifest::plan_test::{PlanTest, Subject, load_test_file};
use manifest::{Diagnostic, Loaded, Plan, Problem, TaskGraph};

use crate::diagnostics::render_human;

/// A scenario ready to run.
pub struct Scenario {
    /// The scenario file.
    pub path: PathBuf,
    /// What it says.
    pub test: PlanTest,
    /// The plan under test.
    pub plan: Arc<Plan>,
    /// Its graph.
    pub graph: Arc<TaskGraph>,
    /// The folder the plan's commands would run in.
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

/// Reads a scenario file and what it tests.
pub fn prepare(path: &Path, color: bool) -> Result<Scenario, Invalid> {
    let invalid = |report: String| Invalid { path: path.to_path_buf(), report };
    let loaded = load_test_file(path);
    let Some(test) = loaded.valid().cloned() else {
        return Err(invalid(render_human(&loaded.diagnostics, &loaded.source, color)));
    };
    let folder = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let (plan_loaded, at) = match &test.subject {
        Some(Subject::Plan(file)) => (manifest::load_file(&folder.join(&file.value)), file),
        Some(Subject::Request(request)) => (planned(&request.value, &test.name), request),
        None => return Err(invalid(render_human(&loaded.diagnostics, &loaded.source, color))),
    };
    let Some((plan, graph)) = plan_loaded.valid() else {
        let errors = plan_loaded.errors().count().max(1);
        let problem = Problem::PlanInvalid { path: at.value.clone(), errors };
        let mut report = render_human(&[Diagnostic::error(problem, at.loc.clone())], &loaded.source, color);
        report.push_str(&render_human(&plan_loaded.diagnostics, &plan_loaded.source, color));
        return Err(invalid(report));
    };
    let problems = test.check_against(plan);
    if !problems.is_empty() {
        return Err(invalid(render_human(&problems, &loaded.source, color)));
    }
    let findings = manifest::critic::critique_graph(plan, graph).findings.iter().map(|f| f.code()).collect();
    Ok(Scenario {
        path: path.to_path_buf(),
        plan: Arc::new(plan.clone()),
        graph: Arc::new(graph.clone()),
        workdir: folder,
        findings,
        test,
    })
}

/// The plan `runner plan`'s deterministic planner writes for a request, loaded.
fn planned(request: &str, name: &str) -> Loaded {
    let outcome = crate::plan::deterministic(request, name, &planner::deterministic::Bindings::default(), None);
    manifest::load_str(&format!("the plan for `{name}`"), name, &outcome.yaml, &|_| false)
}
