//! The machine's public API can grow, and it stays pure: the enums callers match on are
//! `#[non_exhaustive]`, so a new command or error is not a breaking change, except `Event`,
//! which is closed so that every `match` on it in the workspace names each event and a new
//! one fails to compile where it is not handled; only the modules that are part of the API are
//! public; and its dependencies are pure crates only.

#[test]
fn matched_enums_are_non_exhaustive() {
    let enums = [("command.rs", "Command"), ("error.rs", "EngineError"), ("template.rs", "RenderError")];
    let closed = testkit::api::closed_enums(env!("CARGO_MANIFEST_DIR"), &enums);
    assert!(closed.is_empty(), "these public enums are closed to new variants: {closed:?}");
}

#[test]
fn events_are_closed_so_matches_on_them_are_exhaustive() {
    let closed = testkit::api::closed_enums(env!("CARGO_MANIFEST_DIR"), &[("event/mod.rs", "Event")]);
    assert_eq!(
        closed,
        ["Event"],
        "`Event` must not be `#[non_exhaustive]`: the matches on it rely on being exhaustive"
    );
}

#[test]
fn only_api_modules_are_public() {
    let public = testkit::api::public_modules(env!("CARGO_MANIFEST_DIR"));
    // The state machine, commands, errors and task and run states are reached through the
    // crate root's re-exports, so they can be rearranged freely.
    assert_eq!(public, ["child", "context", "conversation", "event", "summary_mode", "template", "tokens"]);
}

#[test]
fn dependencies_are_pure() {
    let text = testkit::api::source(env!("CARGO_MANIFEST_DIR"), "Cargo.toml");
    let normal = text.split("[dependencies]").nth(1).and_then(|rest| rest.split("\n[").next()).unwrap_or("");
    let names: Vec<&str> =
        normal.lines().filter_map(|line| line.split(['.', ' ', '=']).next()).filter(|name| !name.is_empty()).collect();
    assert_eq!(names, ["manifest", "serde", "serde_json", "thiserror", "miette", "minijinja", "sha2"]);
}
