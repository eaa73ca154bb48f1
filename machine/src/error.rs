//! Why the run state machine refuses a command.

/// A command the state machine cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum EngineError {
    /// A command before `Start`.
    #[error("the run has not started")]
    #[diagnostic(code(engine::not_started))]
    NotStarted,
    /// `Start` twice.
    #[error("the run has already started")]
    #[diagnostic(code(engine::already_started))]
    AlreadyStarted,
    /// `Start` with a plan whose dependencies form a cycle: it has no order to run in.
    #[error("the plan's dependencies form a cycle: {tasks}")]
    #[diagnostic(
        code(engine::cycle),
        help("`runner validate` shows each cycle; load plans with `manifest::load_file`")
    )]
    Cycle {
        /// The tasks of each cycle.
        tasks: String,
    },
    /// A command for a run that has ended.
    #[error("the run has already ended ({status})")]
    #[diagnostic(code(engine::finished))]
    Finished {
        /// How it ended.
        status: &'static str,
    },
    /// A task id the plan does not have.
    #[error("the plan has no task `{task}`")]
    #[diagnostic(code(engine::unknown_task))]
    UnknownTask {
        /// The id.
        task: String,
    },
    /// An answer for a task that asked nothing.
    #[error("task `{task}` is not waiting for an answer")]
    #[diagnostic(code(engine::no_question), help("`runner status RUN` shows which tasks wait for what"))]
    NoQuestion {
        /// The task.
        task: String,
    },
    /// A planner's task or line for a run whose plan does not grow, or has been written.
    #[error("the run's plan is not being written: no task can join it")]
    #[diagnostic(
        code(engine::not_growing),
        help("only a run `runner do` started grows while it runs, until its planner finishes")
    )]
    NotGrowing,
    /// A decision for a task that is not a review waiting for one.
    #[error("task `{task}` is not a human review waiting for a decision")]
    #[diagnostic(code(engine::no_review), help("`runner status RUN` shows which tasks wait for what"))]
    NoReview {
        /// The task.
        task: String,
    },
}
