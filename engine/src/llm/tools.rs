//! The tools an agent may call: their definitions for the model, argument checks and the
//! process each call runs. Arguments go to the tool's stdin as JSON; the argv is run directly,
//! never through a shell.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tracing::Instrument as _;

use model::ToolError;
use model::protocol::{FunctionDefinition, ToolCall, ToolDefinition};
use model::redact::excerpt;

/// The built-in tool that asks a person a question.
pub const ASK_USER: &str = "ask_user";
/// The most stdout bytes of a tool call handed back to the model.
pub const OUTPUT_CAP: usize = 64 * 1024;
/// How long a tool call may take when the tool sets no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of stderr a failed call reports.
const STDERR_EXCERPT: usize = 2000;

/// One tool of the plan, ready to be offered and called.
#[derive(Debug)]
pub struct Tool {
    name: String,
    description: String,
    argv: Vec<String>,
    parameters: Value,
    validator: Option<jsonschema::Validator>,
    timeout: Duration,
}

impl Tool {
    /// A tool from the plan; an error says why it cannot be offered.
    pub fn new(name: &str, tool: &manifest::plan::Tool) -> Result<Self, ToolError> {
        if tool.command.is_empty() {
            return Err(ToolError::EmptyCommand);
        }
        let (parameters, validator) = match &tool.input_schema {
            Some(schema) => {
                let validator = jsonschema::validator_for(&schema.value)
                    .map_err(|error| ToolError::BadSchema { message: error.to_string() })?;
                (schema.value.clone(), Some(validator))
            }
            None => (json!({"type": "object"}), None),
        };
        Ok(Tool {
            name: name.to_owned(),
            description: tool.description.clone(),
            argv: tool.command.clone(),
            parameters,
            validator,
            timeout: tool.timeout.map_or(DEFAULT_TIMEOUT, |t| t.to_std()),
        })
    }
}

/// What a tool call comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The text of the `tool` message answering the call, and whether the tool ran and exited
    /// with status 0.
    Result(String, bool),
    /// The model asked a person this question.
    Question(String),
}

/// The tools one agent may call.
#[derive(Debug, Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<Tool>>,
    /// Environment variables tools must not see: the providers' API keys.
    hidden: Arc<[String]>,
}

impl Toolbox {
    /// A toolbox of `tools`; `hidden` variables are removed from the tools' environment.
    pub fn new(tools: impl IntoIterator<Item = Arc<Tool>>, hidden: Arc<[String]>) -> Self {
        Toolbox { tools: tools.into_iter().map(|t| (t.name.clone(), t)).collect(), hidden }
    }

    /// The definitions offered to the model, with `ask_user` when `may_ask`.
    pub fn definitions(&self, may_ask: bool) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> = self
            .tools
            .values()
            .filter(|tool| !(may_ask && tool.name == ASK_USER))
            .map(|tool| function(&tool.name, &tool.description, tool.parameters.clone()))
            .collect();
        if may_ask {
            definitions.push(function(
                ASK_USER,
                "Ask the person who runs this task a clarifying question. Use it only when the \
                 task cannot be done without their answer.",
                json!({
                    "type": "object",
                    "properties": {"question": {"type": "string", "description": "The question, self-contained."}},
                    "required": ["question"],
                }),
            ));
        }
        definitions
    }

    /// Carries out one call: a question for `ask_user`, otherwise the tool's result or what
    /// was wrong with the call, phrased for the model to fix.
    pub async fn call(&self, call: &ToolCall, may_ask: bool, workdir: &Path) -> Outcome {
        let span = crate::spans::tool_call(&call.function.name);
        let outcome = self.carry_out(call, may_ask, workdir).instrument(span.clone()).await;
        span.record("outcome", if matches!(outcome, Outcome::Question(_)) { "question" } else { "result" });
        outcome
    }

    async fn carry_out(&self, call: &ToolCall, may_ask: bool, workdir: &Path) -> Outcome {
        let name = call.function.name.as_str();
        let text = if call.function.arguments.trim().is_empty() { "{}" } else { call.function.arguments.as_str() };
        let arguments: Value = match serde_json::from_str(text) {
            Ok(arguments) => arguments,
            Err(error) => {
                return Outcome::Result(
                    format!(
                        "error: the arguments of `{name}` are not valid JSON ({error}); call it again with a JSON object"
                    ),
                    false,
                );
            }
        };
        if may_ask && name == ASK_USER {
            return match arguments.get("question").and_then(Value::as_str) {
                Some(question) if !question.trim().is_empty() => Outcome::Question(question.to_owned()),
                _ => Outcome::Result(format!("error: `{ASK_USER}` needs a non-empty string `question`"), false),
            };
        }
        let Some(tool) = self.tools.get(name) else {
            let known: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Outcome::Result(format!("error: there is no tool `{name}`; the tools are: {known}"), false);
        };
        if let Some(validator) = &tool.validator {
            let problems: Vec<String> = validator
                .iter_errors(&arguments)
                .take(5)
                .map(|error| {
                    let at = error.instance_path().as_str();
                    if at.is_empty() { error.to_string() } else { format!("at `{at}`: {error}") }
                })
                .collect();
            if !problems.is_empty() {
                let text = format!(
                    "error: the arguments of `{name}` do not match its input schema: {}; fix them and call it again",
                    problems.join("; ")
                );
                return Outcome::Result(text, false);
            }
        }
        let (text, ok) = run(tool, &arguments, workdir, &self.hidden).await;
        Outcome::Result(text, ok)
    }
}

