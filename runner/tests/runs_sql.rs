//! The runs list in PostgreSQL is one query: each run's row keeps what the list shows, written
//! with the records it follows from. Runs that succeed, fail, grow (a map's items, an `expand`
//! task's plan) and take over outputs (a retry) are listed exactly as folding their records
//! lists them: the same table once the rows' summaries are wiped, which makes `runner runs`
//! fold every run.

mod support;

use std::path::Path;

use support::{Env, plan};
use testkit::pg::TestDatabase;

/// `runner runs --store URL`'s table.
fn runs(env: &Env, url: &str) -> String {
    let output = env.runner().args(["runs", "--store", url]).output().expect("runner runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_runs_list_from_the_rows_is_the_list_from_the_records() {
    let Some(db) = TestDatabase::new("runs_sql") else { return };
    let env = Env::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for (name, run) in [("map.yaml", "map"), ("expand.yaml", "expand"), ("offline.yaml", "offline")] {
        let path = examples.join(name);
        let path = path.to_str().expect("a UTF-8 path");
        let applied = env.runner().args(["apply", path, "--yes", "--run-id", run, "--store", &db.url]).output();
        let applied = applied.expect("runner runs");
        assert_eq!(applied.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&applied.stderr));
    }
    let workflow = "    - {id: a, agent: echo, input: one}\n    - {id: b, agent: broken, depends_on: [a]}\n    \
                    - {id: c, agent: echo, input: three, depends_on: [b]}";
    let agents = "    echo: {runtime: mock}\n    broken: {runtime: command, command: [sh, -c, 'exit 3']}";
    env.write("failing.yaml", &plan("failing", agents, workflow));
    let failed = env.runner().args(["apply", "failing.yaml", "--yes", "--run-id", "f", "--store", &db.url]).output();
    assert_eq!(failed.expect("runner runs").status.code(), Some(1));
    let retried = env.runner().args(["retry", "f", "--from", "b", "--run-id", "f2", "--store", &db.url]).output();
    assert_eq!(retried.expect("runner runs").status.code(), Some(1), "the retry fails at b again");

    let unsummarised = "SELECT count(*) FROM runner_runs WHERE tasks IS NULL OR updated IS NULL";
    assert_eq!(db.column(unsummarised), [Some("0".to_owned())], "every run's row keeps its summary");
    let from_rows = runs(&env, &db.url);
    for (run, tasks) in [("f ", "1/3"), ("f2 ", "1/3"), ("expand ", "/"), ("map ", "/")] {
        let line = from_rows.lines().find(|l| l.starts_with(run)).unwrap_or_default();
        assert!(line.contains(tasks), "{run}: {line}\n{from_rows}");
    }
    // A map's items and an expanded plan's tasks are counted: more tasks than the plan wrote.
    let total = |run: &str| db.column(&format!("SELECT tasks::text FROM runner_runs WHERE run_id = '{run}'"));
    assert!(total("map")[0].as_deref().and_then(|t| t.parse::<u64>().ok()).is_some_and(|t| t > 5), "{from_rows}");

    db.execute("UPDATE runner_runs SET tasks = NULL, succeeded = NULL");
    assert_eq!(runs(&env, &db.url), from_rows, "the rows list the runs as folding their records does");
}
