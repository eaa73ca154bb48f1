//! `runner serve` in a real browser: headless Chromium driven by chromedriver over the
//! WebDriver protocol. A run whose review pauses it is watched live, approved from the page,
//! seen to finish (its Cancel and Resume buttons gone), and scrubbed back with the replay
//! slider; a screenshot is saved under `target/`. A sub-plan is drawn as a box of its child
//! plan's tasks whose items link their child runs, each linking back. Skipped, with a message saying why, only
//! when no browser is installed; with `RUNNER_REQUIRE_BROWSER=1` (as `.ci/run` sets after
//! installing one) a missing browser fails.

#[path = "support/server.rs"]
mod server;
mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use server::Server;
use support::{Env, plan};

const WAIT: Duration = Duration::from_secs(30);
/// Held by each test that drives a browser: two Chromiums at once on a small machine load a
/// page slower than the runs they watch take to move on.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// What the draft writes: markup that must show as text.
const MARKUP: &str = "<b>Big</b> news <script>window.pwned = 1</script>";

/// A program on the PATH.
fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
}

/// A chromedriver session, ended and its driver killed when dropped.
struct Browser {
    driver: Child,
    base: String,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Browser {
    fn start(chromium: &PathBuf, driver: &PathBuf, profile: &std::path::Path) -> Browser {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let mut browser = Browser {
            driver: child,
            base: format!("http://127.0.0.1:{port}"),
            runtime,
            client: reqwest::Client::new(),
        };
        let started = Instant::now();
        while browser.call("GET", "/status", None).is_err() {
            assert!(started.elapsed() < WAIT, "chromedriver never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1400,1000".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": chromium, "args": args}
        }}});
        let session = browser.call("POST", "/session", Some(capabilities)).expect("a browser session");
        let id = session["sessionId"].as_str().expect("a session id").to_owned();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.client.get(url),
            "DELETE" => self.client.delete(url),
            _ => self.client.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        self.runtime.block_on(async {
            let response = request.send().await.map_err(|e| e.to_string())?;
            let ok = response.status().is_success();
            let value: Value = response.json().await.map_err(|e| e.to_string())?;
            if ok { Ok(value["value"].clone()) } else { Err(value.to_string()) }
        })
    }

    fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).expect("the page loads");
    }

    fn run(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", Some(json!({"script": script, "args": []}))).expect("the script runs")
    }

    /// Waits until a script returns `true`; says what it waited for otherwise.
    fn wait(&self, what: &str, script: &str) {
        let started = Instant::now();
        while self.run(script) != json!(true) {
            assert!(started.elapsed() < WAIT, "never saw {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn status_of(&self, task: &str) -> Value {
        self.run(&format!(
            "const n = document.querySelector('#graph [data-task=\"{task}\"]'); return n && n.getAttribute('data-status');"
        ))
    }

    /// Whether the Cancel and Resume buttons show.
    fn offered(&self) -> Value {
        self.run("return ['cancel', 'resume'].map(id => !!document.getElementById(id).offsetParent)")
    }

    fn click(&self, css: &str) {
        let found = self.call("POST", "/element", Some(json!({"using": "css selector", "value": css}))).expect(css);
        let id = found.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).expect("an element id");
        self.call("POST", &format!("/element/{id}/click"), None).expect("the click lands");
    }

    fn screenshot(&self, path: &std::path::Path) {
        let png = self.call("GET", "/screenshot", None).expect("a screenshot");
        let bytes = base64(png.as_str().expect("base64 text"));
        std::fs::write(path, bytes).expect("the screenshot is written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Decodes standard base64 (the screenshot WebDriver sends).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let sextets: Vec<u8> = text.bytes().filter_map(value).collect();
    sextets
        .chunks(4)
        .flat_map(|chunk| {
            let n = chunk.iter().fold(0u32, |n, &s| (n << 6) | u32::from(s)) << (6 * (4 - chunk.len()));
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            bytes.into_iter().take(chunk.len().saturating_sub(1))
        })
        .collect()
}

#[test]
fn base64_decodes_what_webdriver_sends() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGk="), b"hi");
    assert_eq!(base64("YWJj"), b"abc");
}

/// Chromium and chromedriver, or `None` (with a message) when either is missing and
/// `RUNNER_REQUIRE_BROWSER` is not set.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let (Some(chromium), Some(driver)) =
        (find(&["chromium", "chromium-browser", "google-chrome"]), find(&["chromedriver"]))
    else {
        assert!(
            std::env::var_os("RUNNER_REQUIRE_BROWSER").is_none(),
            "RUNNER_REQUIRE_BROWSER is set but chromium or chromedriver is missing"
        );
        eprintln!("skipped: no chromium and chromedriver on the PATH (apt-get install -y chromium chromium-driver)");
        return None;
    };
    Some((chromium, driver))
}

