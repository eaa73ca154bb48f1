//! Go to definition, find references and rename, for task ids and agent names wherever they
//! are written (ids, `depends_on`, `inputs`, templates, `agent`, a reviewer, the planner); and
//! from a `type: plan` task's `plan:` to the sub-plan file.

use std::collections::HashMap;

use lsp_types::{GotoDefinitionResponse, Location, PrepareRenameResponse, Range, TextEdit, Url, WorkspaceEdit};

use super::analysis::{Analysis, Kind};
use super::document::{Document, Encoding};

/// Where the name at `offset` is defined, or the sub-plan file a `plan:` value names.
pub fn definition(
    uri: &Url,
    document: &Document,
    analysis: &Analysis,
    offset: usize,
    encoding: Encoding,
) -> Option<GotoDefinitionResponse> {
    if let Some(symbol) = analysis.symbol_at(offset) {
        let definition = analysis.occurrences(symbol).find(|s| s.definition)?;
        let range = document.range(definition.span, encoding);
        return Some(GotoDefinitionResponse::Scalar(Location { uri: uri.clone(), range }));
    }
    let plan = analysis.loaded.plan.as_ref()?;
    let file = plan.tasks.iter().find_map(|task| {
        let at = task.extras().plan.as_ref()?;
        let span = at.loc.span;
        (span.offset() <= offset && offset <= span.offset() + span.len()).then(|| at.value.clone())
    })?;
    let base = uri.to_file_path().ok()?;
    let target = Url::from_file_path(base.parent()?.join(file)).ok()?;
    Some(GotoDefinitionResponse::Scalar(Location { uri: target, range: Range::default() }))
}

/// Every place the name at `offset` is written, its definition too when `declaration`.
pub fn references(
    uri: &Url,
    document: &Document,
    analysis: &Analysis,
    offset: usize,
    declaration: bool,
    encoding: Encoding,
) -> Vec<Location> {
    let Some(symbol) = analysis.symbol_at(offset) else { return Vec::new() };
    analysis
        .occurrences(symbol)
        .filter(|s| declaration || !s.definition)
        .map(|s| Location { uri: uri.clone(), range: document.range(s.span, encoding) })
        .collect()
}

/// The range of the name a rename at `offset` would change; `None` where there is none.
pub fn prepare_rename(
    document: &Document,
    analysis: &Analysis,
    offset: usize,
    encoding: Encoding,
) -> Option<PrepareRenameResponse> {
    let symbol = analysis.symbol_at(offset)?;
    Some(PrepareRenameResponse::Range(document.range(symbol.span, encoding)))
}

/// The edits that rename the task or agent at `offset` to `new_name` everywhere in the plan;
/// an error when the name is not a valid id or is taken.
pub fn rename(
    uri: &Url,
    document: &Document,
    analysis: &Analysis,
    offset: usize,
    new_name: &str,
    encoding: Encoding,
) -> Result<Option<WorkspaceEdit>, String> {
    let Some(symbol) = analysis.symbol_at(offset) else { return Ok(None) };
    if new_name.is_empty() || !new_name.chars().all(super::place::is_word) {
        return Err(format!("`{new_name}` is not a valid name: use letters, digits, `_` and `-`"));
    }
    let what = match symbol.kind {
        Kind::Task => "task",
        Kind::Agent => "agent",
    };
    if new_name != symbol.name
        && analysis.symbols.iter().any(|s| s.kind == symbol.kind && s.definition && s.name == new_name)
    {
        return Err(format!("a {what} named `{new_name}` already exists"));
    }
    let edits: Vec<TextEdit> = analysis
        .occurrences(symbol)
        .map(|s| TextEdit { range: document.range(s.span, encoding), new_text: new_name.to_owned() })
        .collect();
    Ok(Some(WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), edits)])), ..Default::default() }))
}
