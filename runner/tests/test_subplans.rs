//! `runner test` on plans with `type: plan` and `type: expand` tasks: their child runs are
//! driven in the scenario's virtual time, scripted by `TASK/CHILD_TASK` (for a map, for every
//! item or one), answered and reviewed from the scenario, and read by expectations; an
//! `expand` task's script is the plan its agent writes, repaired once when it is refused.

mod shipped;

use std::path::Path;

use serde_json::Value;
use shipped::runner;

/// The child plan: a draft, a person's review, and a final step (shared with `parity.rs`).
const REVIEWED_CHILD: &str = include_str!("fixtures/subplans/reviewed.yaml");

/// The child plan without a review.
const CHILD: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: child}
spec:
  vars: {topic: none}
  agent_definitions: {analyst: {runtime: mock}}
  workflow:
    - {id: draft, agent: analyst, input: 'draft on {{ vars.topic }}'}
    - {id: final, agent: analyst, depends_on: [draft], input: 'final {{ tasks.draft.output }}'}
";

/// A parent whose `sub` runs `child.yaml` with the first task's output as its topic.
const PARENT: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: parent}
spec:
  agent_definitions: {m: {runtime: mock}}
  workflow:
    - {id: first, agent: m, input: hello}
    - {id: sub, type: plan, plan: child.yaml, depends_on: [first], with: {topic: '{{ tasks.first.output }}'}}
    - {id: last, agent: m, depends_on: [sub], input: 'got {{ tasks.sub.output }}'}
";

/// A parent whose `each` runs `child.yaml` once per topic.
const MAPPED: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: mapped}
spec:
  vars: {topics: [cats, dogs]}
  agent_definitions: {m: {runtime: mock}}
  workflow:
    - {id: each, type: plan, plan: child.yaml, for_each: vars.topics, with: {topic: '{{ item }}'}}
    - {id: last, agent: m, depends_on: [each], input: 'got {{ tasks.each.output }}'}
";

/// A parent whose `investigate` step is planned at run time by `planner`.
const EXPANDING: &str = "apiVersion: runner/v1
kind: Plan
metadata: {name: grow}
spec:
  agent_definitions:
    planner: {runtime: mock}
    worker: {runtime: mock}
  workflow:
    - {id: investigate, type: expand, agent: planner, input: Find out why the build is slow., max_tasks: 3}
    - {id: report, agent: worker, depends_on: [investigate], input: 'Report: {{ tasks.investigate.output }}'}
";

/// A plan the planner writes for `investigate`: measure, then explain.
const WRITTEN: &str = "{json: {workflow: [{id: measure, agent: worker, input: Time each step.}, \
                       {id: explain, agent: worker, input: 'Explain {{ tasks.measure.output }}', depends_on: [measure]}]}}";

/// Writes `files` into a fresh folder and runs `runner test t.test.yaml --keep` there with
/// `scenario` as the spec after `plan:`; the exit code, the report, and the kept runs' records
/// by the part of their id after the scenario's run (`""` for it, `.sub` for a child).
fn run(files: &[(&str, &str)], plan: &str, spec: &str) -> (i32, String, Vec<(String, Vec<Value>)>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("writes a file");
    }
    let scenario =
        format!("apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: s}}\nspec:\n  plan: {plan}\n{spec}");
    std::fs::write(dir.path().join("t.test.yaml"), &scenario).expect("writes the scenario");
    let home = tempfile::tempdir().expect("a temp dir");
    let output = runner()
        .current_dir(dir.path())
        .env("RUNNER_HOME", home.path())
        .args(["test", "t.test.yaml", "--keep"])
        .output()
        .expect("runner runs");
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code().expect("an exit code"), format!("{report}\n{scenario}"), kept(home.path()))
}

/// The runs kept under `home`, by the part of their id after the scenario's run, sorted.
fn kept(home: &Path) -> Vec<(String, Vec<Value>)> {
    let Ok(entries) = std::fs::read_dir(home.join("runs")) else { return Vec::new() };
    let mut runs: Vec<(String, Vec<Value>)> = entries
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let log = std::fs::read_to_string(entry.path().join("events.jsonl")).expect("the run's log");
            let records = log.lines().map(|line| serde_json::from_str(line).expect("a JSON record")).collect();
            (name, records)
        })
        .collect();
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    let Some(top) = runs.first().map(|(name, _)| name.clone()) else { return runs };
    runs.into_iter().map(|(name, records)| (name[top.len()..].to_owned(), records)).collect()
}

/// The kept run whose id ends in `suffix`.
fn records<'a>(runs: &'a [(String, Vec<Value>)], suffix: &str) -> &'a [Value] {
    let found = runs.iter().find(|(name, _)| name == suffix);
    &found.unwrap_or_else(|| panic!("no run `{suffix}` among {:?}", runs.iter().map(|r| &r.0).collect::<Vec<_>>())).1
}

