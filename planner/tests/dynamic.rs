//! A model's plan that declares variables, conditions, maps and steps planned at run time
//! (`spec.vars`, `when`, `for_each`, `max_items`, `type: expand` with `max_tasks`) is read back
//! whole: by the author, through its repair, and in the YAML `runner plan` writes. A sub-plan
//! (`type: plan`, `plan`, `with`) names a file the author cannot write, and is sent back.

use manifest::Plan;
use manifest::plan::{ForEach, TaskKind};
use model::Endpoint;
use planner::author::{Authored, Outcome, Request, author};
use serde_json::{Value, json};
use testkit::{FakeOpenAi, Step};

fn endpoint(server: &FakeOpenAi) -> Endpoint {
    let provider = manifest::plan::Provider {
        kind: "openai".to_owned(),
        base_url: server.base_url(),
        timeout: Some(manifest::Duration::from_millis(10_000)),
        ..Default::default()
    };
    Endpoint::for_provider("test", &provider, Some("sk-test".to_owned())).expect("an HTTP client")
}

async fn run(server: &FakeOpenAi) -> Authored {
    let request = Request {
        text: "Brief tea buyers on the sources a search finds, and fetch the page if the request names one.".to_owned(),
        name: "brief".to_owned(),
        models: vec!["model-a".to_owned()],
        candidates: 1,
        temperature: 0.2,
        ..Request::default()
    };
    author(&request, &endpoint(server), &mut |_| {}).await
}

/// A manifest with declared vars, a condition on a triage output, a map over a search's
/// results and a map over a written list, with the gate after the maps; `map` is the search
/// map's task.
fn dynamic(map: Value) -> String {
    json!({
        "apiVersion": "runner/v1",
        "kind": "Plan",
        "metadata": {"name": "brief"},
        "spec": {
            "mission": "Brief tea buyers on the sources a search finds.",
            "vars": {"audience": "tea buyers", "regions": ["EU", "UK"], "depth": 2},
            "agent_definitions": {"researcher": {"runtime": "mock"}, "editor": {"runtime": "mock"}},
            "workflow": [
                {"id": "triage", "agent": "researcher", "input": "Web page or document? {{ mission }}", "on_failure": "retry"},
                {"id": "fetch_page", "agent": "researcher", "depends_on": ["triage"],
                 "when": "tasks.triage.output.kind == \"web\"", "input": "Fetch the page for {{ vars.audience }}."},
                {"id": "search", "agent": "researcher", "input": "Search {{ mission }}; answer {\"results\": [...]}", "on_failure": "retry"},
                map,
                {"id": "per_region", "agent": "researcher", "for_each": ["EU", "UK"],
                 "input": "Market notes for {{ item }} ({{ index }})."},
                {"id": "synthesize", "type": "synthesis_gate", "inputs": ["read_source", "per_region", "fetch_page"],
                 "agent": "editor", "on_failure": "retry"},
                {"id": "write", "agent": "editor", "input": "Write for {{ vars.audience }}: {{ tasks.synthesize.output }}",
                 "depends_on": ["synthesize"], "critical": true, "on_failure": {"action": "retry", "then": "fail"}}
            ]
        }
    })
    .to_string()
}

fn search_map() -> Value {
    json!({"id": "read_source", "agent": "researcher", "depends_on": ["search"],
           "for_each": "tasks.search.output.results", "max_items": 8,
           "input": "Summarise {{ item.title }} ({{ item.url }}), result {{ index }}.",
           "on_failure": {"action": "retry", "then": "skip"}})
}

fn load(text: &str, file: &str) -> Plan {
    let loaded = manifest::load_str(file, "brief", text, &|_| false);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.plan.expect("a valid plan")
}

fn task<'p>(plan: &'p Plan, id: &str) -> &'p manifest::plan::Task {
    plan.tasks.iter().find(|t| t.id.value.as_str() == id).unwrap_or_else(|| panic!("no task `{id}`"))
}

