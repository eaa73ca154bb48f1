//! Critic findings: what is risky in a plan that can run, each with a stable code.

use std::borrow::Cow;
use std::fmt;

use crate::diagnostic::Severity;
use crate::rendered::Rendered;
use crate::source::{Loc, Source};

/// The five dimensions of the seed's PlanCritic; every scored finding belongs to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// A task whose failure blocks every result.
    SinglePointOfFailure,
    /// A template that assumes a field no schema guarantees.
    OutputFormatCoupling,
    /// Inputs that may not fit the context window.
    ContextBudget,
    /// Failures that end the run although something could have been saved.
    MissingFallbacks,
    /// Work serialised without need.
    ParallelMisses,
}

impl Dimension {
    /// Every dimension, in report order.
    pub const ALL: [Dimension; 5] = [
        Dimension::SinglePointOfFailure,
        Dimension::OutputFormatCoupling,
        Dimension::ContextBudget,
        Dimension::MissingFallbacks,
        Dimension::ParallelMisses,
    ];

    /// The snake_case name used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::SinglePointOfFailure => "single_point_of_failure",
            Dimension::OutputFormatCoupling => "output_format_coupling",
            Dimension::ContextBudget => "context_budget",
            Dimension::MissingFallbacks => "missing_fallbacks",
            Dimension::ParallelMisses => "parallel_misses",
        }
    }

    /// A title for tables.
    pub fn title(self) -> &'static str {
        match self {
            Dimension::SinglePointOfFailure => "Single points of failure",
            Dimension::OutputFormatCoupling => "Output-format coupling",
            Dimension::ContextBudget => "Context budget",
            Dimension::MissingFallbacks => "Missing fallbacks",
            Dimension::ParallelMisses => "Parallel misses",
        }
    }
}

