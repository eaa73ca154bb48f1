//! The cluster soak's CI variant: `scripts/cluster_soak.py --quick` against this build's binary
//! and the machine's PostgreSQL. Forty runs of command, http and tool-using llm tasks (a fake
//! model server in the script; a destructive tool the script approves) on three workers and
//! two coordinating processes, one of them SIGKILLed and replaced every two seconds, and every
//! database connection cut once. The script checks each run's outcome against an undisturbed
//! run of its plan, the logs (numbered without a gap, nothing recorded twice), that the
//! destructive tool ran at most once per approval and that nothing started after its task's
//! success was recorded, and exits 1 naming each fault.

use std::path::Path;
use std::process::Command;

#[test]
fn forty_runs_survive_random_kills_and_a_cut_database_with_every_check_holding() {
    // Only to skip (or, with RUNNER_REQUIRE_POSTGRES=1, fail) when no database answers: the
    // script makes a schema of its own.
    let Some(_db) = testkit::pg::TestDatabase::new("cluster_soak") else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster_soak.py");
    let runner = assert_cmd::cargo::cargo_bin("runner");
    let output = Command::new("python3")
        .arg(&script)
        .args(["--quick", "--runs", "40", "--database", &testkit::pg::base_url()])
        .arg("--runner")
        .arg(&runner)
        .output()
        .expect("python3 runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "the soak found faults:\n{stdout}\n{stderr}");
    let figures = stdout.lines().find(|l| l.starts_with("cluster soak: 40 runs")).unwrap_or_default();
    assert!(figures.contains("faults: 0"), "{stdout}\n{stderr}");
    assert!(!figures.contains("kills: 0 workers, 0 coordinators"), "processes were killed: {figures}");
    eprintln!("{figures}");
}