/// The plan carries every dynamic field the answer wrote.
fn assert_dynamic(plan: &Plan) {
    let vars = plan.vars.as_ref().expect("the declared vars are kept");
    assert_eq!(vars.get("audience"), Some(&json!("tea buyers")));
    assert_eq!(vars.get("regions"), Some(&json!(["EU", "UK"])));
    assert_eq!(vars.get("depth"), Some(&json!(2)));
    let fetch = task(plan, "fetch_page").extras();
    assert_eq!(fetch.when.as_ref().map(|w| w.value.as_str()), Some("tasks.triage.output.kind == \"web\""));
    let map = task(plan, "read_source").extras();
    assert_eq!(map.for_each.as_ref().map(|f| &f.value), Some(&ForEach::Expr("tasks.search.output.results".into())));
    assert_eq!(map.max_items.as_ref().map(|max| max.value), Some(8));
    let listed = task(plan, "per_region").extras();
    assert_eq!(listed.for_each.as_ref().map(|f| &f.value), Some(&ForEach::List(vec![json!("EU"), json!("UK")])));
    assert!(listed.max_items.is_none());
}

#[tokio::test]
async fn vars_conditions_and_maps_in_an_answer_reach_the_plan() {
    let answer = format!("Here is the plan:\n```json\n{}\n```", dynamic(search_map()));
    let server = FakeOpenAi::script(vec![Step::Answer(answer)]);
    let authored = run(&server).await;

    assert_eq!(authored.fallback, None);
    assert!(matches!(authored.attempts[0].outcome, Outcome::Valid { tasks: 7, .. }), "{:?}", authored.attempts);
    let manifest = authored.manifest.expect("the plan is accepted");
    assert_dynamic(&load(&manifest, "authored.json"));

    // `runner plan` writes the accepted manifest as YAML; the fields survive that too.
    let yaml = planner::yaml::to_yaml(&serde_json::from_str(&manifest).expect("the manifest is JSON"));
    assert_dynamic(&load(&yaml, "plan.yaml"));
}

#[tokio::test]
async fn a_broken_map_is_repaired_and_the_repair_keeps_every_dynamic_field() {
    let mut not_a_list = search_map();
    not_a_list["for_each"] = json!(8);
    let mut unbounded = search_map();
    unbounded.as_object_mut().map(|task| task.remove("max_items"));
    for (broken, named) in [(not_a_list, "for_each"), (unbounded, "max_items")] {
        let server = FakeOpenAi::script(vec![Step::Answer(dynamic(broken)), Step::Answer(dynamic(search_map()))]);
        let authored = run(&server).await;

        let Outcome::Invalid(problems) = &authored.attempts[0].outcome else {
            panic!("the broken map is refused: {:?}", authored.attempts[0].outcome)
        };
        assert!(problems.contains(named), "{problems}");
        let messages = server.requests()[1].body["messages"].as_array().cloned().unwrap_or_default();
        let repair = messages.last().and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
        assert!(repair.contains(named), "the repair prompt names `{named}`: {repair}");
        assert_eq!(authored.chosen, Some(1));
        assert_dynamic(&load(authored.manifest.as_deref().expect("the repair is accepted"), "repaired.json"));
    }
}

#[tokio::test]
async fn the_prompt_shows_each_dynamic_field_with_an_example() {
    let server = FakeOpenAi::script(vec![Step::Answer(dynamic(search_map()))]);
    run(&server).await;
    let body = &server.requests()[0].body;
    let system = body["messages"][0]["content"].as_str().expect("a system message");
    for shown in [
        "\"vars\": {\"audience\": \"tea buyers\"}",
        "\"when\": \"tasks.triage.output.kind == \\\"web\\\"\"",
        "\"for_each\": \"tasks.search.output.results\", \"max_items\": 10",
        "{{ item.url }}",
        "{{ index }}",
        "\"type\": \"synthesis_gate\", \"inputs\": [\"read_source\"]",
        "`type: expand`",
        "\"type\": \"expand\", \"agent\": \"planner\"",
        "\"max_tasks\": 6",
        "Never write `type: plan`, `plan` or `with`",
    ] {
        assert!(system.contains(shown), "the prompt lacks {shown}:\n{system}");
    }
}

