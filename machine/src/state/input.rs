//! A task's input: its template rendered against the run, with what later attempts are told.

use std::borrow::Cow;
use std::sync::Arc;

use manifest::Plan;
use manifest::plan::TaskKind;

use super::RunState;
use crate::template::{MAX_INPUT_BYTES, RenderError, Values};
use crate::tokens::TokenCounter;

impl<C: TokenCounter> RunState<C> {
    /// Renders `template` against the run: its mission, vars, summary and the outputs it reads.
    pub fn render(&self, template: &str) -> Result<String, RenderError> {
        let values = Values {
            plan: &self.plan,
            graph: &self.graph,
            tasks: &self.tasks,
            vars: &self.vars,
            context_summary: &self.context_summary,
            item: None,
        };
        self.renderer.render(template, &values)
    }

    /// The task's input template rendered against the run, with any answers appended, as the
    /// text a `TaskDispatched` and the task's state share. An input with no template syntax and
    /// nothing to append is the plan's text, copied once.
    pub fn render_input(&self, i: usize) -> Result<Arc<str>, RenderError> {
        let (task, state) = (&self.plan.tasks[i], &self.tasks[i]);
        if task.kind == TaskKind::Plan {
            return self.render_with(i);
        }
        let template = match (&task.input, task.kind) {
            (Some(input), _) => Cow::Borrowed(input.value.as_str()),
            (None, TaskKind::SynthesisGate) => Cow::Owned(gate_input(&self.plan, i)),
            (None, _) => Cow::Borrowed(""),
        };
        let cap = match (task.kind, task.extras().max_output_tokens, &task.agent) {
            (TaskKind::SynthesisGate, Some(cap), Some(_)) => Some(cap),
            _ => None,
        };
        let appends = cap.is_some() || state.feedback().is_some() || !state.answers().is_empty();
        if !appends && !manifest::template::Templates::is_template(&template) {
            return within_cap(&template).map(Arc::from);
        }
        let mut input = self.renderer.render(&template, &self.values(i))?;
        if let Some(cap) = cap {
            input.push_str(&format!("\n\nCondense the above into at most {cap} tokens."));
        }
        if let Some(reason) = state.feedback() {
            input.push_str("\n\nThe previous answer failed verification: ");
            input.push_str(reason);
            input.push_str("\nAnswer again and fix this.");
        }
        for answer in state.answers() {
            input.push_str("\n\nClarification: ");
            input.push_str(answer);
        }
        within_cap(&input).map(Arc::from)
    }
}

impl<C: TokenCounter> RunState<C> {
    /// A sub-plan task's input: the variables its `with` gives the child run, as a JSON object
    /// (a text entry rendered, any other value as written).
    fn render_with(&self, i: usize) -> Result<Arc<str>, RenderError> {
        let values = self.values(i);
        let mut vars = serde_json::Map::new();
        for (name, value) in &self.plan.tasks[i].extras().with {
            let value = match &value.value {
                serde_json::Value::String(template) => self.renderer.value(template, &values)?,
                other => other.clone(),
            };
            vars.insert(name.clone(), value);
        }
        within_cap(&serde_json::Value::Object(vars).to_string()).map(Arc::from)
    }
}

/// The input, when it is within [`MAX_INPUT_BYTES`].
fn within_cap(input: &str) -> Result<&str, RenderError> {
    if input.len() > MAX_INPUT_BYTES { Err(RenderError::TooLarge) } else { Ok(input) }
}

/// The default input of a gate with no `input`: each input's output under its id.
fn gate_input(plan: &Plan, i: usize) -> String {
    let task = &plan.tasks[i];
    let mut text = String::new();
    for input in &task.extras().inputs {
        text.push_str(&format!("## {}\n{{{{ {} }}}}\n\n", input.value, manifest::template::output_of(&input.value)));
    }
    text
}
