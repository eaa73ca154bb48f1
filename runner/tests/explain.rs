//! `runner explain` and the entries in `docs/explain/`: one entry for every diagnostic code the
//! workspace's sources raise and none for a code they no longer have; every example that is a
//! plan or a command produces its entry's code when really run; the command prints, lists and
//! refuses as documented; and human diagnostics end with the hint to run it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

mod shipped;

use shipped::{repo_root, runner};

/// One `## code` entry of a file in `docs/explain/`.
struct Entry {
    file: String,
    code: String,
    body: String,
}

fn entries() -> Vec<Entry> {
    let folder = repo_root().join("docs/explain");
    let mut files: Vec<PathBuf> = fs::read_dir(&folder)
        .expect("docs/explain is a folder")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    files.sort();
    let mut entries = Vec::new();
    for path in files {
        let file = path.file_name().expect("a file name").to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).expect("an explanation file is UTF-8 text");
        for section in text.split("\n## ").skip(1) {
            let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
            let code = heading.trim().trim_matches('`').to_owned();
            entries.push(Entry { file: file.clone(), code, body: body.trim().to_owned() });
        }
    }
    entries
}

/// Every code in a `code(...)` attribute of a non-test source file of a workspace crate (any
/// folder at the root with a `Cargo.toml` and a `src/`), and every critic lint code.
fn source_codes() -> BTreeSet<String> {
    let mut codes: BTreeSet<String> = manifest::critic::Lint::CODES.iter().map(|code| (*code).to_owned()).collect();
    for crate_dir in fs::read_dir(repo_root()).expect("the workspace root lists") {
        let crate_dir = crate_dir.expect("a directory entry").path();
        if crate_dir.join("Cargo.toml").is_file() && crate_dir.join("src").is_dir() {
            scan(&crate_dir.join("src"), &mut codes);
        }
    }
    assert!(codes.len() > 100, "the scan found too few codes: {codes:?}");
    codes
}

fn scan(dir: &Path, codes: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("a source folder lists") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                scan(&path, codes);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            let text = fs::read_to_string(&path).expect("a source file is UTF-8 text");
            for rest in text.split("code(").skip(1) {
                let rest = rest.trim_start_matches('"');
                let code: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_:".contains(*c))
                    .collect();
                let closed = rest[code.len()..].trim_start_matches('"').starts_with(')');
                if closed && code.contains("::") && !code.ends_with(':') {
                    codes.insert(code);
                }
            }
        }
    }
}

#[test]
fn every_code_has_one_entry_and_every_entry_a_code() {
    let codes = source_codes();
    let entries = entries();
    let mut seen = BTreeSet::new();
    let duplicates: Vec<&str> =
        entries.iter().filter(|entry| !seen.insert(entry.code.as_str())).map(|e| e.code.as_str()).collect();
    assert!(duplicates.is_empty(), "codes with more than one entry: {duplicates:?}");
    let missing: Vec<&String> = codes.iter().filter(|code| !seen.contains(code.as_str())).collect();
    let stale: Vec<&str> = seen.iter().copied().filter(|code| !codes.contains(*code)).collect();
    assert!(missing.is_empty(), "codes with no entry in docs/explain/: {missing:?}");
    assert!(stale.is_empty(), "entries in docs/explain/ for codes no source raises any more: {stale:?}");
}

#[test]
fn every_entry_has_a_summary_an_example_and_a_fix() {
    for entry in entries() {
        let Entry { file, code, body } = &entry;
        let summary = body.split("\n\n").next().unwrap_or("");
        assert!(!summary.is_empty() && !summary.starts_with('#'), "{file}: {code} starts with no summary");
        let example = body.split_once("\n### Example\n").map(|(_, rest)| rest);
        let example = example.unwrap_or_else(|| panic!("{file}: {code} has no `### Example`"));
        let (example, fix) =
            example.split_once("\n### Fix\n").unwrap_or_else(|| panic!("{file}: {code} has no `### Fix`"));
        assert_eq!(example.matches("\n```").count(), 2, "{file}: {code}: the example is one fenced block");
        assert!(!fix.trim().is_empty(), "{file}: {code}: the fix is empty");
    }
}

/// The example of an entry: its fence's language and its text.
fn example(entry: &Entry) -> (&str, &str) {
    let block = entry.body.split_once("\n### Example\n").expect("checked above").1;
    let block = block.split_once("```").expect("a fence").1;
    let (language, rest) = block.split_once('\n').expect("a fence line");
    (language.trim(), rest.split_once("```").expect("a closing fence").0)
}