/// Every kind of finding. The code of each variant is stable; [`LintKind::facts`] says it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Lint {
    /// A task on every path to every result, with no fallback.
    #[error("task `{task}` is a single point of failure: every result depends on it and it has no fallback")]
    SinglePointOfFailure {
        /// The task.
        task: String,
    },
    /// A template reads a field the producer's schema does not guarantee.
    #[error("task `{task}` reads `{field}` from `{producer}`, but nothing guarantees `{producer}` outputs it")]
    OutputFormatCoupling {
        /// The reading task.
        task: String,
        /// The producing task.
        producer: String,
        /// The field read.
        field: String,
    },
    /// A task's estimated input is over its budget.
    #[error("task `{task}` may need about {estimate} tokens of input, over its budget of {budget}")]
    ContextBudget {
        /// The task.
        task: String,
        /// The estimated input tokens.
        estimate: u64,
        /// The budget.
        budget: u64,
    },
    /// A task reads many upstream outputs with no gate condensing them.
    #[error("task `{task}` reads {count} upstream outputs directly, with no synthesis gate in between")]
    WideFanIn {
        /// The task.
        task: String,
        /// How many outputs it reads.
        count: usize,
    },
    /// A critical task that neither retries nor replans.
    #[error("critical task `{task}` has no retry or replan")]
    CriticalWithoutFallback {
        /// The task.
        task: String,
    },
    /// A non-critical task whose failure aborts a run that could have degraded.
    #[error("task `{task}` is not critical, yet its failure would abort the whole run")]
    FailAbortsRun {
        /// The task.
        task: String,
    },
    /// A dependency whose output is never read.
    #[error("task `{task}` waits for `{dependency}` but never reads its output")]
    UnreadDependency {
        /// The task.
        task: String,
        /// The dependency.
        dependency: String,
    },
    /// A dependency already implied through another one.
    #[error("`{task}` depends on `{dependency}` twice over: `{via}` already depends on it")]
    RedundantEdge {
        /// The task.
        task: String,
        /// The implied dependency.
        dependency: String,
        /// The dependency that implies it.
        via: String,
    },
    /// `strategy: sequential` makes a task wait for one it does not need.
    #[error("`strategy: sequential` makes `{task}` wait for `{previous}`, which it does not read")]
    ForcedChain {
        /// The task.
        task: String,
        /// The task before it in the list.
        previous: String,
    },
    /// A parallel group larger than the concurrency limit, with no limit of its own.
    #[error("parallel group `{group}` has {size} tasks and no `max_concurrency`")]
    UnlimitedGroup {
        /// The group.
        group: String,
        /// Its size.
        size: usize,
    },
    /// A phase wider than is safe to start at once, with no limit.
    #[error("phase {phase} starts {size} tasks at once and nothing limits concurrency")]
    ParallelExplosion {
        /// The phase, from 1.
        phase: usize,
        /// Its size.
        size: usize,
    },
    /// An agent no task uses.
    #[error("agent `{name}` is never used")]
    UnusedAgent {
        /// The agent.
        name: String,
    },
    /// A tool no agent offers.
    #[error("tool `{name}` is never used")]
    UnusedTool {
        /// The tool.
        name: String,
    },
    /// A provider no agent uses.
    #[error("provider `{name}` is never used")]
    UnusedProvider {
        /// The provider.
        name: String,
    },
    /// A low-reliability agent on the critical path, unchecked.
    #[error("task `{task}` is on the critical path, runs on `{agent}` (reliability {weight}) and nothing verifies it")]
    UnreliableAgent {
        /// The task.
        task: String,
        /// The agent.
        agent: String,
        /// Its reliability weight.
        weight: f64,
    },
    /// A chain of unverified tasks.
    #[error("task `{task}` ends a chain of {length} tasks with no verification in between")]
    LongUnverifiedChain {
        /// The last task of the chain.
        task: String,
        /// The chain's length.
        length: usize,
    },
    /// A destructive tool with no person approving first.
    #[error("task `{task}` can call destructive tool `{tool}` with no human review before it")]
    DestructiveWithoutReview {
        /// The task.
        task: String,
        /// The tool.
        tool: String,
    },
    /// A critical task that depends on an outside service and gives up at the first error.
    #[error("critical task `{task}` depends on an external service ({evidence}) and fails the run at the first error")]
    OptimismBias {
        /// The task.
        task: String,
        /// What suggests an external service.
        evidence: String,
    },
    /// An llm agent with no turn limit.
    #[error("llm agent `{name}` has no `max_turns`")]
    MissingMaxTurns {
        /// The agent.
        name: String,
    },
    /// An API key or secret header goes over plain http to another machine.
    #[error("{sender} sends `{variable}` over plain http to `{host}`, where anyone on the way can read it")]
    PlainHttpSecret {
        /// Who sends it: a provider or an http agent, named.
        sender: String,
        /// The environment variable holding the secret.
        variable: String,
        /// The host it is sent to.
        host: String,
    },
    /// The author's critical path is not the graph's.
    #[error("mission_analysis.critical_path is {declared}, but the longest chain is {computed}")]
    CriticalPathMismatch {
        /// What the plan says.
        declared: String,
        /// What the graph says.
        computed: String,
    },
    /// A task other than a synthesis gate reads the whole output of a map: every item's output.
    #[error(
        "task `{task}` reads the whole output of map `{map}` ({}) with no synthesis gate in between",
        items_text(*.items)
    )]
    MapWithoutSynthesis {
        /// The reading task.
        task: String,
        /// The map task (the one with `for_each`).
        map: String,
        /// The most items it can have: the length of a list written out, or `max_items`; `None`
        /// when nothing caps an expression's list.
        items: Option<u64>,
    },
    /// A task's `when` holds in no run, so the task is always skipped.
    #[error("`{condition}` in the `when` of task `{task}` can never hold{}", status_text(.status.as_deref()))]
    ConditionNeverHolds {
        /// The task.
        task: String,
        /// The part of the `when` that never holds: the whole expression, or one comparison in it.
        condition: String,
        /// For a comparison of a task's status, the word compared with, which no dependent sees.
        status: Option<String>,
    },
    /// A `type: expand` step with no `max_tasks`: nothing bounds the plan its agent writes.
    #[error("task `{task}` runs a plan its agent writes, and no `max_tasks` bounds how many tasks it may have")]
    ExpandWithoutBounds {
        /// The expand task.
        task: String,
    },
    /// `cache` is on for an llm agent whose answers are not repeatable: a stored answer stands in
    /// for one the model might not give again.
    #[error("{owner} turns `cache` on, but llm agent `{agent}` has {missing}, so the model may answer differently")]
    CacheNotDeterministic {
        /// The task or agent whose `cache` it is, named.
        owner: String,
        /// The llm agent.
        agent: String,
        /// What makes its answers vary: no seed, a temperature above 0, or both.
        missing: String,
    },
    /// A forecast figure is expected to pass its `control_logic.budget`.
    #[error("the run's expected {what}, {expected}, is over its budget of {budget}")]
    OverBudget {
        /// `cost` or `duration`.
        what: &'static str,
        /// The expected figure, as shown.
        expected: String,
        /// The budget, as shown.
        budget: String,
    },
    /// A run within the plan's limits can pass its budget, and nothing at run time stops it there.
    #[error("the run's {what} can pass its budget of {budget} ({worst}), and nothing stops it there")]
    BudgetNotKept {
        /// `cost` or `duration`.
        what: &'static str,
        /// The worst case, as shown (`an unbounded amount`, or why it is not known).
        worst: String,
        /// The budget, as shown.
        budget: String,
    },
}

