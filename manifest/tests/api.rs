//! The public API can grow: the enums callers match on are `#[non_exhaustive]`, so a new
//! problem or lint is not a breaking change for code outside the manifest crate; and only the
//! modules that are part of the API are public.

#[test]
fn matched_enums_are_non_exhaustive() {
    let enums = [("problem.rs", "Problem"), ("critic/finding.rs", "Lint")];
    let closed = testkit::api::closed_enums(env!("CARGO_MANIFEST_DIR"), &enums);
    assert!(closed.is_empty(), "these public enums are closed to new variants: {closed:?}");
}

#[test]
fn only_api_modules_are_public() {
    let public = testkit::api::public_modules(env!("CARGO_MANIFEST_DIR"));
    // Diagnostics, durations, the graph and sources are reached through the crate root's
    // re-exports; the reader's modules stay private.
    assert_eq!(public, ["critic", "fix", "plan", "plan_test", "schema", "splice", "subplan", "template"]);
}
