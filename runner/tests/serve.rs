//! `runner serve`: the real binary on a free loopback port, talked to over HTTP: the JSON
//! views of runs, the live stream, plan previews, the actions and every safety rule.

#[path = "support/server.rs"]
mod server;
mod support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use server::Server;
use support::{Env, plan, review_plan};

const ECHO: &str = "    echo: {runtime: mock, latency: 10ms}";
const WAIT: Duration = Duration::from_secs(30);
/// A token that meets the rule: 16 characters or more, each a letter, a digit or `-._~`.
const TOKEN: &str = "s3cret-s3cret-s3cret";

fn three_tasks() -> String {
    plan(
        "three",
        ECHO,
        r#"    - {id: a, agent: echo, input: "hello"}
    - {id: b, agent: echo, input: "b reads {{ tasks.a.output }}", depends_on: [a]}
    - {id: c, agent: echo, input: "{{ tasks.a.output }} + {{ tasks.b.output }}", depends_on: [a, b]}"#,
    )
}

/// Applies a plan written into the test folder as run `run`; returns the exit code.
fn apply(env: &Env, name: &str, text: &str, run: &str) -> Option<i32> {
    env.write(name, text);
    env.runner().args(["apply", name, "--yes", "--run-id", run]).output().expect("runner runs").status.code()
}

fn types(events: &Value) -> Vec<String> {
    events.as_array().expect("a list").iter().map(|e| e["type"].as_str().unwrap_or_default().to_owned()).collect()
}

#[test]
fn the_runs_and_a_run_are_served_as_json_from_the_log() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    let server = Server::start(&env, &[]);

    let runs = server.get("/api/runs").json();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    let row = &runs[0];
    assert_eq!(
        (row["id"].as_str(), row["plan"].as_str(), row["status"].as_str()),
        (Some("r1"), Some("three"), Some("succeeded"))
    );
    assert_eq!((row["tasks"].as_u64(), row["succeeded"].as_u64()), (Some(3), Some(3)));
    assert!(
        row["started"].as_str().is_some_and(|s| s.ends_with('Z')) && row["updated"].as_str() >= row["started"].as_str()
    );

    let run = server.get("/api/runs/r1").json();
    let tasks = &run["graph"]["tasks"];
    assert_eq!(tasks[2]["id"], "c");
    assert_eq!(tasks[2]["deps"], json!([0, 1]), "c depends on a and b");
    assert_eq!(
        (tasks[0]["phase"].as_u64(), tasks[1]["phase"].as_u64(), tasks[2]["phase"].as_u64()),
        (Some(0), Some(1), Some(2))
    );
    assert_eq!(run["graph"]["critical"], json!([0, 1, 2]));
    assert_eq!(run["events"].as_array().map(Vec::len), Some(env.records("r1").len()), "every event of the log");
    assert_eq!(run["state"]["status"], "succeeded");
    assert_eq!(run["state"]["tasks"], json!({"a": "succeeded", "b": "succeeded", "c": "succeeded"}));
    // The forecast apply recorded, against what the run took: the same as `status` shows.
    assert!(run["forecast"]["duration_ms"]["actual"].is_u64(), "{:#}", run["forecast"]);
    assert_eq!(run["forecast"], env.status("r1")["forecast"]);

    assert_eq!(server.get("/api/runs/nope").status, 404);
    assert_eq!(server.get("/api/runs/..%2Fetc").status, 404, "a run id is a plain name");
}

#[test]
fn a_paused_run_has_its_pending_tasks_and_its_review_marked() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &review_plan(), "rv"), Some(3), "the review pauses the run");
    let server = Server::start(&env, &[]);
    let run = server.get("/api/runs/rv").json();
    let kinds: Vec<&str> =
        run["graph"]["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["kind"].as_str()).collect();
    assert_eq!(kinds, ["task", "review", "task"]);
    assert_eq!(run["graph"]["tasks"][2]["id"], "publish", "a task that never ran is in the graph");
    assert_eq!(run["state"]["status"], "paused");
    assert_eq!(run["state"]["tasks"], json!({"draft": "succeeded", "approve": "paused"}));
    assert_eq!(run["state"]["waiting"], json!([{"task": "approve", "question": null}]));
}

