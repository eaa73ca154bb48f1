//! Sub-plans (`type: plan`): loading a plan file loads the files its plan tasks name, each once,
//! into `Plan::subplans` and `Loaded::included`; a missing file, files that include each other,
//! nesting past `MAX_DEPTH`, a `with` key the child does not declare and a child with errors are
//! the parent's errors at its `plan:` line, the child's own errors staying in its file; the fields
//! of plan and expand tasks belong to those types; and the critic counts a plan task as its
//! sub-plan's whole run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use manifest::subplan::MAX_DEPTH;
use manifest::{Diagnostic, Loaded, Problem, load_file, load_str};

/// A folder in the temp folder for one test's plan files, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("manifest-subplans-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("the test folder is created");
        Folder(path)
    }

    /// Writes a plan named after its file: `spec` lines (indented under `spec:`) after the header.
    fn plan(&self, file: &str, spec: &str) -> PathBuf {
        let name = Path::new(file).file_stem().and_then(|s| s.to_str()).expect("a file name");
        let text = format!("apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: {name}}}\nspec:\n{spec}");
        let path = self.0.join(file);
        std::fs::write(&path, text).expect("the plan is written");
        path
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A spec of one mock agent and these workflow lines, each a task under `workflow:`.
fn tasks(lines: &[&str]) -> String {
    let mut spec = String::from("  agent_definitions: {m: {runtime: mock}}\n  workflow:\n");
    for line in lines {
        spec.push_str(&format!("    - {line}\n"));
    }
    spec
}

/// A spec that declares `vars` and has one task reading them.
fn with_vars(vars: &str) -> String {
    format!("  vars: {{{vars}}}\n{}", tasks(&["{id: only, agent: m, input: x}"]))
}

fn codes(diagnostics: &[Diagnostic]) -> Vec<String> {
    diagnostics.iter().map(Diagnostic::code).collect()
}

/// The one diagnostic of a code, with the text it points at.
fn only<'a>(loaded: &'a Loaded, diagnostics: &'a [Diagnostic], code: &str) -> (&'a Diagnostic, String) {
    let found: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.code() == code).collect();
    assert_eq!(found.len(), 1, "one {code} in {:?}", codes(diagnostics));
    (found[0], loaded.source.slice(found[0].loc.span).to_owned())
}

/// The file of `loaded.included` whose name ends with `file`.
fn included<'a>(loaded: &'a Loaded, file: &str) -> &'a Loaded {
    let found = loaded.included.iter().find(|i| i.path.ends_with(file));
    &found.unwrap_or_else(|| panic!("{file} is not included: {:?}", loaded.included.iter().map(|i| &i.path))).loaded
}

#[test]
fn a_child_is_loaded_into_the_parents_subplans() {
    let folder = Folder::new("child");
    folder.plan("child.yaml", &with_vars("topic: rates"));
    let parent =
        folder.plan("parent.yaml", &tasks(&["{id: sub, type: plan, plan: child.yaml, with: {topic: \"jobs\"}}"]));
    let loaded = load_file(&parent);
    assert!(loaded.is_valid(), "{:?}", codes(&loaded.diagnostics));
    let plan = loaded.plan.as_ref().expect("the plan");
    let child = plan.subplans.get("child.yaml").expect("the child, under its `plan:` text");
    assert_eq!(child.name, "child");
    assert_eq!(child.tasks[0].id.value.as_str(), "only");
    assert_eq!(loaded.included.len(), 1);
    assert!(loaded.included[0].loaded.source.name.ends_with("child.yaml"), "{}", loaded.included[0].loaded.source.name);
}

#[test]
fn a_file_two_plans_include_is_loaded_once_and_shared() {
    let folder = Folder::new("diamond");
    folder.plan("leaf.yaml", &tasks(&["{id: leaf, agent: m, input: x}"]));
    folder.plan("left.yaml", &tasks(&["{id: l, type: plan, plan: leaf.yaml}"]));
    folder.plan("right.yaml", &tasks(&["{id: r, type: plan, plan: leaf.yaml}"]));
    let top = folder
        .plan("top.yaml", &tasks(&["{id: a, type: plan, plan: left.yaml}", "{id: b, type: plan, plan: right.yaml}"]));
    let loaded = load_file(&top);
    assert!(loaded.is_valid(), "{:?}", codes(&loaded.diagnostics));
    let mut files: Vec<String> = loaded.included.iter().map(|i| i.loaded.source.name.clone()).collect();
    files.sort();
    assert_eq!(files.len(), 3, "left, right and the leaf once: {files:?}");
    let plan = loaded.plan.as_ref().expect("the plan");
    let leaf_of = |side: &str| Arc::clone(&plan.subplans[side].subplans["leaf.yaml"]);
    assert!(Arc::ptr_eq(&leaf_of("left.yaml"), &leaf_of("right.yaml")), "one plan for the one file");
}

