//! `runner do "REQUEST"`: plan and execute at once. A model writes the plan a line at a time
//! (`planner::lines`) and each task joins the run, and may start, as soon as its line arrives
//! and its dependencies have succeeded. The run records the plan as it grows (`TaskPlanned`,
//! `LineRejected`, `PlanWritten`), so `runner resume` after a crash asks the model to go on
//! from the recorded lines and never runs a finished task again.
//!
//! The planner runs on a runtime of its own; what it writes reaches the run's driver through
//! a channel (the driver's feed), turned into commands here.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;
use engine::event::{Growing, TaskPlanned};
use engine::{Command, Record, Start};
use manifest::Loaded;
use model::Endpoint;
use model::catalog;
use planner::author::{Request, Windows};
use planner::lines::{LineError, LineEvent, LineProblem, LinesAuthored, Verdict, author_lines};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::drive::{Session, drive};
use crate::exit::{EXIT_FAILED, EXIT_PAUSED, EXIT_USAGE};
use crate::home::new_run_id;
use crate::live::say;
use crate::store::Runs;

/// The arguments of `runner do`.
#[derive(Debug, Args)]
pub struct DoArgs {
    /// The request, in plain words; `-` reads it from stdin.
    #[arg(allow_hyphen_values = true)]
    pub text: String,
    /// The model's server: a provider of `--template`, or a base URL.
    #[arg(long)]
    pub provider: String,
    /// A model to ask (default: the provider's model).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// A manifest whose agents, tools and providers the plan uses.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// With a base URL as `--provider`: the environment variable that holds its API key.
    #[arg(long, value_name = "VARIABLE")]
    pub api_key_env: Option<String>,
    /// The plan's name (default: from the request's first words).
    #[arg(long)]
    pub name: Option<String>,
    /// The sampling temperature.
    #[arg(long, default_value_t = crate::plan::DEFAULT_TEMPERATURE)]
    pub temperature: f32,
    /// How long one request to the model may take, such as `300s` (default: the provider's
    /// `timeout`, else 120s).
    #[arg(long, value_name = "DURATION", value_parser = manifest::Duration::parse)]
    pub timeout: Option<manifest::Duration>,
    /// The model's context window in tokens, as the provider's `context_window` would say it.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub context_window: Option<u64>,
    /// Ask for the whole answer at once instead of streaming it (for servers that cannot
    /// stream); tasks then start once the whole plan has arrived.
    #[arg(long)]
    pub no_stream: bool,
    /// How the server is asked to hold the answer to the line schema (`json_schema`,
    /// `json_object`, `ollama`, `none`), for a provider that does not say (default: plain JSON
    /// mode, no schema).
    #[arg(long, value_name = "DIALECT", value_parser = crate::plan::parse_dialect)]
    pub schema_dialect: Option<manifest::plan::SchemaDialect>,
    /// Ask at the terminal before each task joins the run; a task declined is left out.
    #[arg(long)]
    pub confirm_each: bool,
    /// The run's id (default: the plan's name and the time).
    #[arg(long = "run-id", value_name = "ID")]
    pub run_id: Option<String>,
}

/// How the planner of a `runner do` run was set up, recorded in its `RunCreated` so that
/// `runner resume` can ask the same planner to go on. Holds no key: only the name of the
/// variable that does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Settings {
    provider: String,
    models: Vec<String>,
    /// The template, absolute.
    template: Option<PathBuf>,
    api_key_env: Option<String>,
    name: String,
    temperature: f32,
    timeout: Option<manifest::Duration>,
    context_window: Option<u64>,
    stream: bool,
    #[serde(default)]
    schema_dialect: Option<manifest::plan::SchemaDialect>,
}

/// A planner ready to be asked.
struct Planner {
    request: Request,
    windows: Windows,
    endpoint: Endpoint,
}

