//! `runner lsp` spoken to over its stdio, as an editor would: diagnostics on open and on
//! incremental change, hover, completion, definition, references, rename, the outline, quick
//! fixes, and messages that are malformed or about documents that are not plans.

use serde_json::{Value, json};
use testkit::lsp::{Client, apply_edit, position};

/// This build's `runner lsp`, started and initialised.
fn start(encodings: &[&str]) -> (Client, Value) {
    Client::start(std::path::Path::new(env!("CARGO_BIN_EXE_runner")), encodings)
}

const URI: &str = "file:///nonexistent/editing.yaml";

const PLAN: &str = "\
apiVersion: runner/v1
kind: Plan
metadata:
  name: editing
spec:
  agent_definitions:
    writer: {runtime: mock}
    checker:
      runtime: mock
  workflow:
    - id: search
      agent: writer
      input: Find sources.
    - id: draft
      agent: writer
      input: \"Draft from {{ tasks.search.output }}\"
      depends_on: [serach]
      parallel_group: pair
    - id: review   # checks the draft
      agent: checker
      input: \"Check {{ tasks.draft.output }}\"
      depends_on: [search]
      parallel_group: pair
";

fn codes(diagnostics: &[Value]) -> Vec<(String, u64)> {
    diagnostics
        .iter()
        .filter(|d| d["severity"] == 1)
        .map(|d| (d["code"].as_str().unwrap_or("").to_owned(), d["range"]["start"]["line"].as_u64().unwrap_or(0)))
        .collect()
}

fn opened(text: &str) -> (Client, Vec<Value>) {
    let (mut client, _) = start(&[]);
    client.open(URI, text);
    let diagnostics = client.diagnostics(URI, 1);
    (client, diagnostics)
}

fn at(needle: &str, n: usize, after: usize) -> Value {
    json!({"textDocument": {"uri": URI}, "position": position(PLAN, needle, n, after)})
}

#[test]
fn errors_are_published_at_their_lines_with_codes_and_related_places() {
    let (client, diagnostics) = opened(PLAN);
    assert_eq!(
        codes(&diagnostics),
        [("plan::unknown_dependency".to_owned(), 16), ("plan::template_not_ancestor".to_owned(), 20)]
    );
    let typo = &diagnostics[0];
    assert_eq!(typo["range"]["start"], position(PLAN, "serach", 0, 0));
    assert!(typo["message"].as_str().unwrap_or("").contains("did you mean `search`?"), "{typo}");
    assert_eq!(typo["source"], "runner");
    let read = diagnostics.iter().find(|d| d["code"] == "plan::template_not_ancestor").expect("the template error");
    let related = &read["relatedInformation"][0];
    assert_eq!(related["location"]["range"]["start"], position(PLAN, "draft", 0, 0), "the upstream task's id");
    assert_eq!(related["location"]["uri"], URI);
    assert_eq!(client.stop(), 0);
}

#[test]
fn critic_findings_arrive_with_the_critic_s_severity_once_the_plan_is_valid() {
    let valid = PLAN.replace("[serach]", "[search]").replace(
        "draft.output }}\"\n      depends_on: [search]",
        "draft.output }}\"\n      depends_on: [search, draft]",
    );
    let (client, diagnostics) = opened(&valid);
    assert!(codes(&diagnostics).is_empty(), "{diagnostics:?}");
    let redundant = diagnostics.iter().find(|d| d["code"] == "critic::redundant_edge").expect("a redundant edge");
    assert_eq!(redundant["severity"], 3, "an info finding is information");
    assert_eq!(redundant["range"]["start"], position(&valid, "[search, draft]", 0, 1));
    drop(client);
}

#[test]
fn incremental_edits_are_applied_and_the_diagnostics_follow() {
    let (mut client, _) = opened(PLAN);
    let typo = position(PLAN, "serach", 0, 0);
    let end = json!({"line": typo["line"], "character": typo["character"].as_u64().unwrap_or(0) + 6});
    let change = json!({"range": {"start": typo, "end": end}, "text": "search"});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [change]}),
    );
    let diagnostics = client.diagnostics(URI, 2);
    assert_eq!(codes(&diagnostics), [("plan::template_not_ancestor".to_owned(), 20)]);
    // Two edits in one burst: a character typed, then taken back.
    let line = json!({"line": 0, "character": 0});
    let typed = json!({"range": {"start": line, "end": line}, "text": "x"});
    let back = json!({"range": {"start": line, "end": {"line": 0, "character": 1}}, "text": ""});
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 3}, "contentChanges": [typed]}),
    );
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 4}, "contentChanges": [back]}),
    );
    let diagnostics = client.diagnostics(URI, 4);
    assert_eq!(codes(&diagnostics), [("plan::template_not_ancestor".to_owned(), 20)]);
    assert_eq!(client.stop(), 0);
}

