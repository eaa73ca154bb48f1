//! The real plans in `../shared/corpus/plans/`, read from beside the repository (never copied
//! into it). A fresh clone without that folder still passes: the tests say they are skipped.

use std::path::PathBuf;

/// Where the corpus lives, relative to this crate.
pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus/plans");

/// The corpus's plan files in name order, or `None` (after saying which tests are skipped)
/// when the corpus is absent.
pub fn corpus(tests: &str) -> Option<Vec<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(CORPUS) else {
        println!("{tests} skipped: no corpus at {CORPUS}");
        return None;
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    Some(files)
}

/// Loads `ptc_runner-<name>.json`, or `None` (after saying which tests are skipped) when the
/// corpus is absent.
pub fn load(name: &str, tests: &str) -> Option<manifest::Loaded> {
    let folder = std::path::Path::new(CORPUS);
    if !folder.is_dir() {
        println!("{tests} skipped: no corpus at {CORPUS}");
        return None;
    }
    let path = folder.join(format!("ptc_runner-{name}.json"));
    assert!(path.is_file(), "the corpus has no {}", path.display());
    Some(manifest::load_file(&path))
}