/// Whether `output` names `code` as a whole code (not a prefix of a longer one).
fn names(output: &str, code: &str) -> bool {
    output
        .match_indices(code)
        .any(|(at, _)| !output[at + code.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
}

/// Runs an example in a fresh folder and returns what it printed: a `yaml` plan through
/// `runner critic` (which reports the loader's diagnostics and the critic's findings), a `sh`
/// example with `runner` first on the PATH.
fn run_example(language: &str, text: &str) -> String {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let output = match language {
        "yaml" => {
            fs::write(dir.path().join("plan.yaml"), text).expect("the plan is written");
            runner().current_dir(dir.path()).args(["critic", "plan.yaml"]).output().expect("runner runs")
        }
        "sh" => {
            let binary = assert_cmd::cargo::cargo_bin("runner");
            let bin_dir = binary.parent().expect("the binary's folder");
            let path = std::env::join_paths(
                std::iter::once(bin_dir.to_path_buf())
                    .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
            )
            .expect("a PATH");
            std::process::Command::new("sh")
                .arg("-c")
                .arg(text)
                .current_dir(dir.path())
                .env("PATH", path)
                .env("RUNNER_HOME", dir.path().join("home"))
                .env("NO_COLOR", "1")
                .env_remove("RUNNER_MAX_PLAN_BYTES")
                .env_remove("RUNNER_SERVE_TOKEN")
                .stdin(Stdio::null())
                .output()
                .expect("sh runs")
        }
        other => panic!("no way to run a `{other}` example"),
    };
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Plans (`yaml`) and commands (`sh`) are run and must produce their entry's code; `text`
/// examples describe a situation at run time that no cheap command reproduces. Plan and critic
/// codes are all about a plan, so every one of them but `plan::replacement_not_json` (which
/// only a planner's answer during a replan can have) has a plan or a command.
#[test]
fn every_runnable_example_produces_its_code() {
    let mut checked = BTreeMap::<&str, usize>::new();
    let mut described = Vec::new();
    let entries = entries();
    for entry in &entries {
        let (language, text) = example(entry);
        match language {
            "yaml" | "sh" => {
                let output = run_example(language, text);
                assert!(
                    names(&output, &entry.code),
                    "{}: the example of {} does not produce it:\n{output}",
                    entry.file,
                    entry.code
                );
                *checked.entry(language).or_default() += 1;
            }
            "text" => {
                let about_a_plan = entry.code.starts_with("plan::") || entry.code.starts_with("critic::");
                assert!(
                    !about_a_plan || entry.code == "plan::replacement_not_json",
                    "{}: {} is about a plan; give a plan or a command as its example",
                    entry.file,
                    entry.code
                );
                described.push(entry.code.as_str());
            }
            other => panic!("{}: {}: an example is `yaml`, `sh` or `text`, not `{other}`", entry.file, entry.code),
        }
    }
    let machine_checked: usize = checked.values().sum();
    println!(
        "{} entries: {machine_checked} machine-checked ({} plans, {} commands), {} described",
        entries.len(),
        checked.get("yaml").copied().unwrap_or(0),
        checked.get("sh").copied().unwrap_or(0),
        described.len()
    );
    assert_eq!(machine_checked + described.len(), entries.len());
}

#[test]
fn explain_prints_an_entry_as_plain_text() {
    let output = runner().args(["explain", "llm::idle"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(stdout.starts_with("llm::idle\n\n"), "{stdout}");
    assert!(stdout.contains("idle_timeout"), "{stdout}");
    assert!(stdout.contains("\nExample:\n") && stdout.contains("\nFix:\n"), "{stdout}");
    assert!(!stdout.contains("```") && !stdout.contains("###"), "markdown syntax is not shown: {stdout}");
}

#[test]
fn explain_without_a_code_lists_every_code_with_its_summary() {
    let output = runner().arg("explain").output().expect("runner runs");
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let listed: BTreeSet<&str> = stdout.lines().filter_map(|line| line.split_whitespace().next()).collect();
    for code in source_codes() {
        assert!(listed.contains(code.as_str()), "`runner explain` does not list {code}");
    }
    let line = stdout.lines().find(|line| line.starts_with("plan::cycle ")).expect("plan::cycle is listed");
    assert!(line.contains("circle"), "the summary follows the code: {line}");
}

#[test]
fn an_unknown_code_exits_2_with_a_suggestion() {
    let output = runner().args(["explain", "plan::cycel"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).expect("UTF-8");
    assert!(stderr.contains("no diagnostic code `plan::cycel`"), "{stderr}");
    assert!(stderr.contains("did you mean `plan::cycle`?"), "{stderr}");
    let output = runner().args(["explain", "nothing::like_it"]).output().expect("runner runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("did you mean"));
}

#[test]
fn human_diagnostics_end_with_the_hint() {
    let output = runner().args(["validate", "examples/invalid/cycle.yaml"]).output().expect("runner runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let report = stdout.rsplit_once("examples/invalid/cycle.yaml: invalid plan").expect("a summary line").0;
    assert!(report.ends_with("  help: run `runner explain plan::cycle` for more\n"), "{stdout}");
    let output = runner().args(["critic", "examples/critic/unused_agent.yaml"]).output().expect("runner runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let notes = stdout.split_once("critic notes:\n").expect("notes").1;
    assert!(notes.contains("[critic::unused_agent]\n  help: run `runner explain CODE`"), "{stdout}");
}

#[test]
fn a_coded_error_that_stops_a_command_ends_with_the_hint() {
    let output =
        runner().args(["serve", "--addr", "0.0.0.0:0"]).env_remove("RUNNER_SERVE_TOKEN").output().expect("runner runs");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8");
    assert!(stderr.trim_end().ends_with("help: run `runner explain serve::token_required` for more"), "{stderr}");
}

/// docs/critic.md keeps an index of the finding codes with their severities; it must name
/// exactly the critic entries, and each entry's summary must open with the same severity.
#[test]
fn the_critic_index_names_exactly_the_critic_entries() {
    let doc = fs::read_to_string(repo_root().join("docs/critic.md")).expect("docs/critic.md");
    let indexed: BTreeMap<&str, &str> = doc
        .lines()
        .filter(|line| line.starts_with("| [`critic::"))
        .map(|line| {
            let code = line.split('`').nth(1).expect("a code in backticks");
            let severity = line.trim_end_matches(" |").rsplit("| ").next().expect("a severity column");
            (code, severity)
        })
        .collect();
    let entries = entries();
    let critic: BTreeMap<&str, &str> = entries
        .iter()
        .filter(|entry| entry.code.starts_with("critic::"))
        .map(|entry| {
            let severity = match entry.body.as_str() {
                body if body.starts_with("Note") => "info",
                body if body.starts_with("Error") => "error",
                _ => "warning",
            };
            (entry.code.as_str(), severity)
        })
        .collect();
    assert_eq!(indexed, critic, "docs/critic.md's index and docs/explain/critic.md disagree");
}