impl Settings {
    /// The planner these settings describe: the template loaded, the key read, the server's
    /// context windows learnt.
    fn planner(&self, text: &str, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Planner> {
        let template: Option<Loaded> =
            self.template.as_deref().map(crate::plan::load_template).transpose()?.map(|(loaded, _)| loaded);
        let (name, mut provider) =
            crate::plan::author::provider(&self.provider, self.api_key_env.as_deref(), template.as_ref())?;
        if self.timeout.is_some() {
            provider.timeout = self.timeout;
        }
        if self.context_window.is_some() {
            provider.context_window = self.context_window;
        }
        if provider.schema_dialect.is_none() {
            provider.schema_dialect = self.schema_dialect;
        }
        let key = crate::plan::author::api_key(&name, &provider)?;
        let endpoint =
            Endpoint::for_provider(&name, &provider, key.clone()).map_err(|error| anyhow::anyhow!("{error}"))?;
        let mut models = self.models.clone();
        if models.is_empty() {
            models.extend(provider.model.clone());
        }
        if models.is_empty() {
            bail!("name a model with --model (the provider `{name}` has no default model)");
        }
        let timeout = provider.timeout.map_or(model::DEFAULT_TIMEOUT, |t| t.to_std());
        // A server that cannot list its models may still answer chats: its windows are then unknown.
        let served =
            runtime.block_on(catalog::list(&name, &provider.base_url, key.as_deref(), timeout)).unwrap_or_default();
        let windows = crate::plan::author::windows(&served, &provider, &models);
        let request = Request {
            text: text.to_owned(),
            name: self.name.clone(),
            template: template.and_then(|t| t.plan),
            models,
            candidates: 1,
            stream: self.stream,
            temperature: self.temperature,
            schema_dialect: provider.schema_dialect,
            runs_as_written: true,
        };
        Ok(Planner { request, windows, endpoint })
    }
}

/// What the planner's task hands to the command: each line's verdict as it comes, then the end.
enum Written {
    Line(LineEvent),
    Done(Box<LinesAuthored>),
}

/// Starts the planner on `runtime`, going on after `prefix` (the lines a run recorded); what
/// it writes arrives on the returned channel.
fn start_planner(
    runtime: &tokio::runtime::Runtime,
    planner: Planner,
    prefix: Vec<String>,
) -> mpsc::UnboundedReceiver<Written> {
    let (sender, receiver) = mpsc::unbounded_channel();
    runtime.spawn(async move {
        let Planner { request, windows, endpoint } = planner;
        let lines = sender.clone();
        let mut on_line = move |event: LineEvent| {
            let _ = lines.send(Written::Line(event));
        };
        let authored = author_lines(&request, &windows, &endpoint, &prefix, &mut on_line).await;
        let _ = sender.send(Written::Done(Box::new(authored)));
    });
    receiver
}

/// Plans and runs `args`'s request; returns the run's exit code.
pub fn run(runs: &Runs, args: &DoArgs) -> anyhow::Result<u8> {
    let text = if args.text == "-" { crate::plan::read_stdin()? } else { args.text.clone() };
    if text.trim().is_empty() {
        bail!("the request is empty: say what to do, e.g. `runner do \"Fetch the logs, then summarise them\"`");
    }
    if args.confirm_each && !std::io::stdin().is_terminal() {
        eprintln!("error: --confirm-each asks at the terminal, and stdin is not one");
        return Ok(EXIT_USAGE);
    }
    if let Some(run_id) = &args.run_id {
        runs.check_id(run_id)?;
    }
    let template = args.template.as_deref().map(crate::apply::absolute);
    let settings = Settings {
        provider: args.provider.clone(),
        models: args.models.clone(),
        template,
        api_key_env: args.api_key_env.clone(),
        name: args.name.clone().unwrap_or_else(|| crate::plan::name_of(&text)),
        temperature: args.temperature,
        timeout: args.timeout,
        context_window: args.context_window,
        stream: !args.no_stream,
        schema_dialect: args.schema_dialect,
    };
    let runtime = planner_runtime()?;
    let planner = settings.planner(&text, &runtime)?;
    let mut written = start_planner(&runtime, planner, Vec::new());
    say(&format!("planning `{}` with {}…", settings.name, settings.provider));
    let mut confirm = Confirm { asking: args.confirm_each };
    let (lines, plan, rejected) = match runtime.block_on(first_task(&mut written, &mut confirm)) {
        First::Task { lines, plan, before } => (lines, plan, before),
        First::Questions(questions) => {
            eprintln!("the model asks before it plans:");
            for question in questions {
                eprintln!("  - {question}");
            }
            eprintln!("say more in the request and run `runner do` again");
            // As `runner plan` does: the work waits for a person.
            return Ok(EXIT_PAUSED);
        }
        First::Nothing(why) => {
            eprintln!("error: no task could run: {why}; nothing was recorded");
            return Ok(EXIT_FAILED);
        }
    };
    crate::apply::refuse_unset_keys(&plan)?;
    let run_id = args.run_id.clone().unwrap_or_else(|| new_run_id(&plan.name));
    let (run, lock, store) = runs.create(&run_id, &plan.name)?;
    let workdir = std::env::current_dir().context("cannot read the current folder")?;
    let (span, trace) = crate::telemetry::run_span(&run_id, &plan.name, None);
    let author = serde_json::to_value(&settings).context("the planner's settings do not encode")?;
    let start = Start { plan, trace, growing: Some(Growing { request: text, lines, author }), ..Start::default() };
    let (feed, fed) = mpsc::unbounded_channel();
    for problem in rejected {
        let _ = feed.send(reject(problem));
    }
    runtime.spawn(forward(written, feed, confirm));
    say(&format!("run `{run_id}`: {}", run.place()));
    let session = Session { span, feed: Some(fed), ..Session::new(run, lock, workdir, store, Vec::new()) };
    let code = drive(session, Command::Start(start));
    runtime.shutdown_background();
    code
}

/// The planner's feed for a resumed run that was still being planned, with the runtime it
/// runs on (kept until the run is driven): the planner is asked to go on after the lines the
/// run recorded. `None` when the run's plan is not growing.
pub fn resume_feed(
    records: &[Record],
) -> anyhow::Result<Option<(tokio::runtime::Runtime, mpsc::UnboundedReceiver<Command>)>> {
    let Some(growing) = records.iter().find_map(|r| match &r.event {
        engine::Event::RunCreated(created) => created.growing.clone(),
        _ => None,
    }) else {
        return Ok(None);
    };
    let settings: Settings = serde_json::from_value(growing.author.clone())
        .context("the run's RunCreated does not say how its planner was set up")?;
    let mut prefix = growing.lines.clone();
    prefix.extend(records.iter().filter_map(|r| match &r.event {
        engine::Event::TaskPlanned(planned) => Some(planned.text.clone()),
        _ => None,
    }));
    let runtime = planner_runtime()?;
    let planner = settings.planner(&growing.request, &runtime)?;
    say(&format!("the plan was still being written: asking the model to go on after {} lines", prefix.len()));
    let written = start_planner(&runtime, planner, prefix);
    let (feed, fed) = mpsc::unbounded_channel();
    runtime.spawn(forward(written, feed, Confirm { asking: false }));
    Ok(Some((runtime, fed)))
}

/// A runtime for the planner, beside the one the run is driven on.
fn planner_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("planner")
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// What came before the run could be created.
enum First {
    /// The first task's line: the lines so far (header, task), the plan they make, and the
    /// lines rejected before it.
    Task { lines: Vec<String>, plan: Arc<manifest::Plan>, before: Vec<LineProblem> },
    /// The model asked questions instead of planning.
    Questions(Vec<String>),
    /// The planner ended with no task that can run, and why.
    Nothing(String),
}

/// Waits for the first task the planner writes.
async fn first_task(written: &mut mpsc::UnboundedReceiver<Written>, confirm: &mut Confirm) -> First {
    let mut lines = Vec::new();
    let mut before = Vec::new();
    while let Some(next) = written.recv().await {
        match next {
            Written::Line(
                LineEvent::Accepted { line, text, verdict } | LineEvent::Repaired { line, text, verdict },
            ) => match verdict {
                Verdict::Header => lines.push(text),
                Verdict::Questions(questions) => return First::Questions(questions),
                Verdict::Task { plan, id } => {
                    let Some(task) = plan.tasks.last() else { continue };
                    if confirm.ask(task).await {
                        lines.push(text);
                        return First::Task { lines, plan, before };
                    }
                    before.push(declined(line, id));
                }
                Verdict::Rejected(problem) => before.push(problem),
            },
            // A rejected line is asked for again once the answer has ended: only a line
            // dropped in the end is recorded.
            Written::Line(LineEvent::Rejected(_)) => {}
            Written::Line(LineEvent::Dropped(problem)) => before.push(problem),
            Written::Done(authored) => {
                if !authored.questions.is_empty() {
                    return First::Questions(authored.questions.clone());
                }
                let why = authored.failed.clone().unwrap_or_else(|| {
                    let problems: Vec<String> = before.iter().map(ToString::to_string).collect();
                    match problems.is_empty() {
                        true => "the model wrote no task".to_owned(),
                        false => format!("every task line was rejected: {}", problems.join("; ")),
                    }
                });
                return First::Nothing(why);
            }
        }
    }
    First::Nothing("the planner stopped without a word".to_owned())
}

/// Turns what the planner writes into the run's commands, until the plan is written.
async fn forward(
    mut written: mpsc::UnboundedReceiver<Written>,
    feed: mpsc::UnboundedSender<Command>,
    mut confirm: Confirm,
) {
    while let Some(next) = written.recv().await {
        let command = match next {
            Written::Line(
                LineEvent::Accepted { line, text, verdict } | LineEvent::Repaired { line, text, verdict },
            ) => match verdict {
                Verdict::Task { plan, id } => {
                    let Some(task) = plan.tasks.last() else { continue };
                    match confirm.ask(task).await {
                        true => Command::PlanTask(TaskPlanned { line: line as u32, text, task: task.clone() }),
                        false => reject(declined(line, id)),
                    }
                }
                Verdict::Rejected(problem) => reject(problem),
                Verdict::Header | Verdict::Questions(_) => continue,
            },
            Written::Line(LineEvent::Rejected(_)) => continue,
            Written::Line(LineEvent::Dropped(problem)) => reject(problem),
            Written::Done(authored) => {
                let (score, findings) = review(&authored);
                if let Some(score) = score {
                    say(&format!("the plan is written: critic score {score:.1}/10"));
                }
                for finding in &findings {
                    say(&format!("  {finding}"));
                }
                Command::ClosePlan { error: authored.failed.clone(), score, findings }
            }
        };
        if feed.send(command).is_err() {
            return;
        }
    }
}

/// The `RejectLine` of a problem.
fn reject(problem: LineProblem) -> Command {
    Command::RejectLine { line: problem.line as u32, task: problem.task, code: problem.code, reason: problem.message }
}

/// The critic's score and findings of the whole plan, once written.
fn review(authored: &LinesAuthored) -> (Option<f64>, Vec<String>) {
    let Some(manifest) = &authored.manifest else { return (None, Vec::new()) };
    let text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    let loaded = manifest::load_str("plan.json", "plan", &text, &|_| false);
    let review = crate::critic::review(&loaded);
    let findings = review
        .findings()
        .map(|finding| match &finding.task {
            Some(task) => format!("{}: task `{task}`: {}", finding.lint.code_str(), finding.label),
            None => format!("{}: {}", finding.lint.code_str(), finding.label),
        })
        .collect();
    (Some(review.scores.overall), findings)
}

/// Asks at the terminal before each task joins, with `--confirm-each`.
struct Confirm {
    asking: bool,
}

/// The problem of a task the person declined at the `--confirm-each` prompt.
fn declined(line: usize, id: String) -> LineProblem {
    LineProblem::new(line, Some(id), &LineError::Declined)
}

impl Confirm {
    /// Whether the task may join: nobody is asked, or the person said yes.
    async fn ask(&mut self, task: &manifest::plan::Task) -> bool {
        if !self.asking {
            return true;
        }
        let agent = task.agent.as_ref().map_or("no agent", |a| a.value.as_str());
        let input = task.input.as_ref().map_or("", |i| i.value.as_str());
        let question = format!(
            "add task `{}` ({agent}): {}? [y/n] ",
            task.id.value,
            model::redact::excerpt(&input.replace('\n', " "), 120)
        );
        let answer = tokio::task::spawn_blocking(move || {
            eprint!("{question}");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer).map(|_| answer)
        })
        .await;
        matches!(answer, Ok(Ok(answer)) if ["y", "yes"].contains(&answer.trim().to_lowercase().as_str()))
    }
}