/// How many items a map has, for [`Lint::MapWithoutSynthesis`]'s message.
fn items_text(items: Option<u64>) -> String {
    match items {
        Some(1) => "1 item".to_owned(),
        Some(n) => format!("up to {n} items"),
        None => "items not capped by `max_items`".to_owned(),
    }
}

/// Why a condition never holds, for [`Lint::ConditionNeverHolds`]'s message.
fn status_text(status: Option<&str>) -> String {
    match status {
        Some(word) => format!(": a dependent only ever sees `succeeded` or `skipped`, never `{word}`"),
        None => ": it is false whatever the run does".to_owned(),
    }
}

/// A kind of finding apart from what it found. Its stable code and the dimension it is scored in
/// are written once, in [`LintKind::facts`]; [`Lint`], the critic's compact records and
/// [`Lint::CODES`] all read them there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LintKind {
    /// [`Lint::SinglePointOfFailure`].
    SinglePointOfFailure,
    /// [`Lint::OutputFormatCoupling`].
    OutputFormatCoupling,
    /// [`Lint::ContextBudget`].
    ContextBudget,
    /// [`Lint::WideFanIn`].
    WideFanIn,
    /// [`Lint::CriticalWithoutFallback`].
    CriticalWithoutFallback,
    /// [`Lint::FailAbortsRun`].
    FailAbortsRun,
    /// [`Lint::UnreadDependency`].
    UnreadDependency,
    /// [`Lint::RedundantEdge`].
    RedundantEdge,
    /// [`Lint::ForcedChain`].
    ForcedChain,
    /// [`Lint::UnlimitedGroup`].
    UnlimitedGroup,
    /// [`Lint::ParallelExplosion`].
    ParallelExplosion,
    /// [`Lint::UnusedAgent`].
    UnusedAgent,
    /// [`Lint::UnusedTool`].
    UnusedTool,
    /// [`Lint::UnusedProvider`].
    UnusedProvider,
    /// [`Lint::UnreliableAgent`].
    UnreliableAgent,
    /// [`Lint::LongUnverifiedChain`].
    LongUnverifiedChain,
    /// [`Lint::DestructiveWithoutReview`].
    DestructiveWithoutReview,
    /// [`Lint::OptimismBias`].
    OptimismBias,
    /// [`Lint::MissingMaxTurns`].
    MissingMaxTurns,
    /// [`Lint::PlainHttpSecret`].
    PlainHttpSecret,
    /// [`Lint::CriticalPathMismatch`].
    CriticalPathMismatch,
    /// [`Lint::MapWithoutSynthesis`].
    MapWithoutSynthesis,
    /// [`Lint::ConditionNeverHolds`].
    ConditionNeverHolds,
    /// [`Lint::ExpandWithoutBounds`].
    ExpandWithoutBounds,
    /// [`Lint::CacheNotDeterministic`].
    CacheNotDeterministic,
    /// [`Lint::OverBudget`].
    OverBudget,
    /// [`Lint::BudgetNotKept`].
    BudgetNotKept,
}

impl LintKind {
    /// Every kind, in the order of [`Lint`]'s variants.
    pub(crate) const ALL: [LintKind; 27] = [
        LintKind::SinglePointOfFailure,
        LintKind::OutputFormatCoupling,
        LintKind::ContextBudget,
        LintKind::WideFanIn,
        LintKind::CriticalWithoutFallback,
        LintKind::FailAbortsRun,
        LintKind::UnreadDependency,
        LintKind::RedundantEdge,
        LintKind::ForcedChain,
        LintKind::UnlimitedGroup,
        LintKind::ParallelExplosion,
        LintKind::UnusedAgent,
        LintKind::UnusedTool,
        LintKind::UnusedProvider,
        LintKind::UnreliableAgent,
        LintKind::LongUnverifiedChain,
        LintKind::DestructiveWithoutReview,
        LintKind::OptimismBias,
        LintKind::MissingMaxTurns,
        LintKind::PlainHttpSecret,
        LintKind::CriticalPathMismatch,
        LintKind::MapWithoutSynthesis,
        LintKind::ConditionNeverHolds,
        LintKind::ExpandWithoutBounds,
        LintKind::CacheNotDeterministic,
        LintKind::OverBudget,
        LintKind::BudgetNotKept,
    ];

