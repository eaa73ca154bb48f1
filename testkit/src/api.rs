//! Checks on a crate's source text for the tests that pin its public API.

use std::path::Path;

/// Whether `pub enum {name}` in `file` (under the crate's `src/`) carries `#[non_exhaustive]`
/// among the attributes right above it. Panics when the file or the enum is not there.
pub fn is_non_exhaustive(crate_dir: &str, file: &str, name: &str) -> bool {
    let path = Path::new(crate_dir).join("src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{} is readable text: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|line| *line == format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("{file} declares `pub enum {name}`"));
    lines[..at].iter().rev().take_while(|line| line.starts_with("#[")).any(|line| *line == "#[non_exhaustive]")
}