/// The output of task `task` in `records`.
fn output<'a>(records: &'a [Value], task: &str) -> Option<&'a str> {
    records.iter().rev().find(|r| r["type"] == "TaskSucceeded" && r["task"] == task).and_then(|r| r["output"].as_str())
}

#[test]
fn a_child_task_is_scripted_and_the_parent_gets_the_childs_output() {
    let spec = "  overrides:
    tasks:
      sub/draft: {replies: [scripted draft]}
  expect:
    status: succeeded
    tasks:
      last: {output: {equals: got final scripted draft}}
      sub: {output: {equals: final scripted draft}}
      sub/draft: {status: succeeded, attempts: 1, output: {equals: scripted draft}}
";
    let files = [("parent.yaml", PARENT), ("child.yaml", CHILD)];
    let (code, report, runs) = run(&files, "parent.yaml", spec);
    assert_eq!(code, 0, "{report}");
    // The child ran as a run of its own, linked to its parent's task, and `--keep` keeps it.
    let child = records(&runs, ".sub");
    assert_eq!(child[0]["parent"]["task"], "sub");
    let parent = &runs.iter().find(|(name, _)| name.is_empty()).expect("the parent run").1;
    assert_eq!(child[0]["parent"]["run"], parent[0]["run_id"]);
    assert_eq!(output(child, "draft"), Some("scripted draft"));

    // An expectation on a child's task that does not hold names it as the scenario does.
    let wrong = spec.replace("output: {equals: scripted draft}", "output: {equals: another draft}");
    let (code, report, _) = run(&files, "parent.yaml", &wrong);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("tasks.sub/draft.output: expected exactly \"another draft\""), "{report}");
    assert!(report.contains("actual \"scripted draft\""), "{report}");
}

#[test]
fn each_item_of_a_map_of_sub_plans_takes_the_maps_script_or_its_own() {
    let spec = "  overrides:
    tasks:
      each/draft: {replies: [for all]}
      \"each[1]/draft\": {replies: [for dogs]}
  expect:
    status: succeeded
    tasks:
      \"each[0]/final\": {output: {equals: final for all}}
      \"each[1]/final\": {output: {equals: final for dogs}}
      last: {output: {contains: final for dogs}}
";
    let files = [("mapped.yaml", MAPPED), ("child.yaml", CHILD)];
    let (code, report, runs) = run(&files, "mapped.yaml", spec);
    assert_eq!(code, 0, "{report}");
    assert_eq!(output(records(&runs, ".each.0"), "draft"), Some("for all"));
    assert_eq!(output(records(&runs, ".each.1"), "draft"), Some("for dogs"));

    // An expectation on the map's child task is checked in every item's child.
    let every = spec.replace(
        "      last: {output: {contains: final for dogs}}",
        "      each/final: {output: {equals: final for all}}",
    );
    let (code, report, _) = run(&files, "mapped.yaml", &every);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("tasks.each[1]/final.output: expected exactly \"final for all\""), "{report}");
    assert!(!report.contains("tasks.each[0]/final"), "{report}");
}

#[test]
fn a_childs_review_is_decided_from_the_scenario_and_the_parent_goes_on() {
    let files = [("parent.yaml", PARENT), ("child.yaml", REVIEWED_CHILD)];
    let approved = "  reviews: {sub/check: {approve: true, comment: fine}}
  expect:
    status: succeeded
    tasks:
      last: {output: {equals: got final draft on hello}}
      sub/check: {status: succeeded}
";
    let (code, report, runs) = run(&files, "parent.yaml", approved);
    assert_eq!(code, 0, "{report}");
    let child = records(&runs, ".sub");
    let decided = child.iter().find(|r| r["type"] == "ReviewDecided").expect("the child's review was decided");
    assert_eq!(
        (&decided["task"], &decided["approved"], &decided["comment"]),
        (&"check".into(), &true.into(), &"fine".into())
    );
    // The parent's task asked what the child waited for and was answered, as `runner approve
    // RUN sub/check` answers it.
    let parent = records(&runs, "");
    let answered = parent.iter().find(|r| r["type"] == "ClarificationProvided").expect("the parent's task answered");
    assert_eq!(answered["task"], "sub");
    assert!(answered["answer"].as_str().is_some_and(|a| a.starts_with("answered in the sub-plan run `s.sub`")));

    // Without a decision the run is left paused, waiting for the child.
    let (code, report, _) =
        run(&files, "parent.yaml", "  expect: {status: paused, tasks: {sub/check: {status: paused}}}\n");
    assert_eq!(code, 0, "{report}");
}

