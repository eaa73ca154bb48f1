//! The deterministic planner's manifests: their shape, and that every one loads without
//! errors and reads back from its YAML unchanged, whatever the request.

use std::collections::BTreeMap;

use planner::complexity::Complexity;
use planner::deterministic::{Bindings, Draft, plan};
use planner::steps::Kind;
use planner::yaml::to_yaml;
use proptest::prelude::*;
use serde_json::{Value, json};

fn exists(file: &str) -> bool {
    matches!(file, "./notes.md" | "../data/input.csv" | "docs/spec.md" | "README.md")
}

const SEED_EXAMPLE: &str = "Add login with session cookies. Use basic auth. Read API spec at https://example.com/spec.pdf. Then write unit tests.";

/// The ambiguous request of the conversational planning seed: a question to the person, then
/// the work that needs its answer.
const QUESTION_FIRST: &str = "Should the report cover 2023 or 2024? Then write the report.";

/// A template manifest with an llm agent, its provider and a tool.
const TEMPLATE: &str = r#"
apiVersion: runner/v1
kind: Plan
metadata: {name: template}
spec:
  providers:
    local: {base_url: "http://localhost:11434/v1", model: "qwen3:8b"}
  tools:
    web_fetch:
      description: Fetch a URL
      command: [python3, tools/fetch.py]
      input_schema: {type: object, properties: {url: {type: string}}, required: [url]}
  agent_definitions:
    researcher:
      runtime: llm
      provider: local
      system_prompt: You are a careful researcher.
      tools: [web_fetch]
    shell:
      runtime: command
      command: [sh, -c, "cat"]
  workflow:
    - {id: only, agent: researcher, input: x}
"#;

fn template() -> Value {
    serde_saphyr::from_str(TEMPLATE).expect("the template is valid YAML")
}

const REQUESTS: &[&str] = &[
    SEED_EXAMPLE,
    "- Fetch the news\n- Summarise it\n- Email me the summary",
    "1. Install dependencies\n2. Run `cargo test`\n3. Deploy to staging",
    "Fetch the news, summarise it and email it to me",
    "Download https://example.com/data.csv, then clean it; afterwards plot a chart.",
    "Which database should we use?",
    "Ask the user for their API key, then call the API. Which region? Deploy it.",
    "Summarise ./notes.md and compare it with docs/spec.md",
    "Read ../data/input.csv. Next, compute the averages. Finally, write a report to ./out.md.",
    "Run this:\n```\ncargo build --release\n```\nThen ship it.",
    "Use the template at {{ vars.template }} to write the email. Then print {{ tasks.x.output }} and {% if a %}.",
    QUESTION_FIRST,
    "Fix it",
    "rooms",
    "",
    "Thanks!",
    "- a\n- a\n- a\n- The\n- 42\n- true\n- 日本語\n- if",
    "The budget is TBD. Prepare a draft anyway.",
    "Check the CI logs. If the build failed, fix it. After that, rerun the pipeline.",
    "Write \"quoted\" text: with a # hash, a \\ backslash and {# a comment #}; then `echo '{{'`.",
];

fn load(draft: &Draft) -> manifest::Loaded {
    manifest::load_str("plan.yaml", "plan", &draft.yaml, &exists)
}

/// Asserts that a draft loads without errors, reads back from its YAML, and has a task per step.
fn assert_sound(request: &str, draft: &Draft) {
    let loaded = load(draft);
    let errors: Vec<String> = loaded.errors().map(|d| format!("{d:?}")).collect();
    assert!(loaded.is_valid(), "{request:?} does not load:\n{errors:#?}\n{}", draft.yaml);
    let back: Value = serde_saphyr::from_str(&draft.yaml).expect("the YAML reads back");
    assert_eq!(back, draft.manifest, "{request:?}");
    let plan = loaded.plan.as_ref().expect("a valid plan");
    assert_eq!(plan.tasks.len(), draft.steps.len(), "{request:?}");
    assert!(!draft.complexity.reasons.is_empty());
}

fn workflow(draft: &Draft) -> &Vec<Value> {
    draft.manifest["spec"]["workflow"].as_array().expect("a workflow")
}