    /// The stable code and the dimension (`None` for the general checks) of each kind: the one
    /// table of them.
    const fn facts(self) -> (&'static str, Option<Dimension>) {
        match self {
            LintKind::SinglePointOfFailure => {
                ("critic::single_point_of_failure", Some(Dimension::SinglePointOfFailure))
            }
            LintKind::OutputFormatCoupling => ("critic::output_format_coupling", Some(Dimension::OutputFormatCoupling)),
            LintKind::ContextBudget => ("critic::context_budget", Some(Dimension::ContextBudget)),
            LintKind::WideFanIn => ("critic::wide_fan_in", Some(Dimension::ContextBudget)),
            LintKind::CriticalWithoutFallback => {
                ("critic::critical_without_fallback", Some(Dimension::MissingFallbacks))
            }
            LintKind::FailAbortsRun => ("critic::fail_aborts_run", Some(Dimension::MissingFallbacks)),
            LintKind::UnreadDependency => ("critic::unread_dependency", Some(Dimension::ParallelMisses)),
            LintKind::RedundantEdge => ("critic::redundant_edge", Some(Dimension::ParallelMisses)),
            LintKind::ForcedChain => ("critic::forced_chain", Some(Dimension::ParallelMisses)),
            LintKind::UnlimitedGroup => ("critic::unlimited_group", Some(Dimension::ParallelMisses)),
            LintKind::ParallelExplosion => ("critic::parallel_explosion", Some(Dimension::ParallelMisses)),
            LintKind::UnusedAgent => ("critic::unused_agent", None),
            LintKind::UnusedTool => ("critic::unused_tool", None),
            LintKind::UnusedProvider => ("critic::unused_provider", None),
            LintKind::UnreliableAgent => ("critic::unreliable_agent", None),
            LintKind::LongUnverifiedChain => ("critic::long_unverified_chain", None),
            LintKind::DestructiveWithoutReview => ("critic::destructive_without_review", None),
            LintKind::OptimismBias => ("critic::optimism_bias", None),
            LintKind::MissingMaxTurns => ("critic::missing_max_turns", None),
            LintKind::PlainHttpSecret => ("critic::plain_http_secret", None),
            LintKind::CriticalPathMismatch => ("critic::critical_path_mismatch", None),
            LintKind::MapWithoutSynthesis => ("critic::map_without_synthesis", Some(Dimension::ContextBudget)),
            LintKind::ConditionNeverHolds => ("critic::condition_never_holds", None),
            LintKind::ExpandWithoutBounds => ("critic::expand_without_bounds", None),
            LintKind::CacheNotDeterministic => ("critic::cache_not_deterministic", None),
            LintKind::OverBudget => ("critic::over_budget", None),
            LintKind::BudgetNotKept => ("critic::budget_not_kept", None),
        }
    }

    /// The stable code, such as `critic::redundant_edge`.
    pub(crate) const fn code(self) -> &'static str {
        self.facts().0
    }

    /// The dimension a finding of this kind is scored in; `None` for the general checks.
    pub(crate) const fn dimension(self) -> Option<Dimension> {
        self.facts().1
    }
}

impl Lint {
    /// Every code [`Lint::code_str`] gives, in the order of the variants, for what names codes
    /// without a finding: a plan test's critic expectations.
    pub const CODES: [&'static str; 27] = {
        let mut codes = [""; 27];
        let mut i = 0;
        while i < codes.len() {
            codes[i] = LintKind::ALL[i].code();
            i += 1;
        }
        codes
    };