#[test]
fn the_state_after_an_event_is_the_log_folded_up_to_it() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    let server = Server::start(&env, &[]);
    let records = env.records("r1");
    let first = server.get("/api/runs/r1/state?at=1").json();
    assert_eq!((first["status"].as_str(), first["seq"].as_u64()), (Some("running"), Some(1)));
    assert_eq!(first["tasks"], json!({}), "after RunCreated every task is pending");
    let dispatched = records.iter().position(|r| r["type"] == "TaskDispatched").expect("a dispatch") + 1;
    let after = server.get(&format!("/api/runs/r1/state?at={dispatched}")).json();
    assert_eq!(after["tasks"], json!({"a": "running"}));
    let task = server.get(&format!("/api/runs/r1/tasks/a?at={dispatched}")).json();
    assert_eq!((task["status"].as_str(), task["output"].as_str()), (Some("running"), None));
    assert_eq!(server.get("/api/runs/r1/state?at=99999").json()["status"], "succeeded");
}

#[test]
fn a_task_has_its_input_output_attempts_and_events() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    let server = Server::start(&env, &[]);
    let task = server.get("/api/runs/r1/tasks/b").json();
    assert_eq!(task["input"], "b reads hello");
    assert_eq!(task["output"], "b reads hello");
    assert_eq!(
        (task["kind"].as_str(), task["agent"].as_str(), task["attempts"].as_u64()),
        (Some("task"), Some("echo"), Some(1))
    );
    assert_eq!(task["depends_on"], json!(["a"]));
    assert_eq!(types(&task["events"]), ["TaskDispatched", "TaskSucceeded"]);
    assert_eq!(server.get("/api/runs/r1/tasks/zzz").status, 404);
}

#[test]
fn an_output_containing_markup_comes_back_as_text_and_the_page_never_parses_data_as_html() {
    let env = Env::new();
    let markup = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let agents = format!("    evil: {{runtime: mock, default: {markup:?}}}");
    let text = plan("evil", &agents, "    - {id: x, agent: evil, input: go}");
    assert_eq!(apply(&env, "plan.yaml", &text, "ev"), Some(0));
    let server = Server::start(&env, &[]);
    let reply = server.get("/api/runs/ev/tasks/x");
    assert!(reply.headers["content-type"].to_str().is_ok_and(|t| t.starts_with("application/json")));
    assert_eq!(reply.json()["output"], markup, "the output is data, as written");
    let page = server.get("/");
    let policy = page.headers["content-security-policy"].to_str().expect("a policy");
    assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "{policy}");
    let script = server.get("/app.js").text;
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("] {
        assert!(!script.contains(sink), "app.js uses {sink}");
    }
}

#[test]
fn the_stream_follows_the_log_as_another_process_writes_it_and_waits_out_a_torn_line() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    let log = env.log("r1");
    let whole = std::fs::read_to_string(&log).expect("the log");
    let lines: Vec<&str> = whole.split_inclusive('\n').collect();
    let total = lines.len();
    // Two whole lines and half of the third, as a writer caught mid-line leaves it.
    let head = format!("{}{}{}", lines[0], lines[1], &lines[2][..lines[2].len() / 2]);
    std::fs::write(&log, &head).expect("the log is cut");
    let server = Server::start(&env, &[]);
    let mut appended = false;
    let messages = server.stream("/api/runs/r1/stream", WAIT, |messages| {
        let seqs: Vec<u64> = messages
            .iter()
            .flat_map(|m| m["events"].as_array().cloned().unwrap_or_default())
            .filter_map(|e| e["seq"].as_u64())
            .collect();
        if !appended && seqs == [1, 2] {
            // As the store writes: appending, never rewriting.
            let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("the log opens");
            std::io::Write::write_all(&mut file, &whole.as_bytes()[head.len()..]).expect("the rest is written");
            appended = true;
        }
        seqs.len() >= total
    });
    let seqs: Vec<u64> = messages
        .iter()
        .flat_map(|m| m["events"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(
        seqs,
        (1..=total as u64).collect::<Vec<_>>(),
        "each event once, in order, none from the torn line early"
    );
    assert!(appended);
    let last = messages.last().expect("a message");
    assert_eq!(last["status"], "succeeded");
    assert_eq!(last["tasks"]["c"], "succeeded", "the state of the tasks the events touched");

    let after = server.stream(&format!("/api/runs/r1/stream?after={}", total - 1), WAIT, |m| !m.is_empty());
    assert_eq!(after[0]["events"].as_array().map(Vec::len), Some(1), "only what the page lacks");
}

#[test]
fn approve_then_resume_from_the_page_finishes_the_run_with_the_cli_events() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &review_plan(), "rv"), Some(3));
    let server = Server::start(&env, &[]);
    let approved =
        server.post("/api/runs/rv/approve", json!({"task": "approve", "comment": "ship it", "resume": true}));
    assert_eq!(approved.status, 200, "{}", approved.text);
    let state = server.wait_for("/api/runs/rv/state", WAIT, |s| s["status"] == "succeeded");
    assert_eq!(state["tasks"]["publish"], "succeeded");
    let decided: Vec<Value> = env.records("rv").into_iter().filter(|r| r["type"] == "ReviewDecided").collect();
    assert_eq!(decided.len(), 1);
    assert_eq!((decided[0]["approved"].as_bool(), decided[0]["comment"].as_str()), (Some(true), Some("ship it")));
    assert!(env.types("rv").contains(&"RunResumed".to_owned()), "{:?}", env.types("rv"));

    let again = server.post("/api/runs/rv/approve", json!({"task": "approve"}));
    assert_eq!(again.status, 409, "the engine refuses a second decision: {}", again.text);
    assert_eq!(again.json()["code"], "serve::refused");
}