#[test]
fn the_seeds_example_becomes_a_chain_of_four_tasks() {
    let draft = plan(SEED_EXAMPLE, "login", &Bindings::default(), &exists);
    assert_sound(SEED_EXAMPLE, &draft);
    assert_eq!(draft.complexity.complexity, Complexity::Planned);
    let m = &draft.manifest;
    assert_eq!(m["apiVersion"], "runner/v1");
    assert_eq!(m["kind"], "Plan");
    assert_eq!(m["metadata"]["name"], "login");
    let description = m["metadata"]["description"].as_str().unwrap();
    assert!(description.starts_with("Planned deterministically"), "{description}");
    assert!(description.contains("`tool_agent` and `worker` are placeholder"), "{description}");
    assert_eq!(m["spec"]["mission"], SEED_EXAMPLE);
    assert_eq!(m["spec"]["control_logic"], json!({"strategy": "sequential"}));
    assert_eq!(
        m["spec"]["agent_definitions"],
        json!({"tool_agent": {"runtime": "mock", "default": "echo"}, "worker": {"runtime": "mock", "default": "echo"}})
    );
    assert_eq!(
        *workflow(&draft),
        vec![
            json!({"id": "add_login_session_cookies", "agent": "worker", "input": "Add login with session cookies"}),
            json!({
                "id": "use_basic_auth",
                "agent": "worker",
                "input": "Use basic auth\n\nThe output of the previous step (`add_login_session_cookies`):\n\
                          {{ tasks.add_login_session_cookies.output }}",
            }),
            json!({
                "id": "read_api_spec",
                "agent": "tool_agent",
                "input": "Read API spec at https://example.com/spec.pdf\n\nThe output of the previous step \
                          (`use_basic_auth`):\n{{ tasks.use_basic_auth.output }}",
                "attachments": [{"link": "https://example.com/spec.pdf"}],
            }),
            json!({
                "id": "write_unit_tests",
                "agent": "worker",
                "input": "Write unit tests\n\nThe output of the previous step (`read_api_spec`):\n\
                          {{ tasks.read_api_spec.output }}",
            }),
        ]
    );
    assert!(draft.yaml.starts_with("apiVersion: \"runner/v1\"\nkind: \"Plan\"\nmetadata:\n"), "{}", draft.yaml);
}

#[test]
fn the_critic_finds_no_unread_dependency_or_forced_chain() {
    let draft = plan(SEED_EXAMPLE, "login", &Bindings::default(), &exists);
    let loaded = load(&draft);
    let (plan, graph) = loaded.valid().expect("valid");
    let report = manifest::critic::critique_graph(plan, graph);
    let text = format!("{report:?}");
    assert!(!text.contains("UnreadDependency") && !text.contains("ForcedChain"), "{text}");
}

#[test]
fn a_simple_request_is_one_task() {
    let draft =
        plan("Hello there. Summarise the article at https://example.com/a.", "one", &Bindings::default(), &exists);
    assert_eq!(draft.complexity.complexity, Complexity::Simple);
    assert_sound("simple", &draft);
    assert_eq!(draft.steps.len(), 1);
    assert_eq!(
        *workflow(&draft),
        vec![json!({
            "id": "hello_there_summarise_article",
            "agent": "worker",
            "input": "Hello there. Summarise the article at https://example.com/a",
            "attachments": [{"link": "https://example.com/a"}],
        })]
    );
    assert!(!draft.manifest["metadata"]["description"].as_str().unwrap().contains("tool_agent"));
}

#[test]
fn clarifications_are_human_reviews_whose_answer_the_next_task_reads() {
    let draft = plan("Fetch the logs. Which service failed? Then fix it.", "p", &Bindings::default(), &exists);
    assert_sound("clarification", &draft);
    let tasks = workflow(&draft);
    assert_eq!(
        tasks[1],
        json!({"id": "which_service_failed", "type": "human_review", "prompt": "Which service failed?"})
    );
    let input = tasks[2]["input"].as_str().unwrap();
    assert!(input.contains("{{ tasks.which_service_failed.output }}"), "{input}");
    assert!(input.contains("{{ tasks.fetch_logs.output }}"), "{input}");
}

