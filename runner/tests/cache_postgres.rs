//! The task cache of runs in PostgreSQL (the `runner_cache` table), against the real server (a
//! schema per test): a plan re-applied with `--reuse` from another machine's runner home asks
//! the model only for what changed; two processes apply at once; a damaged row is reported and
//! never trusted; `runner cache` lists, prunes and clears the table; the size cap holds.
//! Skipped without a server, unless `RUNNER_REQUIRE_POSTGRES=1`.

#[path = "support/llm.rs"]
mod llm_support;
mod support;

use llm_support::{Out, is_agent, llm_agent, llm_plan, role, runner, user};
use support::{Env, mock_chain};
use testkit::pg::TestDatabase;
use testkit::{FakeOpenAi, Step};

/// `runner ARGS --store URL` in `env`.
fn stored(env: &Env, db: &TestDatabase, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--store", &db.url]);
    runner(env, &all)
}

/// How many rows the cache table holds.
fn rows(db: &TestDatabase) -> usize {
    let counted = db.column("SELECT count(*) FROM runner_cache").into_iter().flatten().next();
    counted.and_then(|n| n.parse().ok()).expect("a count")
}

/// A synthesis of two searches, then a writer: the writer's brief is `brief`.
fn research(base_url: &str, brief: &str) -> String {
    let agents = ["news", "people", "synth", "writer"].map(llm_agent).join("\n");
    let workflow = format!(
        r#"    - {{id: search_news, agent: news, input: "NEWS about XyzzyCorp"}}
    - {{id: search_people, agent: people, input: "PEOPLE at XyzzyCorp"}}
    - id: synthesize
      agent: synth
      input: "SYNTH {{{{ tasks.search_news.output }}}} / {{{{ tasks.search_people.output }}}}"
      depends_on: [search_news, search_people]
    - id: write_brief
      agent: writer
      input: "{brief} {{{{ tasks.synthesize.output }}}}"
      depends_on: [synthesize]"#
    );
    llm_plan("research", base_url, &agents, &workflow, "")
}

#[test]
fn a_plan_reapplied_with_reuse_from_another_machine_asks_only_for_what_changed() {
    let Some(db) = TestDatabase::new("cache_reuse") else { return };
    let server = FakeOpenAi::start(|body, _| {
        let input: String = user(body).chars().take(60).collect();
        Step::Answer(format!("[{}] {input}", role(body)))
    });
    let first_machine = Env::new();
    first_machine.write("plan.yaml", &research(&server.base_url(), "BRIEF one page:"));
    let first = stored(&first_machine, &db, &["apply", "plan.yaml", "--yes"]);
    assert_eq!(first.code, Some(0), "{first}");
    assert_eq!(rows(&db), 4, "each success is a row");
    assert!(!first_machine.home().join("cache").exists(), "nothing is cached under RUNNER_HOME");

    // Another machine (another runner home) on the same database, with only the last input
    // changed: the table gives the rest.
    let second_machine = Env::new();
    second_machine.write("plan.yaml", &research(&server.base_url(), "BRIEF half a page:"));
    let second = stored(&second_machine, &db, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(second.code, Some(0), "{second}");
    let asked: Vec<_> = server.requests().into_iter().skip(4).map(|r| r.body).collect();
    assert_eq!(asked.len(), 1, "only the changed task is asked for: {asked:#?}");
    assert!(is_agent(&asked[0], "writer"), "{asked:#?}");
    assert!(second.stdout.contains("Reuse: 3 of 4 tasks from the cache"), "{second}");
    assert!(second.stdout.contains("run    write_brief: its rendered input changed since run"), "{second}");
    assert!(second.stdout.contains("reused:   3 task outputs from the cache"), "{second}");
    assert_eq!(rows(&db), 5, "the writer's new output is stored beside the old one");

    let list = stored(&second_machine, &db, &["cache", "list"]);
    assert_eq!(list.code, Some(0), "{list}");
    assert_eq!(list.stdout.lines().count(), 5, "{list}");
    assert!(list.stderr.contains("5 stored outputs") && list.stderr.contains("runner_cache table"), "{list}");
    let key = list.stdout.lines().next().and_then(|l| l.split_whitespace().next()).expect("a key").to_owned();
    let show = stored(&second_machine, &db, &["cache", "show", &key[..12]]);
    assert!(show.stdout.contains(&format!("\"key\": \"{key}\"")), "{show}");
}

#[test]
fn two_processes_reuse_at_once_and_a_damaged_row_is_reported_and_never_trusted() {
    let Some(db) = TestDatabase::new("cache_damage") else { return };
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(60, ""));
    assert_eq!(stored(&env, &db, &["apply", "plan.yaml", "--yes"]).code, Some(0));
    assert_eq!(rows(&db), 60);
    let spawn = || {
        env.runner_process()
            .args(["apply", "plan.yaml", "--yes", "--reuse", "--store", &db.url])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("runner runs")
    };
    let (a, b) = std::thread::scope(|scope| {
        let (a, b) = (scope.spawn(spawn), scope.spawn(spawn));
        (a.join().expect("joined"), b.join().expect("joined"))
    });
    for out in [a, b] {
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stdout.contains("Reuse: 60 of 60 tasks"), "{stdout}");
        assert!(!stderr.contains("warning"), "{stderr}");
    }
    assert_eq!(rows(&db), 60, "a reused output is not stored again");

    db.execute("UPDATE runner_cache SET entry = replace(entry, '\"output\":\"step 0\"', '\"output\":\"step X\"')");
    let out = stored(&env, &db, &["apply", "plan.yaml", "--yes", "--reuse"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("is damaged: its output does not match its digest"), "{out}");
    assert!(out.stdout.contains("run    t0: its stored output is damaged"), "{out}");
    let run = out.stdout.lines().find_map(|l| l.strip_prefix("run `")).and_then(|l| l.split('`').next());
    let shown = stored(&env, &db, &["output", run.expect("a run id"), "t1"]);
    assert_eq!(shown.stdout.trim(), "step 1 step 0", "the damaged output was not used");
}

#[test]
fn cache_prune_clear_and_the_size_cap_work_on_the_table() {
    let Some(db) = TestDatabase::new("cache_prune") else { return };
    let env = Env::new();
    env.write("plan.yaml", &mock_chain(40, ""));
    let capped = env
        .runner()
        .env("RUNNER_CACHE_MAX_BYTES", "4KiB")
        .args(["apply", "plan.yaml", "--yes", "--store", &db.url])
        .output()
        .expect("runner runs");
    let stderr = String::from_utf8_lossy(&capped.stderr);
    assert_eq!(capped.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("note: the task cache was over RUNNER_CACHE_MAX_BYTES (4096 bytes)"), "{stderr}");
    let kept = rows(&db);
    assert!(kept > 0 && kept < 40, "some outputs are kept, the oldest removed: {kept}");
    let bytes: Vec<Option<String>> = db.column("SELECT sum(bytes) FROM runner_cache");
    let bytes: u64 = bytes.into_iter().flatten().next().and_then(|n| n.parse().ok()).expect("a sum");
    assert!(bytes <= 4096, "the table holds {bytes} bytes");

    let none = stored(&env, &db, &["cache", "prune", "--older-than", "30d"]);
    assert!(none.stdout.contains(&format!("removed 0 stored outputs, kept {kept}")), "{none}");
    let cleared = stored(&env, &db, &["cache", "clear"]);
    assert!(cleared.stdout.contains(&format!("removed {kept} stored outputs, kept 0 (0 bytes)")), "{cleared}");
    assert_eq!(rows(&db), 0);
}