/// Waits until run `run` has its first event.
fn started(env: &Env, run: &str) {
    let started = Instant::now();
    while env.records(run).is_empty() {
        assert!(started.elapsed() < WAIT, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_run_is_watched_live_approved_from_the_page_and_replayed() {
    let Some((chromium, driver)) = installed() else { return };
    let _alone = ONE_BROWSER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    let agents = format!(
        "    slow: {{runtime: mock, latency: 2500ms, default: {MARKUP:?}}}\n    quick: {{runtime: mock, latency: 300ms}}"
    );
    let workflow = r#"    - {id: draft, agent: slow, input: "write"}
    - {id: approve, type: human_review, depends_on: [draft], prompt: "Publish it?"}
    - {id: publish, agent: quick, input: "publish", depends_on: [approve]}"#;
    env.write("plan.yaml", &plan("watched", &agents, workflow));
    let server = Server::start(&env, &[]);
    let profile = tempfile::tempdir().expect("a profile folder");
    let browser = Browser::start(&chromium, &driver, profile.path());

    let mut apply = env.runner_process();
    apply.args(["apply", "plan.yaml", "--yes", "--run-id", "br"]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut apply = apply.spawn().expect("apply starts");
    started(&env, "br");
    browser.go(&format!("{}/#/run/br", server.url));
    browser.wait("the graph", "return !!document.querySelector('#graph [data-task=\"publish\"]')");
    assert_ne!(browser.status_of("draft"), json!("succeeded"), "the page opened before the draft was written");
    // The forecast apply recorded: 2.8 s expected (the draft, then the publish), and a review makes
    // the worst unbounded.
    let forecast = browser.run("return document.getElementById('forecast').textContent");
    let forecast = forecast.as_str().unwrap_or_default();
    assert!(
        forecast.contains("of 2.8 s expected (unbounded at worst)") && forecast.contains("tokens 0 of 0"),
        "{forecast}"
    );
    browser.wait(
        "the draft turn green live",
        "return document.querySelector('#graph [data-task=\"draft\"]').getAttribute('data-status') === 'succeeded'",
    );
    assert_eq!(apply.wait().expect("apply ends").code(), Some(3), "the review pauses the run");

    browser.wait("the approve button", "return !!document.querySelector('button[data-action=\"approve\"]')");
    // Once `apply` has let go of the run (the page looks again: its exit adds no event).
    browser.wait("Cancel and Resume", "return !!document.getElementById('resume').offsetParent");
    assert_eq!(browser.offered(), json!([true, true]), "a paused run nobody drives offers Cancel and Resume");
    browser.click("#graph [data-task=\"draft\"]");
    browser.wait(
        "the draft's output in the task panel",
        "return [...document.querySelectorAll('#task-panel pre')].some(p => p.textContent.includes('<script>'))",
    );
    let injected = browser.run(
        "return [window.pwned === undefined, document.querySelectorAll('#task-panel script, #task-panel b').length]",
    );
    assert_eq!(injected, json!([true, 0]), "the output shows as text, its markup inert");

    browser.click("button[data-action=\"approve\"]");
    browser.wait("the run finish", "return document.querySelector('#run-status').textContent.startsWith('succeeded')");
    assert_eq!(browser.status_of("publish"), json!("succeeded"));
    browser.wait("Cancel and Resume to go", "return !document.getElementById('cancel').offsetParent");
    assert_eq!(browser.offered(), json!([false, false]), "a run that has ended offers neither");
    assert_eq!(env.status("br")["status"], "succeeded");
    let types = env.types("br");
    assert!(types.contains(&"ReviewDecided".to_owned()) && types.contains(&"RunResumed".to_owned()), "{types:?}");

    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    browser.screenshot(&target.join("serve-finished.png"));

    // Back to the moment the draft was dispatched: it runs, the rest waits.
    let dispatched = types.iter().position(|t| t == "TaskDispatched").expect("a dispatch") + 1;
    browser.run(&format!(
        "const s = document.getElementById('replay'); s.value = {dispatched}; s.dispatchEvent(new Event('input')); return true;"
    ));
    browser.wait(
        "the replayed state",
        "return document.querySelector('#graph [data-task=\"draft\"]').getAttribute('data-status') === 'running'",
    );
    assert_eq!(browser.status_of("publish"), json!("pending"));
    assert_eq!(browser.status_of("approve"), json!("pending"));
    let position = browser.run("return document.getElementById('replay-position').textContent");
    assert_eq!(position, json!(format!("after event {dispatched} of {}", types.len())));
    browser.screenshot(&target.join("serve-replay.png"));
    eprintln!("screenshots in {}", target.display());
}

/// The map node of task `map`: whether it is expanded, its counts line and its status.
fn map_node(browser: &Browser, map: &str) -> Value {
    browser.run(&format!(
        "const n = document.querySelector('#graph [data-map=\"{map}\"]'); \
         return n && [n.getAttribute('data-expanded'), n.getAttribute('data-counts'), n.getAttribute('data-status')];"
    ))
}

/// The item nodes drawn in the graph, each as `[id, map, status]`.
fn item_nodes(browser: &Browser) -> Value {
    browser.run(
        "return [...document.querySelectorAll('#graph [data-item-of]')].map(n => \
         [n.getAttribute('data-task'), n.getAttribute('data-item-of'), n.getAttribute('data-status')]);",
    )
}

#[test]
fn a_map_is_one_node_with_its_counts_that_expands_into_its_items() {
    let Some((chromium, driver)) = installed() else { return };
    let _alone = ONE_BROWSER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    let agents = r#"    finder: {runtime: mock, latency: 4000ms, responses: {search: '["alpha", "beta", "gamma"]'}}
    reader: {runtime: mock, latency: 2500ms, default: echo, responses: {"read[1]": [{fail: "the page is gone"}]}}"#;
    let workflow = r#"    - {id: search, agent: finder, input: "search"}
    - {id: wide, agent: reader, input: "x", depends_on: [search], when: "tasks.search.output | length > 5"}
    - {id: read, agent: reader, depends_on: [search], for_each: tasks.search.output, max_items: 10, on_failure: skip, input: "notes on {{ item }}"}
    - {id: digest, type: synthesis_gate, inputs: [read]}"#;
    env.write("plan.yaml", &plan("mapped", agents, workflow));
    let server = Server::start(&env, &[]);
    let profile = tempfile::tempdir().expect("a profile folder");
    let browser = Browser::start(&chromium, &driver, profile.path());

    let mut apply = env.runner_process();
    apply.args(["apply", "plan.yaml", "--yes", "--run-id", "mp"]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut apply = apply.spawn().expect("apply starts");
    started(&env, "mp");
    browser.go(&format!("{}/#/run/mp", server.url));
    browser.wait("the map node", "return !!document.querySelector('#graph [data-map=\"read\"]')");
    assert_eq!(
        map_node(&browser, "read"),
        json!(["false", "read: map over tasks.search.output (≤ 10), not expanded yet", "pending"]),
        "before MapExpanded the map is one node marked as a map"
    );

    browser.wait(
        "the map expand live with its items running",
        "return document.querySelector('#graph [data-map=\"read\"]').getAttribute('data-counts') === 'read ×3: 3 running'",
    );
    assert_eq!(map_node(&browser, "read")[2], "running", "a map whose items run is drawn running");
    let drawn = browser.run("return [...document.querySelectorAll('#graph [data-task^=\"read\"]')].length");
    assert_eq!(drawn, json!(1), "collapsed, the map and its items are one node");

    browser.click("#graph [data-map=\"read\"] .map-head");
    browser.wait("the map open", "return document.querySelectorAll('#graph [data-item-of=\"read\"]').length === 3");
    assert_eq!(map_node(&browser, "read")[0], "true");
    assert_eq!(apply.wait().expect("apply ends").code(), Some(5), "a failed item skipped leaves the run partial");
    browser.wait("the run finish", "return document.querySelector('#run-status').textContent.startsWith('partial')");
    browser.wait(
        "the items' last statuses",
        "return document.querySelector('#graph [data-item-of][data-task=\"read[2]\"]').getAttribute('data-status') === 'succeeded'",
    );
    assert_eq!(
        item_nodes(&browser),
        json!([["read[0]", "read", "succeeded"], ["read[1]", "read", "skipped"], ["read[2]", "read", "succeeded"]]),
        "still open, each item its own node"
    );
    assert_eq!(map_node(&browser, "read"), json!(["true", "read ×3: 2 succeeded, 1 skipped", "succeeded"]));
    let panel = browser.run(
        "return [document.querySelector('#task-panel .map-summary').textContent, \
         [...document.querySelectorAll('#task-panel .task-list a')].map(a => a.textContent)]",
    );
    assert_eq!(
        panel,
        json!(["read ×3: 2 succeeded, 1 skipped", ["read[0]", "read[1]", "read[2]"]]),
        "the map's panel lists its items"
    );

    let skips = browser.run(
        "return ['wide', 'read[1]'].map(t => { const n = document.querySelector('#graph [data-task=\"' + t + '\"]'); \
         return [n.getAttribute('data-status'), n.getAttribute('data-skip'), n.textContent.includes('skipped: condition false')]; })",
    );
    assert_eq!(
        skips,
        json!([["skipped", "condition", true], ["skipped", null, false]]),
        "a condition's skip is told apart"
    );

    browser.click("#graph [data-item-of=\"read\"][data-task=\"read[1]\"]");
    browser.wait(
        "the item's panel",
        "return [...document.querySelectorAll('#task-panel pre')].some(p => p.textContent.includes('the page is gone'))",
    );
    let item = browser.run("return document.querySelector('#task-panel').textContent.includes('an item of map read')");
    assert_eq!(item, json!(true));
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    browser.screenshot(&target.join("serve-map-expanded.png"));

    browser.click("#graph [data-map=\"read\"] .map-head");
    browser.wait(
        "the map closed",
        "return document.querySelector('#graph [data-map=\"read\"]').getAttribute('data-expanded') === 'false'",
    );
    assert_eq!(item_nodes(&browser), json!([]), "closed again, no item nodes");
    browser.screenshot(&target.join("serve-map-collapsed.png"));

    // Back to just after the expansion: the items are there, none started; and just before.
    let expanded = env.types("mp").iter().position(|t| t == "MapExpanded").expect("a MapExpanded") + 1;
    let replay = |at: usize, counts: &str| {
        browser.run(&format!(
            "const s = document.getElementById('replay'); s.value = {at}; s.dispatchEvent(new Event('input')); return true;"
        ));
        browser.wait(
            &format!("the map replayed as {counts:?}"),
            &format!(
                "return document.querySelector('#graph [data-map=\"read\"]').getAttribute('data-counts') === {counts:?}"
            ),
        );
    };
    replay(expanded, "read ×3: 3 pending");
    replay(expanded - 1, "read: map over tasks.search.output (≤ 10), not expanded yet");
}

#[test]
fn a_sub_plan_is_a_box_of_its_child_tasks_and_each_item_links_its_child_run() {
    let Some((chromium, driver)) = installed() else { return };
    let _alone = ONE_BROWSER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    std::fs::create_dir_all(env.dir().join("plans")).expect("a plans folder");
    for file in ["competitors.yaml", "plans/company.yaml"] {
        std::fs::copy(examples.join(file), env.dir().join(file)).expect("the example is copied");
    }
    let output = env.runner().args(["apply", "competitors.yaml", "--yes", "--run-id", "sp"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let server = Server::start(&env, &[]);
    let profile = tempfile::tempdir().expect("a profile folder");
    let browser = Browser::start(&chromium, &driver, profile.path());

    browser.go(&format!("{}/#/run/sp", server.url));
    browser.wait("the sub-plan's box", "return !!document.querySelector('#graph [data-subplan=\"brief\"]')");
    let rows = browser.run(
        "return [...document.querySelectorAll('#graph [data-subplan=\"brief\"] [data-child-task]')]\
         .map(n => n.getAttribute('data-child-task'))",
    );
    assert_eq!(rows, json!(["profile", "news", "brief"]), "the child plan's tasks, by phase");
    browser.click("#graph [data-map=\"brief\"] .map-head");
    browser.wait(
        "each item's link to its child run",
        "return document.querySelectorAll('#graph [data-item-of=\"brief\"] a.child-link').length === 3",
    );
    let links = browser
        .run("return [...document.querySelectorAll('#graph a.child-link')].map(a => a.getAttribute('data-child-run'))");
    assert_eq!(links, json!(["sp.brief.0", "sp.brief.1", "sp.brief.2"]));
    browser.screenshot(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-subplan.png"));

    browser.click("#graph [data-task=\"brief[1]\"] a.child-link");
    browser.wait("the child run's page", "return !!document.querySelector('#parent-run a')");
    let parent = browser.run(
        "return [location.hash, document.getElementById('parent-run').textContent, \
         document.querySelector('#parent-run a').getAttribute('href')]",
    );
    assert_eq!(parent, json!(["#/run/sp.brief.1", "a sub-plan of run sp, task brief[1]", "#/run/sp"]));
}
