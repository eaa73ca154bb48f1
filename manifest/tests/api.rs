//! The public API can grow: the enums callers match on are `#[non_exhaustive]`, so a new
//! problem or lint is not a breaking change for code outside the manifest crate; and only the
//! modules that are part of the API are public.

use std::path::Path;

#[test]
fn matched_enums_are_non_exhaustive() {
    let enums = [("problem.rs", "Problem"), ("critic/finding.rs", "Lint")];
    let closed: Vec<&str> = enums
        .iter()
        .filter(|(file, name)| !testkit::api::is_non_exhaustive(env!("CARGO_MANIFEST_DIR"), file, name))
        .map(|(_, name)| *name)
        .collect();
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