#[test]
fn answer_reject_cancel_and_retry_record_what_the_cli_records() {
    let env = Env::new();
    let asks = plan(
        "asks",
        "    m: {runtime: mock, latency: 10ms, responses: {a: [{clarify: \"Which fiscal year?\"}, {output: done}]}}",
        "    - {id: a, agent: m, input: report}",
    );
    assert_eq!(apply(&env, "asks.yaml", &asks, "q"), Some(3));
    let server = Server::start(&env, &[]);
    assert_eq!(
        server.get("/api/runs/q/state").json()["waiting"],
        json!([{"task": "a", "question": "Which fiscal year?"}])
    );
    assert_eq!(server.post("/api/runs/q/answer", json!({"task": "a", "text": "2024", "resume": true})).status, 200);
    let state = server.wait_for("/api/runs/q/state", WAIT, |s| s["status"] == "succeeded");
    assert_eq!(state["tasks"]["a"], "succeeded");
    assert!(
        env.records("q").iter().any(|r| r["type"] == "ClarificationProvided" && r["answer"] == "2024"),
        "{:?}",
        env.records("q")
    );

    assert_eq!(apply(&env, "review.yaml", &review_plan(), "rj"), Some(3));
    assert_eq!(server.post("/api/runs/rj/reject", json!({"task": "approve", "comment": "no"})).status, 200);
    assert!(env.records("rj").iter().any(|r| r["type"] == "ReviewDecided" && r["approved"] == false));

    assert_eq!(apply(&env, "review.yaml", &review_plan(), "cx"), Some(3));
    assert_eq!(server.post("/api/runs/cx/cancel", json!({})).status, 200);
    assert_eq!(env.types("cx").last().map(String::as_str), Some("RunCancelled"));

    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    let retried = server.post("/api/runs/r1/retry", json!({"from": "b"}));
    assert_eq!(retried.status, 200, "{}", retried.text);
    let new_run = retried.json()["run"].as_str().expect("the new run's id").to_owned();
    assert_ne!(new_run, "r1");
    server.wait_for(&format!("/api/runs/{new_run}/state"), WAIT, |s| s["status"] == "succeeded");
    let reused: Vec<String> = env
        .records(&new_run)
        .iter()
        .filter(|r| r["type"] == "TaskReused")
        .filter_map(|r| r["task"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(reused, ["a"], "a retry from b reuses a only");
    assert_eq!(server.post("/api/runs/r1/retry", json!({"from": "ghost"})).status, 404);
}

#[test]
fn a_run_that_has_ended_offers_and_takes_neither_cancel_nor_resume() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "r1"), Some(0));
    assert_eq!(apply(&env, "review.yaml", &review_plan(), "rv"), Some(3));
    let server = Server::start(&env, &[]);
    let nothing = json!({"cancel": false, "resume": false});
    assert_eq!(server.get("/api/runs/r1").json()["state"]["actions"], nothing, "the page offers neither");
    assert_eq!(server.get("/api/runs/r1/state").json()["actions"], nothing);
    assert_eq!(server.get("/api/runs/r1/state?at=1").json().get("actions"), None, "a replayed state has none");
    assert_eq!(server.get("/api/runs/rv").json()["state"]["actions"], json!({"cancel": true, "resume": true}));

    let logged = env.records("r1").len();
    for action in ["cancel", "resume"] {
        let refused = server.post(&format!("/api/runs/r1/{action}"), json!({}));
        assert_eq!(refused.status, 409, "{action}: {}", refused.text);
        assert_eq!(refused.json()["code"], "serve::ended");
        assert_eq!(
            refused.json()["message"],
            format!("run `r1` has already ended (succeeded): there is nothing to {action}")
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.records("r1").len(), logged, "nothing was recorded and no `runner resume` started");

    assert_eq!(server.post("/api/runs/rv/cancel", json!({})).status, 200);
    assert_eq!(server.get("/api/runs/rv/state").json()["actions"], nothing, "a cancelled run has ended too");
    let again = server.post("/api/runs/rv/resume", json!({}));
    assert_eq!((again.status, again.json()["code"].as_str()), (409, Some("serve::ended")), "{}", again.text);
    assert_eq!(server.post("/api/runs/nope/cancel", json!({})).status, 404);
}

