//! `runner critic --fix` and `--fix --diff`: the mechanical fixes applied in place as edits at
//! spans, comments and layout kept, the result checked again; typo plans made from every
//! shipped example.

mod support;

use std::path::{Path, PathBuf};

use manifest::edit_distance;
use support::Env;

const TYPOS: &str = "\
# Comments survive the fix.
apiVersion: runner/v1
kind: Plan
metadata:
  name: typos
spec:
  agent_definitions:
    writer: {runtime: mock}   # the only agent
  workflow:
    - id: search
      agent: writr
      input: Find.
      on_failure: skip
    - id: summarise   # last
      agent: writer
      input: \"Sum up {{ tasks.search.output }}\"
      depends_on:
        - serach   # a typo
      on_failure: skip
";

#[test]
fn fix_applies_each_suggestion_in_place_and_says_what_it_changed_and_left() {
    let env = Env::new();
    let plan = env.write("plan.yaml", TYPOS);
    let output = env.runner().args(["critic", "--fix"]).arg(&plan).output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("fixed: line 11: replace `writr` with `writer` (plan::unknown_agent)"), "{report}");
    assert!(report.contains("fixed: line 18: replace `serach` with `search` (plan::unknown_dependency)"), "{report}");
    assert!(report.contains("left: "), "{report}");
    let fixed = std::fs::read_to_string(&plan).expect("readable");
    assert_eq!(fixed, TYPOS.replace("writr", "writer").replace("- serach", "- search"));
    env.runner().arg("validate").arg(&plan).assert().code(0);
}

#[test]
fn diff_prints_the_change_and_leaves_the_file() {
    let env = Env::new();
    let plan = env.write("plan.yaml", TYPOS);
    let output = env.runner().args(["critic", "--fix", "--diff"]).arg(&plan).output().expect("runs");
    assert_eq!(output.status.code(), Some(0));
    let diff = String::from_utf8_lossy(&output.stdout);
    let name = plan.display();
    assert!(diff.starts_with(&format!("--- a/{name}\n+++ b/{name}\n@@ -8,12 +8,12 @@\n")), "{diff}");
    assert!(diff.contains("-      agent: writr\n+      agent: writer\n"), "{diff}");
    assert!(diff.contains("-        - serach   # a typo\n+        - search   # a typo\n"), "{diff}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("would fix: line 11"));
    assert_eq!(std::fs::read_to_string(&plan).expect("readable"), TYPOS, "untouched");
    env.runner().args(["critic", "--diff"]).arg(&plan).assert().code(2);
}

#[test]
fn critic_fixes_follow_once_the_typos_are_fixed() {
    let env = Env::new();
    // The misspelt dependency hides a redundant edge and a critical task without a fallback.
    let text = TYPOS
        .replace("      on_failure: skip\n    - id: summarise", "      critical: true\n    - id: middle\n      agent: writer\n      input: \"{{ tasks.search.output }}\"\n      depends_on: [search]\n      on_failure: skip\n    - id: summarise")
        .replace("        - serach   # a typo\n", "        - middle\n        - serach   # a typo\n");
    let plan = env.write("plan.yaml", &text);
    let output = env.runner().args(["critic", "--fix"]).arg(&plan).output().expect("runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(
        report.contains("(critic::redundant_edge)") && report.contains("(critic::critical_without_fallback)"),
        "{report}"
    );
    let fixed = std::fs::read_to_string(&plan).expect("readable");
    assert!(fixed.contains("    - id: search\n      on_failure: {action: retry, max_attempts: 3}\n"), "{fixed}");
    assert!(fixed.contains("      depends_on:\n        - middle\n      on_failure: skip\n"), "{fixed}");
    assert!(fixed.contains("# Comments survive the fix.") && fixed.contains("# the only agent"));
    let critic = env.runner().args(["critic", "--format", "json"]).arg(&plan).output().expect("runs");
    let critic = String::from_utf8_lossy(&critic.stdout);
    assert!(!critic.contains("redundant_edge") && !critic.contains("critical_without_fallback"), "{critic}");
}

#[test]
fn a_json_plan_stays_json() {
    let env = Env::new();
    let text = r#"{"tasks": [{"id": "fetch", "input": "a"}, {"id": "report", "input": "b", "depends_on": ["fecth"]}]}"#;
    let plan = env.write("plan.json", text);
    env.runner().args(["critic", "--fix"]).arg(&plan).assert().code(0);
    let fixed = std::fs::read_to_string(&plan).expect("readable");
    // Bare-form tasks are critical unless they say not: each gets a retry, written in JSON.
    let retry = r#", "on_failure": {"action": "retry", "max_attempts": 3}"#;
    let expected = text
        .replace("fecth", "fetch")
        .replace(r#""fetch","#, &format!(r#""fetch"{retry},"#))
        .replace(r#""report","#, &format!(r#""report"{retry},"#));
    assert_eq!(fixed, expected);
    serde_json::from_str::<serde_json::Value>(&fixed).expect("still JSON");
}

#[test]
fn what_cannot_be_fixed_is_left_listed_with_exit_2() {
    let env = Env::new();
    let plan = env.write("plan.yaml", &TYPOS.replace("agent: writr", "agent: somebody_else"));
    let output = env.runner().args(["critic", "--fix"]).arg(&plan).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("left: line 11: error plan::unknown_agent"), "{report}");
    let broken = env.write("broken.yaml", "spec: [unclosed\n");
    let output = env.runner().args(["critic", "--fix"]).arg(&broken).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stdout).contains("nothing to fix"));
    assert_eq!(std::fs::read_to_string(&broken).expect("readable"), "spec: [unclosed\n");
    env.runner().args(["critic", "--fix", "no-such-plan.yaml"]).assert().code(2);
}