fn function(name: &str, description: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        kind: "function",
        function: FunctionDefinition { name: name.to_owned(), description: description.to_owned(), parameters },
    }
}

/// Runs a tool's process within its timeout; the text describes the result or the failure,
/// and the flag says whether it ran and exited with status 0.
async fn run(tool: &Tool, arguments: &Value, workdir: &Path, hidden: &[String]) -> (String, bool) {
    let name = &tool.name;
    match tokio::time::timeout(tool.timeout, run_process(tool, arguments, workdir, hidden)).await {
        Ok(Ok(text)) => (text, true),
        Ok(Err(text)) => (text, false),
        // The tool's process group is killed when it is dropped with the timed-out future.
        Err(_) => (format!("error: the tool `{name}` did not finish within {:?} and was stopped", tool.timeout), false),
    }
}

/// The tool's output, or what went wrong.
async fn run_process(tool: &Tool, arguments: &Value, workdir: &Path, hidden: &[String]) -> Result<String, String> {
    let name = &tool.name;
    let Some((program, args)) = tool.argv.split_first() else {
        return Err(format!("error: the tool `{name}` has no command"));
    };
    let mut child = match crate::process::spawn(program, args, workdir, hidden) {
        Ok(child) => child,
        Err(error) => return Err(format!("error: the tool `{name}` could not be started: {error}")),
    };
    let Some((mut stdin, stdout, stderr)) = child.pipes() else {
        return Err(format!("error: the tool `{name}` has no stdin, stdout or stderr"));
    };
    let input = arguments.to_string();
    // A tool that exits without reading its input closes the pipe; that is not an error.
    let feed = async move {
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
    };
    let (_, stdout, stderr) =
        tokio::join!(feed, read_capped(stdout, OUTPUT_CAP), read_capped(stderr, STDERR_EXCERPT * 4));
    let status = match child.wait().await {
        Ok(status) => status,
        Err(error) => return Err(format!("error: the tool `{name}` could not be waited for: {error}")),
    };
    let (stdout, truncated) = match stdout {
        Ok(read) => read,
        Err(error) => return Err(format!("error: the output of `{name}` could not be read: {error}")),
    };
    let stdout = String::from_utf8_lossy(&stdout);
    if !status.success() {
        let code = status.code().map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
        let stderr = stderr.map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default();
        let detail = if stderr.trim().is_empty() { stdout.as_ref() } else { stderr.as_str() };
        let detail = excerpt(detail, STDERR_EXCERPT);
        return Err(if detail.is_empty() {
            format!("error: the tool `{name}` failed with {code}")
        } else {
            format!("error: the tool `{name}` failed with {code}:\n{detail}")
        });
    }
    let mut text = stdout.trim_end().to_owned();
    if truncated {
        text.push_str(&format!("\n[output truncated: only the first {} KiB are shown]", OUTPUT_CAP / 1024));
    }
    Ok(text)
}

/// The first `cap` bytes of a stream, and whether there was more (which is read and dropped, so
/// the writer is never blocked on a full pipe).
async fn read_capped(stream: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut limited = stream.take(cap as u64);
    let mut buffer = Vec::new();
    limited.read_to_end(&mut buffer).await?;
    let mut rest = limited.into_inner();
    let more = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await?;
    // Drop a character cut in half at the end.
    if more > 0
        && let Err(error) = std::str::from_utf8(&buffer)
        && error.error_len().is_none()
    {
        buffer.truncate(error.valid_up_to());
    }
    Ok((buffer, more > 0))
}