#[test]
fn a_driven_run_offers_cancel_but_not_resume() {
    let env = Env::new();
    let slow = plan("slow", "    slow: {runtime: mock, latency: 60s}", "    - {id: a, agent: slow, input: wait}");
    env.write("slow.yaml", &slow);
    let mut applying = env.runner_process();
    applying.args(["apply", "slow.yaml", "--yes", "--run-id", "sl"]);
    let mut applying =
        applying.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("apply");
    let server = Server::start(&env, &[]);
    let state = server.wait_for("/api/runs/sl/state", WAIT, |s| s["tasks"]["a"] == "running");
    assert_eq!(state["actions"], json!({"cancel": true, "resume": false}), "{state}");
    let resumed = server.post("/api/runs/sl/resume", json!({}));
    assert_eq!((resumed.status, resumed.json()["code"].as_str()), (409, Some("serve::refused")), "{}", resumed.text);
    let cancelled = server.post("/api/runs/sl/cancel", json!({}));
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(applying.wait().expect("apply ends").code(), Some(130));
    assert_eq!(server.get("/api/runs/sl/state").json()["actions"], json!({"cancel": false, "resume": false}));
}

#[test]
fn actions_are_post_only_with_a_json_body() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &review_plan(), "rv"), Some(3));
    let server = Server::start(&env, &[]);
    assert_eq!(server.get("/api/runs/rv/approve").status, 405);
    assert_eq!(server.get("/api/runs/rv/cancel?task=approve").status, 405);
    let form = server.send(|client, url| {
        client.post(format!("{url}/api/runs/rv/cancel")).header("content-type", "text/plain").body("{}")
    });
    assert_eq!(form.status, 415, "a cross-site form cannot send JSON");
    assert!(!env.types("rv").contains(&"RunCancelled".to_owned()));
}

