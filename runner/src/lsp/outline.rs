//! The outline: the agents, then the workflow's phases (the graph's levels), each with its
//! parallel groups and tasks; a plan whose graph cannot be built lists its tasks in order.

use lsp_types::{DocumentSymbol, DocumentSymbolResponse, SymbolKind};
use manifest::Span;
use manifest::plan::Task;

use super::analysis::Analysis;
use super::document::{Document, Encoding};

/// The document's symbols, nested.
pub fn symbols(document: &Document, analysis: &Analysis, encoding: Encoding) -> DocumentSymbolResponse {
    let Some(plan) = &analysis.loaded.plan else { return DocumentSymbolResponse::Nested(Vec::new()) };
    let symbol =
        |name: String, detail: Option<String>, kind, whole: Span, select: Span, children: Vec<DocumentSymbol>| {
            #[allow(deprecated)]
            DocumentSymbol {
                name,
                detail,
                kind,
                tags: None,
                deprecated: None,
                range: document.range(whole, encoding),
                selection_range: document.range(select, encoding),
                children: (!children.is_empty()).then_some(children),
            }
        };
    let task = |task: &Task| {
        let detail = task.agent.as_ref().map(|a| format!("{} · {}", task.kind.as_str(), a.value));
        symbol(
            task.id.value.to_string(),
            detail,
            SymbolKind::FUNCTION,
            cover(task.loc.span, task.id.loc.span),
            task.id.loc.span,
            Vec::new(),
        )
    };
    let mut out = Vec::new();
    let agents: Vec<DocumentSymbol> = plan
        .agents
        .iter()
        .map(|(name, agent)| {
            let detail = Some(agent.runtime.name().to_owned());
            symbol(name.clone(), detail, SymbolKind::CLASS, agent.loc.span, agent.loc.span, Vec::new())
        })
        .collect();
    if let Some(whole) = agents_span(analysis) {
        out.push(symbol("agents".into(), None, SymbolKind::NAMESPACE, whole, whole, agents));
    }
    let Some(graph) = &analysis.loaded.graph else {
        out.extend(plan.tasks.iter().map(task));
        return DocumentSymbolResponse::Nested(out);
    };
    for (level, members) in graph.phases().iter().enumerate() {
        let mut children: Vec<DocumentSymbol> = Vec::new();
        let mut groups: Vec<(String, Vec<&Task>)> = Vec::new();
        for &i in members {
            let member = &plan.tasks[i];
            match &member.extras().parallel_group {
                Some(group) => match groups.iter_mut().find(|(name, _)| *name == group.value) {
                    Some((_, tasks)) => tasks.push(member),
                    None => groups.push((group.value.clone(), vec![member])),
                },
                None => children.push(task(member)),
            }
        }
        for (name, tasks) in groups {
            let whole = tasks.iter().map(|t| cover(t.loc.span, t.id.loc.span)).reduce(cover).unwrap_or_default();
            let select = tasks[0].id.loc.span;
            let grouped = tasks.into_iter().map(task).collect();
            children.push(symbol(format!("group {name}"), None, SymbolKind::NAMESPACE, whole, select, grouped));
        }
        let spans = members.iter().map(|&i| cover(plan.tasks[i].loc.span, plan.tasks[i].id.loc.span));
        let whole = spans.reduce(cover).unwrap_or_default();
        let select = members.first().map_or(whole, |&i| plan.tasks[i].id.loc.span);
        let detail = Some(format!("{} task{}", members.len(), if members.len() == 1 { "" } else { "s" }));
        out.push(symbol(format!("phase {}", level + 1), detail, SymbolKind::MODULE, whole, select, children));
    }
    DocumentSymbolResponse::Nested(out)
}

/// The smallest span that holds both.
fn cover(a: Span, b: Span) -> Span {
    if a.is_empty() && a.offset() == 0 {
        return b;
    }
    let start = a.offset().min(b.offset());
    let end = (a.offset() + a.len()).max(b.offset() + b.len());
    Span::new(start, end - start)
}

/// The span that holds every agent's definition.
fn agents_span(analysis: &Analysis) -> Option<Span> {
    let plan = analysis.loaded.plan.as_ref()?;
    plan.agents.values().map(|a| a.loc.span).filter(|s| !s.is_empty()).reduce(cover)
}
