//! A plan that grows while it runs (`runner do`): each task the planner writes joins the plan
//! at the end as its line arrives and may start at once, a line that cannot be taken is
//! recorded as such, and the run neither pauses nor ends until the planner has finished.

use std::sync::Arc;

use manifest::TaskGraph;
use manifest::plan::Task;

use super::RunState;
use super::process::Next;
use crate::error::EngineError;
use crate::event::{Event, TaskPlanned};
use crate::task::TaskState;
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// `PlanTask`: the task joins the plan, unless it cannot (the planner checks each line
    /// first; this guards the plan the run holds): then its line is recorded as rejected.
    pub(super) fn plan_task(&mut self, planned: TaskPlanned, out: &mut Vec<Event>) -> Result<Next, EngineError> {
        self.ensure_growing()?;
        match self.joinable(&planned.task) {
            Ok(()) => self.emit(Event::TaskPlanned(Box::new(planned)), out),
            Err((code, reason)) => {
                let task = Some(planned.task.id.value.to_string());
                let event = Event::LineRejected { line: planned.line, task, code: code.to_owned(), reason };
                self.emit(event, out);
            }
        }
        Ok(Next::Schedule)
    }

    /// `RejectLine`: records a line of the planner that cannot be taken.
    pub(super) fn reject_line(
        &mut self,
        line: u32,
        task: Option<String>,
        code: String,
        reason: String,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        self.ensure_growing()?;
        self.emit(Event::LineRejected { line, task, code, reason }, out);
        Ok(Next::Stop)
    }

    /// `ClosePlan`: no more tasks join; the run may now pause for people or end.
    pub(super) fn close_plan(
        &mut self,
        error: Option<String>,
        score: Option<f64>,
        findings: Vec<String>,
        out: &mut Vec<Event>,
    ) -> Result<Next, EngineError> {
        self.ensure_growing()?;
        self.emit(Event::PlanWritten { error, score, findings }, out);
        Ok(Next::Schedule)
    }

    /// Refuses a planner's command for a run whose plan does not grow (any more).
    fn ensure_growing(&self) -> Result<(), EngineError> {
        if self.status.is_final() {
            return Err(EngineError::Finished { status: self.status.as_str() });
        }
        if !self.growing {
            return Err(EngineError::NotGrowing);
        }
        Ok(())
    }

    /// Why `task` cannot join the plan, as a diagnostic code and a reason.
    fn joinable(&self, task: &Task) -> Result<(), (&'static str, String)> {
        let id = task.id.value.as_str();
        if self.index_of(id).is_some() || self.maps.contains_key(id) {
            return Err(("plan::duplicate_task", format!("the plan already has a task `{id}`")));
        }
        if let Some(agent) = &task.agent
            && !self.plan.agents.contains_key(agent.value.as_str())
        {
            return Err((
                "plan::unknown_agent",
                format!("task `{id}` names agent `{}`, which the plan does not define", agent.value),
            ));
        }
        if let Some(missing) = task.depends_on.iter().find(|d| self.index_of(&d.value).is_none()) {
            return Err((
                "plan::unknown_dependency",
                format!("task `{id}` depends on `{}`, which no earlier line wrote", missing.value),
            ));
        }
        Ok(())
    }

    /// `TaskPlanned`: the task joins the plan at the end, pending; the tasks before keep their
    /// places and states. A task whose graph cannot be built (only a tampered log has one) is
    /// ignored.
    pub(super) fn planned(&mut self, task: &Task) {
        let mut plan = (*self.plan).clone();
        plan.tasks.push(task.clone());
        let Ok(graph) = TaskGraph::build(&plan) else { return };
        let mut tasks = std::mem::take(&mut self.tasks);
        tasks.push(TaskState::new());
        self.rebuild(Arc::new(plan), Arc::new(graph), tasks);
    }
}
