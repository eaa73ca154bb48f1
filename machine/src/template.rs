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
use minijinja::value::{Enumerator, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Environment, UndefinedBehavior};

use crate::task::{TaskState, TaskStatus};

/// A task's output in a template: renders as its text; when the text is a JSON object, its
/// fields read as `tasks.X.output.field`, and when it is a JSON array (a map's output), it
/// iterates and indexes as a list.
#[derive(Debug)]
struct Output {
    text: Arc<str>,
    json: Option<serde_json::Value>,
}

impl Object for Output {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.json {
            Some(serde_json::Value::Array(_)) => ObjectRepr::Seq,
            _ => ObjectRepr::Plain,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let field = match self.json.as_ref()? {
            serde_json::Value::Array(items) => items.get(key.as_usize()?)?,
            json => json.get(key.as_str()?)?,
        };
        Some(match field {
            serde_json::Value::String(s) => Value::from(s.as_str()),
            other => Value::from(minijinja::value::Serde(other)),
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match &self.json {
            Some(serde_json::Value::Array(items)) => Enumerator::Seq(items.len()),
            _ => Enumerator::NonEnumerable,
        }
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
    /// The item a map's item task runs on, for `{{ item }}` and `{{ index }}`.
    pub item: Option<Item<'a>>,
}

/// One element of a map's list and its position, as an item task's templates read them.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// The element, `{{ item }}`.
    pub value: &'a serde_json::Value,
    /// Its position from 0, `{{ index }}`.
    pub index: usize,
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
        let context = context(run, &compiled.undeclared_variables(true), &compiled.undeclared_variables(false));
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

impl Renderer {
    /// Whether a `when` holds: its expression evaluated against the run, then taken as true or
    /// false as Jinja's `if` would. An expression that reads what the run does not have fails.
    pub fn condition(&self, expr: &str, run: &Values<'_>) -> Result<bool, RenderError> {
        Ok(self.eval(expr, run)?.is_true())
    }

    /// The list a `for_each` expression yields: a list, or a text holding a JSON array (a
    /// task's output); anything else fails, saying what it yielded.
    pub fn list(&self, expr: &str, run: &Values<'_>) -> Result<Vec<serde_json::Value>, RenderError> {
        let value = self.eval(expr, run)?;
        let not_a_list = |what: String| RenderError::Template {
            detail: format!("`for_each: {expr}` yielded {what}, which is not a list"),
        };
        let parsed = match value.kind() {
            ValueKind::Seq => {
                serde_json::to_value(&value).map_err(|e| not_a_list(format!("a list it cannot read ({e})")))?
            }
            ValueKind::String | ValueKind::Plain => {
                let text = value.to_string();
                serde_json::from_str(&text).map_err(|_| not_a_list(format!("the text `{}`", excerpt(&text))))?
            }
            kind => return Err(not_a_list(format!("a {kind}"))),
        };
        match parsed {
            serde_json::Value::Array(items) => Ok(items),
            other => Err(not_a_list(format!("the JSON `{}`", excerpt(&other.to_string())))),
        }
    }

    /// The value a sub-plan's `with` entry gives: a text that is one `{{ expression }}` gives
    /// the expression's value (a list or an object stays one), any other text its rendering.
    pub fn value(&self, template: &str, run: &Values<'_>) -> Result<serde_json::Value, RenderError> {
        let trimmed = template.trim();
        let single = trimmed.strip_prefix("{{").and_then(|t| t.strip_suffix("}}")).filter(|inner| {
            !inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%") && !inner.contains("{#")
        });
        let Some(expr) = single else {
            return self.render(template, run).map(serde_json::Value::String);
        };
        let value = self.eval(expr, run)?;
        serde_json::to_value(&value)
            .map_err(|e| RenderError::Template { detail: format!("`{expr}` yielded a value that is not JSON ({e})") })
    }

    /// Whether an expression reads `item` or `index`: a map's condition on each item.
    pub fn reads_item(&self, expr: &str) -> bool {
        self.env.compile_expression(manifest::template::expression(expr)).is_ok_and(|compiled| {
            let read = compiled.undeclared_variables(false);
            read.contains("item") || read.contains("index")
        })
    }

    /// Evaluates an expression against the run's values, refusing an undefined result.
    fn eval(&self, expr: &str, run: &Values<'_>) -> Result<Value, RenderError> {
        // An expression is one line: minijinja's line number would say nothing.
        let describe = |error: minijinja::Error| RenderError::Template {
            detail: error.detail().map_or_else(|| error.kind().to_string(), str::to_owned),
        };
        let compiled = self.env.compile_expression(manifest::template::expression(expr)).map_err(describe)?;
        let context = context(run, &compiled.undeclared_variables(true), &compiled.undeclared_variables(false));
        let value = compiled.eval(context).map_err(describe)?;
        if value.is_undefined() {
            return Err(RenderError::Template { detail: format!("`{expr}` reads something the run does not have") });
        }
        Ok(value)
    }
}

/// The context a template or expression sees: `mission`, `vars`, `context_summary`, the tasks it
/// reads (`nested` paths name them; a bare `tasks` in `top` gives it every task) and, for an
/// item task, `item` and `index`.
fn context(
    run: &Values<'_>,
    nested: &std::collections::HashSet<String>,
    top: &std::collections::HashSet<String>,
) -> BTreeMap<&'static str, Value> {
    let read: Vec<&str> = nested
        .iter()
        .filter_map(|path| path.strip_prefix("tasks.").map(|rest| rest.split('.').next().unwrap_or(rest)))
        .collect();
    // `tasks["x-y"]` hides which task is read; give such templates every task.
    let everything = top.contains("tasks") && read.is_empty();
    let mut tasks = BTreeMap::new();
    let ids: Box<dyn Iterator<Item = usize>> = if everything {
        Box::new(0..run.tasks.len())
    } else {
        Box::new(read.iter().filter_map(|id| run.graph.index_of(id)))
    };
    for i in ids {
        let state = &run.tasks[i];
        let text = state.output.clone().unwrap_or_else(|| "".into());
        let json =
            serde_json::from_str::<serde_json::Value>(&text).ok().filter(|json| json.is_object() || json.is_array());
        let output = if state.status == TaskStatus::Succeeded || state.status == TaskStatus::Skipped {
            Value::from_object(Output { text, json })
        } else {
            Value::UNDEFINED
        };
        let entry = BTreeMap::from([("output", output), ("status", Value::from(state.status.as_str()))]);
        tasks.insert(run.plan.tasks[i].id.value.as_str(), Value::from(entry));
    }
    let mut context = BTreeMap::from([
        ("mission", Value::from(run.plan.mission.clone().unwrap_or_default())),
        ("vars", Value::from(minijinja::value::Serde(run.vars))),
        ("context_summary", Value::from(run.context_summary)),
        ("tasks", Value::from(tasks)),
    ]);
    if let Some(item) = run.item {
        context.insert("item", Value::from(minijinja::value::Serde(item.value)));
        context.insert("index", Value::from(item.index));
    }
    context
}

/// The start of a long text, for an error message.
fn excerpt(text: &str) -> String {
    let end = text.char_indices().nth(80).map_or(text.len(), |(i, _)| i);
    if end < text.len() { format!("{}...", &text[..end]) } else { text.to_owned() }
}

fn describe(error: &minijinja::Error) -> RenderError {
    let detail = error.detail().map_or_else(|| error.kind().to_string(), str::to_owned);
    let detail = match error.line() {
        Some(line) => format!("{detail} (line {line} of the template)"),
        None => detail,
    };
    RenderError::Template { detail }
}
