//! Helpers for tests that run `runner` on the plans shipped in `examples/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The workspace root: tests run from here so file names in the output are stable relative paths.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("runner/ has a parent").to_path_buf()
}

/// `runner`, run from the workspace root without colours.
pub fn runner() -> Command {
    let mut command = Command::cargo_bin("runner").expect("the runner binary is built");
    command.current_dir(repo_root()).env("NO_COLOR", "1");
    command
}

/// The `.yaml` files of a folder under the root, as sorted relative paths with `/` separators.
pub fn plans_in(folder: &str) -> Vec<String> {
    let mut plans: Vec<String> = std::fs::read_dir(repo_root().join(folder))
        .unwrap_or_else(|error| panic!("cannot list {folder}: {error}"))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .map(|path| format!("{folder}/{}", path.file_name().expect("a file name").to_string_lossy()))
        .collect();
    plans.sort();
    assert!(!plans.is_empty(), "no plans in {folder}");
    plans
}

/// A plan's file name without `.yaml`.
pub fn stem(plan: &str) -> &str {
    Path::new(plan).file_stem().and_then(|s| s.to_str()).expect("a file stem")
}

/// A critic finding as the JSON report locates it: code, task, line, column.
pub type Located = (String, Option<String>, u64, u64);

/// Every finding of a JSON critic report, located.
pub fn located(report: &serde_json::Value) -> Vec<Located> {
    report["findings"]
        .as_array()
        .expect("the report lists its findings")
        .iter()
        .map(|f| {
            (
                f["code"].as_str().expect("code").to_owned(),
                f["task"].as_str().map(str::to_owned),
                f["line"].as_u64().expect("line"),
                f["column"].as_u64().expect("column"),
            )
        })
        .collect()
}
