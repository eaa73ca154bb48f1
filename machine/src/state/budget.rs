//! Budgets: the token budget, the cost budget and `max_turns_per_phase`, checked before each
//! dispatch; once one is spent nothing more is dispatched and the run ends when what runs has finished.

use super::RunState;
use crate::event::{Event, Outcome, SkipCause};
use crate::tokens::{TokenCounter, Tokenizer};

impl<C: TokenCounter> RunState<C> {
    /// Whether dispatching `input` for task `i` would go past the token budget or its phase's
    /// turns; the input's tokens, counted with its agent's tokenizer, are the estimate.
    pub(super) fn over_budget(&self, i: usize, input: &str) -> Option<String> {
        let control = &self.plan.control;
        let used = self.tokens.prompt + self.tokens.completion;
        if let Some(budget) = control.token_budget {
            let tokenizer = Tokenizer::of_agent(&self.plan, self.plan.agent_of(&self.plan.tasks[i]));
            let estimate = self.counter.count(input, tokenizer) as u64;
            if used.saturating_add(estimate) > budget {
                return Some(format!(
                    "the token budget is spent: {used} of {budget} tokens used, and task `{}` would need about {estimate} more",
                    self.id(i)
                ));
            }
        }
        if let Some(cost) = control.budget.as_ref().and_then(|b| b.value.cost)
            && self.spent >= cost
        {
            return Some(format!(
                "the cost budget is spent: {:.4} of {cost} {} used before task `{}`",
                self.spent,
                self.plan.currency().unwrap_or_default(),
                self.id(i)
            ));
        }
        let level = self.graph.level(i);
        match control.max_turns_per_phase {
            Some(max) if self.tally.turns.get(level).copied().unwrap_or(0) >= max => Some(format!(
                "phase {} has used all {max} of its turns (max_turns_per_phase) before task `{}`",
                level + 1,
                self.id(i)
            )),
            _ => None,
        }
    }

    /// Ends a run whose budget ran out: what never finished is skipped, and the run fails if
    /// any of it was critical.
    pub(super) fn end_exhausted(&mut self, reason: String, out: &mut Vec<Event>) {
        let mut critical = false;
        for i in 0..self.tasks.len() {
            if !self.tasks[i].status.is_final() {
                critical |= self.plan.tasks[i].critical;
                let task = self.id(i).to_owned();
                self.emit(
                    Event::TaskSkipped { task, reason: format!("not run: {reason}"), cause: SkipCause::Failure },
                    out,
                );
            }
        }
        let outcome = if critical { Outcome::Failed } else { Outcome::Partial };
        self.finish(outcome, reason, out);
    }
}
