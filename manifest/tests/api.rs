//! The public API can grow: the enums callers match on are `#[non_exhaustive]`, so a new
//! problem or lint is not a breaking change for code outside the manifest crate; and only the
//! modules that are part of the API are public.

use std::path::Path;

/// Whether `pub enum {name}` in `file` (under `src/`) carries `#[non_exhaustive]` among the
/// attributes right above it.
fn non_exhaustive(file: &str, name: &str) -> bool {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = std::fs::read_to_string(&path).expect("a manifest source file is readable text");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|line| *line == format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("{file} declares `pub enum {name}`"));
    lines[..at].iter().rev().take_while(|line| line.starts_with("#[")).any(|line| *line == "#[non_exhaustive]")
}

#[test]
fn matched_enums_are_non_exhaustive() {
    let enums = [("problem.rs", "Problem"), ("critic/finding.rs", "Lint")];
    let closed: Vec<&str> =
        enums.iter().filter(|(file, name)| !non_exhaustive(file, name)).map(|(_, name)| *name).collect();
    assert!(closed.is_empty(), "these public enums are closed to new variants: {closed:?}");
}

#[test]
fn only_api_modules_are_public() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(&path).expect("lib.rs is readable text");
    let public: Vec<&str> =
        text.lines().filter_map(|line| line.strip_prefix("pub mod ")).map(|name| name.trim_end_matches(';')).collect();
    // Diagnostics, durations, the graph and sources are reached through the crate root's
    // re-exports; the reader's modules stay private.
    assert_eq!(public, ["critic", "plan", "schema", "splice", "template"]);
}
