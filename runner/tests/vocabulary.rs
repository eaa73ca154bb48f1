//! The run log's words, declared once in `machine` (`Event::NAMES`, `TaskStatus::NAMES`), and
//! the places outside Rust that must know each of them: the event reference in
//! `docs/events.md` and the web page's script and style. A new event or status fails here
//! until those places handle it.

use std::collections::BTreeSet;
use std::path::Path;

use engine::{Event, TaskStatus};

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{} reads: {error}", path.display()))
}

/// The `### NAME` sections under `## Event types` in the event reference.
fn documented_events(text: &str) -> Vec<&str> {
    let Some((_, rest)) = text.split_once("\n## Event types\n") else { return Vec::new() };
    let section = rest.split("\n## ").next().unwrap_or(rest);
    section.lines().filter_map(|line| line.strip_prefix("### ")).map(str::trim).collect()
}

/// The names in `documented` that are not in `declared`, and the other way round.
fn differences<'a>(declared: &[&'a str], documented: &[&'a str]) -> (Vec<&'a str>, Vec<&'a str>) {
    let declared: BTreeSet<&str> = declared.iter().copied().collect();
    let documented: BTreeSet<&str> = documented.iter().copied().collect();
    (declared.difference(&documented).copied().collect(), documented.difference(&declared).copied().collect())
}

#[test]
fn every_event_has_its_section_in_the_reference_and_every_section_is_an_event() {
    let text = read("../docs/events.md");
    let documented = documented_events(&text);
    let (undocumented, unknown) = differences(Event::NAMES, &documented);
    assert!(undocumented.is_empty(), "docs/events.md lacks a `### NAME` section for {undocumented:?}");
    assert!(unknown.is_empty(), "docs/events.md documents {unknown:?}, which are not events");
    assert_eq!(documented.len(), Event::NAMES.len(), "docs/events.md documents an event twice");
}

#[test]
fn the_reference_check_sees_a_missing_and_an_unknown_section() {
    let text = "# Ref\n## Event types\n### RunCreated\ntext\n### TaskExploded\n## The log file\n### RunResumed\n";
    assert_eq!(documented_events(text), ["RunCreated", "TaskExploded"]);
    let (undocumented, unknown) = differences(&["RunCreated", "RunResumed"], &documented_events(text));
    assert_eq!((undocumented, unknown), (vec!["RunResumed"], vec!["TaskExploded"]));
}

/// The web page lists task statuses for its legend and paints each with a `.s-STATUS` rule;
/// it shows every event through the server's one-line form, so the only event names it may
/// spell are ones it compares `e.type` with, and those must be events.
#[test]
fn the_web_page_knows_every_task_status_and_names_only_events() {
    let script = read("src/serve/assets/app.js");
    let style = read("src/serve/assets/app.css");
    let declared = script
        .lines()
        .find_map(|line| line.strip_prefix("const STATUSES = ["))
        .and_then(|rest| rest.strip_suffix("];"))
        .expect("app.js declares `const STATUSES = [...];` on one line");
    let listed: Vec<&str> = declared.split(',').map(|word| word.trim().trim_matches('"')).collect();
    assert_eq!(listed, TaskStatus::NAMES, "app.js's STATUSES differ from the task statuses");
    for status in TaskStatus::NAMES {
        assert!(style.contains(&format!(".s-{status} {{")), "app.css has no `.s-{status}` rule to paint the status");
    }
    let compared: Vec<&str> = script.split("e.type === \"").skip(1).filter_map(|rest| rest.split('"').next()).collect();
    assert!(!compared.is_empty(), "app.js compares event types as `e.type === \"NAME\"`");
    for name in compared {
        assert!(Event::NAMES.contains(&name), "app.js handles `{name}`, which is not an event");
    }
}