#[test]
fn hover_describes_tasks_agents_fields_and_explains_diagnostics() {
    let (mut client, _) = opened(PLAN);
    let hover = |client: &mut Client, params: Value| {
        client.request("textDocument/hover", params)["contents"]["value"].as_str().unwrap_or("").to_owned()
    };
    let task = hover(&mut client, at("id: draft", 0, 5));
    assert!(
        task.contains("**task `draft`**") && task.contains("agent `writer`") && task.contains("depends on `serach`"),
        "{task}"
    );
    assert!(task.contains("Draft from {{ tasks.search.output }}"), "the input excerpt: {task}");
    let agent = hover(&mut client, at("agent: checker", 0, 8));
    assert!(
        agent.contains("**agent `checker`**") && agent.contains("`mock`") && agent.contains("does 1 task"),
        "{agent}"
    );
    let field = hover(&mut client, at("depends_on: [search]", 0, 2));
    assert!(field.contains("`depends_on`") && field.contains("must finish first"), "{field}");
    let typo = hover(&mut client, at("serach", 0, 2));
    assert!(
        typo.contains("plan::unknown_dependency") && typo.contains("runner explain plan::unknown_dependency"),
        "{typo}"
    );
    let nothing = client.request("textDocument/hover", at("Find sources", 0, 2));
    assert_eq!(nothing, Value::Null);
    assert_eq!(client.stop(), 0);
}

fn labels(result: &Value) -> Vec<String> {
    let items = result.as_array().cloned().unwrap_or_default();
    items.iter().map(|i| i["label"].as_str().unwrap_or("").to_owned()).collect()
}

#[test]
fn completion_offers_what_is_valid_at_the_cursor() {
    // Half-written lines that no YAML parser accepts: the names come from the last reading that
    // had a plan.
    let text = format!(
        "{PLAN}    - id: last\n      agent: \n      type: \n      depends_on: [dr\n      input: \"{{{{ tasks.\"\n      \n"
    );
    let (mut client, _) = opened(PLAN);
    let change = json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": text}]});
    client.notify("textDocument/didChange", change);
    client.diagnostics(URI, 2);
    let complete = |client: &mut Client, needle: &str, n: usize, after: usize| {
        let params = json!({"textDocument": {"uri": URI}, "position": position(&text, needle, n, after)});
        labels(&client.request("textDocument/completion", params))
    };
    let agents = complete(&mut client, "agent: \n", 0, 7);
    assert_eq!(agents, ["checker", "writer"]);
    let kinds = complete(&mut client, "type: \n", 0, 6);
    assert!(kinds.contains(&"synthesis_gate".to_owned()) && kinds.contains(&"human_review".to_owned()), "{kinds:?}");
    let dependencies = complete(&mut client, "[dr", 0, 3);
    assert!(
        dependencies.contains(&"draft".to_owned()) && dependencies.contains(&"search".to_owned()),
        "{dependencies:?}"
    );
    let templated = complete(&mut client, "{{ tasks.\"", 0, 9);
    assert!(templated.contains(&"review".to_owned()), "{templated:?}");
    let fields = complete(&mut client, "      \n", 0, 6);
    assert!(fields.contains(&"on_failure".to_owned()) && fields.contains(&"verification".to_owned()), "{fields:?}");
    assert!(!fields.contains(&"agent_definitions".to_owned()), "only a task's fields: {fields:?}");
    assert_eq!(client.stop(), 0);
}

