//! The cap on a plan's size: given to one load, or set for the process (loads and splices),
//! never above the 4 GiB that 32-bit spans can address.

use std::path::PathBuf;

use manifest::{
    Diagnostic, Loaded, MAX_PLAN_BYTES, PLAN_BYTES_CEILING, load_file, load_file_with_limit, load_str, plan_limit,
    set_plan_limit, splice,
};

const PLAN: &str = "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: capped}\nspec:\n  agent_definitions:\n    \
                    echo: {runtime: mock}\n  workflow:\n    - {id: a, agent: echo, input: hi}\n";

/// A file in the temp folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        Scratch(std::env::temp_dir().join(format!("manifest-plan-limit-{}-{name}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn too_large(loaded: &Loaded) -> &Diagnostic {
    let first = loaded.diagnostics.first().expect("a diagnostic");
    assert_eq!(first.code(), "plan::too_large", "{:?}", loaded.diagnostics);
    first
}

#[test]
fn a_file_is_read_up_to_the_limit_it_is_given() {
    let file = Scratch::new("small.yaml");
    std::fs::write(&file.0, PLAN).expect("the plan is written");
    let size = PLAN.len() as u64;
    assert!(load_file_with_limit(&file.0, size).is_valid(), "a plan of exactly the limit loads");
    let refused = load_file_with_limit(&file.0, size - 1);
    let diagnostic = too_large(&refused);
    assert_eq!(diagnostic.to_string(), format!("the plan is {size} bytes; plans are limited to {} bytes", size - 1));
    assert!(diagnostic.help.as_deref().is_some_and(|h| h.contains("RUNNER_MAX_PLAN_BYTES")), "{diagnostic:?}");
}

#[test]
fn no_limit_goes_past_the_ceiling_and_the_error_there_says_so() {
    let file = Scratch::new("sparse.yaml");
    let sparse = std::fs::File::create(&file.0).expect("the file is created");
    // Sparse: no disk is used, and the size is refused before anything is read.
    if sparse.set_len(PLAN_BYTES_CEILING + 1).is_err() {
        eprintln!("skipped: this file system cannot hold a sparse file of 4 GiB");
        return;
    }
    let refused = load_file_with_limit(&file.0, u64::MAX);
    let diagnostic = too_large(&refused);
    assert!(diagnostic.to_string().ends_with(&format!("limited to {PLAN_BYTES_CEILING} bytes")), "{diagnostic}");
    let help = diagnostic.help.as_deref().unwrap_or_default();
    assert!(help.contains("4 GiB") && help.contains("split the plan"), "{help}");
}

/// One test sets the process's limit, so no other test here sees it change.
#[test]
fn the_process_limit_applies_to_loads_and_splices_and_is_clamped() {
    assert_eq!(plan_limit(), MAX_PLAN_BYTES, "32 MiB by default");
    let file = Scratch::new("process.yaml");
    std::fs::write(&file.0, PLAN).expect("the plan is written");
    let plan = load_str("plan.yaml", "plan", PLAN, &|_| true).plan.expect("a plan");

    assert_eq!(set_plan_limit(10), 10);
    too_large(&load_file(&file.0));
    let spliced = splice(&plan, &["a"], "a", r#"{"workflow": [{"id": "b", "agent": "echo", "input": "hi"}]}"#);
    assert_eq!(spliced.errors().map(Diagnostic::code).collect::<Vec<_>>(), ["plan::too_large"]);

    assert_eq!(set_plan_limit(u64::MAX), PLAN_BYTES_CEILING, "clamped to what 32-bit spans address");
    assert_eq!(plan_limit(), PLAN_BYTES_CEILING);
    assert!(load_file(&file.0).is_valid());
    set_plan_limit(MAX_PLAN_BYTES);
}