#[test]
fn a_plan_is_previewed_by_path_or_pasted_with_its_problems_at_their_lines() {
    let env = Env::new();
    env.write("good.yaml", &three_tasks());
    let broken = plan(
        "broken",
        ECHO,
        "    - {id: a, agent: echo, input: x}\n    - {id: b, agent: echo, input: go, depends_on: [serach]}",
    );
    env.write("broken.yaml", &broken);
    let server = Server::start(&env, &[]);

    let good = server.get("/api/plan?path=good.yaml").json();
    assert_eq!((good["name"].as_str(), good["valid"].as_bool()), (Some("three"), Some(true)));
    assert_eq!(good["graph"]["tasks"].as_array().map(Vec::len), Some(3));
    assert!(good["findings"].as_array().expect("findings").iter().all(|f| f["line"].as_u64().is_some_and(|l| l >= 1)));

    let bad = server.get("/api/plan?path=broken.yaml").json();
    assert_eq!((bad["valid"].as_bool(), bad["graph"].is_null()), (Some(false), true));
    let error = bad["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .find(|d| d["severity"] == "error")
        .expect("an error")
        .clone();
    let line = broken.lines().position(|l| l.contains("serach")).expect("the line") + 1;
    assert_eq!(error["line"].as_u64(), Some(line as u64), "{error}");
    assert!(error["message"].as_str().is_some_and(|m| m.contains("serach")), "{error}");

    let pasted = server.post("/api/plan", json!({"text": broken})).json();
    let places = |report: &Value| -> Vec<(Value, Value)> {
        report["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| (d["code"].clone(), d["line"].clone()))
            .collect()
    };
    assert_eq!(places(&pasted), places(&bad), "pasted text is read as the file is");
    assert_eq!(pasted["name"], "broken");
}

#[test]
fn paths_cannot_leave_the_served_folder_and_reads_are_capped() {
    let env = Env::new();
    let outside = tempfile::tempdir().expect("a folder");
    std::fs::write(outside.path().join("secret.yaml"), three_tasks()).expect("written");
    std::os::unix::fs::symlink(outside.path().join("secret.yaml"), env.dir().join("link.yaml")).expect("a link");
    std::fs::create_dir(env.dir().join("sub")).expect("a folder");
    env.write("sub/inside.yaml", &three_tasks());
    env.write("huge.yaml", &"#".repeat(5 << 20));
    let server = Server::start(&env, &[]);

    assert_eq!(server.get("/api/plan?path=sub/inside.yaml").status, 200);
    let secret = outside.path().join("secret.yaml");
    for path in ["../x.yaml", "sub/../../x.yaml", secret.to_str().expect("a UTF-8 path"), "link.yaml"] {
        let reply = server.get(&format!("/api/plan?path={}", path.replace('/', "%2F")));
        assert_eq!(reply.status, 403, "{path}: {}", reply.text);
        assert_eq!(reply.json()["code"], "serve::outside");
    }
    assert_eq!(server.get("/api/plan?path=huge.yaml").status, 413);
    let big = server.post("/api/plan", json!({"text": "#".repeat(5 << 20)}));
    assert_eq!(big.status, 413, "a body over the cap is refused");
}

#[test]
fn loopback_is_the_default_and_another_address_needs_a_token() {
    let env = Env::new();
    let help = env.runner().args(["serve", "--help"]).output().expect("runner runs");
    assert!(String::from_utf8_lossy(&help.stdout).contains("[default: 127.0.0.1:8080]"));
    let refused =
        env.runner().args(["serve", "--addr", "0.0.0.0:0"]).env_remove("RUNNER_SERVE_TOKEN").output().expect("runs");
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("needs a token"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let empty =
        env.runner().args(["serve", "--addr", "0.0.0.0:0"]).env("RUNNER_SERVE_TOKEN", "").output().expect("runs");
    assert_ne!(empty.status.code(), Some(0), "an empty token is no token");
}

#[test]
fn with_a_token_every_request_carries_it() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &review_plan(), "rv"), Some(3));
    let mut command = env.runner_process();
    command.args(["serve", "--addr", "127.0.0.1:0"]).env("RUNNER_SERVE_TOKEN", TOKEN);
    let server = Server::spawn(command);
    for path in ["/", "/app.js", "/api/runs", "/api/runs/rv/stream"] {
        assert_eq!(server.get(path).status, 401, "{path}");
    }
    let action = server.post("/api/runs/rv/cancel", json!({}));
    assert_eq!(action.status, 401);
    assert_eq!(server.send(|c, url| c.get(format!("{url}/api/runs")).bearer_auth("wrong")).status, 401);
    assert_eq!(server.send(|c, url| c.get(format!("{url}/api/runs")).bearer_auth(TOKEN)).status, 200);
    let first = server.get(&format!("/?token={TOKEN}"));
    assert_eq!(first.status, 200);
    let cookie = first.headers["set-cookie"].to_str().expect("a cookie").to_owned();
    assert!(cookie.starts_with(&format!("runner_token={TOKEN};")) && cookie.contains("HttpOnly"), "{cookie}");
    let with_cookie =
        server.send(|c, url| c.get(format!("{url}/api/runs")).header("cookie", format!("runner_token={TOKEN}")));
    assert_eq!(with_cookie.status, 200);
    assert!(!env.types("rv").contains(&"RunCancelled".to_owned()), "the refused action did nothing");
}

#[test]
fn a_request_naming_another_host_is_refused() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let reply = server.send(|c, url| c.get(format!("{url}/api/runs")).header("host", "attacker.example"));
    assert_eq!(reply.status, 403);
    assert_eq!(server.get("/api/runs").status, 200);
}

