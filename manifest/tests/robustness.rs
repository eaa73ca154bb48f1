//! The loader never panics: arbitrary text and bytes, and random manifests built from the real
//! field names, all end in a `Loaded` whose diagnostics point inside the text.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use manifest::{Loaded, Span, load_file, load_str};
use proptest::prelude::*;

/// A file in the temp folder, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn with(bytes: &[u8]) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("manifest-robustness-{}-{}.yaml", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, bytes).expect("write temp file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn within(span: Span, text: &str) -> bool {
    span.offset().checked_add(span.len()).is_some_and(|end| end <= text.len())
        && text.is_char_boundary(span.offset())
        && text.is_char_boundary(span.offset() + span.len())
}

/// What every load must satisfy: an invalid plan has an error, every span (primary and
/// related) lies on character boundaries inside the text, and messages render.
fn check(loaded: &Loaded) -> Result<(), TestCaseError> {
    let text = &loaded.source.text;
    if !loaded.is_valid() {
        prop_assert!(loaded.errors().next().is_some(), "invalid without an error: {:?}", loaded.diagnostics);
    }
    for diagnostic in &loaded.diagnostics {
        prop_assert!(within(diagnostic.loc.span, text), "span outside the text: {:?} in {:?}", diagnostic, text);
        for (span, _) in &diagnostic.related {
            prop_assert!(within(*span, text), "related span outside the text: {:?} in {:?}", diagnostic, text);
        }
        prop_assert!(!diagnostic.to_string().is_empty());
        prop_assert!(diagnostic.code().starts_with("plan::"), "{}", diagnostic.code());
    }
    if let Some(graph) = &loaded.graph {
        prop_assert!(graph.critical_path().len() <= graph.len());
        prop_assert_eq!(graph.topo_order().len(), graph.len());
        prop_assert_eq!(graph.phases().iter().map(Vec::len).sum::<usize>(), graph.len());
    }
    Ok(())
}

fn load_bytes(bytes: &[u8]) -> Loaded {
    let file = TempFile::with(bytes);
    load_file(&file.0)
}

/// Text that looks a little like YAML or JSON, so the readers get past the first character.
fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "apiVersion: runner/v1\n",
            "kind: Plan\n",
            "spec:\n",
            "  workflow:\n",
            "  - id: a\n",
            "    depends_on: [",
            "{",
            "}",
            "[",
            "]",
            ",",
            ": ",
            "- ",
            "\n",
            "  ",
            "\t",
            "\"",
            "'",
            "&a ",
            "*a",
            "<<: ",
            "!!str ",
            "? ",
            "|\n",
            ">-\n",
            "---\n",
            "...\n",
            "#",
            "%YAML 1.2\n",
            "\\u",
            "{{ tasks.a.output }}",
            "{%",
            "null",
            "~",
            "1e9",
            "-0",
            "0x1F",
            ".inf",
            "\u{feff}",
            "\r\n",
            "\u{85}",
            "é",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,8}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_loads_without_panicking(text in any::<String>()) {
        check(&load_bytes(text.as_bytes()))?;
    }

    #[test]
    fn yamlish_text_loads_without_panicking(text in yamlish()) {
        check(&load_bytes(text.as_bytes()))?;
    }

    #[test]
    fn arbitrary_bytes_load_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check(&load_bytes(&bytes))?;
    }

    #[test]
    fn random_manifests_load_without_panicking(document in manifest(), style in prop::sample::select(&[Style::Block, Style::Flow][..])) {
        let text = render(&document, style);
        check(&load_str("fuzz.yaml", "fuzz", &text, &|file| file.ends_with(".md")))?;
    }
}

