//! The attempts queue against the real PostgreSQL: a coordinator's remote runtimes and
//! in-process workers carry a plan of command tasks out together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use engine::cluster::{ClusterError, Leases, Plans, Remote, Tally, Worker};
use engine::driver::Driver;
use engine::store::MemoryStore;
use engine::store::postgres::Database;
use engine::{Command, Outcome, RunStatus, Start};
use testkit::pg::TestDatabase;
use testkit::{FakeOpenAi, Step};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A folder with a script that logs the start and end of each run of it (with its input) to
/// `log`, sleeping between; removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("engine-cluster-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temp folder");
        let script = "read -r input\necho \"start $(date +%s%N) $input\" >> \"$1\"\nsleep \"$2\"\n\
                      echo \"end $(date +%s%N) $input\" >> \"$1\"\necho \"did $input\"\n";
        std::fs::write(path.join("record.sh"), script).expect("the script is written");
        Folder(path)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.0.join("log")).unwrap_or_default()
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` independent tasks of a command agent that runs the recording script for `seconds`.
fn plan(folder: &Path, n: usize, seconds: &str, limit: usize) -> Arc<manifest::Plan> {
    let log = folder.join("log");
    let mut yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: cluster}}\nspec:\n  control_logic: {{max_concurrency: {limit}}}\n  \
         agent_definitions:\n    rec: {{runtime: command, command: [sh, record.sh, '{}', '{seconds}']}}\n  workflow:\n",
        log.display()
    );
    for i in 0..n {
        yaml.push_str(&format!("    - {{id: t{i}, agent: rec, input: t{i}}}\n"));
    }
    let loaded = manifest::load_str("cluster.yaml", "cluster", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

fn plans_of(plan: &Arc<manifest::Plan>) -> Plans {
    let plan = Arc::clone(plan);
    Arc::new(move |_run| {
        let plan = Arc::clone(&plan);
        Box::pin(async move { Ok(plan) })
    })
}

/// The most starts without their end at any moment of the log.
fn most_at_once(log: &str) -> usize {
    let mut marks: Vec<(u128, i32)> = log
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            let kind = words.next()?;
            let at: u128 = words.next()?.parse().ok()?;
            Some((at, if kind == "start" { 1 } else { -1 }))
        })
        .collect();
    // An end and a start at the same nanosecond: the end first.
    marks.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in marks {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// Run `run_id`'s coordinator on `db`: its remote runtimes, and a driver (recording in
/// memory, running commands in `workdir`) whose agents use them.
async fn coordinator(db: &Database, run_id: &str, leases: Leases, workdir: PathBuf) -> (Remote, Driver<MemoryStore>) {
    let remote = Remote::start(db, run_id, leases).await.expect("the coordinator starts");
    let driver = Driver::new(run_id.into(), MemoryStore::new(), &[], workdir).with_runtimes(remote.registry());
    (remote, driver)
}

/// The number a `SELECT count(*) ...` gives.
async fn count(db: &Database, sql: &str) -> i64 {
    db.client().query_one(sql, &[]).await.expect("the tables are readable").get(0)
}

fn leases() -> Leases {
    Leases { lease: Duration::from_secs(5), renew: Duration::from_millis(500), poll: Duration::from_millis(200) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_of_four_is_four_across_all_workers() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("limit");
    let plan = plan(&folder.0, 24, "0.1", 4);
    let stop = CancellationToken::new();
    let workers = spawn_workers(&db, &plan, 3, 8, &stop);
    let (_remote, driver) = coordinator(&db, "run-limit", leases(), folder.0.clone()).await;
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("it is driven");
    stop.cancel();
    let done = done_by(workers).await;
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let t3 = state.index_of("t3").expect("t3 exists");
    assert_eq!(state.tasks[t3].output.as_deref(), Some("did t3"));
    assert_eq!(done, 24, "each attempt was carried out once");
    let log = folder.log();
    assert_eq!(log.lines().filter(|l| l.starts_with("start")).count(), 24, "{log}");
    let most = most_at_once(&log);
    assert!(most <= 4, "at most four ran at once in the cluster, saw {most}:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claims_only_the_runtimes_it_accepts() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("runtimes");
    let plan = plan(&folder.0, 6, "0", 6);
    let stop = CancellationToken::new();
    let spawn = |id: &str, runtimes: &[&str]| {
        let worker = Worker::new(id, plans_of(&plan))
            .runtimes(runtimes.iter().map(|&r| r.to_owned()).collect())
            .leases(leases());
        let (db, stop) = (db.clone(), stop.clone());
        tokio::spawn(async move { worker.run(&db, stop).await })
    };
    let llm_only = spawn("llm-only", &["llm"]);
    let commands = spawn("commands", &["command"]);
    let (_remote, driver) = coordinator(&db, "run-runtimes", leases(), folder.0.clone()).await;
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("it is driven");
    stop.cancel();
    let llm_only = llm_only.await.expect("the worker ran").expect("the worker worked");
    let commands = commands.await.expect("the worker ran").expect("the worker worked");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(llm_only.done.load(Ordering::Relaxed), 0);
    assert_eq!(commands.done.load(Ordering::Relaxed), 6);
}

/// A plan of `n` tasks for each of two `llm` agents on the provider `fake` at `base_url`, whose
/// settings add `limits`: `plain` (no tools) and `handy` (it may call a tool: its attempts go
/// to workers that take `llm` attempts, and stay with the coordinator while none does).
fn llm_plan(base_url: &str, limits: &str, n: usize) -> Arc<manifest::Plan> {
    let mut yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: llm}}\nspec:\n  providers:\n    fake: {{kind: openai, \
         base_url: \"{base_url}\", model: m, {limits}}}\n  tools:\n    look: {{description: Look, command: [cat], \
         input_schema: {{type: object}}}}\n  agent_definitions:\n    plain: {{runtime: llm, provider: fake}}\n    \
         handy: {{runtime: llm, provider: fake, tools: [look]}}\n  workflow:\n"
    );
    for agent in ["plain", "handy"] {
        for i in 0..n {
            yaml.push_str(&format!("    - {{id: {agent}{i}, agent: {agent}, input: t{i}}}\n"));
        }
    }
    let loaded = manifest::load_str("llm.yaml", "llm", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

/// Starts `n` workers of `concurrency` slots each on `plan` until `stop`.
fn spawn_workers(
    db: &Database,
    plan: &Arc<manifest::Plan>,
    n: usize,
    concurrency: usize,
    stop: &CancellationToken,
) -> Vec<JoinHandle<Result<Arc<Tally>, ClusterError>>> {
    (0..n)
        .map(|n| {
            let worker = Worker::new(format!("w{n}"), plans_of(plan)).concurrency(concurrency).leases(leases());
            let (db, stop) = (db.clone(), stop.clone());
            tokio::spawn(async move { worker.run(&db, stop).await })
        })
        .collect()
}

/// The attempts the workers carried out, once they stopped.
async fn done_by(workers: Vec<JoinHandle<Result<Arc<Tally>, ClusterError>>>) -> u64 {
    let mut done = 0;
    for worker in workers {
        done += worker.await.expect("the worker ran").expect("the worker worked").done.load(Ordering::Relaxed);
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_max_concurrency_holds_across_workers_and_the_coordinator() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let answer = Step::Delay(Duration::from_millis(200), Box::new(Step::Answer("ok".into())));
    let server = FakeOpenAi::script(vec![answer]);
    let plan = llm_plan(&server.base_url(), "max_concurrency: 2", 4);
    let stop = CancellationToken::new();
    // Three slots each: a worker's own limiter of 2 would let 4 requests run in the cluster.
    let workers = spawn_workers(&db, &plan, 2, 3, &stop);
    let (_remote, driver) = coordinator(&db, "run-llm", leases(), std::env::temp_dir()).await;
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("it is driven");
    stop.cancel();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(server.requests().len(), 8);
    assert_eq!(server.max_in_flight(), 2, "two requests at a time in the cluster, as the provider allows");
    assert_eq!(done_by(workers).await, 8, "the workers carried out every attempt, the tool-using agent's too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_requests_per_minute_holds_across_workers_and_the_coordinator() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let server = FakeOpenAi::script(vec![Step::Answer("ok".into())]);
    let plan = llm_plan(&server.base_url(), "requests_per_minute: 3", 4);
    let stop = CancellationToken::new();
    // Each worker's own window of 3 a minute would let 6 requests through.
    let workers = spawn_workers(&db, &plan, 2, 4, &stop);
    let (_remote, driver) = coordinator(&db, "run-rpm", leases(), std::env::temp_dir()).await;
    let cancel = CancellationToken::new();
    let driving = tokio::spawn(driver.run(Command::Start(Start::plan(Arc::clone(&plan))), cancel.clone()));
    let started = std::time::Instant::now();
    while server.requests().len() < 3 {
        assert!(started.elapsed() < Duration::from_secs(30), "three requests were not sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every attempt is dispatched at once; give the others time to get past a limiter that
    // did not hold them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.requests().len(), 3, "three requests in the run's first minute, from all its processes");
    let waiting = count(&db, "SELECT count(*) FROM runner_request_starts WHERE run_id = 'run-rpm'").await;
    assert_eq!(waiting, 3, "the window holds the three starts");
    cancel.cancel();
    stop.cancel();
    let state = driving.await.expect("the driver ran").expect("it is driven");
    assert_eq!(state.status, RunStatus::Cancelled);
    done_by(workers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_window_counts_each_run_and_provider_apart_across_connections() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let (first, second) = (
        Database::connect(&schema.url).await.expect("the database answers"),
        Database::connect(&schema.url).await.expect("the database answers"),
    );
    let start = |db: &Database, run: &'static str, provider: &'static str| {
        let db = db.clone();
        async move {
            let row = db
                .client()
                .query_one("SELECT runner_request_start($1, $2, 2)", &[&run, &provider])
                .await
                .expect("the window answers");
            row.get::<_, f64>(0)
        }
    };
    assert_eq!(start(&first, "r", "p").await, 0.0);
    assert_eq!(start(&second, "r", "p").await, 0.0);
    let wait = start(&first, "r", "p").await;
    assert!(wait > 59.0 && wait <= 60.0, "the third start in a minute waits for the first to leave it: {wait}");
    assert!(start(&second, "r", "p").await > 0.0, "so does one from another connection");
    assert_eq!(start(&second, "r", "other").await, 0.0, "another provider has a window of its own");
    assert_eq!(start(&first, "s", "p").await, 0.0, "and so has another run");
    let age = "UPDATE runner_request_starts SET started_at = started_at - interval '61 seconds' WHERE run_id = 'r'";
    first.client().execute(age, &[]).await.expect("the starts are aged");
    assert_eq!(start(&second, "r", "p").await, 0.0, "starts older than a minute no longer count");
    let left = count(&first, "SELECT count(*) FROM runner_request_starts WHERE run_id = 'r'").await;
    assert_eq!(left, 1, "and are deleted: only the new start is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_gives_its_attempts_back_at_once() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("stop");
    let plan = plan(&folder.0, 2, "30", 2);
    // A lease far longer than the test: only the release can queue the attempts again.
    let long =
        Leases { lease: Duration::from_secs(600), renew: Duration::from_secs(200), poll: Duration::from_millis(100) };
    let stop = CancellationToken::new();
    let worker = Worker::new("w", plans_of(&plan)).leases(long);
    let working = tokio::spawn({
        let (db, stop) = (db.clone(), stop.clone());
        async move { worker.run(&db, stop).await }
    });
    let (_remote, driver) = coordinator(&db, "run-stop", long, folder.0.clone()).await;
    let driving = tokio::spawn(driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new()));
    let count = |state: &'static str| {
        let db = db.clone();
        async move {
            let sql = "SELECT count(*) FROM runner_attempts WHERE state = $1 AND claim IS NOT NULL = ($1 = 'claimed')";
            db.client().query_one(sql, &[&state]).await.expect("the queue is readable").get::<_, i64>(0)
        }
    };
    let started = std::time::Instant::now();
    while count("claimed").await < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "the worker did not claim both attempts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    working.await.expect("the worker ran").expect("the worker stopped cleanly");
    assert_eq!(count("queued").await, 2, "both attempts are queued again, without a claim");
    driving.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_withdraws_the_attempts_workers_still_run() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("ended");
    let log = folder.0.join("log");
    // Two tasks that take a minute, and one that fails the run after a moment.
    let yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: ended}}\nspec:\n  agent_definitions:\n    \
         rec: {{runtime: command, command: [sh, record.sh, '{}', '60']}}\n    \
         broken: {{runtime: command, command: [sh, -c, 'sleep 1; exit 3']}}\n  workflow:\n    \
         - {{id: slow1, agent: rec, input: slow1}}\n    - {{id: slow2, agent: rec, input: slow2}}\n    \
         - {{id: breaks, agent: broken, on_failure: fail}}\n",
        log.display()
    );
    let loaded = manifest::load_str("ended.yaml", "ended", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let plan = Arc::new(loaded.plan.expect("the plan loads"));
    let stop = CancellationToken::new();
    let worker = Worker::new("w", plans_of(&plan)).leases(leases());
    let tally = worker.tally();
    let working = tokio::spawn({
        let (db, stop) = (db.clone(), stop.clone());
        async move { worker.run(&db, stop).await }
    });
    let (remote, driver) = coordinator(&db, "run-ended", leases(), folder.0.clone()).await;
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(30), run).await.expect("the run ends").expect("it is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Failed));
    remote.close().await;
    let left = count(&db, "SELECT count(*) FROM runner_attempts WHERE run_id = 'run-ended'").await;
    assert_eq!(left, 0, "the run's attempts left the queue with it");
    // Renewals come every 500 ms: the worker stops both slow attempts at its next one, not
    // after their minute.
    let started = std::time::Instant::now();
    while tally.withdrawn.load(Ordering::Relaxed) < 2 {
        assert!(started.elapsed() < Duration::from_secs(20), "the worker still runs the withdrawn attempts");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    let tally = working.await.expect("the worker ran").expect("the worker worked");
    assert_eq!(
        (tally.done.load(Ordering::Relaxed), tally.lost.load(Ordering::Relaxed)),
        (1, 0),
        "only `breaks` replied"
    );
    let log = folder.log();
    assert_eq!(log.lines().filter(|l| l.starts_with("start")).count(), 2, "{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with("end")).count(), 0, "the slow tasks were stopped: {log}");
}

/// A plan of one task whose `llm` agent on the provider at `base_url` may call `log`, a tool that
/// appends its arguments to `calls` and answers `logged`.
fn tool_plan(base_url: &str, calls: &Path) -> Arc<manifest::Plan> {
    let yaml = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: tools}}\nspec:\n  providers:\n    fake: {{kind: openai, \
         base_url: \"{base_url}\", model: m, stream: false}}\n  tools:\n    log: {{description: Log, command: [sh, -c, \
         'cat >> \"$0\"; echo >> \"$0\"; echo logged', '{}']}}\n  agent_definitions:\n    \
         handy: {{runtime: llm, provider: fake, tools: [log]}}\n  workflow:\n    - {{id: t, agent: handy, input: go}}\n",
        calls.display()
    );
    let loaded = manifest::load_str("tools.yaml", "tools", &yaml, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(loaded.plan.expect("the plan loads"))
}

/// The turn a request asks for: one more than the answers it holds.
fn turn_of(body: &serde_json::Value) -> usize {
    body["messages"].as_array().map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count()) + 1
}

/// Calls `log` on turn 1 and answers on turn 2; the first request waits `first`, any later
/// one for turn 1 `again`.
fn tool_server(first: Duration, again: Duration) -> FakeOpenAi {
    FakeOpenAi::start(move |body, n| match (turn_of(body), n) {
        (1, n) => {
            let call = Step::ToolCalls(vec![("log".into(), r#"{"line": 1}"#.into())]);
            Step::Delay(if n == 0 { first } else { again }, Box::new(call))
        }
        _ => Step::Answer("all logged".into()),
    })
}

/// The events of `type` in a driver's records.
fn of_type(records: &[engine::event::Record], name: &str) -> usize {
    records.iter().filter(|r| r.event.name() == name).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_using_agent_runs_on_a_worker_whose_journal_the_coordinator_records() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("tools");
    let server = tool_server(Duration::ZERO, Duration::ZERO);
    let plan = tool_plan(&server.base_url(), &folder.0.join("calls"));
    let stop = CancellationToken::new();
    let workers = spawn_workers(&db, &plan, 1, 2, &stop);
    // The worker is up before the attempt is dispatched, so it is the one to run it.
    while count(&db, "SELECT count(*) FROM runner_workers").await == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let store = MemoryStore::new();
    let remote = Remote::start(&db, "run-tools", leases()).await.expect("the coordinator starts");
    let driver = Driver::new("run-tools".into(), store.clone(), &[], folder.0.clone()).with_runtimes(remote.registry());
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("it is driven");
    stop.cancel();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let t = state.index_of("t").expect("t exists");
    assert_eq!(state.tasks[t].output.as_deref(), Some("all logged"));
    assert_eq!(done_by(workers).await, 1, "the worker carried the attempt out");
    let records = store.records();
    assert_eq!(of_type(&records, "ModelTurn"), 2, "both turns are in the coordinator's log");
    assert_eq!(of_type(&records, "ToolCallStarted"), 1);
    assert_eq!(of_type(&records, "ToolCallFinished"), 1);
    assert_eq!(std::fs::read_to_string(folder.0.join("calls")).unwrap_or_default(), "{\"line\":1}\n");
    assert_eq!(count(&db, "SELECT count(*) FROM runner_journal").await, 0, "no journal entry is left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_using_agent_stays_with_the_coordinator_while_no_worker_takes_llm_attempts() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("tools-here");
    let server = tool_server(Duration::ZERO, Duration::ZERO);
    let plan = tool_plan(&server.base_url(), &folder.0.join("calls"));
    let stop = CancellationToken::new();
    let worker = Worker::new("commands", plans_of(&plan)).runtimes(vec!["command".into()]).leases(leases());
    let commands = tokio::spawn({
        let (db, stop) = (db.clone(), stop.clone());
        async move { worker.run(&db, stop).await }
    });
    let (_remote, driver) = coordinator(&db, "run-here", leases(), folder.0.clone()).await;
    let run = driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new());
    let state = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("it is driven");
    stop.cancel();
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    assert_eq!(done_by(vec![commands]).await, 0, "the worker that takes only commands ran nothing");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_claim_was_taken_over_records_no_turn_and_starts_no_tool() {
    let Some(schema) = TestDatabase::new("cluster") else { return };
    let db = Database::connect(&schema.url).await.expect("the database answers");
    let folder = Folder::new("fenced");
    // The first request is answered after two seconds: long enough for its claim to be taken
    // over, too short for its worker's renewal (every 4 s) to notice before the answer comes.
    // The second worker's request for the same turn takes three, so the attempt is still under
    // way when the first worker's answer comes and it tries to record it.
    let server = tool_server(Duration::from_secs(2), Duration::from_secs(3));
    let plan = tool_plan(&server.base_url(), &folder.0.join("calls"));
    let stop = CancellationToken::new();
    let slow =
        Leases { lease: Duration::from_secs(5), renew: Duration::from_secs(4), poll: Duration::from_millis(200) };
    // One slot, busy with the attempt until its answer comes: the first worker cannot claim it again.
    let first = Worker::new("first", plans_of(&plan)).concurrency(1).leases(slow);
    let first_tally = first.tally();
    let first = tokio::spawn({
        let (db, stop) = (db.clone(), stop.clone());
        async move { first.run(&db, stop).await }
    });
    while count(&db, "SELECT count(*) FROM runner_workers").await == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let store = MemoryStore::new();
    let remote = Remote::start(&db, "run-fenced", leases()).await.expect("the coordinator starts");
    let driver =
        Driver::new("run-fenced".into(), store.clone(), &[], folder.0.clone()).with_runtimes(remote.registry());
    let driving = tokio::spawn(driver.run(Command::Start(Start::plan(Arc::clone(&plan))), CancellationToken::new()));
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // As if the first worker had been paused past its lease and another had claimed the attempt:
    // a new claim token, and a lease that has run out, so the second worker claims it at once.
    let taken = "UPDATE runner_attempts SET claim = nextval('runner_attempt_claims'), \
                 lease_until = now() - interval '1 second' WHERE state = 'claimed'";
    assert_eq!(db.client().execute(taken, &[]).await.expect("the claim is taken over"), 1);
    let second = spawn_workers(&db, &plan, 1, 2, &stop);
    let state = tokio::time::timeout(Duration::from_secs(60), driving).await.expect("the run ends");
    let state = state.expect("the driver ran").expect("it is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    let ended = |tally: &Tally| tally.refused.load(Ordering::Relaxed) + tally.lost.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    while ended(&first_tally) == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the first worker's attempt did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    let first = first.await.expect("the worker ran").expect("the worker worked");
    assert_eq!(first.done.load(Ordering::Relaxed), 0, "the first worker's reply was not accepted");
    assert_eq!(done_by(second).await, 1, "the second worker carried the attempt out");
    let records = store.records();
    assert_eq!(of_type(&records, "ModelTurn"), 2, "each turn recorded once: the first worker's turn 1 was refused");
    assert_eq!(of_type(&records, "ToolCallStarted"), 1);
    assert_eq!(
        std::fs::read_to_string(folder.0.join("calls")).unwrap_or_default(),
        "{\"line\":1}\n",
        "the tool ran once, for the worker whose claim was current"
    );
    // The cut request is the only one asked twice.
    let turns: Vec<usize> = server.requests().iter().map(|r| turn_of(&r.body)).collect();
    assert_eq!(turns, [1, 1, 2]);
}