#[test]
fn a_question_before_the_work_is_asked_first_and_the_work_reads_its_answer() {
    let draft = plan(QUESTION_FIRST, "report", &Bindings::default(), &exists);
    assert_sound(QUESTION_FIRST, &draft);
    assert_eq!(draft.complexity.complexity, Complexity::Planned);
    assert_eq!(draft.complexity.reasons, ["asks a question before the work: `Should the report cover 2023 or 2024?`"]);
    assert_eq!(
        *workflow(&draft),
        vec![
            json!({
                "id": "should_report_cover_2023",
                "type": "human_review",
                "prompt": "Should the report cover 2023 or 2024?",
            }),
            json!({
                "id": "write_report",
                "agent": "worker",
                "input": "Write the report\n\nThe answer to `should_report_cover_2023`:\n\
                          {{ tasks.should_report_cover_2023.output }}",
            }),
        ]
    );
    let loaded = load(&draft);
    let (plan, _) = loaded.valid().expect("the plan is valid");
    let depends_on: Vec<&str> = plan.tasks[1].depends_on.iter().map(|d| d.value.as_str()).collect();
    assert_eq!(depends_on, ["should_report_cover_2023"]);
}

#[test]
fn a_request_without_a_question_is_unchanged() {
    let request = "The report should cover 2024. Then write the report.";
    let draft = plan(request, "report", &Bindings::default(), &exists);
    assert_sound(request, &draft);
    assert_eq!(draft.complexity.complexity, Complexity::Simple);
    assert_eq!(
        *workflow(&draft),
        vec![json!({
            "id": "report_should_cover_2024",
            "agent": "worker",
            "input": "The report should cover 2024. Then write the report",
        })]
    );
}

#[test]
fn a_lone_question_is_unchanged() {
    let request = "Should the report cover 2023 or 2024?";
    let draft = plan(request, "report", &Bindings::default(), &exists);
    assert_sound(request, &draft);
    assert_eq!(draft.complexity.complexity, Complexity::Simple);
    assert_eq!(
        *workflow(&draft),
        vec![json!({"id": "should_report_cover_2023", "type": "human_review", "prompt": request})]
    );
}

#[test]
fn a_question_followed_by_no_work_stays_one_question() {
    let request = "Should the report cover 2023 or 2024? The board reads it in May.";
    let draft = plan(request, "report", &Bindings::default(), &exists);
    assert_sound(request, &draft);
    assert_eq!(draft.complexity.complexity, Complexity::Simple);
    assert_eq!(
        *workflow(&draft),
        vec![json!({
            "id": "should_report_cover_2023",
            "type": "human_review",
            "prompt": "Should the report cover 2023 or 2024? The board reads it in May",
        })]
    );
}

#[test]
fn an_empty_request_asks_what_to_do() {
    let draft = plan(" \n\t ", "empty", &Bindings::default(), &exists);
    assert_sound("empty", &draft);
    assert_eq!(draft.steps[0].kind, Kind::Clarification);
    assert_eq!(workflow(&draft)[0]["type"], "human_review");
    assert!(draft.manifest["spec"].get("agent_definitions").is_none());
}

#[test]
fn template_syntax_in_the_request_renders_as_written() {
    let request = "Print {{ tasks.x.output }}, {% raw %} and {# note #} literally";
    let draft = plan(request, "t", &Bindings::default(), &exists);
    assert_sound(request, &draft);
    let input = workflow(&draft)[0]["input"].as_str().unwrap();
    let rendered = machine::RunState::<model::tokens::Tiktoken>::new().render(input).unwrap();
    assert_eq!(rendered, draft.steps[0].text);
}

#[test]
fn a_template_lends_its_agents_tools_and_providers() {
    let bindings = Bindings { agents: BTreeMap::new(), template: Some(template()) };
    let draft = plan(SEED_EXAMPLE, "templated", &bindings, &exists);
    assert_sound(SEED_EXAMPLE, &draft);
    let spec = &draft.manifest["spec"];
    assert_eq!(spec["providers"], template()["spec"]["providers"]);
    assert_eq!(spec["tools"], template()["spec"]["tools"]);
    assert_eq!(spec["agent_definitions"], template()["spec"]["agent_definitions"]);
    // The first agent by name does every step.
    assert!(workflow(&draft).iter().all(|t| t["agent"] == "researcher"));
    assert!(!draft.manifest["metadata"]["description"].as_str().unwrap().contains("placeholder"));
}

#[test]
fn the_agent_map_picks_an_agent_per_kind() {
    let agents = BTreeMap::from([(Kind::Tool, "shell".to_owned()), (Kind::Processing, "researcher".to_owned())]);
    let draft = plan(SEED_EXAMPLE, "mapped", &Bindings { agents, template: Some(template()) }, &exists);
    assert_sound(SEED_EXAMPLE, &draft);
    let agents: Vec<&str> = workflow(&draft).iter().map(|t| t["agent"].as_str().unwrap()).collect();
    assert_eq!(agents, ["researcher", "researcher", "shell", "researcher"]);
}