/// Every plan the project ships that loads without errors.
fn shipped_plans() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut plans = Vec::new();
    for dir in [root.clone(), root.join("challenges"), root.join("critic"), root.join("tools")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !name.ends_with(".yaml") || name.ends_with(".test.yaml") {
                continue;
            }
            // Copied alone into a test folder: plans that read sub-plans or files are left out.
            let loaded = manifest::load_file(&path);
            let alone = manifest::load_str("plan.yaml", "plan", &loaded.source.text, &|_| false);
            if loaded.is_valid() && loaded.included.is_empty() && alone.is_valid() {
                plans.push(path);
            }
        }
    }
    plans.sort();
    plans
}

/// The plan with one dependency misspelt (a letter dropped), where the original is the one
/// closest id to the typo; `None` when no dependency makes an unambiguous typo.
fn misspelt(path: &Path) -> Option<(String, String)> {
    let loaded = manifest::load_file(path);
    let plan = loaded.plan.as_ref()?;
    let text = loaded.source.text.to_string();
    let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.value.as_str()).collect();
    for task in &plan.tasks {
        for dependency in &task.depends_on {
            let id = dependency.value.as_str();
            let span = dependency.loc.span;
            if id.len() < 5 || text.get(span.offset()..span.offset() + span.len()) != Some(id) {
                continue;
            }
            let typo = format!("{}{}", &id[..2], &id[3..]);
            let closest: Vec<&&str> = ids.iter().filter(|other| edit_distance(&typo, other) <= 1).collect();
            if closest.len() == 1 && !ids.contains(&typo.as_str()) {
                let mut mutated = text.clone();
                mutated.replace_range(span.offset()..span.offset() + span.len(), &typo);
                return Some((mutated, typo));
            }
        }
    }
    None
}

#[test]
fn typo_plans_made_from_every_shipped_example_fix_back_to_the_example_fixed() {
    let env = Env::new();
    let mut checked = 0;
    for path in shipped_plans() {
        let Some((mutated, typo)) = misspelt(&path) else { continue };
        let original = std::fs::read_to_string(&path).expect("readable");
        // Fixing the typo plan must give what fixing the example itself gives.
        let clean = env.write("clean.yaml", &original);
        env.runner().args(["critic", "--fix"]).arg(&clean).output().expect("runs");
        let typo_plan = env.write("typo.yaml", &mutated);
        let output = env.runner().args(["critic", "--fix"]).arg(&typo_plan).output().expect("runs");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(report.contains(&format!("replace `{typo}`")), "{}: {report}", path.display());
        let fixed = std::fs::read_to_string(&typo_plan).expect("readable");
        assert_eq!(fixed, std::fs::read_to_string(&clean).expect("readable"), "{}", path.display());
        for comment in original.lines().filter(|l| l.trim_start().starts_with('#')) {
            assert!(fixed.contains(comment), "{}: lost {comment:?}", path.display());
        }
        env.runner().arg("validate").arg(&typo_plan).assert().code(0);
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} examples made a typo plan");
}