/// A document to render: the scalars a manifest can hold, and collections.
#[derive(Debug, Clone)]
enum Doc {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string written quoted.
    Str(String),
    /// A word written plain (YAML) or quoted (flow).
    Word(&'static str),
    Seq(Vec<Doc>),
    Map(Vec<(&'static str, Doc)>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    /// Block YAML with indentation.
    Block,
    /// JSON-style flow collections.
    Flow,
}

const IDS: &[&str] = &["a", "b", "c", "d", "e", "unknown", "serach", "", "a b", "tasks"];
const AGENTS: &[&str] = &["writer", "reviewer", "ghost", "default"];
const WORDS: &[&str] = &[
    "task",
    "synthesis_gate",
    "human_review",
    "gate",
    "review",
    "bogus",
    "retry",
    "skip",
    "replan",
    "fail",
    "stop",
    "mock",
    "llm",
    "command",
    "sequential",
    "parallel",
    "eager",
    "1s",
    "500ms",
    "2h",
    "10x",
    "runner/v1",
    "Plan",
    "schema_check",
    "llm_reviewer",
    "none",
    "true",
    "null",
    "~",
    "yes",
    "0",
    "-1",
];
const TEMPLATES: &[&str] = &[
    "{{ tasks.a.output }}",
    "{{ tasks.b.output }} and {{ tasks.zzz.output }}",
    "{{ results.c }}",
    "{{ tasks.a.output",
    "{% if tasks.d.output %}yes{% endif %}",
    "{{ mission }}",
    "{{ tasks[0] }}",
    "plain text",
];

fn id() -> impl Strategy<Value = Doc> {
    prop::sample::select(IDS).prop_map(|id| Doc::Str(id.to_owned()))
}

fn scalar() -> impl Strategy<Value = Doc> {
    prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        prop_oneof![any::<i64>(), -3i64..5].prop_map(Doc::Int),
        prop_oneof![any::<f64>(), -1.0f64..2.0].prop_map(Doc::Float),
        prop::sample::select(WORDS).prop_map(Doc::Word),
        prop::sample::select(TEMPLATES).prop_map(|t| Doc::Str(t.to_owned())),
        id(),
        ".{0,12}".prop_map(Doc::Str),
    ]
}

/// Any value at all, a few levels deep.
fn anything() -> impl Strategy<Value = Doc> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Doc::Seq),
            prop::collection::vec((prop::sample::select(&["x", "type", "action", "id", "output"][..]), inner), 0..4)
                .prop_map(unique),
        ]
    })
}

