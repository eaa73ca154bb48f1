//! Rendering task inputs: minijinja in strict mode, so a template that reads something missing
//! fails the attempt instead of sending a prompt with a hole in it.
//!
//! The context holds `mission`, `vars`, `context_summary` and, under `tasks`, only the tasks
//! the template reads, so rendering does not grow with the size of the plan. A rendered text
//! is capped at [`MAX_INPUT_BYTES`]: rendering stops there and fails.
//!
//! It reads a run through [`Values`], a borrowed view of the parts a template can see, so
//! rendering knows nothing of the state machine (which renders through `RunState::render`).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::sync::Arc;

use manifest::{Plan, TaskGraph};
use minijinja::value::{Object, ObjectRepr, Value};
use minijinja::{Environment, UndefinedBehavior};

use crate::task::{TaskState, TaskStatus};

/// A task's output in a template: renders as its text; when the text is a JSON object, its
/// fields read as `tasks.X.output.field`.
#[derive(Debug)]
struct Output {
    text: Arc<str>,
    json: Option<serde_json::Value>,
}

impl Object for Output {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let field = self.json.as_ref()?.get(key.as_str()?)?;
        Some(match field {
            serde_json::Value::String(s) => Value::from(s.as_str()),
            other => Value::from(minijinja::value::Serde(other)),
        })
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The largest input a task can be given (8 MiB): eight outputs of a command agent at its
/// default `max_output_bytes`, and far below what would flood the event log.
pub const MAX_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum RenderError {
    /// The template does not compile, or reads something the run does not have (strict mode).
    #[error("{detail}")]
    #[diagnostic(code(template::render), help("`runner validate` checks what a template reads"))]
    Template {
        /// What minijinja reported, with the template's line when it knows it.
        detail: String,
    },
    /// The rendered text is over [`MAX_INPUT_BYTES`].
    #[error(
        "the rendered input is larger than {MAX_INPUT_BYTES} bytes (8 MiB), the cap on a task's input; \
         make the template read less"
    )]
    #[diagnostic(code(template::too_large))]
    TooLarge,
}

/// What a template can read of a run: the plan's mission, `--var` values, the context summary
/// and the tasks' outputs and statuses.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The plan (its mission and task ids).
    pub plan: &'a Plan,
    /// The plan's graph (to find a task by id).
    pub graph: &'a TaskGraph,
    /// Each task's state, in workflow order.
    pub tasks: &'a [TaskState],
    /// `--var` values.
    pub vars: &'a manifest::plan::Vars,
    /// The rolling context summary.
    pub context_summary: &'a str,
}

/// The rendered text, refusing to grow past the cap.
struct Capped {
    bytes: Vec<u8>,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_INPUT_BYTES {
            self.over = true;
            return Err(std::io::Error::other("over the input cap"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Renders templates against a run.
#[derive(Debug, Clone)]
pub struct Renderer {
    env: Environment<'static>,
}

impl Default for Renderer {
    fn default() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        Renderer { env }
    }
}

impl Renderer {
    /// Renders `template` with the run's mission, vars and the outputs it reads; fails when the
    /// text grows past [`MAX_INPUT_BYTES`].
    pub fn render(&self, template: &str, run: &Values<'_>) -> Result<String, RenderError> {
        if !manifest::template::Templates::is_template(template) {
            return Ok(template.to_owned());
        }
        let compiled = self.env.template_from_str(template).map_err(|e| describe(&e))?;
        let read: Vec<String> = compiled
            .undeclared_variables(true)
            .into_iter()
            .filter_map(|path| {
                path.strip_prefix("tasks.").map(|rest| rest.split('.').next().unwrap_or(rest).to_owned())
            })
            .collect();
        // `tasks["x-y"]` hides which task is read; give such templates every task.
        let everything = compiled.undeclared_variables(false).contains("tasks") && read.is_empty();
        let mut tasks = BTreeMap::new();
        let ids: Box<dyn Iterator<Item = usize>> = if everything {
            Box::new(0..run.tasks.len())
        } else {
            Box::new(read.iter().filter_map(|id| run.graph.index_of(id)))
        };
        for i in ids {
            let state = &run.tasks[i];
            let text = state.output.clone().unwrap_or_else(|| "".into());
            let json = serde_json::from_str::<serde_json::Value>(&text).ok().filter(serde_json::Value::is_object);
            let output = if state.status == TaskStatus::Succeeded || state.status == TaskStatus::Skipped {
                Value::from_object(Output { text, json })
            } else {
                Value::UNDEFINED
            };
            let entry = BTreeMap::from([("output", output), ("status", Value::from(state.status.as_str()))]);
            tasks.insert(run.plan.tasks[i].id.value.as_str(), Value::from(entry));
        }
        let context = BTreeMap::from([
            ("mission", Value::from(run.plan.mission.clone().unwrap_or_default())),
            ("vars", Value::from(minijinja::value::Serde(run.vars))),
            ("context_summary", Value::from(run.context_summary)),
            ("tasks", Value::from(tasks)),
        ]);
        let mut out = Capped { bytes: Vec::new(), over: false };
        match compiled.render_captured_to(context, &mut out) {
            Ok(_) => {
                Ok(String::from_utf8(out.bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
            }
            Err(_) if out.over => Err(RenderError::TooLarge),
            Err(error) => Err(describe(&error)),
        }
    }
}

fn describe(error: &minijinja::Error) -> RenderError {
    let detail = error.detail().map_or_else(|| error.kind().to_string(), str::to_owned);
    let detail = match error.line() {
        Some(line) => format!("{detail} (line {line} of the template)"),
        None => detail,
    };
    RenderError::Template { detail }
}