#[test]
fn nested_sub_plans_are_scripted_and_answered_through_every_level() {
    let inner = "apiVersion: runner/v1
kind: Plan
metadata: {name: inner}
spec:
  agent_definitions: {deep: {runtime: mock}}
  workflow:
    - {id: ask, agent: deep, input: Which year?}
";
    let middle = "apiVersion: runner/v1
kind: Plan
metadata: {name: middle}
spec:
  agent_definitions: {m: {runtime: mock}}
  workflow:
    - {id: inner, type: plan, plan: inner.yaml}
";
    let top = "apiVersion: runner/v1
kind: Plan
metadata: {name: top}
spec:
  agent_definitions: {m: {runtime: mock}}
  workflow:
    - {id: outer, type: plan, plan: middle.yaml}
";
    let spec = "  overrides:
    tasks:
      outer/inner/ask: {replies: [{clarify: Which year?}, 'the 2025 figures']}
  answers: {outer/inner/ask: '2025'}
  expect:
    status: succeeded
    tasks:
      outer: {output: {equals: the 2025 figures}}
      outer/inner/ask: {attempts: 2}
";
    let files = [("top.yaml", top), ("middle.yaml", middle), ("inner.yaml", inner)];
    let (code, report, runs) = run(&files, "top.yaml", spec);
    assert_eq!(code, 0, "{report}");
    let deepest = records(&runs, ".outer.inner");
    let answer = deepest.iter().find(|r| r["type"] == "ClarificationProvided").expect("the question was answered");
    assert_eq!((&answer["task"], &answer["answer"]), (&"ask".into(), &"2025".into()));
    let middle = records(&runs, ".outer");
    let routed = middle.iter().find(|r| r["type"] == "ClarificationProvided").expect("the middle run was answered");
    assert_eq!(routed["answer"], "answered in the sub-plan run `s.outer.inner`");
}

#[test]
fn an_expand_tasks_scripted_plan_runs_as_a_child() {
    let spec = format!(
        "  overrides:
    tasks:
      investigate: {{replies: [{WRITTEN}]}}
      investigate/measure: {{replies: [linking takes 90s]}}
  expect:
    status: succeeded
    tasks:
      report: {{output: {{equals: 'Report: Explain linking takes 90s'}}}}
      investigate/explain: {{status: succeeded, output: {{equals: Explain linking takes 90s}}}}
"
    );
    let (code, report, runs) = run(&[("grow.yaml", EXPANDING)], "grow.yaml", &spec);
    assert_eq!(code, 0, "{report}");
    let child = records(&runs, ".investigate");
    let tasks: Vec<&str> = child[0]["plan"]["tasks"]
        .as_array()
        .expect("the written plan")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(tasks, ["measure", "explain"]);
}

#[test]
fn an_expand_tasks_refused_plan_is_repaired_once_then_fails_the_task() {
    // The first reply is no plan; the repair round's reply is taken.
    let repaired = format!(
        "  overrides:
    tasks:
      investigate: {{replies: [no plan here, {WRITTEN}]}}
  expect: {{status: succeeded, tasks: {{investigate/measure: {{status: succeeded}}}}}}
"
    );
    let (code, report, _) = run(&[("grow.yaml", EXPANDING)], "grow.yaml", &repaired);
    assert_eq!(code, 0, "{report}");

    // Refused in both rounds: the task fails with the problems of the repair round's plan.
    let refused = "  overrides:
    tasks:
      investigate:
        replies: [no plan here, {json: {workflow: [{id: a, agent: nobody, input: x}]}}]
  expect:
    status: failed
    tasks:
      investigate: {status: failed, attempts: 1}
";
    let (code, report, runs) = run(&[("grow.yaml", EXPANDING)], "grow.yaml", refused);
    assert_eq!(code, 0, "{report}");
    assert_eq!(runs.len(), 1, "no child run was started: {:?}", runs.iter().map(|r| &r.0).collect::<Vec<_>>());
    let failed = records(&runs, "").iter().find(|r| r["type"] == "TaskFailed").expect("the task failed");
    let error = failed["error"].as_str().expect("an error");
    assert!(error.starts_with("the plan the agent wrote for this step is still refused after one repair"), "{error}");
    assert!(error.contains("task `a` uses unknown agent `nobody`"), "{error}");
}

#[test]
fn a_child_task_the_sub_plan_lacks_is_a_located_error() {
    let spec = "  overrides:\n    tasks:\n      sub/drafts: {replies: [x]}\n";
    let (code, report, _) = run(&[("parent.yaml", PARENT), ("child.yaml", CHILD)], "parent.yaml", spec);
    assert_eq!(code, 2, "{report}");
    assert!(report.contains("test::unknown_target"), "{report}");
    assert!(report.contains("plan `parent` has no task `sub/drafts`"), "{report}");
    assert!(report.contains("did you mean `sub/draft`?"), "{report}");
}
