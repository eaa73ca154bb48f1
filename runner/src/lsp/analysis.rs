//! What the server knows of a document after reading it: the loaded plan, the critic's
//! findings, the fixes on offer, and every place a task id or an agent name is written.

use std::path::Path;

use manifest::critic::Finding;
use manifest::plan::Verification;
use manifest::{Loaded, Span};

use crate::fix::Offered;

/// A name a plan defines and refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A task id.
    Task,
    /// An agent name.
    Agent,
}

/// One place a task id or an agent name is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// A task or an agent.
    pub kind: Kind,
    /// The name.
    pub name: String,
    /// The bytes of the name itself, quotes left out.
    pub span: Span,
    /// Whether this is where it is defined (a task's `id`, an agent's key).
    pub definition: bool,
}

/// A document read: its plan and everything found in it.
pub struct Analysis {
    /// The loader's result (the plan, its graph and its diagnostics).
    pub loaded: Loaded,
    /// The critic's findings, when the plan is valid.
    pub findings: Vec<Finding>,
    /// The fixes on offer, the loader's and the critic's.
    pub fixes: Vec<Offered>,
    /// Where each task id and agent name is written, in source order.
    pub symbols: Vec<Symbol>,
}

impl Analysis {
    /// Reads `text`, the document at `path` (for its attachments and sub-plan files, when it is
    /// a file on disk).
    pub fn new(text: &str, path: Option<&Path>) -> Self {
        let name = path.map_or_else(|| "plan".to_owned(), |p| p.display().to_string());
        let stem =
            path.and_then(Path::file_stem).map_or_else(|| "plan".to_owned(), |s| s.to_string_lossy().into_owned());
        let base = path.and_then(Path::parent).map(Path::to_path_buf);
        let files = |file: &str| base.as_ref().is_some_and(|base| base.join(file).is_file());
        let mut loaded = manifest::load_str(&name, &stem, text, &files);
        if let Some(path) = path {
            manifest::subplan::resolve(&mut loaded, path);
        }
        let findings: Vec<Finding> = crate::critic::review(&loaded).findings().collect();
        let fixes = crate::fix::offered(&loaded, &findings, text);
        let symbols = symbols(&loaded, text);
        Analysis { loaded, findings, fixes, symbols }
    }

    /// The symbol written at byte `offset`, if any.
    pub fn symbol_at(&self, offset: usize) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.span.offset() <= offset && offset <= s.span.offset() + s.span.len())
    }

    /// Every place the name of `symbol` is written, its definition first.
    pub fn occurrences<'a>(&'a self, symbol: &'a Symbol) -> impl Iterator<Item = &'a Symbol> + 'a {
        let same = move |s: &&Symbol| s.kind == symbol.kind && s.name == symbol.name;
        let definitions = self.symbols.iter().filter(same).filter(|s| s.definition);
        definitions.chain(self.symbols.iter().filter(same).filter(|s| !s.definition))
    }
}

/// The names a plan defines, for completion. The server keeps those of the last reading that
/// had a plan, so a half-written line that breaks the YAML still completes.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Each task's id and agent.
    pub tasks: Vec<(String, Option<String>)>,
    /// Each agent's name and runtime.
    pub agents: Vec<(String, &'static str)>,
}

impl Names {
    /// The names of an analysis's plan; `None` when it has none.
    pub fn of(analysis: &Analysis) -> Option<Names> {
        let plan = analysis.loaded.plan.as_ref()?;
        let tasks = plan.tasks.iter().map(|t| (t.id.value.to_string(), t.agent.as_ref().map(|a| a.value.to_string())));
        let agents = plan.agents.iter().map(|(name, agent)| (name.clone(), agent.runtime.name()));
        Some(Names { tasks: tasks.collect(), agents: agents.collect() })
    }
}

/// Every place a task id or agent name is written in a plan read from `text`.
fn symbols(loaded: &Loaded, text: &str) -> Vec<Symbol> {
    let Some(plan) = &loaded.plan else { return Vec::new() };
    let mut out = Vec::new();
    // A gate's inputs are among its dependencies too, at the same place: each place once.
    let mut seen = std::collections::HashSet::new();
    let mut add = |kind, name: &str, span: Span, definition| {
        if let Some(span) = name_in(text, span, name)
            && seen.insert(span.offset())
        {
            out.push(Symbol { kind, name: name.to_owned(), span, definition });
        }
    };
    for (name, agent) in &plan.agents {
        add(Kind::Agent, name, agent.loc.span, true);
    }
    for task in &plan.tasks {
        add(Kind::Task, &task.id.value, task.id.loc.span, true);
        for dependency in task.depends_on.iter().chain(&task.extras().inputs) {
            add(Kind::Task, &dependency.value, dependency.loc.span, false);
        }
        for read in &task.reads {
            let end = read.loc.span.offset() + read.loc.span.len();
            let span = Span::new(end.saturating_sub(read.task.len()), read.task.len());
            add(Kind::Task, &read.task, span, false);
        }
        if let Some(agent) = &task.agent {
            add(Kind::Agent, &agent.value, agent.loc.span, false);
        }
        if let Some(Verification::LlmReviewer { agent, .. }) = &task.extras().verification {
            add(Kind::Agent, &agent.value, agent.loc.span, false);
        }
    }
    for agent in [&plan.control.planner, &plan.control.compactor].into_iter().flatten() {
        add(Kind::Agent, &agent.value, agent.loc.span, false);
    }
    out.sort_by_key(|s| s.span.offset());
    out
}

/// The span of `name` as written at `span`, quotes left out; `None` when the text there is not
/// the name (a name the loader made up, such as a bare plan's `task_3`).
fn name_in(text: &str, span: Span, name: &str) -> Option<Span> {
    let written = text.get(span.offset()..span.offset() + span.len())?;
    let quoted = written.len() >= 2 && (written.starts_with('"') || written.starts_with('\''));
    let (offset, inner) =
        if quoted { (span.offset() + 1, &written[1..written.len() - 1]) } else { (span.offset(), written) };
    (!name.is_empty() && inner == name).then(|| Span::new(offset, name.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "\
apiVersion: runner/v1
kind: Plan
metadata: {name: p}
spec:
  agent_definitions:
    stub: {runtime: mock}
  workflow:
    - id: search
      agent: stub
      input: Find.
    - id: \"report\"
      agent: stub
      input: \"On {{ tasks.search.output }}\"
      depends_on: [search]
";

    #[test]
    fn ids_and_agents_are_found_where_they_are_written() {
        let analysis = Analysis::new(PLAN, None);
        let at = |word: &str, n: usize| PLAN.match_indices(word).nth(n).expect("the word is there").0;
        let search = analysis.symbol_at(at("search", 0) + 2).expect("the definition");
        assert!(search.definition && search.kind == Kind::Task);
        let places: Vec<usize> = analysis.occurrences(search).map(|s| s.span.offset()).collect();
        assert_eq!(places, [at("search", 0), at("search", 1), at("search", 2)], "definition, template, depends_on");
        let report = analysis.symbol_at(at("report", 0)).expect("a quoted id");
        assert_eq!(report.span, Span::new(at("report", 0), 6), "the quotes are left out");
        let stub = analysis.symbol_at(at("stub", 0)).expect("the agent's key");
        assert_eq!(analysis.occurrences(stub).count(), 3);
    }
}