#[test]
fn definition_and_references_follow_ids_through_dependencies_and_templates() {
    let (mut client, _) = opened(PLAN);
    let definition = client.request("textDocument/definition", at("tasks.draft", 0, 7));
    assert_eq!(definition["range"]["start"], position(PLAN, "draft", 0, 0));
    assert_eq!(definition["uri"], URI);
    let mut params = at("id: search", 0, 5);
    params["context"] = json!({"includeDeclaration": true});
    let references = client.request("textDocument/references", params.clone());
    let lines: Vec<u64> = references
        .as_array()
        .map(|r| r.iter().filter_map(|l| l["range"]["start"]["line"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(lines, [10, 15, 21], "the id, the template, the dependency");
    params["context"] = json!({"includeDeclaration": false});
    assert_eq!(client.request("textDocument/references", params).as_array().map(Vec::len), Some(2));
    let agent = client.request("textDocument/definition", at("agent: checker", 0, 9));
    assert_eq!(agent["range"]["start"]["line"], 7);
    assert_eq!(client.request("textDocument/definition", at("Find sources", 0, 1)), Value::Null);
    assert_eq!(client.stop(), 0);
}

#[test]
fn rename_changes_every_place_a_name_is_written_and_refuses_a_taken_name() {
    let (mut client, _) = opened(PLAN);
    let prepared = client.request("textDocument/prepareRename", at("tasks.search", 0, 8));
    assert_eq!(prepared["start"], position(PLAN, "search", 1, 0));
    let mut params = at("id: search", 0, 5);
    params["newName"] = json!("gather");
    let edit = client.request("textDocument/rename", params.clone());
    let renamed = apply_edit(PLAN, &edit, URI);
    assert_eq!(renamed.matches("gather").count(), 3, "{renamed}");
    assert!(
        renamed.contains("tasks.gather.output")
            && renamed.contains("depends_on: [gather]")
            && renamed.contains("[serach]"),
        "{renamed}"
    );
    assert!(renamed.contains("# checks the draft"), "comments stay");
    params["newName"] = json!("draft");
    let taken = client.call("textDocument/rename", params.clone());
    assert!(taken["error"]["message"].as_str().unwrap_or("").contains("already exists"), "{taken}");
    params["newName"] = json!("two words");
    assert!(client.call("textDocument/rename", params).get("error").is_some());
    let mut agent = at("checker:", 0, 2);
    agent["newName"] = json!("critic");
    let renamed = apply_edit(PLAN, &client.request("textDocument/rename", agent), URI);
    assert!(renamed.contains("    critic:\n") && renamed.contains("agent: critic"), "{renamed}");
    assert_eq!(client.stop(), 0);
}

#[test]
fn the_outline_lists_agents_then_phases_with_groups_and_tasks() {
    let valid = PLAN.replace("[serach]", "[search]");
    let (mut client, _) = opened(&valid);
    let symbols = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": URI}}));
    let names: Vec<&str> =
        symbols.as_array().map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, ["agents", "phase 1", "phase 2"]);
    assert_eq!(symbols[0]["children"][1]["name"], "writer");
    assert_eq!(symbols[1]["children"][0]["name"], "search");
    assert_eq!(symbols[2]["children"][0]["name"], "group pair");
    assert_eq!(symbols[2]["children"][0]["children"][0]["name"], "draft");
    assert_eq!(symbols[2]["children"][0]["children"][1]["name"], "review");
    assert_eq!(symbols[2]["children"][0]["children"][0]["selectionRange"]["start"], position(&valid, "draft", 0, 0));
    assert_eq!(client.stop(), 0);
}

#[test]
fn quick_fixes_carry_the_edits_of_mechanical_helps() {
    let (mut client, diagnostics) = opened(PLAN);
    let typo = diagnostics.iter().find(|d| d["code"] == "plan::unknown_dependency").expect("the typo").clone();
    let params = json!({"textDocument": {"uri": URI}, "range": typo["range"], "context": {"diagnostics": [typo]}});
    let actions = client.request("textDocument/codeAction", params);
    let action = &actions[0];
    assert_eq!(action["title"], "replace `serach` with `search`");
    assert_eq!(action["kind"], "quickfix");
    assert_eq!(action["diagnostics"][0]["code"], "plan::unknown_dependency");
    let fixed = apply_edit(PLAN, &action["edit"], URI);
    assert!(fixed.contains("depends_on: [search]\n      parallel_group: pair\n    - id: review"), "{fixed}");
    let read = diagnostics.iter().find(|d| d["code"] == "plan::template_not_ancestor").expect("the read").clone();
    let params = json!({"textDocument": {"uri": URI}, "range": read["range"], "context": {"diagnostics": [read]}});
    let actions = client.request("textDocument/codeAction", params);
    assert_eq!(actions[0]["title"], "add `draft` to the dependencies of `review`");
    let fixed = apply_edit(&fixed, &actions[0]["edit"], URI);
    assert!(fixed.contains("depends_on: [search, draft]"), "{fixed}");
    let nothing = json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}, "context": {"diagnostics": []}});
    assert_eq!(client.request("textDocument/codeAction", nothing), json!([]));
    assert_eq!(client.stop(), 0);
}

