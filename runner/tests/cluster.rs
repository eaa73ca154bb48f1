//! Workers and coordinators as real processes on the real PostgreSQL (each test in a schema
//! of its own): a plan of a few hundred command tasks that each append a line to a file, run
//! by three `runner worker`s and a coordinator while processes are killed and paused. Every
//! run finishes, no task is recorded as succeeded twice, no task runs again once its success
//! is recorded, and a worker paused past its lease has its late result refused.

mod support;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Env, plan};
use testkit::pg::TestDatabase;
use testkit::{FakeOpenAi, Step};

/// Every lease in these tests, in milliseconds: short, so that takeovers come quickly.
const LEASE_MS: &str = "1500";
/// The run every test drives.
const RUN: &str = "r";

/// Appends `start <time> <run>/<task>/<attempt>` to the file named by `$1` (the time as
/// records stamp it, so the two compare as text; the attempt from the mark every program of
/// an attempt carries, as the input may never come if its worker dies at once), sleeps `$2`
/// seconds, and prints `did <task>`.
const TASK_SCRIPT: &str = "echo \"start $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $RUNNER_ATTEMPT\" >> \"$1\"\n\
                           read -r task\n\
                           sleep \"$2\"\n\
                           echo \"did $task\"\n";

/// Three workers, a coordinator, and the database they share.
struct Cluster {
    env: Env,
    db: TestDatabase,
    workers: Vec<Child>,
    tasks: usize,
}

impl Cluster {
    /// A plan of `tasks` independent tasks that each take `seconds`, and three workers of four
    /// attempts each; `None` when no database answers.
    fn new(test: &str, tasks: usize, seconds: &str) -> Option<Cluster> {
        Cluster::with_plan(test, tasks, |env| {
            let script = env.write("task.sh", TASK_SCRIPT);
            let lines = env.dir().join("lines.txt");
            let agent = format!("    slow: {{runtime: command, command: [sh, {script:?}, {lines:?}, '{seconds}']}}");
            let workflow: Vec<String> =
                (0..tasks).map(|i| format!("    - {{id: t{i}, agent: slow, input: t{i}}}")).collect();
            plan("cluster", &agent, &workflow.join("\n"))
        })
    }

    /// Three workers of four attempts each, for the plan of `tasks` tasks that `write` gives
    /// (it may write files into the test's folder first); `None` when no database answers.
    fn with_plan(test: &str, tasks: usize, write: impl FnOnce(&Env) -> String) -> Option<Cluster> {
        let db = TestDatabase::new(test)?;
        let env = Env::new();
        let yaml = write(&env);
        env.write("plan.yaml", &yaml);
        // The tables exist before anything polls them.
        env.runner().args(["runs", "--store", &db.url]).assert().success();
        let mut cluster = Cluster { env, db, workers: Vec::new(), tasks };
        for n in 0..3 {
            let worker = cluster.process(&format!("worker-{n}"), &["worker", "--concurrency", "4"]);
            cluster.workers.push(worker);
        }
        Some(cluster)
    }