#[test]
fn a_missing_file_is_an_error_at_the_plan_line() {
    let folder = Folder::new("missing");
    let parent = folder.plan("parent.yaml", &tasks(&["{id: sub, type: plan, plan: nowhere.yaml}"]));
    let loaded = load_file(&parent);
    assert!(!loaded.is_valid());
    let (diagnostic, at) = only(&loaded, &loaded.diagnostics, "plan::subplan_missing");
    assert_eq!(at, "nowhere.yaml");
    assert!(diagnostic.to_string().contains("does not exist"), "{diagnostic}");
    assert!(loaded.included.is_empty());
}

#[test]
fn files_that_include_each_other_are_a_cycle_naming_every_file() {
    let folder = Folder::new("cycle");
    let a = folder.plan("a.yaml", &tasks(&["{id: to_b, type: plan, plan: b.yaml}"]));
    let b = folder.plan("b.yaml", &tasks(&["{id: to_a, type: plan, plan: a.yaml}"]));
    let loaded = load_file(&a);
    assert!(!loaded.is_valid());
    // a's error is that b has one; the cycle is found in b, at b's line that closes it.
    let (_, at) = only(&loaded, &loaded.diagnostics, "plan::subplan_invalid");
    assert_eq!(at, "b.yaml");
    let child = included(&loaded, "b.yaml");
    let (cycle, at) = only(child, &child.diagnostics, "plan::subplan_cycle");
    assert_eq!(at, "a.yaml");
    let Problem::SubPlanCycle { chain } = &cycle.problem else { panic!("{cycle:?}") };
    let shown = |p: &PathBuf| p.display().to_string();
    assert_eq!(chain, &[shown(&a), shown(&b), shown(&a)], "every file, the first again at the end");
    // Each file is named as it was opened, not as its canonical path: here through a link.
    #[cfg(unix)]
    {
        let link = folder.0.join("link");
        std::os::unix::fs::symlink(&folder.0, &link).expect("the link is made");
        let loaded = load_file(&link.join("a.yaml"));
        let child = included(&loaded, "b.yaml");
        let (cycle, _) = only(child, &child.diagnostics, "plan::subplan_cycle");
        let Problem::SubPlanCycle { chain } = &cycle.problem else { panic!("{cycle:?}") };
        let through = |file: &str| shown(&link.join(file));
        assert_eq!(chain, &[through("a.yaml"), through("b.yaml"), through("a.yaml")]);
    }
}

#[test]
fn a_plan_that_includes_itself_is_a_cycle() {
    let folder = Folder::new("itself");
    let me = folder.plan("me.yaml", &tasks(&["{id: again, type: plan, plan: me.yaml}"]));
    let loaded = load_file(&me);
    let (cycle, at) = only(&loaded, &loaded.diagnostics, "plan::subplan_cycle");
    assert_eq!(at, "me.yaml");
    let Problem::SubPlanCycle { chain } = &cycle.problem else { panic!("{cycle:?}") };
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert!(loaded.included.is_empty(), "the file is not loaded a second time");
}

#[test]
fn a_with_key_the_child_does_not_declare_is_an_error_with_a_suggestion() {
    let folder = Folder::new("var");
    folder.plan("child.yaml", &with_vars("topic: rates, region: EU"));
    let parent = folder.plan("parent.yaml", &tasks(&["{id: sub, type: plan, plan: child.yaml, with: {topik: jobs}}"]));
    let loaded = load_file(&parent);
    let (diagnostic, at) = only(&loaded, &loaded.diagnostics, "plan::subplan_var");
    assert_eq!(at, "jobs", "at the value given");
    assert_eq!(diagnostic.help.as_deref(), Some("did you mean `topic`?"));
    let Problem::SubPlanVar { name, declared, .. } = &diagnostic.problem else { panic!("{diagnostic:?}") };
    assert_eq!((name.as_str(), declared.clone()), ("topik", vec!["region".to_owned(), "topic".to_owned()]));
    // A child that declares no variables takes none.
    folder.plan("bare.yaml", &tasks(&["{id: only, agent: m, input: x}"]));
    let parent = folder.plan("bare_parent.yaml", &tasks(&["{id: sub, type: plan, plan: bare.yaml, with: {x: 1}}"]));
    let loaded = load_file(&parent);
    let (diagnostic, _) = only(&loaded, &loaded.diagnostics, "plan::subplan_var");
    assert!(diagnostic.help.as_deref().is_some_and(|h| h.contains("spec.vars")), "{diagnostic:?}");
}

