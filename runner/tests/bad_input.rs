//! `runner validate` on hostile input: junk, huge, deep, explosive, malformed or missing files
//! all end with exit code 2 and a diagnostic that names the problem, never a panic.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use assert_cmd::Command;
use serde_json::Value;

/// A fresh folder in the temp dir for one test's files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("runner-bad-input-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).expect("write plan");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `runner validate` said about a plan, in both output formats.
struct Rejection {
    /// The report of the human format (stdout).
    human: String,
    /// The `(code, message)` of each diagnostic in the JSON format.
    diagnostics: Vec<(String, String)>,
    /// The line and column of the first diagnostic.
    at: (u64, u64),
}

impl Rejection {
    /// Asserts the first diagnostic has `code`, that the human output names it, and that the
    /// first message contains each of `words`.
    fn expect(&self, code: &str, words: &[&str]) {
        let (first_code, message) = self.diagnostics.first().expect("at least one diagnostic");
        assert_eq!(first_code, code, "diagnostics: {:?}", self.diagnostics);
        assert!(self.human.contains(code), "the human report does not name {code}:\n{}", self.human);
        for word in words {
            assert!(message.contains(word), "`{message}` does not mention `{word}`");
        }
    }
}

/// Runs `runner validate PATH --format FORMAT`, asserts it exits 2 without panicking, and
/// returns its stdout and stderr.
fn run(path: &Path, format: &str) -> (String, String) {
    let output = Command::cargo_bin("runner")
        .expect("the runner binary is built")
        .env("NO_COLOR", "1")
        .arg("validate")
        .arg(path)
        .args(["--format", format])
        .output()
        .expect("runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "runner panicked:\n{stderr}");
    assert_eq!(output.status.code(), Some(2), "exit status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    (stdout, stderr)
}

/// Runs `runner validate` on a path in the human and JSON formats.
fn validate(path: &Path) -> Rejection {
    let (human, _) = run(path, "human");
    let (stdout, _) = run(path, "json");
    let report: Value = serde_json::from_str(&stdout).expect("validate --format json prints JSON");
    assert_eq!(report["valid"], false);
    let diagnostics = report["diagnostics"]
        .as_array()
        .expect("a diagnostics list")
        .iter()
        .map(|d| {
            (d["code"].as_str().unwrap_or_default().to_owned(), d["message"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let first = &report["diagnostics"][0];
    let at = (first["line"].as_u64().unwrap_or(0), first["column"].as_u64().unwrap_or(0));
    Rejection { human, diagnostics, at }
}

fn rejected(name: &str, bytes: &[u8]) -> Rejection {
    let scratch = Scratch::new();
    validate(&scratch.file(name, bytes))
}

/// Deterministic junk bytes (xorshift), NULs included.
fn junk(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if i % 16 == 0 { 0 } else { state.to_le_bytes()[0] }
        })
        .collect()
}

#[test]
fn binary_junk_is_not_utf8() {
    rejected("junk.yaml", &junk(4096)).expect("plan::not_utf8", &[]);
}

#[test]
fn text_with_nul_characters_is_a_yaml_syntax_error() {
    rejected("nul.yaml", b"apiVersion: runner/v1\nkind: \0Plan\0\n").expect("plan::yaml_syntax", &[]);
}

#[test]
fn a_file_over_the_size_cap_is_too_large() {
    let mut big = b"apiVersion: runner/v1\n# ".to_vec();
    big.resize(50 * 1024 * 1024, b'x');
    rejected("big.yaml", &big).expect("plan::too_large", &[]);
}

#[test]
fn ten_thousand_nested_lists_are_over_the_depth_limit() {
    let deep = "[".repeat(10_000);
    rejected("deep.yaml", deep.as_bytes()).expect("plan::over_limit", &["deeper than 48 levels"]);
    let closed = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    rejected("deep.yaml", closed.as_bytes()).expect("plan::over_limit", &["deeper than 48 levels"]);
}

#[test]
fn ten_thousand_nested_lists_in_json_are_over_the_depth_limit() {
    let deep = format!("{{\"spec\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    rejected("deep.json", deep.as_bytes()).expect("plan::over_limit", &["deeper than 48 levels"]);
}

#[test]
fn a_limit_is_named_in_words_with_what_to_change() {
    let deep = format!("x: {}{}\n", "[".repeat(60), "]".repeat(60));
    let rejection = rejected("deep.yaml", deep.as_bytes());
    rejection.expect("plan::over_limit", &["nests deeper than 48 levels"]);
    assert!(rejection.human.contains("$defs"), "the help says how to flatten it:\n{}", rejection.human);
    for debug in ["Depth {", "budget breached", "indentation and quoting"] {
        assert!(!rejection.human.contains(debug), "`{debug}` in:\n{}", rejection.human);
    }
}

/// A plan whose one task checks its output against a schema of `objects` nested objects.
fn plan_with_nested_schema(objects: usize) -> String {
    let mut schema = "{type: string}".to_owned();
    for _ in 0..objects {
        schema = format!("{{type: object, properties: {{inner: {schema}}}}}");
    }
    format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: deep-schema}}\nspec:\n  agent_definitions:\n    \
         default: {{runtime: mock}}\n  workflow:\n    - id: answer\n      input: hi\n      verification:\n        \
         type: schema_check\n        schema: {schema}\n"
    )
}

#[test]
fn a_schema_of_twenty_nested_objects_loads() {
    let scratch = Scratch::new();
    let output = Command::cargo_bin("runner")
        .expect("the runner binary is built")
        .arg("validate")
        .arg(scratch.file("schema.yaml", plan_with_nested_schema(20).as_bytes()))
        .output()
        .expect("runner runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    rejected("deeper.yaml", plan_with_nested_schema(22).as_bytes()).expect("plan::over_limit", &["48 levels"]);
}

#[test]
fn an_alias_bomb_exceeds_the_budget() {
    let mut bomb = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let aliases = vec![format!("*a{}", level - 1); 9].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
    }
    // One format only: the YAML reader replays a million alias events before it gives up,
    // which takes seconds in an unoptimised build.
    let scratch = Scratch::new();
    let (human, _) = run(&scratch.file("bomb.yaml", bomb.as_bytes()), "human");
    assert!(human.contains("plan::over_limit"), "{human}");
    assert!(human.contains("aliases") && human.contains("anchors"), "the limit and the fix are named: {human}");
    assert!(!human.contains("RecordedAnchorEvents") && !human.contains("indentation"), "{human}");
}

#[test]
fn a_json_plan_is_reported_as_json_where_it_breaks() {
    let rejection = rejected("bad.json", br#"{"apiVersion": "runner/v1", "kind": "Plan",, }"#);
    rejection.expect("plan::json_syntax", &["invalid JSON"]);
    assert!(!rejection.human.contains("YAML"), "{}", rejection.human);
    assert_eq!(rejection.at, (1, 44), "at the second comma");
}

#[test]
fn duplicate_keys_are_a_yaml_syntax_error() {
    let plan = "apiVersion: runner/v1\nkind: Plan\nkind: Plan\n";
    rejected("duplicate.yaml", plan.as_bytes()).expect("plan::yaml_syntax", &["duplicate"]);
    let json = r#"{"apiVersion": "runner/v1", "kind": "Plan", "kind": "Plan"}"#;
    rejected("duplicate.json", json.as_bytes()).expect("plan::json_syntax", &["duplicate"]);
}

#[test]
fn invalid_utf8_is_reported_with_its_offset() {
    let rejection = rejected("latin1.yaml", b"apiVersion: runner/v1\nkind: Pl\xe4n\n");
    rejection.expect("plan::not_utf8", &["30"]);
    assert_eq!(rejection.at, (2, 9), "at the bad byte, not at 1:1");
    assert!(rejection.human.contains("kind: Pl"), "the line is shown:\n{}", rejection.human);
}

#[test]
fn an_empty_file_is_not_a_plan() {
    rejected("empty.yaml", b"").expect("plan::wrong_type", &["mapping", "null"]);
}

#[test]
fn a_lone_scalar_is_not_a_plan() {
    rejected("hello.yaml", b"hello\n").expect("plan::wrong_type", &["mapping", "string"]);
}

#[test]
fn a_missing_file_is_an_io_error() {
    let scratch = Scratch::new();
    validate(&scratch.0.join("nowhere.yaml")).expect("plan::io", &[]);
}

#[test]
fn an_error_in_a_100k_character_line_is_shown_cut_around_it() {
    let words: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
    let (left, right) = words.split_at(12_345);
    let line = format!("      input: \"{} {{{{ nowhere }}}} {}\"", left.join(" "), right.join(" "));
    assert!(line.len() > 100_000);
    let plan = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: long}}\nspec:\n  agent_definitions:\n    a: {{runtime: mock}}\n  workflow:\n    - id: only\n      agent: a\n{line}\n"
    );
    let rejection = rejected("long.yaml", plan.as_bytes());
    rejection.expect("plan::template_unknown_variable", &["nowhere"]);
    let (line_number, column) = rejection.at;
    assert_eq!(line_number, 10);
    assert!(column > 50_000, "the column is the real one: {column}");
    assert!(rejection.human.contains(&format!("long.yaml:10:{column}")), "{}", rejection.human);
    assert!(rejection.human.contains("…"), "the line is cut:\n{}", rejection.human);
    assert!(rejection.human.contains("w12344 {{ nowhere }} w12345"), "around the error:\n{}", rejection.human);
    let widest = rejection.human.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest < 200, "a line of {widest} characters:\n{}", rejection.human);
}
