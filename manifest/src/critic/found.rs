//! Findings as the passes record them: which check found what, by the positions of the tasks,
//! dependencies and reads concerned, in 16 bytes. A [`Finding`] with its message, label and help
//! is made from the plan only when it is shown, so a plan with hundreds of thousands of findings
//! holds no strings for them.

use crate::diagnostic::Severity;
use crate::source::Loc;

use super::finding::{Dimension, Finding, LintKind};
use super::{Facts, context, coupling, fallbacks, hygiene, maps, parallel, spof};

/// A finding as recorded. `task` is a position in `Plan::tasks`; `dependency` one in the task's
/// `depends_on`; `read` one in the task's reads of outputs ([`Facts::reads`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Found {
    /// [`Lint::SinglePointOfFailure`](super::Lint::SinglePointOfFailure).
    SinglePointOfFailure { task: u32 },
    /// [`Lint::OutputFormatCoupling`](super::Lint::OutputFormatCoupling).
    OutputFormatCoupling { task: u32, read: u32 },
    /// [`Lint::WideFanIn`](super::Lint::WideFanIn).
    WideFanIn { task: u32 },
    /// [`Lint::CriticalWithoutFallback`](super::Lint::CriticalWithoutFallback).
    CriticalWithoutFallback { task: u32 },
    /// [`Lint::FailAbortsRun`](super::Lint::FailAbortsRun).
    FailAbortsRun { task: u32 },
    /// [`Lint::UnreadDependency`](super::Lint::UnreadDependency).
    UnreadDependency { task: u32, dependency: u32 },
    /// [`Lint::RedundantEdge`](super::Lint::RedundantEdge): `via` is the task (a position in `Plan::tasks`) that implies it.
    RedundantEdge { task: u32, dependency: u32, via: u32 },
    /// [`Lint::ForcedChain`](super::Lint::ForcedChain): the task waits for its `chained_after`.
    ForcedChain { task: u32 },
    /// [`Lint::LongUnverifiedChain`](super::Lint::LongUnverifiedChain).
    LongUnverifiedChain { task: u32 },
    /// [`Lint::MapWithoutSynthesis`](super::Lint::MapWithoutSynthesis): `read` takes the map's output.
    MapWithoutSynthesis { task: u32, read: u32 },
    /// Any other finding, made whole by its pass: these concern definitions, groups, phases or
    /// the few tasks that are critical, so a plan has few of them.
    Whole(Box<Finding>),
}

/// A position in a plan's lists as the record keeps it. A plan with 2^32 tasks, or a task with
/// 2^32 dependencies, would not fit in memory (a task alone takes hundreds of bytes).
pub(super) fn index(position: usize) -> u32 {
    u32::try_from(position).expect("a plan's lists hold fewer than 2^32 items: they would not fit in memory")
}

/// Records a finding made whole at position `at`.
pub(super) fn push_whole_at(found: &mut Vec<Found>, at: usize, finding: Finding) {
    found.insert(at, Found::Whole(Box::new(finding)));
}

/// Records a finding its pass made whole.
pub(super) fn push_whole(found: &mut Vec<Found>, finding: Finding) {
    found.push(Found::Whole(Box::new(finding)));
}

impl Found {
    /// The finding whole, as its pass describes it.
    pub(super) fn finding(&self, facts: &Facts<'_>) -> Finding {
        let at = |i: u32| i as usize;
        match self {
            Found::SinglePointOfFailure { task } => spof::finding(facts, at(*task)),
            Found::OutputFormatCoupling { task, read } => coupling::finding(facts, at(*task), at(*read)),
            Found::WideFanIn { task } => context::wide_fan_in(facts, at(*task)),
            Found::CriticalWithoutFallback { task } => fallbacks::critical_without_fallback(facts, at(*task)),
            Found::FailAbortsRun { task } => fallbacks::fail_aborts_run(facts, at(*task)),
            Found::UnreadDependency { task, dependency } => {
                parallel::unread_dependency(facts, at(*task), at(*dependency))
            }
            Found::RedundantEdge { task, dependency, via } => {
                parallel::redundant_edge(facts, at(*task), at(*dependency), at(*via))
            }
            Found::ForcedChain { task } => parallel::forced_chain(facts, at(*task)),
            Found::LongUnverifiedChain { task } => hygiene::long_unverified_chain(facts, at(*task)),
            Found::MapWithoutSynthesis { task, read } => maps::map_without_synthesis(facts, at(*task), at(*read)),
            Found::Whole(finding) => (**finding).clone(),
        }
    }