/// A triage, a compound step its agent plans once the triage has run, and the write-up that
/// reads the step's output; `step` is the compound step.
fn compound(step: Value) -> String {
    json!({
        "apiVersion": "runner/v1",
        "kind": "Plan",
        "metadata": {"name": "brief"},
        "spec": {
            "mission": "Find out why checkout failed and what to do about it.",
            "agent_definitions": {"sre": {"runtime": "mock"}, "planner": {"runtime": "mock"}},
            "workflow": [
                {"id": "triage", "agent": "sre", "input": "What kind of failure is it? {{ mission }}", "on_failure": "retry"},
                step,
                {"id": "write_up", "agent": "sre", "depends_on": ["investigate"], "critical": true,
                 "on_failure": "retry", "input": "Write the report from {{ tasks.investigate.output }}."}
            ]
        }
    })
    .to_string()
}

/// The compound step as an `expand` task whose agent writes at most six tasks.
fn expand_step() -> Value {
    json!({"id": "investigate", "type": "expand", "agent": "planner", "depends_on": ["triage"], "max_tasks": 6,
           "input": "Plan the investigation of: {{ tasks.triage.output }}"})
}

/// The plan carries the compound step as the answer wrote it.
fn assert_expand(plan: &Plan) {
    let step = task(plan, "investigate");
    assert_eq!(step.kind, TaskKind::Expand);
    assert_eq!(step.agent.as_ref().map(|agent| agent.value.as_str()), Some("planner"));
    assert_eq!(step.extras().max_tasks.as_ref().map(|max| max.value), Some(6));
}

#[tokio::test]
async fn a_step_planned_at_run_time_in_an_answer_reaches_the_plan() {
    let server = FakeOpenAi::script(vec![Step::Answer(compound(expand_step()))]);
    let authored = run(&server).await;

    assert_eq!(authored.fallback, None);
    assert!(matches!(authored.attempts[0].outcome, Outcome::Valid { tasks: 3, .. }), "{:?}", authored.attempts);
    let manifest = authored.manifest.expect("the plan is accepted");
    assert_expand(&load(&manifest, "authored.json"));
    let yaml = planner::yaml::to_yaml(&serde_json::from_str(&manifest).expect("the manifest is JSON"));
    assert_expand(&load(&yaml, "plan.yaml"));
}

#[tokio::test]
async fn a_sub_plan_in_an_answer_is_sent_back_and_the_repair_is_kept() {
    let with_file = json!({"id": "investigate", "type": "plan", "plan": "plans/investigate.yaml",
                           "depends_on": ["triage"], "with": {"kind": "{{ tasks.triage.output }}"}});
    // Read from text, the sub-plan's file is never looked at: the loader alone would let it
    // through, and the run would fail on a file that does not exist.
    assert_eq!(task(&load(&compound(with_file.clone()), "sub.json"), "investigate").kind, TaskKind::Plan);
    let without_file = json!({"id": "investigate", "type": "plan", "agent": "planner", "depends_on": ["triage"],
                              "input": "Investigate."});
    let plan_on_a_task = json!({"id": "investigate", "agent": "planner", "depends_on": ["triage"],
                                "plan": "investigate.yaml", "input": "Investigate."});
    for broken in [with_file, without_file, plan_on_a_task] {
        let server =
            FakeOpenAi::script(vec![Step::Answer(compound(broken.clone())), Step::Answer(compound(expand_step()))]);
        let authored = run(&server).await;

        let Outcome::Invalid(problems) = &authored.attempts[0].outcome else {
            panic!("the sub-plan is refused: {broken} {:?}", authored.attempts[0].outcome)
        };
        assert!(problems.starts_with("author::sub_plan: task `investigate` runs a plan file"), "{problems}");
        assert!(problems.contains("`type: expand`"), "the help points to expand: {problems}");
        for asks_for_a_file in ["plan::missing_field", "plan::wrong_task_type", "plan::invalid_value"] {
            assert!(!problems.contains(asks_for_a_file), "{asks_for_a_file} is left out: {problems}");
        }
        let messages = server.requests()[1].body["messages"].as_array().cloned().unwrap_or_default();
        let repair = messages.last().and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
        assert!(repair.contains("author::sub_plan"), "the repair prompt names the refusal: {repair}");
        assert_eq!(authored.chosen, Some(1));
        assert_expand(&load(authored.manifest.as_deref().expect("the repair is accepted"), "repaired.json"));
    }
}
