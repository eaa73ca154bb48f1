//! `runner plan`: a request in plain words to a manifest that `runner critic` and `runner
//! apply` take, by the deterministic planner or by a model (with repair, fallback and
//! candidates), with its provenance recorded and, with `--apply`, a confirmation loop. The
//! model's half (`--provider`) is `author.rs`.

pub mod author;
mod lines;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use manifest::Loaded;
use manifest::plan::SchemaDialect;
use planner::deterministic::{Bindings, Draft};
use planner::steps::Kind;

use crate::exit::{EXIT_DECLINED, EXIT_PAUSED, EXIT_USAGE};
use crate::home::new_run_id;
use crate::provenance::{Chosen, PlanDir, Provenance};

/// The arguments of `runner plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The request, in plain words; `-` reads it from stdin.
    #[arg(required_unless_present = "show", allow_hyphen_values = true)]
    pub text: Option<String>,
    /// Write the manifest to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The plan's name (default: from the request's first words).
    #[arg(long)]
    pub name: Option<String>,
    /// A manifest whose agents, tools and providers the plan uses.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// The agent for a kind of step (`tool`, `processing`), as KIND=AGENT; repeatable.
    #[arg(long = "agent-map", value_name = "KIND=AGENT", value_parser = parse_binding)]
    pub agent_map: Vec<(Kind, String)>,
    /// Have a model write the plan: a provider of `--template`, or a base URL.
    #[arg(long)]
    pub provider: Option<String>,
    /// A model to ask, in order; repeatable (at most three are tried).
    #[arg(long = "model", value_name = "MODEL", requires = "provider")]
    pub models: Vec<String>,
    /// With a base URL as `--provider`: the environment variable that holds its API key.
    #[arg(long, value_name = "VARIABLE", requires = "provider")]
    pub api_key_env: Option<String>,
    /// Plans to ask each model for; the one the critic scores best is kept.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub candidates: u8,
    /// Show the plan as the model writes it.
    #[arg(long, requires = "provider")]
    pub stream: bool,
    /// Have the model write the plan a line at a time (a header, then one task per line), each
    /// line checked as it arrives and repaired on its own; with `--stream`, as it is written.
    #[arg(long, requires = "provider", conflicts_with = "candidates")]
    pub lines: bool,
    /// How the server is asked to hold the answer to a JSON Schema (`json_schema`,
    /// `json_object`, `ollama`, `none`), for a provider that does not say (default: plain JSON
    /// mode, no schema).
    #[arg(long, value_name = "DIALECT", requires = "provider", value_parser = parse_dialect)]
    pub schema_dialect: Option<SchemaDialect>,
    /// The sampling temperature.
    #[arg(long, default_value_t = DEFAULT_TEMPERATURE)]
    pub temperature: f32,
    /// How long one request to the model may take, such as `300s` or `10m` (default: the
    /// provider's `timeout`, else 120s).
    #[arg(long, value_name = "DURATION", requires = "provider", value_parser = manifest::Duration::parse)]
    pub timeout: Option<manifest::Duration>,
    /// The model's context window in tokens, as the provider's `context_window` would say it
    /// (the server's, when it reports a smaller one, still wins).
    #[arg(long, value_name = "TOKENS", requires = "provider", value_parser = clap::value_parser!(u64).range(1..))]
    pub context_window: Option<u64>,
    /// Which model goes first: the one with the best record in models.json, or the order given.
    #[arg(long, value_enum, default_value_t = ModelOrder::Best)]
    pub model_order: ModelOrder,
    /// Show the plan, ask `Proceed? [y/n/e]`, then run it.
    #[arg(long)]
    pub apply: bool,
    /// With `--apply`: run without asking.
    #[arg(long, short, requires = "apply")]
    pub yes: bool,
    /// Print the provenance of an earlier plan.
    #[arg(long, value_name = "ID", conflicts_with = "text")]
    pub show: Option<String>,
}

/// The sampling temperature a model plans at unless `--temperature` says otherwise.
pub const DEFAULT_TEMPERATURE: f32 = 0.2;