/// A map without repeated keys, which the YAML reader would refuse outright.
fn unique(mut entries: Vec<(&'static str, Doc)>) -> Doc {
    let mut seen = std::collections::HashSet::new();
    entries.retain(|(key, _)| seen.insert(*key));
    Doc::Map(entries)
}

/// Mostly the right kind of value, sometimes any value.
fn or_anything(usual: impl Strategy<Value = Doc> + 'static) -> BoxedStrategy<Doc> {
    prop_oneof![12 => usual, 1 => anything()].boxed()
}

/// A map holding most of the given fields, in random order, sometimes with an unknown field.
fn fields(fields: Vec<(&'static str, BoxedStrategy<Doc>)>) -> impl Strategy<Value = Doc> {
    let count = fields.len();
    let picks: Vec<_> =
        fields.into_iter().map(|(name, value)| (any::<u8>(), value.prop_map(move |v| (name, v)))).collect();
    (picks, any::<u8>(), anything(), prop::collection::vec(any::<prop::sample::Index>(), 0..count)).prop_map(
        |(picked, unknown, extra, swaps)| {
            let mut entries: Vec<_> = picked.into_iter().filter(|(p, _)| p % 8 != 0).map(|(_, e)| e).collect();
            for swap in swaps {
                if !entries.is_empty() {
                    let i = swap.index(entries.len());
                    entries.swap(0, i);
                }
            }
            if unknown % 6 == 0 {
                entries.push(("unknwon_field", extra));
            }
            Doc::Map(entries)
        },
    )
}

fn failure_policy() -> impl Strategy<Value = Doc> {
    prop_oneof![
        prop::sample::select(&["retry", "skip", "replan", "fail", "stop", "explode"][..]).prop_map(Doc::Word),
        fields(vec![
            ("action", or_anything(prop::sample::select(&["retry", "skip", "fail", "replan"][..]).prop_map(Doc::Word))),
            ("max_attempts", or_anything((-1i64..6).prop_map(Doc::Int))),
            ("backoff", or_anything(prop::sample::select(&["1s", "0ms", "5x", "2m"][..]).prop_map(Doc::Word))),
            ("then", or_anything(prop::sample::select(&["skip", "fail", "retry"][..]).prop_map(Doc::Word))),
            ("retry_on", or_anything(prop::sample::select(&["any", "transient", "never"][..]).prop_map(Doc::Word))),
        ]),
    ]
}

fn task() -> impl Strategy<Value = Doc> {
    fields(vec![
        ("id", or_anything(id())),
        (
            "type",
            or_anything(
                prop::sample::select(&["task", "synthesis_gate", "human_review", "gate", "nope"][..])
                    .prop_map(Doc::Word),
            ),
        ),
        ("agent", or_anything(prop::sample::select(AGENTS).prop_map(|a| Doc::Str(a.to_owned())))),
        ("input", or_anything(prop::sample::select(TEMPLATES).prop_map(|t| Doc::Str(t.to_owned())))),
        ("depends_on", or_anything(prop_oneof![prop::collection::vec(id(), 0..4).prop_map(Doc::Seq), id()])),
        ("inputs", or_anything(prop::collection::vec(id(), 0..3).prop_map(Doc::Seq))),
        ("parallel_group", or_anything(prop::sample::select(&["g1", "g2"][..]).prop_map(Doc::Word))),
        ("on_failure", or_anything(failure_policy())),
        ("critical", or_anything(any::<bool>().prop_map(Doc::Bool))),
        ("timeout", or_anything(prop::sample::select(&["1s", "10m", "0s", "forever"][..]).prop_map(Doc::Word))),
        ("max_retries", or_anything((-1i64..4).prop_map(Doc::Int))),
        (
            "attachments",
            or_anything(
                prop::collection::vec(
                    prop_oneof![
                        Just(Doc::Map(vec![("file", Doc::Str("notes.md".into()))])),
                        Just(Doc::Map(vec![("file", Doc::Str("missing.txt".into()))])),
                        Just(Doc::Map(vec![("link", Doc::Str("https://example.com".into()))])),
                    ],
                    0..3,
                )
                .prop_map(Doc::Seq),
            ),
        ),
    ])
}

fn agent() -> impl Strategy<Value = Doc> {
    fields(vec![
        ("runtime", or_anything(prop::sample::select(&["mock", "llm", "command", "wasm"][..]).prop_map(Doc::Word))),
        ("default", or_anything(Just(Doc::Str("done".into())))),
        ("latency", or_anything(prop::sample::select(&["10ms", "1s", "soon"][..]).prop_map(Doc::Word))),
        ("command", or_anything(Just(Doc::Seq(vec![Doc::Str("echo".into()), Doc::Str("hi".into())])))),
        ("provider", or_anything(Just(Doc::Word("local")))),
        ("model", or_anything(Just(Doc::Word("small")))),
        ("responses", or_anything(Just(Doc::Map(vec![("a", Doc::Str("ok".into()))])))),
    ])
}

fn manifest() -> impl Strategy<Value = Doc> {
    let agents = prop::collection::vec((prop::sample::select(AGENTS), agent()), 0..3).prop_map(unique);
    let workflow = prop::collection::vec(or_anything(task()), 0..7).prop_map(Doc::Seq);
    let spec = fields(vec![
        ("agent_definitions", or_anything(agents)),
        ("workflow", or_anything(workflow)),
        ("mission", or_anything(Just(Doc::Str("find things".into())))),
        (
            "control_logic",
            or_anything(fields(vec![
                ("strategy", or_anything(prop::sample::select(WORDS).prop_map(Doc::Word))),
                ("max_concurrency", or_anything((-1i64..4).prop_map(Doc::Int))),
            ])),
        ),
    ]);
    let metadata = fields(vec![("name", or_anything(Just(Doc::Str("fuzz".into()))))]);
    fields(vec![
        ("apiVersion", or_anything(prop::sample::select(&["runner/v1", "runner/v2"][..]).prop_map(Doc::Word))),
        ("kind", or_anything(prop::sample::select(&["Plan", "Pod"][..]).prop_map(Doc::Word))),
        ("metadata", or_anything(metadata)),
        ("spec", or_anything(spec)),
    ])
}

fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || matches!(c, '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn scalar_text(doc: &Doc, style: Style) -> Option<String> {
    Some(match doc {
        Doc::Null => "null".to_owned(),
        Doc::Bool(b) => b.to_string(),
        Doc::Int(i) => i.to_string(),
        Doc::Float(f) if f.is_finite() => format!("{f:?}"),
        Doc::Float(f) if f.is_nan() => ".nan".to_owned(),
        Doc::Float(f) => if *f > 0.0 { ".inf" } else { "-.inf" }.to_owned(),
        Doc::Str(s) => quoted(s),
        Doc::Word(w) if style == Style::Block => (*w).to_owned(),
        Doc::Word(w) => quoted(w),
        Doc::Seq(_) | Doc::Map(_) => return None,
    })
}

fn render(doc: &Doc, style: Style) -> String {
    let mut out = String::new();
    match style {
        Style::Block => block(doc, 0, &mut out),
        Style::Flow => flow(doc, &mut out),
    }
    out
}

fn flow(doc: &Doc, out: &mut String) {
    match doc {
        Doc::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                flow(item, out);
            }
            out.push(']');
        }
        Doc::Map(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n ");
                }
                out.push_str(&quoted(key));
                out.push_str(": ");
                flow(value, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar_text(scalar, Style::Flow).unwrap_or_default()),
    }
}