#[test]
fn a_childs_errors_stay_in_its_file_and_make_the_parent_invalid() {
    let folder = Folder::new("invalid");
    folder.plan("child.yaml", &tasks(&["{id: one, agent: m, input: x}", "{id: two, agent: nobody, input: x}"]));
    let parent = folder.plan("parent.yaml", &tasks(&["{id: sub, type: plan, plan: child.yaml}"]));
    let loaded = load_file(&parent);
    assert!(!loaded.is_valid());
    let (diagnostic, at) = only(&loaded, &loaded.diagnostics, "plan::subplan_invalid");
    assert_eq!(at, "child.yaml");
    assert!(matches!(diagnostic.problem, Problem::SubPlanInvalid { errors: 1, .. }), "{diagnostic:?}");
    assert_eq!(codes(&loaded.diagnostics), ["plan::subplan_invalid"], "the child's error is not the parent's");
    let child = included(&loaded, "child.yaml");
    let (unknown, at) = only(child, &child.diagnostics, "plan::unknown_agent");
    assert_eq!(at, "nobody");
    // The child's workflow starts on line 7, its second task on line 8.
    assert_eq!(child.source.line_column(unknown.loc.span.offset()).0, 8);
    assert!(child.source.name.ends_with("child.yaml"));
}

#[test]
fn nesting_deeper_than_max_depth_is_refused() {
    let folder = Folder::new("deep");
    let chain = |files: usize| {
        folder.plan(&format!("p{}.yaml", files - 1), &tasks(&["{id: last, agent: m, input: x}"]));
        for i in (0..files - 1).rev() {
            folder.plan(&format!("p{i}.yaml"), &tasks(&[&format!("{{id: down, type: plan, plan: p{}.yaml}}", i + 1)]));
        }
        load_file(&folder.0.join("p0.yaml"))
    };
    let deepest = chain(MAX_DEPTH);
    assert!(deepest.is_valid(), "{MAX_DEPTH} files nest: {:?}", codes(&deepest.diagnostics));
    assert_eq!(deepest.included.len(), MAX_DEPTH - 1);
    let too_deep = chain(MAX_DEPTH + 1);
    assert!(!too_deep.is_valid());
    let refused: Vec<&Diagnostic> = too_deep
        .included
        .iter()
        .flat_map(|i| &i.loaded.diagnostics)
        .filter(|d| d.code() == "plan::subplan_too_deep")
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "{:?}",
        too_deep.included.iter().map(|i| codes(&i.loaded.diagnostics)).collect::<Vec<_>>()
    );
    let Problem::SubPlanTooDeep { chain, .. } = &refused[0].problem else { panic!("{:?}", refused[0]) };
    assert_eq!(chain.len(), MAX_DEPTH + 1, "{chain:?}");
    let message = refused[0].problem.to_string();
    assert!(message.contains(&format!("more than {MAX_DEPTH} files deep")), "{message}");
}

/// Loads a plan from text (no files): a spec of one mock agent and these tasks.
fn load_tasks(lines: &[&str]) -> Loaded {
    let text = format!("apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n{}", tasks(lines));
    load_str("t.yaml", "t", &text, &|_| true)
}

