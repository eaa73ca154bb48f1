//! [`Review`]: the critic's review of a plan with its findings kept compact, for reports on
//! plans of any size. Each finding is made whole only when it is asked for, so a report that
//! draws a few findings and counts the rest never holds the others' text, and one that writes
//! every finding holds one at a time.

use crate::diagnostic::Severity;
use crate::graph::TaskGraph;
use crate::plan::Plan;

use super::finding::{Dimension, Finding};
use super::found::Found;
use super::{Critique, Facts, Metrics, Scores};
use super::{caching, conditions, context, coupling, fallbacks, hygiene, maps, metrics, parallel, secrets, spof};

/// The critic's review of a plan: its scores, its metrics and its findings in source order,
/// each made on demand by [`Review::finding`].
pub struct Review<'p> {
    /// `None` for a plan that cannot run, which has no findings.
    facts: Option<Facts<'p>>,
    /// Sorted by position, in pass order at one place.
    found: Vec<Found>,
    /// The score of each dimension and overall.
    pub scores: Scores,
    /// The seed's evaluation metrics.
    pub metrics: Metrics,
}

/// Reviews a plan whose graph is already built.
pub fn review<'p>(plan: &'p Plan, graph: &'p TaskGraph) -> Review<'p> {
    let facts = Facts::new(plan, graph);
    let mut found = Vec::new();
    spof::check(&facts, &mut found);
    coupling::check(&facts, &mut found);
    context::check(&facts, &mut found);
    maps::check(&facts, &mut found);
    fallbacks::check(&facts, &mut found);
    parallel::check(&facts, &mut found);
    hygiene::check(&facts, &mut found);
    conditions::check(&facts, &mut found);
    secrets::check(plan, &mut found);
    caching::check(plan, &mut found);
    // Held while every report is made from it, and the sort's keys come on top: the room
    // pushing left over would be a fifth more.
    found.shrink_to_fit();
    // Stable: findings at one place keep the order of the passes, which is deterministic. Each
    // place is looked up once, in the order the passes found them (task order, so the tasks are
    // read front to back), rather than twice a comparison in the merge's order. Spans keep 32-bit
    // offsets, so the narrower key loses nothing and the keys take half the room.
    found.sort_by_cached_key(|f| f.loc(&facts).span.offset() as u32);
    let scores = Scores::of(found.iter().map(|f| (f.dimension(), f.severity())));
    let metrics = metrics::compute(&facts);
    Review { facts: Some(facts), found, scores, metrics }
}

impl<'p> Review<'p> {
    /// The review of a plan that cannot run: no findings, every score 0.
    pub fn unrunnable() -> Self {
        Review { facts: None, found: Vec::new(), scores: Scores::zero(), metrics: Metrics::default() }
    }

    /// Adds a finding made outside the plan's own passes (the forecast's budget checks), in
    /// source order; a review of a plan that cannot run takes none.
    pub fn add(&mut self, finding: Finding) {
        let Some(facts) = &self.facts else { return };
        let offset = finding.loc.span.offset() as u32;
        let at = self.found.partition_point(|f| f.loc(facts).span.offset() as u32 <= offset);
        self.scores = Scores::of(
            self.found.iter().map(|f| (f.dimension(), f.severity())).chain([(finding.dimension(), finding.severity)]),
        );
        super::found::push_whole_at(&mut self.found, at, finding);
    }

    /// How many findings there are.
    pub fn len(&self) -> usize {
        self.found.len()
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// Finding `i` (in source order) whole; panics when `i` is not below [`Review::len`].
    pub fn finding(&self, i: usize) -> Finding {
        self.found[i].finding(self.facts())
    }

    /// Every finding whole, in source order, each made as the iterator reaches it.
    pub fn findings(&self) -> impl ExactSizeIterator<Item = Finding> + '_ {
        self.found.iter().map(|f| f.finding(self.facts()))
    }

    /// The stable code of finding `i`, such as `critic::redundant_edge`.
    pub fn code(&self, i: usize) -> &'static str {
        self.found[i].code()
    }

    /// The severity of finding `i`.
    pub fn severity(&self, i: usize) -> Severity {
        self.found[i].severity()
    }

    /// The dimension finding `i` is scored in.
    pub fn dimension(&self, i: usize) -> Option<Dimension> {
        self.found[i].dimension()
    }

    /// The task finding `i` concerns, if any.
    pub fn task(&self, i: usize) -> Option<&str> {
        self.found[i].task(self.facts())
    }

    /// The byte offset finding `i` is at.
    pub fn offset(&self, i: usize) -> usize {
        self.found[i].loc(self.facts()).span.offset()
    }

    /// The review with every finding made whole.
    pub fn into_critique(self) -> Critique {
        let findings = self.findings().collect();
        Critique { findings, scores: self.scores, metrics: self.metrics }
    }

    fn facts(&self) -> &Facts<'p> {
        self.facts.as_ref().expect("a review has facts whenever it has findings: an unrunnable one has none")
    }
}
