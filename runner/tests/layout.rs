//! How the runner's modules depend on each other: only `main.rs` reaches the dispatcher, so the
//! command modules never import each other in a circle through `cli.rs`; and the store layer
//! (`store/`, `home.rs`) imports no command module, so commands stand on the store and never
//! the other way round.

use std::fs;
use std::path::Path;

#[test]
fn only_main_imports_the_dispatcher() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&src, &[]);
    assert!(files.iter().any(|(path, _)| path.ends_with("plan/mod.rs")), "files in folders are read too");
    let mut offenders = Vec::new();
    for (path, module) in files {
        if module.is_empty() {
            // main.rs, the crate root.
            continue;
        }
        let text = fs::read_to_string(&path).expect("a runner source file is UTF-8 text");
        if text.contains("crate::cli") || crate_modules_named(&text, &module).iter().any(|name| name == "cli") {
            offenders.push(module.join("::"));
        }
    }
    assert!(offenders.is_empty(), "these modules import the dispatcher `crate::cli`: {offenders:?}");
}

/// The store layer: where runs live and how they are read and written. Everything else the
/// crate declares in `main.rs` is a command module (a subcommand, or what subcommands share:
/// driving, the live view, diagnostics, exit codes), which the store layer must not import.
const STORE_LAYER: [&str; 2] = ["store", "home"];

#[test]
fn the_store_layer_imports_no_command_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let main = fs::read_to_string(src.join("main.rs")).expect("runner/src/main.rs is readable");
    let modules: Vec<&str> =
        main.lines().filter_map(|line| line.trim().strip_prefix("mod ")?.strip_suffix(';')).collect();
    for layer in STORE_LAYER {
        assert!(modules.contains(&layer), "main.rs declares no module `{layer}`: update STORE_LAYER");
    }
    let commands: Vec<&str> = modules.iter().copied().filter(|m| !STORE_LAYER.contains(m)).collect();
    assert!(commands.contains(&"apply") && commands.contains(&"worker"), "the command modules are found: {commands:?}");

    let mut files = vec![(src.join("home.rs"), vec!["home".to_owned()])];
    files.extend(rust_files(&src.join("store"), &["store".to_owned()]));
    assert!(files.len() > 2, "the store layer's files are found: {files:?}");
    let mut offenders = Vec::new();
    for (path, module) in &files {
        let text = fs::read_to_string(path).expect("a runner source file is UTF-8 text");
        for used in crate_modules_named(&text, module) {
            if commands.contains(&used.as_str()) {
                offenders.push(format!("{} uses crate::{used}", path.strip_prefix(&src).unwrap_or(path).display()));
            }
        }
    }
    assert!(offenders.is_empty(), "the store layer imports command modules: {offenders:?}");
}

/// Every `.rs` file under `dir` with its module path (`mod.rs` is the folder's module, `main.rs`
/// the crate root's).
fn rust_files(dir: &Path, module: &[String]) -> Vec<(std::path::PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("a source folder is readable") {
        let path = entry.expect("a source folder lists its entries").path();
        let name = path.file_stem().and_then(|name| name.to_str()).unwrap_or_default().to_owned();
        let mut inner = module.to_vec();
        if path.is_dir() {
            inner.push(name);
            files.extend(rust_files(&path, &inner));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            if name != "mod" && name != "main" {
                inner.push(name);
            }
            files.push((path, inner));
        }
    }
    files
}

/// The top-level modules of the crate that `text`, the source of module `module`, names: through
/// `crate::` (with `crate::{a, b}` groups), or through as many `super::` as reach the crate root.
fn crate_modules_named(text: &str, module: &[String]) -> Vec<String> {
    let mut roots = vec!["crate::".to_owned()];
    // From a file's module, `super::` taken `module.len()` times is the crate root.
    roots.push("super::".repeat(module.len()));
    let mut named = Vec::new();
    for root in &roots {
        for (at, _) in text.match_indices(root.as_str()) {
            let rest = &text[at + root.len()..];
            if rest.starts_with("super::") {
                continue;
            }
            match rest.strip_prefix('{') {
                Some(group) => {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    named.extend(group.split(',').map(|item| first_name(item.trim())));
                }
                None => named.push(first_name(rest)),
            }
        }
    }
    named.retain(|name| !name.is_empty());
    named
}

/// The identifier `path` starts with.
fn first_name(path: &str) -> String {
    path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

#[test]
fn crate_paths_are_read_through_groups_and_super() {
    let text = "use crate::{home::RunDir, worker::leases};\nuse super::super::logs::Tail;\nuse super::Postgres;";
    let named = crate_modules_named(text, &["store".to_owned(), "run".to_owned()]);
    assert_eq!(named, ["home", "worker", "logs"]);
    assert_eq!(crate_modules_named("crate::drive::CANCEL_POLL", &["home".to_owned()]), ["drive"]);
}