    /// Its kind, which holds its code and dimension.
    pub(crate) fn kind(&self) -> LintKind {
        match self {
            Lint::SinglePointOfFailure { .. } => LintKind::SinglePointOfFailure,
            Lint::OutputFormatCoupling { .. } => LintKind::OutputFormatCoupling,
            Lint::ContextBudget { .. } => LintKind::ContextBudget,
            Lint::WideFanIn { .. } => LintKind::WideFanIn,
            Lint::CriticalWithoutFallback { .. } => LintKind::CriticalWithoutFallback,
            Lint::FailAbortsRun { .. } => LintKind::FailAbortsRun,
            Lint::UnreadDependency { .. } => LintKind::UnreadDependency,
            Lint::RedundantEdge { .. } => LintKind::RedundantEdge,
            Lint::ForcedChain { .. } => LintKind::ForcedChain,
            Lint::UnlimitedGroup { .. } => LintKind::UnlimitedGroup,
            Lint::ParallelExplosion { .. } => LintKind::ParallelExplosion,
            Lint::UnusedAgent { .. } => LintKind::UnusedAgent,
            Lint::UnusedTool { .. } => LintKind::UnusedTool,
            Lint::UnusedProvider { .. } => LintKind::UnusedProvider,
            Lint::UnreliableAgent { .. } => LintKind::UnreliableAgent,
            Lint::LongUnverifiedChain { .. } => LintKind::LongUnverifiedChain,
            Lint::DestructiveWithoutReview { .. } => LintKind::DestructiveWithoutReview,
            Lint::OptimismBias { .. } => LintKind::OptimismBias,
            Lint::MissingMaxTurns { .. } => LintKind::MissingMaxTurns,
            Lint::PlainHttpSecret { .. } => LintKind::PlainHttpSecret,
            Lint::CriticalPathMismatch { .. } => LintKind::CriticalPathMismatch,
            Lint::MapWithoutSynthesis { .. } => LintKind::MapWithoutSynthesis,
            Lint::ConditionNeverHolds { .. } => LintKind::ConditionNeverHolds,
            Lint::ExpandWithoutBounds { .. } => LintKind::ExpandWithoutBounds,
            Lint::CacheNotDeterministic { .. } => LintKind::CacheNotDeterministic,
            Lint::OverBudget { .. } => LintKind::OverBudget,
            Lint::BudgetNotKept { .. } => LintKind::BudgetNotKept,
        }
    }

    /// The stable code, such as `critic::redundant_edge`, without the allocation of
    /// `miette::Diagnostic::code`: reports of many findings ask it of each.
    pub fn code_str(&self) -> &'static str {
        self.kind().code()
    }

    /// The dimension a finding is scored in; `None` for the general checks.
    pub fn dimension(&self) -> Option<Dimension> {
        self.kind().dimension()
    }
}

impl miette::Diagnostic for Lint {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code_str()))
    }
}

/// One finding: what is risky, where, why it matters and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What was found; its variant gives the stable code.
    pub lint: Lint,
    /// `Warning` or `Info`; `Error` for a budget the plan cannot keep.
    pub severity: Severity,
    /// The task it concerns, if any.
    pub task: Option<String>,
    /// Where it is.
    pub loc: Loc,
    /// The text under the label; most labels and helps are fixed text, borrowed rather than
    /// copied into every finding.
    pub label: Cow<'static, str>,
    /// How to fix it.
    pub help: Option<Cow<'static, str>>,
}

impl Finding {
    /// A warning.
    pub fn warning(lint: Lint, task: Option<&str>, loc: &Loc) -> Self {
        Finding::new(lint, Severity::Warning, task, loc)
    }

    /// An error: the plan runs, but cannot keep what it promises.
    pub fn error(lint: Lint, task: Option<&str>, loc: &Loc) -> Self {
        Finding::new(lint, Severity::Error, task, loc)
    }

    /// A note.
    pub fn info(lint: Lint, task: Option<&str>, loc: &Loc) -> Self {
        Finding::new(lint, Severity::Info, task, loc)
    }

    fn new(lint: Lint, severity: Severity, task: Option<&str>, loc: &Loc) -> Self {
        Finding {
            lint,
            severity,
            task: task.map(str::to_owned),
            loc: loc.clone(),
            label: Cow::Borrowed("here"),
            help: None,
        }
    }