#[test]
fn plan_and_expand_fields_belong_to_their_types() {
    for (task, field, kind, at) in [
        ("{id: a, agent: m, input: x, max_tasks: 5}", "max_tasks", "expand", "5"),
        ("{id: a, type: plan, plan: c.yaml, max_tasks: 5}", "max_tasks", "expand", "5"),
        ("{id: a, agent: m, input: x, plan: c.yaml}", "plan", "plan", "c.yaml"),
        ("{id: a, agent: m, input: x, with: {topic: y}}", "with", "plan", "y"),
        ("{id: a, type: expand, agent: m, input: x, plan: c.yaml}", "plan", "plan", "c.yaml"),
    ] {
        let loaded = load_tasks(&[task]);
        let (diagnostic, text) = only(&loaded, &loaded.diagnostics, "plan::wrong_task_type");
        assert_eq!(text, at, "{task}");
        let Problem::WrongTaskType { field: f, kind: k, .. } = &diagnostic.problem else { panic!("{diagnostic:?}") };
        assert_eq!((f.as_str(), k.as_str()), (field, kind), "{task}");
    }
    let bounded = load_tasks(&["{id: a, type: expand, agent: m, input: x, max_tasks: 5}"]);
    assert!(bounded.is_valid(), "{:?}", codes(&bounded.diagnostics));
}

#[test]
fn a_plan_task_names_a_plan_file_and_no_agent() {
    let loaded = load_tasks(&["{id: sub, type: plan}"]);
    let (diagnostic, at) = only(&loaded, &loaded.diagnostics, "plan::missing_field");
    assert_eq!(at, "sub");
    assert!(matches!(&diagnostic.problem, Problem::MissingField { field, .. } if field == "plan"), "{diagnostic:?}");
    let loaded = load_tasks(&["{id: sub, type: plan, plan: c.yaml, agent: m}"]);
    let (diagnostic, at) = only(&loaded, &loaded.diagnostics, "plan::invalid_value");
    assert_eq!(at, "m");
    assert!(diagnostic.to_string().contains("child run"), "{diagnostic}");
}

#[test]
fn a_with_template_reads_only_ancestors_like_an_input() {
    let not_ancestor = load_tasks(&[
        "{id: sub, type: plan, plan: c.yaml, with: {topic: \"{{ tasks.late.output }}\"}}",
        "{id: late, agent: m, input: x}",
    ]);
    let (refused, at) = only(&not_ancestor, &not_ancestor.diagnostics, "plan::template_not_ancestor");
    assert_eq!(at, "tasks.late");
    let as_input =
        load_tasks(&["{id: sub, agent: m, input: \"{{ tasks.late.output }}\"}", "{id: late, agent: m, input: x}"]);
    let (same, at) = only(&as_input, &as_input.diagnostics, "plan::template_not_ancestor");
    assert_eq!(at, "tasks.late");
    assert_eq!((&refused.label, &refused.help), (&same.label, &same.help), "refused as an input is");
    let ancestor = load_tasks(&[
        "{id: early, agent: m, input: x}",
        "{id: sub, type: plan, plan: c.yaml, depends_on: [early], with: {topic: \"{{ tasks.early.output }}\"}}",
    ]);
    assert!(ancestor.is_valid(), "{:?}", codes(&ancestor.diagnostics));
}

#[test]
fn the_critic_counts_a_plan_task_as_its_sub_plans_whole_run_once_per_item() {
    let folder = Folder::new("tokens");
    let child_path =
        folder.plan("child.yaml", &tasks(&["{id: a, agent: m, input: abcd}", "{id: b, agent: m, input: abcd}"]));
    let child = load_file(&child_path);
    let child_tokens = manifest::critic::critique(child.plan.as_ref().expect("the child")).metrics.estimated_tokens;
    assert_eq!(child_tokens, 2 * 1001, "two tasks of one token of input and 1000 of output");
    let estimate = |file: &str, task: &str| {
        let path = folder.plan(file, &tasks(&[task]));
        let loaded = load_file(&path);
        assert!(loaded.is_valid(), "{task}: {:?}", codes(&loaded.diagnostics));
        manifest::critic::critique(loaded.plan.as_ref().expect("the plan")).metrics.estimated_tokens
    };
    assert_eq!(estimate("once.yaml", "{id: s, type: plan, plan: child.yaml}"), child_tokens);
    let listed = estimate("list.yaml", "{id: s, type: plan, plan: child.yaml, for_each: [a, b, c]}");
    assert_eq!(listed, 3 * child_tokens);
    // A sub-plan's own sub-plans count too.
    let nested = estimate("nested.yaml", "{id: s, type: plan, plan: list.yaml, for_each: [x, y]}");
    assert_eq!(nested, 2 * 3 * child_tokens);
}
