//! `runner lsp` in a real editor: Neovim (Debian's package), headless, with its built-in LSP
//! client started on `runner lsp` by `tests/editor/neovim.lua`. It opens a plan with a misspelt
//! dependency and a template that reads a task that is not upstream, reads the diagnostics the
//! client received, applies the quick fix, renames a task and writes the file, which is checked
//! here. Skipped, with a message saying why, only when Neovim is not installed; with
//! `RUNNER_REQUIRE_EDITOR=1` (as `.ci/run` sets after installing it) a missing Neovim fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const PLAN: &str = "\
# A plan being written: two mistakes the editor should show.
apiVersion: runner/v1
kind: Plan
metadata:
  name: in-the-editor
spec:
  agent_definitions:
    writer: {runtime: mock}
  workflow:
    - id: search   # where the sources come from
      agent: writer
      input: Find sources.
    - id: draft
      agent: writer
      input: \"Draft from {{ tasks.search.output }}\"
      depends_on: [serach]
    - id: review
      agent: writer
      input: \"Check {{ tasks.draft.output }}\"
      depends_on: [search]
";

fn neovim() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).map(|dir| dir.join("nvim")).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("RUNNER_REQUIRE_EDITOR").is_none(),
            "RUNNER_REQUIRE_EDITOR is set but nvim is missing"
        );
        eprintln!("skipped: no nvim on the PATH (apt-get install -y neovim)");
    }
    found
}

fn codes(seen: &Value) -> Vec<(String, u64)> {
    let seen = seen.as_array().cloned().unwrap_or_default();
    seen.iter()
        .filter(|d| d["severity"] == 1)
        .map(|d| (d["code"].as_str().unwrap_or("").to_owned(), d["line"].as_u64().unwrap_or(0)))
        .collect()
}

fn drive(nvim: &Path, plan: &Path, out: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/editor/neovim.lua");
    let mut editor = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-i", "NONE", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("RUNNER_BIN", env!("CARGO_BIN_EXE_runner"))
        .env("RUNNER_EDITOR_PLAN", plan)
        .env("RUNNER_EDITOR_OUT", out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nvim starts");
    // The script's own waits give up after 30 s each; an editor stuck past all of them is killed.
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = editor.try_wait().expect("nvim can be waited for") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = editor.kill();
            panic!("nvim did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let written = std::fs::read_to_string(out).unwrap_or_else(|e| panic!("nvim ({status}) wrote no report: {e}"));
    serde_json::from_str(&written).expect("the report is JSON")
}

#[test]
fn neovim_shows_the_critic_applies_a_fix_and_renames_a_task() {
    let Some(nvim) = neovim() else { return };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let plan = dir.path().join("plan.yaml");
    std::fs::write(&plan, PLAN).expect("the plan is written");
    let report = drive(&nvim, &plan, &dir.path().join("report.json"));
    assert!(report.get("failed").is_none(), "the editor script failed: {}", report["failed"]);

    // Lines from 0: the typo is on line 15, the template on line 18.
    assert_eq!(
        codes(&report["opened"]),
        [("plan::unknown_dependency".to_owned(), 15), ("plan::template_not_ancestor".to_owned(), 18)]
    );
    let hover = report["hover"].as_str().unwrap_or("");
    assert!(hover.contains("**task `draft`**") && hover.contains("depends on `serach`"), "{hover}");
    assert_eq!(report["action"], "replace `serach` with `search`");
    assert_eq!(codes(&report["fixed"]), [("plan::template_not_ancestor".to_owned(), 18)]);
    assert_eq!(codes(&report["renamed"]), [("plan::template_not_ancestor".to_owned(), 18)]);
    assert_eq!(report["references"], 4, "the renamed id, its template, and two dependencies");

    let written = std::fs::read_to_string(&plan).expect("the plan is readable");
    let expected = PLAN
        .replace("[serach]", "[gather]")
        .replace("id: search", "id: gather")
        .replace("tasks.search.output", "tasks.gather.output")
        .replace("depends_on: [search]", "depends_on: [gather]");
    assert_eq!(written, expected, "the fix and the rename, and nothing else, comments kept");
    let validate =
        Command::new(env!("CARGO_BIN_EXE_runner")).arg("validate").arg(&plan).output().expect("validate runs");
    let stdout = String::from_utf8_lossy(&validate.stdout);
    assert!(stdout.contains("plan::template_not_ancestor") && !stdout.contains("unknown_dependency"), "{stdout}");
}
