//! How the runner's modules depend on each other: only `main.rs` reaches the dispatcher, so the
//! command modules never import each other in a circle through `cli.rs`.

use std::fs;
use std::path::Path;

#[test]
fn only_main_imports_the_dispatcher() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    for entry in fs::read_dir(&src).expect("runner/src is a readable folder") {
        let path = entry.expect("runner/src lists its entries").path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_owned();
        if path.extension().is_none_or(|extension| extension != "rs") || name == "main.rs" {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a runner source file is UTF-8 text");
        if text.contains("crate::cli") {
            offenders.push(name);
        }
    }
    assert!(offenders.is_empty(), "these modules import the dispatcher `crate::cli`: {offenders:?}");
}