    /// Sets the label.
    pub fn label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the help line.
    pub fn help(mut self, help: impl Into<Cow<'static, str>>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The stable code, such as `critic::redundant_edge`.
    pub fn code(&self) -> String {
        self.lint.code_str().to_owned()
    }

    /// The dimension it is scored in.
    pub fn dimension(&self) -> Option<Dimension> {
        self.lint.dimension()
    }

    /// Attaches the source so miette can draw snippets.
    pub fn with_source(&self, source: &Source) -> Rendered {
        let help = self.help.as_deref().map(str::to_owned);
        Rendered::new(source, self.code(), self.severity, self.lint.to_string(), help)
            .label(self.loc.span, &*self.label)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.lint.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_str_is_the_code_miette_shows() {
        let s = String::new;
        let lints = [
            Lint::SinglePointOfFailure { task: s() },
            Lint::OutputFormatCoupling { task: s(), producer: s(), field: s() },
            Lint::ContextBudget { task: s(), estimate: 0, budget: 0 },
            Lint::WideFanIn { task: s(), count: 0 },
            Lint::CriticalWithoutFallback { task: s() },
            Lint::FailAbortsRun { task: s() },
            Lint::UnreadDependency { task: s(), dependency: s() },
            Lint::RedundantEdge { task: s(), dependency: s(), via: s() },
            Lint::ForcedChain { task: s(), previous: s() },
            Lint::UnlimitedGroup { group: s(), size: 0 },
            Lint::ParallelExplosion { phase: 0, size: 0 },
            Lint::UnusedAgent { name: s() },
            Lint::UnusedTool { name: s() },
            Lint::UnusedProvider { name: s() },
            Lint::UnreliableAgent { task: s(), agent: s(), weight: 0.0 },
            Lint::LongUnverifiedChain { task: s(), length: 0 },
            Lint::DestructiveWithoutReview { task: s(), tool: s() },
            Lint::OptimismBias { task: s(), evidence: s() },
            Lint::MissingMaxTurns { name: s() },
            Lint::PlainHttpSecret { sender: s(), variable: s(), host: s() },
            Lint::CriticalPathMismatch { declared: s(), computed: s() },
            Lint::MapWithoutSynthesis { task: s(), map: s(), items: None },
            Lint::ConditionNeverHolds { task: s(), condition: s(), status: None },
            Lint::ExpandWithoutBounds { task: s() },
            Lint::CacheNotDeterministic { owner: s(), agent: s(), missing: s() },
            Lint::OverBudget { what: "cost", expected: s(), budget: s() },
            Lint::BudgetNotKept { what: "cost", worst: s(), budget: s() },
        ];
        for lint in &lints {
            let shown = miette::Diagnostic::code(lint).map(|c| c.to_string());
            assert_eq!(shown.as_deref(), Some(lint.code_str()), "{lint:?}");
            assert_eq!(lint.dimension(), lint.kind().dimension(), "{lint:?}");
        }
        let distinct: std::collections::HashSet<&str> = lints.iter().map(Lint::code_str).collect();
        assert_eq!(distinct.len(), lints.len(), "one code per variant, every variant listed");
        assert_eq!(lints.each_ref().map(Lint::kind), LintKind::ALL, "ALL lists every variant's kind in order");
        assert_eq!(lints.map(|lint| lint.code_str()), Lint::CODES, "CODES lists every variant's code in order");
    }

    #[test]
    fn every_kind_has_a_code_and_every_dimension_its_lints() {
        for kind in LintKind::ALL {
            let name = kind.code().strip_prefix("critic::").unwrap_or_default();
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{kind:?} has no code of the form critic::snake_case: {:?}",
                kind.code()
            );
        }
        for dimension in Dimension::ALL {
            let scored: Vec<LintKind> =
                LintKind::ALL.into_iter().filter(|k| k.dimension() == Some(dimension)).collect();
            assert!(!scored.is_empty(), "no lint is scored in {dimension:?}");
        }
        let general: Vec<&str> =
            LintKind::ALL.into_iter().filter(|k| k.dimension().is_none()).map(LintKind::code).collect();
        assert_eq!(
            general,
            [
                "critic::unused_agent",
                "critic::unused_tool",
                "critic::unused_provider",
                "critic::unreliable_agent",
                "critic::long_unverified_chain",
                "critic::destructive_without_review",
                "critic::optimism_bias",
                "critic::missing_max_turns",
                "critic::plain_http_secret",
                "critic::critical_path_mismatch",
                "critic::condition_never_holds",
                "critic::expand_without_bounds",
                "critic::cache_not_deterministic",
                "critic::over_budget",
                "critic::budget_not_kept",
            ],
            "the general checks, scored in no dimension"
        );
    }

    #[test]
    fn every_code_has_its_entry_in_the_critic_docs() {
        let docs = include_str!("../../../docs/critic.md");
        for code in Lint::CODES {
            assert!(docs.contains(&format!("`{code}`")), "docs/critic.md does not describe `{code}`");
        }
    }
}