/// `--model-order` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelOrder {
    /// The model with the best record in `$RUNNER_HOME/models.json` first.
    Best,
    /// As given.
    Given,
}

/// Reads a `--schema-dialect` value: one of the words a manifest's provider takes.
pub(crate) fn parse_dialect(text: &str) -> Result<SchemaDialect, String> {
    SchemaDialect::ALL.into_iter().find(|dialect| dialect.as_str() == text).ok_or_else(|| {
        let words: Vec<&str> = SchemaDialect::ALL.iter().map(|dialect| dialect.as_str()).collect();
        format!("`{text}` is not a schema dialect: use {}", words.join(", "))
    })
}

/// Reads an `--agent-map` value, `KIND=AGENT`.
fn parse_binding(text: &str) -> Result<(Kind, String), BindingError> {
    let (kind, agent) = text.split_once('=').ok_or_else(|| BindingError::NotKindAgent { text: text.to_owned() })?;
    let kind = [Kind::Tool, Kind::Processing, Kind::Clarification]
        .into_iter()
        .find(|k| k.as_str() == kind.trim())
        .ok_or_else(|| BindingError::UnknownKind { kind: kind.to_owned() })?;
    Ok((kind, agent.trim().to_owned()))
}

/// Why an `--agent-map` value cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, miette::Diagnostic)]
enum BindingError {
    /// No `=` in the value.
    #[diagnostic(code(cli::agent_map))]
    NotKindAgent {
        /// The value given.
        text: String,
    },
    /// The kind before `=` is not a step kind.
    #[diagnostic(code(cli::step_kind))]
    UnknownKind {
        /// The kind given.
        kind: String,
    },
}

impl std::fmt::Display for BindingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindingError::NotKindAgent { text } => write!(f, "`{text}` is not KIND=AGENT"),
            BindingError::UnknownKind { kind } => {
                write!(f, "unknown step kind `{kind}`: use tool, processing or clarification")
            }
        }
    }
}

impl std::error::Error for BindingError {}

/// The longest request read from stdin.
const REQUEST_LIMIT: u64 = 1 << 20;

/// What a planner produced: the manifest and how it came about.
pub struct Outcome {
    /// The manifest, as YAML; empty when the model asked questions instead.
    pub yaml: String,
    /// How it came about.
    pub provenance: Provenance,
}