#[test]
fn a_token_needs_sixteen_characters_that_pass_unchanged_through_a_url_and_a_cookie() {
    let env = Env::new();
    let with_variable = |addr: &str, token: &str| {
        let mut command = env.runner_process();
        command.args(["serve", "--addr", addr]).env("RUNNER_SERVE_TOKEN", token);
        command
    };
    let with_flag = |token: &str| {
        let mut command = env.runner_process();
        command.args(["serve", "--addr", "127.0.0.1:0", "--token", token]).env_remove("RUNNER_SERVE_TOKEN");
        command
    };
    let cases = [
        (with_variable("0.0.0.0:0", "   "), "whitespace only, beyond loopback"),
        (with_variable("127.0.0.1:0", "   "), "whitespace only, on loopback"),
        (with_variable("127.0.0.1:0", "fifteen-chars-x"), "15 characters"),
        (with_flag("sixteen chars and more"), "whitespace inside"),
        (with_flag("sixteen+chars&more;x"), "characters a URL or a cookie would change"),
        (with_flag("sixteen%20chars-and-more"), "a percent sign"),
    ];
    for (command, what) in cases {
        let (code, stderr) = refusal(command);
        assert_eq!(code, Some(2), "{what}: a usage error, as a missing token is: {stderr}");
        assert!(stderr.contains("at least 16 characters, each a letter, a digit or one of `-._~`"), "{what}: {stderr}");
        assert!(!stderr.contains("fifteen-chars-x"), "the token itself is not printed: {stderr}");
    }
    let sixteen = with_variable("127.0.0.1:0", "sixteen-chars-ok");
    let server = Server::spawn(sixteen);
    assert_eq!(server.send(|c, url| c.get(format!("{url}/api/runs")).bearer_auth("sixteen-chars-ok")).status, 200);
}

#[test]
fn the_timeouts_and_the_connection_cap_must_be_positive_numbers() {
    let env = Env::new();
    for (variable, value) in [
        ("RUNNER_SERVE_HEADER_TIMEOUT_MS", "0"),
        ("RUNNER_SERVE_BODY_TIMEOUT_MS", "10s"),
        ("RUNNER_SERVE_MAX_CONNECTIONS", "-1"),
    ] {
        let mut command = env.runner_process();
        command.args(["serve", "--addr", "127.0.0.1:0"]).env_remove("RUNNER_SERVE_TOKEN").env(variable, value);
        let (code, stderr) = refusal(command);
        assert_eq!(code, Some(2), "{variable}={value}: {stderr}");
        assert!(stderr.contains(variable), "{variable}={value}: {stderr}");
    }
}

#[test]
fn a_client_that_never_finishes_its_headers_or_idles_is_disconnected() {
    let env = Env::new();
    let server = start_with(&env, &[("RUNNER_SERVE_HEADER_TIMEOUT_MS", "200")]);
    let here = address(&server);
    let mut streams: Vec<TcpStream> = (0..20).map(|_| connect(&server)).collect();
    for (i, stream) in streams.iter_mut().enumerate() {
        let sent = match i % 3 {
            0 => String::new(),
            1 => format!("GET /api/runs HTTP/1.1\r\nHost: {here}\r\n"),
            _ => format!("GET /api/runs HTTP/1.1\r\nHost: {here}\r\n\r\n"),
        };
        stream.write_all(sent.as_bytes()).expect("the request is sent");
    }
    let started = Instant::now();
    for (i, stream) in streams.iter_mut().enumerate() {
        assert!(closed_within(stream, WAIT), "connection {i} is still open after {:?}", started.elapsed());
    }
}

#[test]
fn a_body_announced_over_the_cap_is_refused_before_it_arrives() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let mut stream = connect(&server);
    let head = post_head(&server, "/api/plan", 10 << 30);
    stream.write_all(format!("{head}{{\"text\": \"ab").as_bytes()).expect("the request is sent");
    let reply = reply(&mut stream);
    assert_eq!(status(&reply), 413, "{reply}");
    assert!(reply.contains("serve::too_large"), "{reply}");
}

