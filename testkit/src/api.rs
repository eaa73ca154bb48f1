//! Checks on a crate's source text for the tests that pin its public API.

use std::path::Path;

/// The text of `file` under the crate's folder; panics when it cannot be read.
pub fn source(crate_dir: &str, file: &str) -> String {
    let path = Path::new(crate_dir).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{} is readable text: {e}", path.display()))
}

/// Whether `pub enum {name}` in `file` (under the crate's `src/`) carries `#[non_exhaustive]`
/// among the attributes right above it. Panics when the file or the enum is not there.
fn is_non_exhaustive(crate_dir: &str, file: &str, name: &str) -> bool {
    let text = source(crate_dir, &format!("src/{file}"));
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|line| *line == format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("{file} declares `pub enum {name}`"));
    lines[..at].iter().rev().take_while(|line| line.starts_with("#[")).any(|line| *line == "#[non_exhaustive]")
}

/// The enums of `enums` (file under `src/`, name) that are not `#[non_exhaustive]`.
pub fn closed_enums<'a>(crate_dir: &str, enums: &[(&str, &'a str)]) -> Vec<&'a str> {
    enums.iter().filter(|(file, name)| !is_non_exhaustive(crate_dir, file, name)).map(|(_, name)| *name).collect()
}

/// The modules the crate's `src/lib.rs` declares `pub mod`, in order.
pub fn public_modules(crate_dir: &str) -> Vec<String> {
    let text = source(crate_dir, "src/lib.rs");
    text.lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|name| name.trim_end_matches(';').to_owned())
        .collect()
}