/// Plans a request; returns the exit code.
pub fn run(args: &PlanArgs, store: Option<&str>) -> anyhow::Result<u8> {
    if let Some(id) = &args.show {
        return crate::provenance::show(id);
    }
    let request = match args.text.as_deref() {
        Some("-") => read_stdin()?,
        text => text.unwrap_or_default().to_owned(),
    };
    if request.trim().is_empty() {
        bail!(
            "the request is empty: say what the plan should do, e.g. `runner plan \"Fetch the logs, then summarise them\"`"
        );
    }
    let template = args.template.as_deref().map(load_template).transpose()?;
    let name = args.name.clone().unwrap_or_else(|| name_of(&request));
    let id = new_run_id(&name);
    let bindings = Bindings {
        agents: args.agent_map.iter().cloned().collect::<BTreeMap<_, _>>(),
        template: template.as_ref().map(|(_, value)| value.clone()),
    };
    let dir = PlanDir::create(&id, Vec::new())?;
    let mut request = request;
    let mut outcome = loop {
        dir.write("request.txt", &request)?;
        let outcome = match &args.provider {
            Some(_) => {
                let template = template.as_ref().map(|(loaded, _)| loaded);
                author::write(args, &request, &name, template, &bindings, &dir)?
            }
            None => deterministic(&request, &name, &bindings, None),
        };
        let asked = !outcome.provenance.questions.is_empty() && outcome.yaml.is_empty();
        if !asked || !args.apply || !std::io::stdin().is_terminal() {
            break outcome;
        }
        // The model needs answers: ask them here and plan again with them.
        request.push_str("\n\nAnswers to your questions:");
        for question in &outcome.provenance.questions {
            eprint!("{question}\n> ");
            std::io::stderr().flush()?;
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer)?;
            request.push_str(&format!("\n- {question} {}", answer.trim()));
        }
    };
    if !outcome.provenance.questions.is_empty() && outcome.yaml.is_empty() {
        dir.finish(&outcome.provenance)?;
        eprintln!("the model needs answers before it can plan:");
        for question in &outcome.provenance.questions {
            eprintln!("  - {question}");
        }
        eprintln!("plan again with the answers in the request (provenance: runner plan --show {id})");
        return Ok(EXIT_PAUSED);
    }
    outcome.provenance.id.clone_from(&id);
    outcome.provenance.created = engine::clock::now();
    outcome.provenance.request.clone_from(&request);
    let path = target(args, &name)?;
    loop {
        let loaded = manifest::load_str("plan.yaml", &name, &outcome.yaml, &|file| Path::new(file).is_file());
        outcome.provenance.chosen = chosen(&loaded);
        dir.write("plan.yaml", &outcome.yaml)?;
        dir.finish(&outcome.provenance)?;
        if !loaded.is_valid() {
            // The planners only hand over valid plans; an edit in $EDITOR can break one.
            let color = crate::diagnostics::color_stderr();
            eprint!("{}", crate::diagnostics::render_loaded(&loaded, color));
            eprintln!("{}", crate::validate::summary(&loaded));
            if !args.apply {
                return Ok(EXIT_USAGE);
            }
        }
        match &path {
            Some(path) => {
                std::fs::write(path, &outcome.yaml).with_context(|| format!("cannot write {}", path.display()))?
            }
            None => crate::diagnostics::print(&outcome.yaml)?,
        }
        eprintln!("planned `{name}` (id {id}; provenance: runner plan --show {id})");
        let Some(path) = path.as_ref().filter(|_| args.apply) else { return Ok(0) };
        eprint!("{}", summary(&loaded));
        let choice = if args.yes && loaded.is_valid() { Choice::Yes } else { ask(loaded.is_valid())? };
        match choice {
            Choice::Yes => {
                let runs = crate::store::Runs::choose(store)?;
                return crate::apply::run(&runs, &crate::apply::ApplyArgs::confirmed(path.clone()));
            }
            Choice::No => {
                eprintln!("declined: nothing ran");
                return Ok(EXIT_DECLINED);
            }
            Choice::Edit => outcome.yaml = edit(path)?,
        }
    }
}

/// The deterministic planner's manifest and provenance; `fallback` says why a model's plan
/// was not used.
pub fn deterministic(request: &str, name: &str, bindings: &Bindings, fallback: Option<String>) -> Outcome {
    let draft: Draft = planner::deterministic::plan(request, name, bindings, &|file| Path::new(file).exists());
    let provenance = Provenance {
        planner: "deterministic".to_owned(),
        complexity: draft.complexity.reasons.clone(),
        candidates: 0,
        fallback,
        ..Provenance::default()
    };
    Outcome { yaml: draft.yaml, provenance }
}

/// The request from stdin, at most 1 MiB.
pub(crate) fn read_stdin() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(REQUEST_LIMIT + 1)
        .read_to_end(&mut bytes)
        .context("cannot read the request from stdin")?;
    if bytes.len() as u64 > REQUEST_LIMIT {
        bail!("the request on stdin is over {} MiB", REQUEST_LIMIT >> 20);
    }
    String::from_utf8(bytes).context("the request on stdin is not UTF-8")
}

