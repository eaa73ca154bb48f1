//! `runner plan` from the command line: the deterministic planner, provenance, `--show`,
//! agent bindings, `--apply`, and a model writing the plan against a local fake OpenAI server
//! (repair, fallback to the next model and to the rules, reliability records, questions,
//! secrets kept out of the provenance).

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use std::path::PathBuf;

use llm_support::{KEY_VAR, Out, files_under, runner, user};
use serde_json::{Value, json};
use support::Env;
use testkit::{FakeOpenAi, Step};

const SEED: &str = "Add login with session cookies. Use basic auth. Read API spec at https://example.com/spec.pdf. Then write unit tests.";

/// The folder of the only plan recorded so far.
fn only_plan(env: &Env) -> PathBuf {
    let plans: Vec<PathBuf> = std::fs::read_dir(env.home().join("plans"))
        .expect("the plans folder exists")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    assert_eq!(plans.len(), 1, "{plans:?}");
    plans.into_iter().next().expect("one plan")
}

fn provenance(dir: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(dir.join("provenance.json")).expect("provenance.json");
    serde_json::from_str(&text).expect("provenance.json is JSON")
}

fn validate(env: &Env, file: &str) -> Out {
    runner(env, &["validate", file])
}

#[test]
fn the_seed_example_becomes_four_steps_with_the_link_on_the_third() {
    let env = Env::new();
    let out = runner(&env, &["plan", SEED, "-o", "plan.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    let valid = validate(&env, "plan.yaml");
    assert_eq!(valid.code, Some(0), "{valid}");
    assert!(valid.stdout.contains("4 tasks"), "{valid}");
    let text = std::fs::read_to_string(env.dir().join("plan.yaml")).expect("the plan was written");
    let loaded = manifest::load_str("plan.yaml", "plan", &text, &|_| true);
    let plan = loaded.plan.expect("the plan loads");
    assert_eq!(plan.control.strategy, manifest::plan::Strategy::Sequential);
    let links: Vec<usize> = plan.tasks.iter().map(|t| t.extras().attachments.len()).collect();
    assert_eq!(links, [0, 0, 1, 0]);
    let dir = only_plan(&env);
    let record = provenance(&dir);
    assert_eq!(record["planner"], "deterministic");
    assert_eq!(record["request"], SEED);
    assert_eq!(record["chosen"]["errors"], 0);
    assert_eq!(std::fs::read_to_string(dir.join("plan.yaml")).expect("a copy"), text);
    let id = dir.file_name().and_then(|n| n.to_str()).expect("an id").to_owned();
    assert!(out.stderr.contains(&id), "the id is printed: {out}");
    let shown = runner(&env, &["plan", "--show", &id]);
    assert_eq!(shown.code, Some(0), "{shown}");
    assert!(shown.stdout.contains("deterministic") && shown.stdout.contains("read_api_spec"), "{shown}");
}

#[test]
fn every_plan_runner_writes_passes_validate() {
    let env = Env::new();
    let requests = [
        "Summarise README.md",
        "1. fetch the logs\n2. grep them for errors\n3. which service failed?\n4. write a report",
        "Run `cargo test` then fix what fails; finally open a pull request",
        "Download https://example.com/a.csv and https://example.com/b.csv, merge them, then chart it.",
        "Should we use Postgres or SQLite? Decide, then write the schema.",
        "- one\n- two\n- three\n* four\n• five",
        "\"quoted\" {{ tasks.x.output }} {% raw %} — dashes – and ‘quotes’",
    ];
    for (n, request) in requests.iter().enumerate() {
        let file = format!("p{n}.yaml");
        let out = runner(&env, &["plan", request, "-o", &file]);
        assert_eq!(out.code, Some(0), "{request}: {out}");
        let valid = validate(&env, &file);
        assert_eq!(valid.code, Some(0), "{request}: {valid}");
    }
    let printed = runner(&env, &["plan", "Fetch the page, then count its words"]);
    assert_eq!(printed.code, Some(0), "{printed}");
    env.write("printed.yaml", &printed.stdout);
    let valid = validate(&env, "printed.yaml");
    assert_eq!(valid.code, Some(0), "the manifest printed to stdout validates too: {valid}");
}

#[test]
fn agent_map_and_template_bind_the_steps_to_real_agents() {
    let env = Env::new();
    env.write(
        "template.yaml",
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: tpl}\nspec:\n  agent_definitions:\n    \
         shell: {runtime: command, command: [cat]}\n    thinker: {runtime: mock}\n  workflow:\n    \
         - {id: t, agent: thinker, input: x}\n",
    );
    let out = runner(
        &env,
        &[
            "plan",
            "Run the tests, then summarise the failures",
            "--template",
            "template.yaml",
            "--agent-map",
            "tool=shell",
            "--agent-map",
            "processing=thinker",
            "-o",
            "plan.yaml",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let text = std::fs::read_to_string(env.dir().join("plan.yaml")).expect("written");
    let plan = manifest::load_str("plan.yaml", "plan", &text, &|_| true).plan.expect("loads");
    let agents: Vec<&str> = plan.tasks.iter().filter_map(|t| t.agent.as_ref()).map(|a| a.value.as_str()).collect();
    assert_eq!(agents, ["shell", "thinker"], "{text}");
    assert!(plan.agents.contains_key("shell") && plan.agents.contains_key("thinker"), "{text}");
    let bad = runner(&env, &["plan", "x", "--agent-map", "nonsense"]);
    assert_eq!(bad.code, Some(2), "{bad}");
}

#[test]
fn apply_with_yes_plans_and_runs_the_plan() {
    let env = Env::new();
    let out = runner(&env, &["plan", "Collect the numbers, then add them up", "--apply", "--yes", "-o", "p.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.all().contains("succeeded"), "{out}");
    let declined = runner(&env, &["plan", "Collect the numbers, then add them up", "--apply", "-o", "q.yaml"]);
    assert_eq!(declined.code, Some(4), "no terminal, no --yes: declined: {declined}");
}

/// A small valid manifest a model might write (mock agents: no template given).
fn manifest_json(tasks: usize) -> String {
    let workflow: Vec<Value> = (0..tasks)
        .map(|i| {
            let mut task = json!({"id": format!("step{i}"), "agent": "worker", "input": format!("do part {i}")});
            if i > 0 {
                task["depends_on"] = json!([format!("step{}", i - 1)]);
                task["input"] = json!(format!("continue from {{{{ tasks.step{}.output }}}}", i - 1));
            }
            task
        })
        .collect();
    json!({
        "apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "authored"},
        "spec": {"mission": "m", "agent_definitions": {"worker": {"runtime": "mock"}}, "workflow": workflow}
    })
    .to_string()
}

fn answer(text: &str) -> Step {
    Step::Answer(text.to_owned())
}

#[test]
fn a_model_writes_the_plan_and_its_prompt_answer_and_record_are_kept() {
    let server = FakeOpenAi::start(|_, _| answer(&format!("Here it is:\n```json\n{}\n```", manifest_json(2))));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["plan", "Do the two parts", "--provider", &base, "--model", "m1", "-o", "plan.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    let valid = validate(&env, "plan.yaml");
    assert_eq!(valid.code, Some(0), "{valid}");
    let dir = only_plan(&env);
    let record = provenance(&dir);
    assert_eq!(record["planner"], "llm");
    assert_eq!(record["prompt_version"], planner::author::PROMPT_VERSION);
    assert_eq!(record["attempts"][0]["outcome"], "valid");
    let prompt = std::fs::read_to_string(dir.join("prompt-01.txt")).expect("the prompt is kept");
    assert!(prompt.contains("Do the two parts"), "{prompt}");
    let raw = std::fs::read_to_string(dir.join("output-01.txt")).expect("the answer is kept");
    assert!(raw.starts_with("Here it is:"), "{raw}");
    let models = runner(&env, &["models"]);
    assert!(models.stdout.contains("m1"), "{models}");
    let counts: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("models.json")).expect("models.json"))
            .expect("JSON");
    assert_eq!(counts["m1"]["successes"], 1, "{counts}");
}

#[test]
fn a_model_that_never_plans_falls_to_the_next_then_to_the_rules_and_the_better_model_goes_first_next_time() {
    let server = FakeOpenAi::start(|body, _| match body["model"].as_str() {
        Some("good") => answer(&manifest_json(1)),
        _ => answer("I cannot produce JSON today."),
    });
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["plan", "Fetch it, then sum it", "--provider", &base, "--model", "bad", "-o", "a.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("warning") && out.stderr.contains("deterministic"), "{out}");
    assert_eq!(validate(&env, "a.yaml").code, Some(0));
    let asked = server.requests().len();
    assert_eq!(asked, 2, "one answer and one repair");

    let out = runner(
        &env,
        &["plan", "Fetch it, then sum it", "--provider", &base, "--model", "bad", "--model", "good", "-o", "b.yaml"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let first_of_second_call = &server.requests()[asked];
    assert_eq!(first_of_second_call.body["model"], "good", "the model with the better record goes first");
    let given = runner(
        &env,
        &[
            "plan",
            "Fetch it, then sum it",
            "--provider",
            &base,
            "--model",
            "bad",
            "--model",
            "good",
            "--model-order",
            "given",
            "-o",
            "c.yaml",
        ],
    );
    assert_eq!(given.code, Some(0), "{given}");
    let requests = server.requests();
    let third: Vec<&str> = requests[asked + 1..].iter().filter_map(|r| r.body["model"].as_str()).collect();
    assert_eq!(third, ["bad", "bad", "good"], "as given: bad, its repair, then good");
    let table = runner(&env, &["models"]);
    assert!(table.stdout.contains("bad") && table.stdout.contains("good"), "{table}");
}

#[test]
fn questions_instead_of_a_plan_exit_3_and_are_shown() {
    let server = FakeOpenAi::start(|_, _| answer(r#"{"questions": ["Which database: Postgres or SQLite?"]}"#));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["plan", "Set up the database", "--provider", &base, "--model", "m"]);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stderr.contains("Which database"), "{out}");
    assert!(out.stdout.is_empty(), "no manifest: {out}");
}

#[test]
fn keys_and_token_values_never_reach_the_provenance() {
    let server = FakeOpenAi::start(|body, _| {
        let text = user(body);
        answer(&format!("{} // you said: {text} // {}", manifest_json(1), testkit::AUTHORIZATION_ECHO))
    });
    let env = Env::new();
    let base = server.base_url();
    let token = "tok-SECRET-VALUE-98765";
    let key = "sk-PLAN-KEY-13579";
    let output = env
        .runner()
        .env(KEY_VAR, key)
        .env("DEPLOY_TOKEN", token)
        .args(["plan", &format!("Deploy with token {token}"), "--provider", &base])
        .args(["--api-key-env", KEY_VAR, "--model", "m", "-o", "plan.yaml"])
        .output()
        .expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(server.requests().iter().all(|r| r.authorization.as_deref() == Some(&*format!("Bearer {key}"))));
    let mut seen = 0;
    for file in files_under(&env.home()) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!text.contains(token) && !text.contains(key), "a secret in {}:\n{text}", file.display());
        seen += usize::from(text.contains("[redacted]"));
    }
    assert!(seen >= 2, "the request and the prompt held the token and were redacted");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains(key), "{stderr}");
}

/// Runs `runner ARGS` on a pseudo-terminal with `EDITOR` set, typing `input`.
fn on_terminal(env: &Env, args: &[&str], editor: &str, input: &str) -> Out {
    llm_support::on_terminal(env, args, &[("EDITOR", editor)], input)
}

#[test]
fn on_a_terminal_questions_are_asked_the_plan_can_be_edited_and_then_it_runs() {
    let server = FakeOpenAi::start(|body, _| {
        if user(body).contains("Answers to your questions") {
            answer(&manifest_json(2))
        } else {
            answer(r#"{"questions": ["Which part first?"]}"#)
        }
    });
    let env = Env::new();
    let base = server.base_url();
    let out = on_terminal(
        &env,
        &["plan", "Do the parts", "--provider", &base, "--model", "m", "--apply", "-o", "plan.yaml"],
        "sed -i s/part/piece/",
        "the first one\ne\ny\n",
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("Which part first?"), "the question was asked: {out}");
    assert!(out.stdout.contains("Proceed? [y/n/e]"), "{out}");
    assert!(out.stdout.contains("succeeded"), "{out}");
    let second = &server.requests()[1];
    assert!(user(&second.body).contains("- Which part first? the first one"), "{}", user(&second.body));
    let text = std::fs::read_to_string(env.dir().join("plan.yaml")).expect("written");
    assert!(text.contains("do piece 0") && !text.contains("do part 0"), "the edit was kept: {text}");
}

#[test]
fn a_template_provider_by_name_and_its_default_model_write_a_plan_for_its_agents() {
    let base = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let seen = std::sync::Arc::clone(&base);
    let server = FakeOpenAi::start(move |_, _| {
        let url = seen.get().cloned().unwrap_or_default();
        answer(
            &json!({
                "apiVersion": "runner/v1", "kind": "Plan", "metadata": {"name": "authored"},
                "spec": {
                    "providers": {"fake": {"kind": "openai", "base_url": url, "model": "house-model"}},
                    "agent_definitions": {"writer": {"runtime": "llm", "provider": "fake", "max_turns": 2}},
                    "workflow": [{"id": "draft", "agent": "writer", "input": "Draft the note"}]
                }
            })
            .to_string(),
        )
    });
    base.set(server.base_url()).expect("set once");
    let env = Env::new();
    env.write(
        "template.yaml",
        &format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: tpl}}\nspec:\n  providers:\n    fake: {{kind: openai, \
             base_url: \"{}\", model: house-model}}\n  agent_definitions:\n    writer: {{runtime: llm, provider: fake, \
             max_turns: 2}}\n  workflow:\n    - {{id: t, agent: writer, input: x}}\n",
            server.base_url()
        ),
    );
    let out =
        runner(&env, &["plan", "Write a note", "--template", "template.yaml", "--provider", "fake", "-o", "p.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(server.requests()[0].body["model"], "house-model", "the provider's model is the default");
    let prompt = server.requests()[0].body["messages"].to_string();
    assert!(prompt.contains("writer") && prompt.contains("house-model"), "the template is offered: {prompt}");
    let text = std::fs::read_to_string(env.dir().join("p.yaml")).expect("written");
    assert!(text.contains("draft") && text.contains("writer"), "{text}");
    assert_eq!(validate(&env, "p.yaml").code, Some(0));
    let unknown = runner(&env, &["plan", "Write a note", "--template", "template.yaml", "--provider", "nope"]);
    assert_eq!(unknown.code, Some(2), "{unknown}");
    assert!(unknown.stderr.contains("fake"), "the known providers are named: {unknown}");
}

#[test]
fn plans_written_at_once_all_count_in_the_model_records() {
    let server = FakeOpenAi::start(|_, _| {
        Step::Delay(std::time::Duration::from_millis(100), Box::new(answer(&manifest_json(1))))
    });
    let env = Env::new();
    let base = server.base_url();
    let children: Vec<std::process::Child> = (0..4)
        .map(|n| {
            env.runner_process()
                .args(["plan", "Do it", "--provider", &base, "--model", "m", "-o", &format!("p{n}.yaml")])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("runner starts")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("runner ends").success());
    }
    let counts: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("models.json")).expect("models.json"))
            .expect("JSON");
    assert_eq!(counts["m"]["successes"], 4, "{counts}");
}

#[test]
fn a_streamed_answer_is_shown_as_it_comes_with_a_key_split_across_pieces_redacted() {
    let key = "sk-STREAM-KEY-24680";
    let manifest = manifest_json(1);
    let (head, tail) = manifest.split_at(manifest.len() / 2);
    let pieces = vec![
        head.to_owned(),
        tail.to_owned(),
        " // echoed: sk-STR".to_owned(),
        "EAM-KEY-24680 and sk-ST".to_owned(),
        "ill not a key".to_owned(),
    ];
    let server = FakeOpenAi::start(move |_, _| Step::Stream(pieces.clone()));
    let env = Env::new();
    let base = server.base_url();
    let output = env
        .runner()
        .env(KEY_VAR, key)
        .args(["plan", "Do it", "--provider", &base, "--api-key-env", KEY_VAR, "--model", "m", "--stream"])
        .args(["-o", "plan.yaml"])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("\"apiVersion\""), "the answer is shown: {stderr}");
    assert!(stderr.contains("echoed: [redacted] and sk-STill not a key"), "{stderr}");
    assert!(!stderr.contains(key), "{stderr}");
    assert_eq!(server.requests()[0].body["stream"], true);
}

/// The text of every message a request sent.
fn messages_text(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|messages| messages.iter().map(|m| m["content"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default()
}

/// The o200k tokens of `texts`.
fn tokens_of(texts: &[String]) -> u64 {
    texts.iter().map(|text| model::tokens::count(text, model::tokens::Tokenizer::O200k) as u64).sum()
}

/// A window in which the whole prompt for `request` does not fit but the prompt without its
/// research example does, measured on the prompt itself so that it holds as the schema grows.
fn window_between_all_and_one_example(request: &str) -> u64 {
    let wide = FakeOpenAi::script(vec![answer(&manifest_json(1))]);
    wide.serve_models(json!({"data": [{"id": "small", "max_model_len": 1_000_000}]}));
    let env = Env::new();
    let out = runner(&env, &["plan", request, "--provider", &wide.base_url(), "--model", "small", "-o", "p.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    let whole = messages_text(&wide.requests()[0].body);
    let system = &whole[0];
    let start = system.find("## Example: research").expect("the whole prompt has the research example");
    let end = system[start..].find("## Example: a sequential plan").map_or(system.len(), |i| start + i);
    let research = tokens_of(&[system[start..end].to_owned()]);
    // The author estimates a quarter above the count and keeps an eighth of the window for the
    // answer: aim the prompt's room halfway into the research example.
    let room_for_prompt = tokens_of(&whole) * 5 / 4 - research * 5 / 8;
    room_for_prompt * 8 / 7
}

#[test]
fn prompts_are_fitted_to_the_window_the_server_reports_and_the_repair_leaves_out_more() {
    let window = window_between_all_and_one_example("Do the part");
    // The first answer is long prose that cannot be used: the repair must make room for it.
    let prose = "word ".repeat(1500);
    let server = FakeOpenAi::script(vec![answer(&prose), answer(&manifest_json(1))]);
    server.serve_models(json!({"object": "list", "data": [{"id": "small", "max_model_len": window}]}));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["plan", "Do the part", "--provider", &base, "--model", "small", "-o", "plan.yaml"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(validate(&env, "plan.yaml").code, Some(0));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "an answer and its repair");
    let first = messages_text(&requests[0].body);
    let repair = messages_text(&requests[1].body);
    assert!(!first[0].contains("## Example: research"), "the full prompt does not fit {window} tokens");
    assert!(first[0].contains("## Example: a sequential plan"), "the smaller example still fits");
    assert!(repair[0].len() < first[0].len(), "the repair leaves out more to hold the long answer");
    assert!(repair.iter().any(|text| text.contains("word word")), "the answer is quoted back");
    let room = (window / 8).clamp(512, 4096);
    for request in &requests {
        let tokens = tokens_of(&messages_text(&request.body));
        assert!(tokens < window - room, "{tokens} tokens leave the answer its room");
        let limit = request.body["max_tokens"].as_u64().expect("max_tokens is sent");
        assert!(limit >= room && tokens + limit <= window, "prompt {tokens} + answer {limit} fit the window");
    }
    let record = provenance(&only_plan(&env));
    assert_eq!(record["context_windows"]["small"], json!({"tokens": window, "from": "the server's max_model_len"}));
    assert_eq!(record["attempts"][0]["left_out"], "the research example", "{record}");
    assert!(record["attempts"][1]["left_out"].as_str().is_some_and(|s| s.starts_with("both examples")), "{record}");
}

#[test]
fn a_prompt_that_cannot_fit_the_window_is_never_sent_and_the_warning_says_why() {
    let server = FakeOpenAi::script(vec![answer(&manifest_json(1))]);
    server.serve_models(json!({"data": [{"id": "tiny", "context_length": 1000}]}));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["plan", "Fetch it, then sum it", "--provider", &base, "--model", "tiny", "-o", "p.yaml"]);
    assert_eq!(out.code, Some(0), "the rules plan instead: {out}");
    assert!(server.requests().is_empty(), "nothing was sent");
    for words in ["does not fit", "`tiny` is 1000 tokens (the server's context_length)", "deterministic"] {
        assert!(out.stderr.contains(words), "`{words}` in {out}");
    }
    assert_eq!(validate(&env, "p.yaml").code, Some(0));
    let counts = std::fs::read_to_string(env.home().join("models.json")).unwrap_or_default();
    assert!(!counts.contains("tiny"), "a prompt never sent is not the model's failure: {counts}");
    let args =
        ["plan", "Sum it", "--provider", &base, "--model", "unlisted", "--context-window", "900", "-o", "q.yaml"];
    let out = runner(&env, &args);
    assert!(out.stderr.contains("`unlisted` is 900 tokens (the provider's context_window)"), "{out}");
    assert!(server.requests().is_empty(), "nothing was sent");
}

#[test]
fn the_providers_context_window_applies_when_the_server_does_not_say_and_the_smaller_one_wins() {
    let server = FakeOpenAi::script(vec![answer(&manifest_json(1))]);
    let env = Env::new();
    env.write(
        "template.yaml",
        &format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: tpl}}\nspec:\n  providers:\n    fake: {{kind: openai, \
             base_url: \"{}\", model: m, context_window: 1000}}\n  agent_definitions:\n    writer: {{runtime: llm, \
             provider: fake}}\n  workflow:\n    - {{id: t, agent: writer, input: x}}\n",
            server.base_url()
        ),
    );
    let args = ["plan", "Write a note", "--template", "template.yaml", "--provider", "fake", "-o", "p.yaml"];
    let out = runner(&env, &args);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("1000 tokens (the provider's context_window)"), "{out}");
    server.serve_models(json!({"data": [{"id": "m", "max_model_len": 900}, {"id": "other", "max_model_len": 100}]}));
    let out = runner(&env, &args);
    assert!(out.stderr.contains("900 tokens (the server's max_model_len)"), "{out}");
    assert!(server.requests().is_empty(), "nothing was sent");
}

#[test]
fn timeout_sets_how_long_a_request_to_the_model_may_take() {
    let server = FakeOpenAi::script(vec![Step::Hang]);
    let env = Env::new();
    let base = server.base_url();
    let out =
        runner(&env, &["plan", "Do it", "--provider", &base, "--model", "m", "--timeout", "100ms", "-o", "p.yaml"]);
    assert_eq!(out.code, Some(0), "the rules plan instead: {out}");
    assert!(out.stderr.contains("did not answer within 100ms"), "{out}");
    let bad = runner(&env, &["plan", "Do it", "--provider", &base, "--timeout", "soon"]);
    assert_eq!(bad.code, Some(2), "{bad}");
}

/// A server whose model calls the tool it is offered and answers JSON in JSON mode.
fn capable(body: &Value, _: usize) -> Step {
    if body.get("tools").is_some() {
        let tool = body["tools"][0]["function"]["name"].as_str().unwrap_or("").to_owned();
        return Step::ToolCalls(vec![(tool, r#"{"number": 7}"#.to_owned())]);
    }
    match body.get("response_format") {
        Some(_) => answer(r#"{"answer": 7}"#),
        None => answer("seven"),
    }
}

fn json_out(out: &Out) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {out}"))
}

#[test]
fn probe_reports_the_models_served_their_windows_and_that_tools_and_json_mode_work() {
    let server = FakeOpenAi::start(capable);
    server.serve_models(json!({"data": [{"id": "m", "max_model_len": 4096}, {"id": "n"}]}));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["probe", &base, "--model", "m", "--model", "gone", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out}");
    let report = json_out(&out);
    assert_eq!(report["reachable"], true);
    assert_eq!(report["served"], json!(["m", "n"]));
    let m = &report["models"][0];
    assert_eq!(m["model"], "m");
    assert_eq!(m["listed"], true);
    assert_eq!(m["context_window"], json!({"tokens": 4096, "from": "the server's max_model_len"}));
    assert_eq!(m["tool_calls"]["works"], true, "{m}");
    assert_eq!(m["json_mode"]["works"], true, "{m}");
    assert_eq!(report["models"][1]["listed"], false);
    assert_eq!(report["models"][1]["context_window"], Value::Null);
    let requests = server.requests();
    assert_eq!(requests.len(), 10, "per model one tool request, one JSON-mode request and one per schema dialect");
    assert!(requests.iter().all(|r| r.body["temperature"] == 0.0), "the probes are repeatable");
    let human = runner(&env, &["probe", &base, "--model", "m"]);
    assert_eq!(human.code, Some(0), "{human}");
    for words in ["serves: m, n", "context window: 4096 tokens", "tool calls work: yes", "JSON mode works: yes"] {
        assert!(human.stdout.contains(words), "`{words}` in {human}");
    }
}

#[test]
fn probe_finds_a_server_that_drops_tools_and_a_json_mode_that_answers_prose() {
    let server = FakeOpenAi::start(|_, _| answer("Sure! The number is 7."));
    let env = Env::new();
    let base = server.base_url();
    let out = runner(&env, &["probe", &base, "--model", "m", "--format", "json"]);
    assert_eq!(out.code, Some(0), "the server answered: {out}");
    let report = json_out(&out);
    assert_eq!(report["served"], Value::Null, "this server does not list its models");
    let m = &report["models"][0];
    assert_eq!(m["tool_calls"]["works"], false);
    assert!(m["tool_calls"]["detail"].as_str().is_some_and(|d| d.contains("answered in text")), "{m}");
    assert_eq!(m["json_mode"]["works"], false);
    assert!(m["json_mode"]["detail"].as_str().is_some_and(|d| d.contains("not a JSON object")), "{m}");
    let human = runner(&env, &["probe", &base, "--model", "m"]);
    for words in ["context window: unknown", "tool calls work: NO", "JSON mode works: NO"] {
        assert!(human.stdout.contains(words), "`{words}` in {human}");
    }
    server.serve_models(json!({"data": [{"id": "only"}]}));
    let only = json_out(&runner(&env, &["probe", &base, "--format", "json"]));
    assert_eq!(only["models"][0]["model"], "only", "a server's only model is probed by default");
}

#[test]
fn probe_of_a_server_that_cannot_be_reached_exits_7() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let base = format!("http://{}/v1", closed.local_addr().expect("an address"));
    drop(closed);
    let env = Env::new();
    let out = runner(&env, &["probe", &base, "--model", "m"]);
    assert_eq!(out.code, Some(7), "{out}");
    assert!(out.stderr.contains("cannot reach"), "{out}");
    let json = runner(&env, &["probe", &base, "--format", "json"]);
    assert_eq!(json.code, Some(7), "{json}");
    assert_eq!(json_out(&json)["reachable"], false);
}

#[test]
fn probe_takes_a_template_provider_its_model_and_key_and_never_shows_the_key() {
    let server = FakeOpenAi::start(|body, _| match body.get("tools") {
        Some(_) => answer(&format!("no tools here, key {}", testkit::AUTHORIZATION_ECHO)),
        None => answer(r#"{"answer": 7}"#),
    });
    let env = Env::new();
    env.write(
        "template.yaml",
        &format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: tpl}}\nspec:\n  providers:\n    fake: {{kind: openai, \
             base_url: \"{}\", api_key_env: {KEY_VAR}, model: house, context_window: 2048}}\n  agent_definitions:\n    \
             writer: {{runtime: llm, provider: fake}}\n  workflow:\n    - {{id: t, agent: writer, input: x}}\n",
            server.base_url()
        ),
    );
    let key = "sk-PROBE-KEY-11223";
    let output = env
        .runner()
        .env(KEY_VAR, key)
        .args(["probe", "fake", "--template", "template.yaml"])
        .output()
        .expect("runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("house") && stdout.contains("2048 tokens (the provider's context_window)"), "{stdout}");
    assert!(stdout.contains("[redacted]") && !stdout.contains(key), "{stdout}");
    assert!(server.requests().iter().all(|r| r.authorization.as_deref() == Some(&*format!("Bearer {key}"))));
    let unset = env
        .runner()
        .env_remove(KEY_VAR)
        .args(["probe", "fake", "--template", "template.yaml"])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert_eq!(unset.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(KEY_VAR), "the unset variable is named: {stderr}");
}