#[test]
fn a_body_that_stops_or_trickles_is_answered_408_and_closed() {
    let env = Env::new();
    let server = start_with(&env, &[("RUNNER_SERVE_BODY_TIMEOUT_MS", "200")]);
    let head = post_head(&server, "/api/plan", 100);

    let mut stalled = connect(&server);
    stalled.write_all(format!("{head}{{\"text\": \"ab").as_bytes()).expect("the request is sent");
    let answer = reply(&mut stalled);
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(answer.contains("serve::body_timeout"), "{answer}");
    assert!(closed_within(&mut stalled, WAIT), "the connection is closed after a 408");

    // A byte every 50 ms would finish in 5 s and never leaves the body idle for 200 ms.
    let mut trickled = connect(&server);
    trickled.write_all(head.as_bytes()).expect("the head is sent");
    let mut writer = trickled.try_clone().expect("a second handle");
    let trickle = std::thread::spawn(move || {
        for _ in 0..100 {
            if writer.write_all(b" ").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let answer = reply(&mut trickled);
    assert_eq!(status(&answer), 408, "the whole body must arrive within the deadline: {answer}");
    trickle.join().expect("the writer ends");
}

#[test]
fn connections_over_the_cap_wait_until_one_closes() {
    let env = Env::new();
    let server =
        start_with(&env, &[("RUNNER_SERVE_MAX_CONNECTIONS", "2"), ("RUNNER_SERVE_HEADER_TIMEOUT_MS", "600000")]);
    let held: Vec<TcpStream> = (0..2).map(|_| connect(&server)).collect();
    let mut third = connect(&server);
    let request = format!("GET /api/runs HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", address(&server));
    third.write_all(request.as_bytes()).expect("the request is sent");
    third.set_read_timeout(Some(Duration::from_millis(1500))).expect("a timeout");
    let mut byte = [0u8; 1];
    let early = third.read(&mut byte);
    assert!(
        early
            .as_ref()
            .is_err_and(|e| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "a third connection was served while the cap of 2 was held: {early:?}"
    );
    drop(held);
    third.set_read_timeout(Some(WAIT)).expect("a timeout");
    let answer = reply(&mut third);
    assert_eq!(status(&answer), 200, "served once a slot is free: {answer}");
}

#[test]
fn a_state_changing_request_from_another_origin_is_refused() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &review_plan(), "rv"), Some(3));
    let server = Server::start(&env, &[]);
    let here = address(&server);
    let port = here.rsplit_once(':').expect("a port").1;
    let cancel = |origin: &str| {
        server.send(|c, url| c.post(format!("{url}/api/runs/rv/cancel")).header("origin", origin).json(&json!({})))
    };
    for origin in ["http://evil.example", "null", &format!("https://{here}"), &format!("http://localhost:{port}")] {
        let refused = cancel(origin);
        assert_eq!((refused.status, refused.json()["code"].as_str()), (403, Some("serve::origin")), "{origin}");
    }
    let read = server.send(|c, url| c.get(format!("{url}/api/runs")).header("origin", "http://evil.example"));
    assert_eq!(read.status, 200, "a GET changes nothing, and the browser keeps its answer from another site");
    assert!(!env.types("rv").contains(&"RunCancelled".to_owned()), "no refused request did anything");
    assert_eq!(cancel(&server.url).status, 200, "the page's own origin");
    assert_eq!(env.types("rv").last().map(String::as_str), Some("RunCancelled"));
}

#[test]
fn the_host_is_one_header_naming_this_machine_and_port_with_a_path_as_target() {
    let env = Env::new();
    let server = Server::start(&env, &[]);
    let here = address(&server).to_owned();
    let port = here.rsplit_once(':').expect("a port").1.to_owned();
    let get = |target: &str, hosts: &[&str]| {
        let lines: String = hosts.iter().map(|host| format!("Host: {host}\r\n")).collect();
        let mut stream = connect(&server);
        let request = format!("GET {target} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).expect("the request is sent");
        reply(&mut stream)
    };
    for host in [here.clone(), format!("LOCALHOST:{port}"), format!("localhost.:{port}"), format!("[::1]:{port}")] {
        let answer = get("/api/runs", &[&host]);
        assert_eq!(status(&answer), 200, "{host}: {answer}");
    }
    let userinfo = format!("{here}@evil.example");
    let cases: [(&str, &[&str], &str, &str); 7] = [
        ("/api/runs", &[&userinfo], "serve::bad_host", "userinfo"),
        ("/api/runs", &[&here, "evil.example"], "serve::bad_host", "two Host headers, loopback first"),
        ("/api/runs", &[&here, &here], "serve::bad_host", "the same Host twice"),
        ("http://evil.example/api/runs", &[&here], "serve::bad_host", "an absolute-form target"),
        ("/api/runs", &[], "serve::bad_host", "no Host"),
        ("/api/runs", &["127.0.0.1:1"], "serve::foreign_host", "another port"),
        ("/api/runs", &["localhost"], "serve::foreign_host", "no port is port 80"),
    ];
    for (target, hosts, code, what) in cases {
        let answer = get(target, hosts);
        assert!(matches!(status(&answer), 400 | 403) && answer.contains(code), "{what}: {answer}");
    }
}

/// `runner serve` with the variables of `vars` set, on a free loopback port, without a token.
fn start_with(env: &Env, vars: &[(&str, &str)]) -> Server {
    let mut command = env.runner_process();
    command.args(["serve", "--addr", "127.0.0.1:0"]).env_remove("RUNNER_SERVE_TOKEN").envs(vars.iter().copied());
    Server::spawn(command)
}

/// Runs a `runner serve` that must refuse to start: its exit code and stderr. Fails, and
/// stops it, if it prints its URL instead.
fn refusal(mut command: Command) -> (Option<i32>, String) {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("runner serve starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.contains("http://") {
        let _ = child.kill();
        let _ = child.wait();
        panic!("runner serve started instead of refusing: {line}");
    }
    let output = child.wait_with_output().expect("runner serve ends");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The `host:port` the server listens on.
fn address(server: &Server) -> &str {
    server.url.trim_start_matches("http://")
}

/// A new connection to the server, its reads bounded by [`WAIT`].
fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(address(server)).expect("the server accepts connections");
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    stream
}

/// The head of a JSON `POST` announcing a body of `length` bytes.
fn post_head(server: &Server, path: &str, length: u64) -> String {
    let here = address(server);
    format!(
        "POST {path} HTTP/1.1\r\nHost: {here}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// Reads one response (head and a `Content-Length` body), or what came before the connection
/// closed or went quiet for [`WAIT`].
fn reply(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while !complete(&bytes) {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => bytes.extend_from_slice(&chunk[..read]),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether `bytes` hold a whole response head and as much body as it announces.
fn complete(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

/// The status code of a raw response; fails on anything else.
fn status(reply: &str) -> u16 {
    reply
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {reply:?}"))
}

/// Whether the server closes `stream` within `limit`, whatever it sends before.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).expect("a read timeout");
    let mut sink = Vec::new();
    match stream.read_to_end(&mut sink) {
        Ok(_) => true,
        Err(error) => !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

#[test]
fn reused_tasks_are_marked_with_where_their_output_came_from() {
    let env = Env::new();
    assert_eq!(apply(&env, "plan.yaml", &three_tasks(), "first"), Some(0));
    let edited = three_tasks().replace("\"{{ tasks.a.output }} + ", "\"{{ tasks.a.output }} and ");
    env.write("plan.yaml", &edited);
    let out =
        env.runner().args(["apply", "plan.yaml", "--yes", "--reuse", "--run-id", "second"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let server = Server::start(&env, &[]);
    let run = server.get("/api/runs/second").json();
    assert_eq!(run["state"]["reused"], json!(["a", "b"]), "{run}");
    let task = server.get("/api/runs/second/tasks/a").json();
    assert_eq!(
        (task["reused_from"]["run"].as_str(), task["reused_from"]["attempt"].as_u64()),
        (Some("first"), Some(1))
    );
    assert_eq!(task["status"], "succeeded");
    let ran = server.get("/api/runs/second/tasks/c").json();
    assert!(ran.get("reused_from").is_none(), "c ran: {ran}");
}

#[test]
fn in_the_database_the_stream_hears_of_new_records_instead_of_polling_for_them() {
    let Some(db) = testkit::pg::TestDatabase::new("serve_stream") else { return };
    let env = Env::new();
    env.write("plan.yaml", &review_plan());
    let applied = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "p", "--store", &db.url]).output();
    assert_eq!(applied.expect("runner runs").status.code(), Some(3), "the run waits for its review");
    let server = Server::start(&env, &["--store", &db.url]);
    let mut decided = false;
    // The stream looks at the database unasked only every 30 s: the run's end comes within 20
    // only when the writer's announcement reaches it.
    let messages = server.stream("/api/runs/p/stream", Duration::from_secs(20), |messages| {
        if !decided && !messages.is_empty() {
            env.runner().args(["approve", "p", "approve", "--store", &db.url]).assert().success();
            env.runner().args(["resume", "p", "--store", &db.url]).assert().success();
            decided = true;
        }
        messages.last().is_some_and(|m| m["status"] == "succeeded")
    });
    assert!(decided);
    let list = server.get("/api/runs").json();
    assert_eq!(list[0]["id"], "p");
    assert_eq!((list[0]["tasks"].as_u64(), list[0]["succeeded"].as_u64()), (Some(3), Some(3)), "{list}");
    assert_eq!(list[0]["status"], "succeeded");
    assert!(messages.len() >= 2, "the first state, then what the other process recorded");
}