    /// Its kind, which holds its code and dimension.
    fn kind(&self) -> LintKind {
        match self {
            Found::SinglePointOfFailure { .. } => LintKind::SinglePointOfFailure,
            Found::OutputFormatCoupling { .. } => LintKind::OutputFormatCoupling,
            Found::WideFanIn { .. } => LintKind::WideFanIn,
            Found::CriticalWithoutFallback { .. } => LintKind::CriticalWithoutFallback,
            Found::FailAbortsRun { .. } => LintKind::FailAbortsRun,
            Found::UnreadDependency { .. } => LintKind::UnreadDependency,
            Found::RedundantEdge { .. } => LintKind::RedundantEdge,
            Found::ForcedChain { .. } => LintKind::ForcedChain,
            Found::LongUnverifiedChain { .. } => LintKind::LongUnverifiedChain,
            Found::MapWithoutSynthesis { .. } => LintKind::MapWithoutSynthesis,
            Found::Whole(finding) => finding.lint.kind(),
        }
    }

    /// The stable code, as [`Finding::code`] gives it.
    pub(super) fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// The severity its pass gives it.
    pub(super) fn severity(&self) -> Severity {
        match self {
            Found::FailAbortsRun { .. } | Found::RedundantEdge { .. } => Severity::Info,
            Found::Whole(finding) => finding.severity,
            _ => Severity::Warning,
        }
    }

    /// The dimension it is scored in, as [`Finding::dimension`] gives it.
    pub(super) fn dimension(&self) -> Option<Dimension> {
        self.kind().dimension()
    }

    /// The id of the task it concerns, if any.
    pub(super) fn task<'a>(&'a self, facts: &Facts<'a>) -> Option<&'a str> {
        match self {
            Found::Whole(finding) => finding.task.as_deref(),
            _ => Some(facts.plan.tasks[self.task_index()?].id.value.as_str()),
        }
    }

    /// Where it is.
    pub(super) fn loc<'a>(&'a self, facts: &Facts<'a>) -> &'a Loc {
        let tasks = &facts.plan.tasks;
        match self {
            Found::SinglePointOfFailure { task }
            | Found::WideFanIn { task }
            | Found::ForcedChain { task }
            | Found::LongUnverifiedChain { task } => &tasks[*task as usize].id.loc,
            Found::CriticalWithoutFallback { task } | Found::FailAbortsRun { task } => {
                &tasks[*task as usize].on_failure.loc
            }
            Found::UnreadDependency { task, dependency } | Found::RedundantEdge { task, dependency, .. } => {
                &tasks[*task as usize].depends_on[*dependency as usize].loc
            }
            Found::OutputFormatCoupling { task, read } | Found::MapWithoutSynthesis { task, read } => {
                &facts.reads[*task as usize][*read as usize].1.loc
            }
            Found::Whole(finding) => &finding.loc,
        }
    }

    fn task_index(&self) -> Option<usize> {
        match self {
            Found::SinglePointOfFailure { task }
            | Found::OutputFormatCoupling { task, .. }
            | Found::WideFanIn { task }
            | Found::CriticalWithoutFallback { task }
            | Found::FailAbortsRun { task }
            | Found::UnreadDependency { task, .. }
            | Found::RedundantEdge { task, .. }
            | Found::ForcedChain { task }
            | Found::LongUnverifiedChain { task }
            | Found::MapWithoutSynthesis { task, .. } => Some(*task as usize),
            Found::Whole(_) => None,
        }
    }
}