/// A template manifest: loaded (it must be valid) and as a JSON value for the planner.
pub(crate) fn load_template(path: &Path) -> anyhow::Result<(Loaded, serde_json::Value)> {
    let loaded = manifest::load_file(path);
    if !loaded.is_valid() {
        eprint!("{}", crate::diagnostics::render_loaded(&loaded, crate::diagnostics::color_stderr()));
        bail!("the template {} has errors", path.display());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value =
        planner::template_value(&text).with_context(|| format!("cannot read the template {}", path.display()))?;
    Ok((loaded, value))
}

/// A plan name from the request's first words: lower case, `-` between words.
pub(crate) fn name_of(request: &str) -> String {
    let words: Vec<String> = request
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(4)
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() { "plan".to_owned() } else { words.join("-") }
}

/// What validation and the critic say of the chosen manifest.
fn chosen(loaded: &Loaded) -> Chosen {
    let critique = crate::critic::review(loaded);
    let count = |severity| loaded.diagnostics.iter().filter(|d| d.severity == severity).count();
    Chosen {
        file: "plan.yaml".to_owned(),
        errors: count(manifest::Severity::Error),
        warnings: count(manifest::Severity::Warning),
        score: critique.scores.overall,
        findings: critique.findings().take(5).map(|f| format!("{} [{}]", f.lint, f.code())).collect(),
    }
}

/// The file the manifest goes to: `--output`, or with `--apply` `./<name>.yaml` (never over an
/// existing file), so the plan is a file that can be applied again, in the folder its relative
/// paths mean; `None`: print it.
fn target(args: &PlanArgs, name: &str) -> anyhow::Result<Option<PathBuf>> {
    match (&args.output, args.apply) {
        (Some(path), _) => Ok(Some(path.clone())),
        (None, true) => {
            // A file in this folder whatever the name holds (`--name ../x` stays here).
            let stem: String =
                name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
            let path = PathBuf::from(format!("{}.yaml", stem.trim_matches('-')));
            if path.exists() {
                bail!("{} exists; name the file to write with --output", path.display());
            }
            Ok(Some(path))
        }
        (None, false) => Ok(None),
    }
}

/// The plan in brief for the confirmation: numbered steps with their agents, the critic's
/// score and its first findings.
fn summary(loaded: &Loaded) -> String {
    let mut out = String::new();
    let Some(plan) = &loaded.plan else { return out };
    let _ = writeln!(out, "plan `{}`: {} step(s)", plan.name, plan.tasks.len());
    for (n, task) in plan.tasks.iter().enumerate() {
        let who = match task.kind {
            manifest::plan::TaskKind::HumanReview => "you (review)".to_owned(),
            _ => plan.agent_of(task).unwrap_or("built-in").to_owned(),
        };
        let text = task.input.as_ref().or(task.extras().prompt.as_ref()).map_or("", |t| t.value.as_str());
        let first = text.lines().next().unwrap_or("");
        let _ = writeln!(out, "  {}. {} [{who}] {first}", n + 1, task.id.value);
    }
    let critique = crate::critic::review(loaded);
    let _ = writeln!(out, "critic score {:.1}/10", critique.scores.overall);
    for finding in critique.findings().take(3) {
        let _ = writeln!(out, "  - {} [{}]", finding.lint, finding.code());
    }
    out
}

enum Choice {
    Yes,
    No,
    Edit,
}

/// Asks `Proceed? [y/n/e]` on a terminal.
fn ask(valid: bool) -> anyhow::Result<Choice> {
    if !std::io::stdin().is_terminal() {
        eprintln!("declined: stdin is not a terminal, so nobody can confirm; pass --yes to run without asking");
        return Ok(Choice::No);
    }
    loop {
        eprint!("{}", if valid { "Proceed? [y/n/e] " } else { "The plan has errors. Edit it? [e/n] " });
        std::io::stderr().flush()?;
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer)? == 0 {
            return Ok(Choice::No);
        }
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" if valid => return Ok(Choice::Yes),
            "n" | "no" | "" => return Ok(Choice::No),
            "e" | "edit" => return Ok(Choice::Edit),
            _ => eprintln!("answer y (run it), n (stop) or e (edit it in $EDITOR)"),
        }
    }
}

/// Opens the manifest in `$EDITOR` (`vi` when unset) and reads it back.
fn edit(path: &Path) -> anyhow::Result<String> {
    let editor = std::env::var("EDITOR").ok().filter(|e| !e.trim().is_empty()).unwrap_or_else(|| "vi".to_owned());
    // `$EDITOR` may carry arguments (`code --wait`); the file is the last argument, never
    // spliced into a shell string.
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(path)
        .status()
        .with_context(|| format!("cannot start the editor `{program}`"))?;
    if !status.success() {
        bail!("the editor `{program}` exited with {status}");
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}