/// Writes `doc` as block YAML at `indent`, assuming the line so far ends where it goes.
fn block(doc: &Doc, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match doc {
        Doc::Seq(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push('-');
                child(item, indent + 2, out);
            }
        }
        Doc::Map(entries) if !entries.is_empty() => {
            for (key, value) in entries {
                out.push_str(&pad);
                out.push_str(key);
                out.push(':');
                child(value, indent + 2, out);
            }
        }
        Doc::Seq(_) => out.push_str(&format!("{pad}[]\n")),
        Doc::Map(_) => out.push_str(&format!("{pad}{{}}\n")),
        scalar => out.push_str(&format!("{pad}{}\n", scalar_text(scalar, Style::Block).unwrap_or_default())),
    }
}

/// Writes the value after `key:` or `-`: scalars and empty collections inline, others below.
fn child(doc: &Doc, indent: usize, out: &mut String) {
    match doc {
        Doc::Seq(items) if !items.is_empty() => {
            out.push('\n');
            block(doc, indent, out);
        }
        Doc::Map(entries) if !entries.is_empty() => {
            out.push('\n');
            block(doc, indent, out);
        }
        Doc::Seq(_) => out.push_str(" []\n"),
        Doc::Map(_) => out.push_str(" {}\n"),
        scalar => out.push_str(&format!(" {}\n", scalar_text(scalar, Style::Block).unwrap_or_default())),
    }
}

#[test]
fn a_rendered_manifest_can_be_valid() {
    let task = |id: &str, deps: Vec<Doc>| {
        Doc::Map(vec![
            ("id", Doc::Str(id.into())),
            ("agent", Doc::Str("writer".into())),
            ("input", Doc::Str("{{ tasks.a.output }}".into())),
            ("depends_on", Doc::Seq(deps)),
        ])
    };
    let document = Doc::Map(vec![
        ("apiVersion", Doc::Word("runner/v1")),
        ("kind", Doc::Word("Plan")),
        ("metadata", Doc::Map(vec![("name", Doc::Str("ok".into()))])),
        (
            "spec",
            Doc::Map(vec![
                ("agent_definitions", Doc::Map(vec![("writer", Doc::Map(vec![("runtime", Doc::Word("mock"))]))])),
                (
                    "workflow",
                    Doc::Seq(vec![
                        Doc::Map(vec![
                            ("id", Doc::Str("a".into())),
                            ("agent", Doc::Str("writer".into())),
                            ("input", Doc::Str("go".into())),
                        ]),
                        task("b", vec![Doc::Str("a".into())]),
                    ]),
                ),
            ]),
        ),
    ]);
    for style in [Style::Block, Style::Flow] {
        let text = render(&document, style);
        let loaded = load_str("ok.yaml", "ok", &text, &|_| true);
        assert!(loaded.is_valid(), "{text}\n{:#?}", loaded.diagnostics);
    }
}

#[test]
fn a_workflow_is_read_wherever_it_may_be_written() {
    let agents = "agent_definitions: {m: {runtime: mock}}";
    let tasks = "[{id: a, agent: m, input: x}, {id: b, agent: m, input: y, depends_on: [a]}]";
    let envelope = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: p}\n";
    let placed = [
        format!("{envelope}spec:\n  {agents}\n  workflow: {tasks}\n"),
        format!("{agents}\nworkflow: {tasks}\n"),
        format!("plan:\n  {agents}\n  workflow: {tasks}\n"),
        // An alias is read as a copy of its anchor's node, in the workflow's place.
        format!("{envelope}x-tasks: &tasks {tasks}\nspec:\n  {agents}\n  workflow: *tasks\n"),
        // A merge key's entries are merged into the mapping that holds it.
        format!("x: &base\n  workflow: {tasks}\n<<: [*base]\n{agents}\n"),
    ];
    for text in &placed {
        let loaded = load_str("p.yaml", "p", text, &|_| true);
        let ids: Vec<&str> =
            loaded.plan.iter().flat_map(|plan| &plan.tasks).map(|task| task.id.value.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "{text}\n{:?}", loaded.diagnostics);
    }
    for text in [
        format!("{envelope}spec:\n  {agents}\n  workflow: just words\n"),
        format!("{envelope}spec:\n  {agents}\n  workflow: {tasks}\n  workflow: {tasks}\n"),
        format!("{envelope}spec:\n  plan:\n    {agents}\n    workflow: {tasks}\n"),
        format!("plan: {{{agents}, workflow: {{a: 1}}}}\n"),
    ] {
        let loaded = load_str("p.yaml", "p", &text, &|_| true);
        assert!(loaded.errors().next().is_some(), "{text}");
        check(&loaded).expect("diagnostics inside the text");
    }
}