#[test]
fn malformed_messages_and_unknown_requests_get_errors_and_the_server_goes_on() {
    let (mut client, _) = opened(PLAN);
    client.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    client.send_raw(b"Content-Length: 5\r\n\r\n[1,2]");
    let unknown = client.call("textDocument/noSuchThing", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = client.call("textDocument/hover", json!({"textDocument": "not an object"}));
    assert_eq!(bad["error"]["code"], -32602);
    let closed = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///never/opened.yaml"}, "position": {"line": 0, "character": 0}}),
    );
    assert_eq!(closed, Value::Null);
    let far = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": URI}, "position": {"line": 9999, "character": 9999}}),
    );
    assert!(far.is_array(), "a position past the end is clamped: {far}");
    assert_eq!(client.stop(), 0);
}

#[test]
fn documents_that_are_not_plans_get_a_diagnostic_or_nothing_never_a_crash() {
    let (mut client, _) = start(&[]);
    for (n, text) in
        ["# Notes\n\nnot: [a plan", "[1, 2, 3]\n", "", "\u{0}\u{1}binary\u{ffff}", "key: value\n"].iter().enumerate()
    {
        let uri = format!("file:///nonexistent/other{n}.yaml");
        client.open(&uri, text);
        let diagnostics = client.diagnostics(&uri, 1);
        assert!(!diagnostics.is_empty(), "{text:?} is not a plan, and says so");
        for method in ["textDocument/hover", "textDocument/completion", "textDocument/definition"] {
            let params = json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}});
            let response = client.call(method, params);
            assert!(response.get("error").is_none(), "{method} on {text:?}: {response}");
        }
        let symbols = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": uri}}));
        assert_eq!(symbols, json!([]));
    }
    assert_eq!(client.stop(), 0);
}

#[test]
fn utf8_columns_are_used_when_the_client_offers_them() {
    // Characters of two and four bytes before the template: one and two UTF-16 units, two and
    // four UTF-8 ones.
    let text = PLAN.replace("Check {{", "Check é😀 {{");
    for (offered, encoding, column) in [(&["utf-8", "utf-16"][..], "utf-8", 30), (&[][..], "utf-16", 27)] {
        let (mut client, init) = start(offered);
        assert_eq!(init["capabilities"]["positionEncoding"], encoding);
        client.open(URI, &text);
        let diagnostics = client.diagnostics(URI, 1);
        let read = diagnostics.iter().find(|d| d["code"] == "plan::template_not_ancestor").expect("the read");
        assert_eq!(read["range"]["start"]["character"], column, "in {encoding}");
        assert_eq!(client.stop(), 0);
    }
}

#[test]
fn exit_without_shutdown_is_exit_code_1() {
    let (mut client, _) = start(&[]);
    client.notify("exit", Value::Null);
    assert_eq!(client.exit_code(), 1);
}

#[test]
fn a_client_that_skips_initialized_is_served_all_the_same() {
    let mut client = Client::spawn(std::path::Path::new(env!("CARGO_BIN_EXE_runner")));
    client.request("initialize", json!({"capabilities": {}}));
    client.open(URI, PLAN);
    assert!(!client.diagnostics(URI, 1).is_empty());
    assert_eq!(client.stop(), 0);
}

#[test]
fn definition_on_a_plan_value_opens_the_sub_plan_file_and_its_errors_show() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let path = folder.join("graph_subplans.yaml");
    let uri = format!("file://{}", path.display());
    let text = std::fs::read_to_string(&path).expect("the fixture is readable");
    let (mut client, _) = start(&[]);
    client.open(&uri, &text);
    assert!(codes(&client.diagnostics(&uri, 1)).is_empty(), "its sub-plan files are found beside it");
    let params = json!({"textDocument": {"uri": uri}, "position": position(&text, "subplans/company.yaml", 0, 3)});
    let definition = client.request("textDocument/definition", params);
    assert_eq!(definition["uri"], format!("file://{}", folder.join("subplans/company.yaml").display()));
    let missing = text.replacen("plan: subplans/company.yaml", "plan: subplans/nowhere.yaml", 1);
    let change = json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": missing}]});
    client.notify("textDocument/didChange", change);
    let diagnostics = client.diagnostics(&uri, 2);
    assert_eq!(codes(&diagnostics), [("plan::subplan_missing".to_owned(), 17)]);
    assert_eq!(client.stop(), 0);
}

#[test]
fn a_document_over_the_plan_cap_is_refused_with_a_diagnostic() {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_runner"));
    command.arg("lsp").env("RUNNER_MAX_PLAN_BYTES", "200");
    let mut client = Client::spawn_command(command);
    client.request("initialize", json!({"capabilities": {}}));
    client.open(URI, PLAN);
    let diagnostics = client.diagnostics(URI, 1);
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0]["code"], "plan::too_large");
    assert_eq!(client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": URI}})), json!([]));
    assert_eq!(client.stop(), 0);
}