#[test]
fn an_agent_named_but_defined_nowhere_gets_a_placeholder() {
    let agents = BTreeMap::from([(Kind::Tool, "fetcher".to_owned())]);
    let draft = plan(SEED_EXAMPLE, "mapped", &Bindings { agents, template: None }, &exists);
    assert_sound(SEED_EXAMPLE, &draft);
    let defined = draft.manifest["spec"]["agent_definitions"].as_object().unwrap();
    assert_eq!(defined.keys().collect::<Vec<_>>(), ["fetcher", "worker"]);
    assert!(draft.manifest["metadata"]["description"].as_str().unwrap().contains("`fetcher`"));
}

#[test]
fn every_request_loads_with_every_binding() {
    let bindings = [
        Bindings::default(),
        Bindings { agents: BTreeMap::from([(Kind::Processing, "writer".to_owned())]), template: None },
        Bindings { agents: BTreeMap::new(), template: Some(template()) },
        Bindings {
            agents: BTreeMap::from([(Kind::Tool, "shell".to_owned()), (Kind::Clarification, "nobody".to_owned())]),
            template: Some(template()),
        },
        Bindings { agents: BTreeMap::new(), template: Some(json!({"agents": {"helper": "You help."}})) },
    ];
    for request in REQUESTS {
        for binding in &bindings {
            let draft = plan(request, "every", binding, &exists);
            assert_sound(request, &draft);
        }
    }
}

#[test]
fn hostile_input_never_panics_and_always_loads() {
    // A megabyte of mixed text, deterministic: bullets, braces, quotes, unicode, controls.
    let alphabet: Vec<&str> = vec![
        "a",
        "fetch ",
        "then ",
        "run ",
        "or ",
        "? ",
        ". ",
        "\n",
        "\n- ",
        "\n1. ",
        "`",
        "{{",
        "}}",
        "{%",
        "{#",
        "\"",
        "\\",
        "#",
        ": ",
        "https://x.io/a?b ",
        "./notes.md ",
        "日本",
        "é",
        "\u{0}",
        "\u{85}",
        "\u{2028}",
        "\u{feff}",
        "\r\n",
        "\t",
        "—",
        "“",
        "💥",
        "\u{7f}",
        "```\n",
        "if ",
        "true ",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::new();
    while text.len() < 1 << 20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(alphabet[(state % alphabet.len() as u64) as usize]);
    }
    let draft = plan(&text, "hostile", &Bindings::default(), &exists);
    assert_sound("1 MB of noise", &draft);

    let bullets: String = (0..10_000).map(|i| format!("- step {} fetch the thing\n", i % 7)).collect();
    let draft = plan(&bullets, "bullets", &Bindings::default(), &exists);
    assert_eq!(draft.steps.len(), 10_000);
    assert_sound("10k bullets", &draft);

    let long_line = "word ".repeat(200_000);
    assert_sound("one long sentence", &plan(&long_line, "long", &Bindings::default(), &exists));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_text_plans_to_a_loadable_manifest(request in prop_oneof![
        ".{0,300}",
        "[-*•1.)a ?`{}%#\"'\\\\:\n\r\tthen and or fetch run]{0,200}",
        proptest::collection::vec("[a-z ]{0,20}|https://[a-z.]{1,10}/[a-z?=]{0,5}|\\{\\{ [a-z.]{0,10} \\}\\}|\n- |[.?;,] ", 0..20)
            .prop_map(|parts| parts.concat()),
    ]) {
        let draft = plan(&request, "prop", &Bindings::default(), &exists);
        assert_sound(&request, &draft);
    }

    #[test]
    fn yaml_reads_back_as_the_same_value(value in json_value()) {
        let yaml = to_yaml(&value);
        let back: Value = serde_saphyr::from_str(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        prop_assert_eq!(back, value, "{}", yaml);
    }
}

/// JSON values with the strings a YAML emitter finds hardest.
fn json_value() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        ".*",
        "[ \"'#:{}\\[\\]\n\t\\\\,&*!|>%@`-]{0,12}",
        Just(String::new()),
        Just("{{ tasks.a.output }}".to_owned()),
        Just("  leading spaces".to_owned()),
        Just("key: value # comment".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just("0x1F".to_owned()),
        Just("1e3".to_owned()),
        Just("~".to_owned()),
        Just("- item".to_owned()),
        Just("日本語 💥 \u{85} \u{2028} \u{feff}".to_owned()),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(text.clone(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}
