//! The public API can grow: the enums callers match on are `#[non_exhaustive]`, so a new
//! error is not a breaking change; and only the modules that are part of the API are public.

#[test]
fn matched_enums_are_non_exhaustive() {
    let enums = [("error.rs", "LlmError"), ("tool_error.rs", "ToolError"), ("catalog.rs", "CatalogError")];
    let closed = testkit::api::closed_enums(env!("CARGO_MANIFEST_DIR"), &enums);
    assert!(closed.is_empty(), "these public enums are closed to new variants: {closed:?}");
}

#[test]
fn only_api_modules_are_public() {
    let public = testkit::api::public_modules(env!("CARGO_MANIFEST_DIR"));
    // The endpoint's parts (retries, streaming, error mapping) are reached through `Endpoint`.
    assert_eq!(public, ["catalog", "dialect", "limiter", "protocol", "redact", "spans", "tokens"]);
}
