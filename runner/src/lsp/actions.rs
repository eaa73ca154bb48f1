//! Code actions: the quick fix of every diagnostic and finding in the range asked about whose
//! help is a mechanical edit (the same fixes `runner critic --fix` applies).

use std::collections::HashMap;

use lsp_types::{CodeAction, CodeActionKind, CodeActionOrCommand, Range, TextEdit, Url, WorkspaceEdit};

use super::analysis::Analysis;
use super::document::{Document, Encoding};

/// The quick fixes for whatever is found within `range`.
pub fn actions(
    uri: &Url,
    document: &Document,
    analysis: &Analysis,
    range: Range,
    encoding: Encoding,
) -> Vec<CodeActionOrCommand> {
    let asked = document.span(range, encoding);
    let (from, to) = (asked.offset(), asked.offset() + asked.len());
    let published = super::publish::diagnostics(uri, document, analysis, encoding).diagnostics;
    analysis
        .fixes
        .iter()
        .filter(|offer| offer.span.offset() <= to && from <= offer.span.offset() + offer.span.len())
        .map(|offer| {
            let edits: Vec<TextEdit> = offer
                .fix
                .edits
                .iter()
                .map(|e| TextEdit { range: document.range(e.span, encoding), new_text: e.text.clone() })
                .collect();
            let at = document.range(offer.span, encoding);
            let code = lsp_types::NumberOrString::String(offer.code.clone());
            let fixes: Vec<_> =
                published.iter().filter(|d| d.range == at && d.code.as_ref() == Some(&code)).cloned().collect();
            CodeActionOrCommand::CodeAction(CodeAction {
                title: offer.fix.title.clone(),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: (!fixes.is_empty()).then_some(fixes),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), edits)])),
                    ..Default::default()
                }),
                is_preferred: Some(true),
                ..Default::default()
            })
        })
        .collect()
}
