//! Sub-plans: the plan files `type: plan` tasks name, loaded with the plan that names them.
//! Each file is read once, its problems reported in its own file, and its plan put in the
//! parent's [`Plan::subplans`]; a `with` key the child does not declare and files that include
//! each other are errors at the parent's `plan:` line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, Problem};
use crate::load::{Loaded, load_file_alone};
use crate::plan::{Plan, TaskKind};

/// How deep sub-plans may nest: a chain of files this long is refused as if it were a cycle
/// would be, before it could exhaust anything.
pub const MAX_DEPTH: usize = 16;

/// One sub-plan file as loaded: its path (as opened) and everything found in it.
#[derive(Debug, Clone)]
pub struct Included {
    /// The file, as opened (the parent's folder joined with `plan:`).
    pub path: PathBuf,
    /// Its source, plan and diagnostics.
    pub loaded: Loaded,
}

/// What is known of each file met so far: its plan when it was read and how many errors it
/// has, and the chain of files being loaded, to find cycles: each file's identity, and its path
/// as opened, which the chain shows.
#[derive(Default)]
struct Resolver {
    plans: HashMap<PathBuf, (Option<Arc<Plan>>, usize)>,
    stack: Vec<(PathBuf, PathBuf)>,
    included: Vec<Included>,
}

/// Loads the sub-plans of `loaded` (read from `path`), recursively, into its plan's
/// `subplans`; their files' diagnostics go in `loaded.included`, the parent's own (a missing
/// file, a cycle, a child with errors, a `with` key it does not declare) in
/// `loaded.diagnostics`.
pub fn resolve(loaded: &mut Loaded, path: &Path) {
    let mut resolver = Resolver { stack: vec![(key(path), path.to_path_buf())], ..Resolver::default() };
    resolver.resolve_in(loaded, path);
    loaded.included = resolver.included;
}

impl Resolver {
    fn resolve_in(&mut self, loaded: &mut Loaded, path: &Path) {
        let Some(plan) = loaded.plan.as_mut() else { return };
        if !plan.tasks.iter().any(|t| t.kind == TaskKind::Plan) {
            return;
        }
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut found = Vec::new();
        let mut subplans = std::mem::take(&mut plan.subplans);
        for task in plan.tasks.iter().filter(|t| t.kind == TaskKind::Plan) {
            let Some(written) = &task.extras().plan else { continue };
            let child = base.join(&written.value);
            let task_id = task.id.value.to_string();
            let Some(child_plan) = self.child(&child, &task_id, &written.value, &written.loc, &mut found) else {
                continue;
            };
            check_with(task, &task_id, &written.value, &child_plan, &mut found);
            subplans.insert(written.value.clone(), child_plan);
        }
        plan.subplans = subplans;
        if !found.is_empty() {
            loaded.diagnostics.extend(found);
            // Errors first, then warnings, then notes, each in source order, as loading sorts them.
            loaded.diagnostics.sort_by_key(|d| (d.severity, d.loc.span.offset()));
        }
    }

    /// The plan of one sub-plan file, loading it (and its own sub-plans) the first time.
    fn child(
        &mut self,
        file: &Path,
        task: &str,
        written: &str,
        loc: &crate::Loc,
        out: &mut Vec<Diagnostic>,
    ) -> Option<Arc<Plan>> {
        let key = key(file);
        let chain_from = |start: usize| -> Vec<String> {
            let opened = self.stack[start..].iter().map(|(_, shown)| shown.as_path());
            opened.chain([file]).map(|p| p.display().to_string()).collect()
        };
        if let Some(start) = self.stack.iter().position(|(p, _)| *p == key) {
            let chain = chain_from(start);
            out.push(Diagnostic::error(Problem::SubPlanCycle { chain }, loc.clone()));
            return None;
        }
        if self.stack.len() >= MAX_DEPTH {
            let chain = chain_from(0);
            out.push(Diagnostic::error(Problem::SubPlanTooDeep { chain, most: MAX_DEPTH }, loc.clone()));
            return None;
        }
        if let Some((plan, errors)) = self.plans.get(&key) {
            if *errors > 0 {
                out.push(invalid(task, written, *errors, loc));
            }
            return plan.clone();
        }
        if !file.is_file() {
            let reason = match file.exists() {
                true => "it is not a file".to_owned(),
                false => format!("{} does not exist", file.display()),
            };
            let problem = Problem::SubPlanMissing { task: task.into(), path: written.into(), reason };
            out.push(Diagnostic::error(problem, loc.clone()));
            return None;
        }
        let mut loaded = load_file_alone(file);
        self.stack.push((key.clone(), file.to_path_buf()));
        self.resolve_in(&mut loaded, file);
        self.stack.pop();
        // A child with errors still gives its variables to check `with` against; the error
        // here keeps the parent from running it.
        let plan = loaded.plan.clone().map(Arc::new);
        let errors = if loaded.is_valid() { 0 } else { loaded.errors().count().max(1) };
        if errors > 0 {
            out.push(invalid(task, written, errors, loc));
        }
        self.plans.insert(key, (plan.clone(), errors));
        self.included.push(Included { path: file.to_path_buf(), loaded });
        plan
    }
}

/// The parent's error for a child with errors of its own.
fn invalid(task: &str, written: &str, errors: usize, loc: &crate::Loc) -> Diagnostic {
    Diagnostic::error(Problem::SubPlanInvalid { task: task.into(), path: written.into(), errors }, loc.clone())
}

/// Every `with` key must be a variable the child declares.
fn check_with(task: &crate::plan::Task, id: &str, written: &str, child: &Plan, out: &mut Vec<Diagnostic>) {
    let declared: Vec<String> = child.vars.as_ref().map(|v| v.keys().cloned().collect()).unwrap_or_default();
    for (name, value) in &task.extras().with {
        if declared.contains(name) {
            continue;
        }
        let help = match crate::diagnostic::did_you_mean(name, declared.iter().map(String::as_str)) {
            Some(suggestion) => suggestion,
            None if declared.is_empty() => "declare it in the sub-plan's `spec.vars`, with a default".to_owned(),
            None => format!("its variables: {}", declared.join(", ")),
        };
        let problem = Problem::SubPlanVar {
            task: id.into(),
            path: written.into(),
            name: name.clone(),
            declared: declared.clone(),
        };
        out.push(Diagnostic::error(problem, value.loc.clone()).help(help));
    }
}

/// A file's identity for cycles and the cache: its canonical path when it has one.
fn key(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