    /// `runner ARGS --store URL` with the short leases, its stderr in `<name>.err`.
    fn process(&self, name: &str, args: &[&str]) -> Child {
        let stderr = File::create(self.err(name)).expect("the stderr file is created");
        self.env
            .runner_process()
            .args(args)
            .args(["--store", &self.db.url])
            .env("RUNNER_LEASE_MS", LEASE_MS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("runner starts")
    }

    fn err(&self, name: &str) -> PathBuf {
        self.env.dir().join(format!("{name}.err"))
    }

    /// What a process wrote to stderr so far.
    fn stderr(&self, name: &str) -> String {
        std::fs::read_to_string(self.err(name)).unwrap_or_default()
    }

    /// The index of the worker that holds the run's lease, if one does.
    fn coordinating_worker(&self) -> Option<usize> {
        let sql = format!("SELECT owner FROM runner_runs WHERE run_id = '{RUN}' AND lease_until > now()");
        let owner = self.db.column(&sql).into_iter().flatten().next()?;
        self.workers.iter().position(|w| owner.ends_with(&format!(" pid {}", w.id())))
    }

    /// `runner apply --detach`: the run is recorded and left to the workers.
    fn detach(&self) {
        let output = self
            .env
            .runner()
            .args(["apply", "plan.yaml", "--yes", "--run-id", RUN, "--detach", "--store", &self.db.url])
            .output()
            .expect("runner runs");
        assert!(output.status.success(), "apply --detach: {}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.lines().last(), Some(RUN), "apply --detach prints the run id last");
    }

    /// The coordinator: `apply` of the plan, working no attempts itself.
    fn coordinator(&self) -> Child {
        self.process("coordinator", &["apply", "plan.yaml", "--yes", "--run-id", RUN, "--no-local-work"])
    }

    /// The run's records, in order.
    fn records(&self) -> Vec<Value> {
        let sql = format!("SELECT record FROM runner_events WHERE run_id = '{RUN}' ORDER BY seq");
        self.db.column(&sql).into_iter().flatten().filter_map(|text| serde_json::from_str(&text).ok()).collect()
    }

    /// The time each task's success was recorded at, by task; a task recorded twice fails.
    fn successes(&self) -> BTreeMap<String, String> {
        let mut successes = BTreeMap::new();
        for record in self.records().iter().filter(|r| r["type"] == "TaskSucceeded") {
            let (task, at) = (record["task"].as_str().unwrap_or_default(), record["at"].as_str().unwrap_or_default());
            let earlier = successes.insert(task.to_owned(), at.to_owned());
            assert!(earlier.is_none(), "task `{task}` is recorded as succeeded twice");
        }
        successes
    }

    /// The run's status as its row has it.
    fn status(&self) -> String {
        let sql = format!("SELECT status FROM runner_runs WHERE run_id = '{RUN}'");
        self.db.column(&sql).into_iter().flatten().next().unwrap_or_default()
    }

    /// How many attempts the process `pid` holds claims on.
    fn claimed_by(&self, pid: u32) -> usize {
        let sql = format!("SELECT count(*) FROM runner_attempts WHERE state = 'claimed' AND worker LIKE '% pid {pid}'");
        self.db.column(&sql).into_iter().flatten().next().and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Waits (polling) until `done` holds, failing after 40 s with `what`.
    fn wait_until(&self, what: &str, done: impl Fn(&Cluster) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(started.elapsed() < Duration::from_secs(40), "not within 40 s: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the run to succeed, stops the workers (SIGTERM), and checks what happened:
    /// every task recorded as succeeded once, and started only before that was recorded.
    fn finish(mut self) -> Cluster {
        self.wait_until("the run succeeds", |c| c.status() == "succeeded");
        for worker in &mut self.workers {
            if matches!(worker.try_wait(), Ok(None)) {
                signal(worker, "TERM");
                let _ = worker.wait();
            }
        }
        let successes = self.successes();
        assert_eq!(successes.len(), self.tasks, "every task succeeded");
        let lines = std::fs::read_to_string(self.env.dir().join("lines.txt")).expect("the tasks wrote lines");
        let mut starts = 0;
        for line in lines.lines() {
            let mut words = line.split(' ');
            let (Some("start"), Some(at), Some(mark)) = (words.next(), words.next(), words.next()) else {
                panic!("a line the script does not write: {line}");
            };
            let task = mark.split('/').nth(1).unwrap_or_default();
            let Some(succeeded) = successes.get(task) else { panic!("a line of a task the plan lacks: {line}") };
            assert!(
                at <= succeeded.as_str(),
                "task `{task}` ran at {at}, after its success was recorded at {succeeded}"
            );
            starts += 1;
        }
        assert!(starts >= self.tasks, "each task ran at least once");
        self
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _ = worker.kill();
            let _ = worker.wait();
        }
    }
}

/// Sends `SIG<name>` to a child.
fn signal(child: &Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {}", child.id());
}

#[test]
fn a_detached_run_is_coordinated_by_a_worker_and_by_another_when_that_one_dies() {
    let Some(mut cluster) = Cluster::new("detached", 160, "0.05") else { return };
    cluster.detach();
    cluster.wait_until("a worker coordinates the run and 20 tasks succeed", |c| {
        c.coordinating_worker().is_some() && c.successes().len() >= 20
    });
    let first = cluster.coordinating_worker().expect("a worker coordinates the run");
    assert!(cluster.successes().len() < 160, "the run is still under way when its coordinator is killed");
    cluster.workers[first].kill().expect("the coordinating worker is killed");
    let _ = cluster.workers[first].wait();
    let cluster = cluster.finish();
    let records = cluster.records();
    let first_attempts = records.iter().filter(|r| r["type"] == "TaskDispatched" && r["attempt"] == 1).count();
    assert_eq!(first_attempts, 160, "a detached run's tasks are dispatched by its coordinator, from attempt 1");
    let second = (0..3)
        .filter(|&n| n != first)
        .find(|n| cluster.stderr(&format!("worker-{n}")).contains("coordinating run `r`"));
    assert!(second.is_some(), "another worker took the run over");
}

#[test]
fn dropped_database_connections_end_no_process_and_the_run_ends_as_it_would() {
    let Some(mut cluster) = Cluster::new("dropped", 200, "0.05") else { return };
    let mut coordinator = cluster.coordinator();
    // Six times during the run, every connection of the test is ended, as a database restart
    // or a failover ends them: the workers and the coordinator connect again and go on.
    for round in 1..=6 {
        cluster.wait_until("more tasks succeed", |c| c.successes().len() >= round * 25);
        assert!(cluster.db.terminate_connections() > 0, "round {round}: the processes had connections");
    }
    cluster.wait_until("the run succeeds", |c| c.status() == "succeeded");
    assert_eq!(coordinator.wait().expect("the coordinator ends").code(), Some(0), "{}", cluster.stderr("coordinator"));
    // Idle now, the workers ride out one more drop.
    cluster.db.terminate_connections();
    std::thread::sleep(Duration::from_millis(500));
    for (n, worker) in cluster.workers.iter_mut().enumerate() {
        let status = worker.try_wait().expect("a worker's status");
        assert!(
            status.is_none(),
            "worker {n} exited by itself ({status:?}): {}",
            cluster.stderr(&format!("worker-{n}"))
        );
    }
    let cluster = cluster.finish();
    let dispatched = cluster.records().iter().filter(|r| r["type"] == "TaskDispatched").count();
    assert_eq!(dispatched, 200, "no attempt failed and was dispatched again because a connection dropped");
}

#[test]
fn a_killed_worker_and_a_killed_coordinator_lose_no_task_and_repeat_none_done() {
    let Some(mut cluster) = Cluster::new("killed", 240, "0.05") else { return };
    let mut coordinator = cluster.coordinator();
    let pid = cluster.workers[0].id();
    cluster.wait_until("40 tasks succeed and worker 0 holds claims", |c| {
        c.successes().len() >= 40 && c.claimed_by(pid) > 0
    });
    cluster.workers[0].kill().expect("worker 0 is killed");
    let _ = cluster.workers[0].wait();
    cluster.wait_until("100 tasks succeed", |c| c.successes().len() >= 100);
    assert!(cluster.successes().len() < 240, "the run is still under way when its coordinator is killed");
    coordinator.kill().expect("the coordinator is killed");
    let _ = coordinator.wait();
    let cluster = cluster.finish();
    let took_over = (1..3).any(|n| cluster.stderr(&format!("worker-{n}")).contains("coordinating run `r`"));
    assert!(took_over, "a worker coordinated the run after its coordinator died");
}

#[test]
fn a_worker_paused_past_its_lease_has_its_late_result_refused() {
    let Some(cluster) = Cluster::new("paused", 120, "0.3") else { return };
    let mut coordinator = cluster.coordinator();
    let pid = cluster.workers[1].id();
    cluster.wait_until("worker 1 holds claims", |c| c.claimed_by(pid) > 0);
    signal(&cluster.workers[1], "STOP");
    // Its claims run out and other workers claim those attempts again.
    cluster.wait_until("worker 1's claims are taken over", |c| c.claimed_by(pid) == 0);
    signal(&cluster.workers[1], "CONT");
    let cluster = cluster.finish();
    assert_eq!(coordinator.wait().expect("the coordinator ends").code(), Some(0), "{}", cluster.stderr("coordinator"));
    let stderr = cluster.stderr("worker-1");
    assert!(
        stderr.contains("was refused") || stderr.contains("lost the claim"),
        "the paused worker's late result was refused:\n{stderr}"
    );
}

#[test]
fn a_run_that_fails_stops_the_attempts_its_workers_still_run() {
    let Some(mut cluster) = Cluster::with_plan("failing", 3, |env| {
        let script = env.write("task.sh", TASK_SCRIPT);
        let lines = env.dir().join("lines.txt");
        let agents = format!(
            "    slow: {{runtime: command, command: [sh, {script:?}, {lines:?}, '60']}}\n    \
             broken: {{runtime: command, command: [sh, -c, 'sleep 1; exit 3']}}"
        );
        let workflow = "    - {id: slow1, agent: slow, input: slow1}\n    - {id: slow2, agent: slow, input: slow2}\n    \
                        - {id: breaks, agent: broken, on_failure: fail}";
        plan("failing", &agents, workflow)
    }) else {
        return;
    };
    let mut coordinator = cluster.coordinator();
    assert_eq!(coordinator.wait().expect("the coordinator ends").code(), Some(1), "{}", cluster.stderr("coordinator"));
    assert_eq!(cluster.status(), "failed");
    let sql = format!("SELECT count(*) FROM runner_attempts WHERE run_id = '{RUN}'");
    assert_eq!(cluster.db.column(&sql), [Some("0".to_owned())], "the run left nothing in the queue");
    // The workers stop the slow attempts at their next renewal, not after their minute.
    cluster.wait_until("the workers stop both slow attempts", |c| {
        (0..3).map(|n| c.stderr(&format!("worker-{n}")).matches("was withdrawn").count()).sum::<usize>() == 2
    });
    for worker in &mut cluster.workers {
        signal(worker, "TERM");
        let _ = worker.wait();
    }
    let withdrawn: usize = (0..3)
        .filter_map(|n| {
            let stderr = cluster.stderr(&format!("worker-{n}"));
            let last = stderr.lines().rfind(|l| l.contains(" stopped: "))?.to_owned();
            last.split(", ").find_map(|part| part.strip_suffix(" withdrawn")?.parse::<usize>().ok())
        })
        .sum();
    assert_eq!(withdrawn, 2, "the workers stopped both slow attempts as withdrawn");
}

#[test]
fn a_providers_requests_per_minute_holds_for_the_run_across_worker_processes() {
    let server = FakeOpenAi::script(vec![Step::Answer("ok".into())]);
    let provider = format!(
        "  providers:\n    fake: {{kind: openai, base_url: \"{}\", model: m, requests_per_minute: 4}}\n",
        server.base_url()
    );
    let Some(cluster) = Cluster::with_plan("rpm", 12, |_| {
        let workflow: Vec<String> = (0..12).map(|i| format!("    - {{id: t{i}, agent: ask, input: t{i}}}")).collect();
        let yaml = plan("rpm", "    ask: {runtime: llm, provider: fake}", &workflow.join("\n"));
        yaml.replace("  agent_definitions:", &format!("{provider}  agent_definitions:"))
    }) else {
        return;
    };
    cluster.detach();
    // Three workers of four slots, each with a window of 4 a minute of its own, would send 12.
    cluster.wait_until("four requests are sent", |_| server.requests().len() >= 4);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(server.requests().len(), 4, "four requests in the run's first minute, from all its workers");
    cluster.env.runner().args(["cancel", RUN, "--store", &cluster.db.url]).assert().success();
    cluster.wait_until("the run is cancelled", |c| c.status() == "cancelled");
}

#[test]
fn detach_and_no_local_work_without_a_database_are_usage_errors() {
    let env = Env::new();
    env.write("plan.yaml", &plan("solo", "    echo: {runtime: mock}", "    - {id: a, agent: echo, input: hi}"));
    for flag in ["--detach", "--no-local-work"] {
        let output = env.runner().args(["apply", "plan.yaml", "--yes", flag]).env_remove("RUNNER_STORE").output();
        let output = output.expect("runner runs");
        assert_eq!(output.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("need the runs in PostgreSQL"), "{flag}: {stderr}");
        assert!(!env.home().join("runs").exists(), "{flag}: no run was created");
    }
}

#[test]
fn a_worker_without_a_database_says_what_it_needs() {
    let env = Env::new();
    let output = env.runner().args(["worker"]).env_remove("RUNNER_STORE").output().expect("runner runs");
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("a worker needs the database the runs are in"), "{stderr}");
}

#[test]
fn resume_detach_hands_a_paused_run_to_the_workers_and_needs_a_database() {
    let env = Env::new();
    env.write("plan.yaml", &plan("solo", "    echo: {runtime: mock}", "    - {id: a, agent: echo, input: hi}"));
    let output = env.runner().args(["resume", "r", "--detach"]).env_remove("RUNNER_STORE").output();
    let output = output.expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--detach needs the runs in PostgreSQL"));

    // A review gate pauses the run with nothing else to do; once approved, `resume --detach`
    // records the run as going on and lets go of it, and a worker coordinates it to the end.
    let Some(db) = TestDatabase::new("resume_detach") else { return };
    let workflow = "    - {id: a, agent: echo, input: hi}\n    - {id: gate, type: human_review, prompt: go on?, depends_on: [a]}\n    \
                    - {id: b, agent: echo, input: after, depends_on: [gate]}";
    env.write("plan.yaml", &plan("paused", "    echo: {runtime: mock}", workflow));
    let applied = env.runner().args(["apply", "plan.yaml", "--yes", "--run-id", "p", "--store", &db.url]).output();
    assert_eq!(applied.expect("runner runs").status.code(), Some(3), "the run pauses for the review");
    let early = env.runner().args(["resume", "p", "--detach", "--store", &db.url]).output().expect("runner runs");
    assert_eq!(early.status.code(), Some(3), "nothing to resume before the decision");
    assert!(String::from_utf8_lossy(&early.stderr).contains("still waits for a person"));
    env.runner().args(["approve", "p", "gate", "--store", &db.url]).assert().success();
    let handed = env.runner().args(["resume", "p", "--detach", "--store", &db.url]).output().expect("runner runs");
    assert_eq!(handed.status.code(), Some(0), "{}", String::from_utf8_lossy(&handed.stderr));
    assert_eq!(String::from_utf8_lossy(&handed.stdout).trim(), "p", "it prints the run id");
    let row = "SELECT status || ' ' || coalesce(lease_until > now(), false)::text FROM runner_runs WHERE run_id = 'p'";
    assert_eq!(db.column(row), [Some("running false".to_owned())], "going on, and nobody holds it");
    let mut worker = env
        .runner_process()
        .args(["worker", "--store", &db.url])
        .env("RUNNER_LEASE_MS", LEASE_MS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner starts");
    let started = Instant::now();
    let status = "SELECT status FROM runner_runs WHERE run_id = 'p'";
    while db.column(status) != [Some("succeeded".to_owned())] {
        assert!(started.elapsed() < Duration::from_secs(40), "a worker did not finish the run");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&worker, "TERM");
    let _ = worker.wait();
}

#[test]
fn a_worker_that_would_do_nothing_is_a_usage_error() {
    let Some(db) = TestDatabase::new("idle_worker") else { return };
    let env = Env::new();
    let output = env.runner().args(["worker", "--concurrency", "0", "--no-takeover", "--store", &db.url]).output();
    let output = output.expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("would do nothing"));
}
