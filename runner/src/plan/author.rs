//! `runner plan --provider`: a model writes the plan. This module picks the provider and the
//! order of the models, runs the author, records every prompt and answer in the plan's
//! provenance folder and every attempt in the models' records, and falls back to the
//! deterministic planner when no model gives a valid plan. Each model's context window, which
//! the prompts are fitted to, is the smaller of what the server's `/models` says and the
//! provider's `context_window`, either one when only one is known, else the default.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use manifest::Loaded;
use manifest::plan::Provider;
use model::Endpoint;
use model::catalog::{self, Catalog};
use model::tokens::Tokenizer;
use planner::author::{Authored, Outcome as Attempted, PROMPT_VERSION, Request, Window, Windows, author_within};
use planner::deterministic::Bindings;

use super::{ModelOrder, Outcome, PlanArgs, deterministic};
use crate::models::{Attempted as Counted, Models};
use crate::provenance::{Attempt, ContextWindow, PlanDir, Provenance};

/// Has a model write the plan for `request`; returns the manifest (YAML) and its provenance,
/// or the model's questions with no manifest.
pub fn write(
    args: &PlanArgs,
    request: &str,
    name: &str,
    template: Option<&Loaded>,
    bindings: &Bindings,
    dir: &PlanDir,
) -> anyhow::Result<Outcome> {
    let provider_arg = args.provider.as_deref().unwrap_or_default();
    let (provider_name, mut provider) = provider(provider_arg, args.api_key_env.as_deref(), template)?;
    if args.timeout.is_some() {
        provider.timeout = args.timeout;
    }
    if args.context_window.is_some() {
        provider.context_window = args.context_window;
    }
    let key = api_key(&provider_name, &provider)?;
    let dir = dir.with_secret(key.clone());
    let endpoint =
        Endpoint::for_provider(&provider_name, &provider, key.clone()).map_err(|error| anyhow::anyhow!("{error}"))?;
    let mut models = args.models.clone();
    if models.is_empty() {
        models.extend(provider.model.clone());
    }
    if models.is_empty() {
        bail!("name a model with --model (the provider `{provider_name}` has no default model)");
    }
    if args.model_order == ModelOrder::Best {
        models = Models::load()?.best_first(&models);
    }
    let authoring = Request {
        text: request.to_owned(),
        name: name.to_owned(),
        template: template.and_then(|t| t.plan.clone()),
        models,
        candidates: usize::from(args.candidates),
        stream: args.stream,
        temperature: args.temperature,
        // The provider's own dialect wins; a base URL has none but `--schema-dialect`.
        schema_dialect: provider.schema_dialect.or(args.schema_dialect),
        runs_as_written: false,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let timeout = provider.timeout.map_or(model::DEFAULT_TIMEOUT, |t| t.to_std());
    // A server that cannot list its models may still answer chats: its windows are then unknown.
    let served = runtime
        .block_on(catalog::list(&provider_name, &provider.base_url, key.as_deref(), timeout))
        .unwrap_or_default();
    let windows = windows(&served, &provider, &authoring.models);
    let mut provenance = Provenance {
        planner: "llm".to_owned(),
        prompt_version: Some(PROMPT_VERSION.to_owned()),
        provider: Some(provider_name),
        temperature: Some(args.temperature),
        candidates: usize::from(args.candidates),
        context_windows: authoring
            .models
            .iter()
            .map(|model| {
                let window = windows.of(model);
                (model.clone(), ContextWindow { tokens: window.tokens, from: window.learnt_from.clone() })
            })
            .collect(),
        ..Provenance::default()
    };
    if args.lines {
        let written = super::lines::write(&authoring, &windows, &endpoint, &runtime, &dir, provenance)?;
        return Ok(written.unwrap_or_else(|(why, provenance)| fall_back(request, name, bindings, why, provenance)));
    }
    let mut stream = Stream { dir: &dir, held: String::new() };
    let mut show = |piece: &str| stream.show(piece);
    let authored: Authored = runtime.block_on(author_within(&authoring, &windows, &endpoint, &mut show));
    if args.stream {
        stream.finish();
    }
    provenance.questions.clone_from(&authored.questions);
    record_attempts(&dir, &authored.attempts, &mut provenance)?;
    if let Some(manifest) = &authored.manifest {
        let value: serde_json::Value =
            serde_json::from_str(manifest).context("the author handed over a manifest that is not JSON")?;
        return Ok(Outcome { yaml: planner::yaml::to_yaml(&value), provenance });
    }
    if !authored.questions.is_empty() {
        return Ok(Outcome { yaml: String::new(), provenance });
    }
    let why = authored.fallback.unwrap_or_else(|| "no model gave a valid plan".to_owned());
    Ok(fall_back(request, name, bindings, why, provenance))
}

/// The deterministic planner's plan for `request`, with the provenance of the models that
/// could not write one and why.
fn fall_back(request: &str, name: &str, bindings: &Bindings, why: String, provenance: Provenance) -> Outcome {
    eprintln!("warning: {why}; falling back to the deterministic planner");
    let mut outcome = deterministic(request, name, bindings, Some(why));
    outcome.provenance.prompt_version = provenance.prompt_version;
    outcome.provenance.protocol = provenance.protocol;
    outcome.provenance.provider = provenance.provider;
    outcome.provenance.temperature = provenance.temperature;
    outcome.provenance.candidates = provenance.candidates;
    outcome.provenance.context_windows = provenance.context_windows;
    outcome.provenance.attempts = provenance.attempts;
    outcome.provenance.problems = provenance.problems;
    outcome
}

/// Writes each attempt's prompt and answer into the folder, records it in `provenance`, and
/// counts it in models.json when the plan is kept.
pub(crate) fn record_attempts(
    dir: &PlanDir,
    attempts: &[planner::author::AttemptRecord],
    provenance: &mut Provenance,
) -> anyhow::Result<()> {
    let mut counts = Models::default();
    for (n, attempt) in attempts.iter().enumerate() {
        let (prompt_file, output_file) = (format!("prompt-{:02}.txt", n + 1), format!("output-{:02}.txt", n + 1));
        dir.write(&prompt_file, &attempt.prompt)?;
        dir.write(&output_file, &attempt.raw)?;
        let (outcome, detail, score, counted) = match &attempt.outcome {
            Attempted::ParseFailed(why) => ("parse_failed", why.clone(), None, Counted::ParseFailure),
            Attempted::Invalid(problems) => ("invalid", problems.clone(), None, Counted::ValidationFailure),
            Attempted::Valid { score, tasks } => ("valid", format!("{tasks} tasks"), Some(*score), Counted::Success),
            Attempted::Questions(questions) => ("questions", questions.join("\n"), None, Counted::Success),
            Attempted::Failed(error) => ("failed", error.clone(), None, Counted::RequestFailure),
        };
        let answered = counted != Counted::RequestFailure;
        counts.count(&attempt.model, counted, attempt.repair, answered.then_some(attempt.latency_ms));
        provenance.attempts.push(Attempt {
            model: attempt.model.clone(),
            candidate: attempt.candidate + 1,
            repair: attempt.repair,
            latency_ms: attempt.latency_ms,
            outcome: outcome.to_owned(),
            detail: dir.redact(&detail),
            score,
            left_out: attempt.left_out.clone(),
            prompt_file,
            output_file,
        });
    }
    // models.json keeps the record of plans that are kept; an unkept plan test's leaves no trace.
    if dir.is_kept() {
        counts.add_to_file()?;
    }
    Ok(())
}

/// The API key of `provider`, from the variable its `api_key_env` names; an error when that
/// variable is unset.
pub(crate) fn api_key(name: &str, provider: &Provider) -> anyhow::Result<Option<String>> {
    match &provider.api_key_env {
        Some(variable) => Ok(Some(std::env::var(&variable.value).map_err(|_| {
            anyhow::anyhow!("the environment variable `{}` (the API key of `{name}`) is not set", variable.value)
        })?)),
        None => Ok(None),
    }
}

/// The context window of `model` when the server or the provider gives it: the smaller of the
/// two when both do.
pub(crate) fn known_window(served: &Catalog, provider: &Provider, model: &str) -> Option<Window> {
    let configured = provider
        .context_window
        .map(|tokens| Window { tokens, learnt_from: "the provider's context_window".to_owned() });
    let from_server = served
        .get(model)
        .and_then(|m| m.context_window)
        .map(|(tokens, field)| Window { tokens, learnt_from: format!("the server's {field}") });
    match (from_server, configured) {
        (Some(server), Some(mine)) => Some(if mine.tokens < server.tokens { mine } else { server }),
        (server, mine) => server.or(mine),
    }
}

/// Each model's context window (the default when neither the server nor the provider gives
/// it) and the provider's tokenizer.
pub(crate) fn windows(served: &Catalog, provider: &Provider, models: &[String]) -> Windows {
    let windows = models
        .iter()
        .map(|model| (model.clone(), known_window(served, provider, model).unwrap_or_default()))
        .collect::<BTreeMap<_, _>>();
    Windows {
        models: windows,
        otherwise: Window::default(),
        tokenizer: Tokenizer::named(provider.tokenizer.as_deref()).unwrap_or_default(),
    }
}

/// Prints a streamed answer as it arrives, redacted: text that could be the start of a secret
/// is held back until the next piece shows whether it is one.
struct Stream<'a> {
    dir: &'a PlanDir,
    held: String,
}

impl Stream<'_> {
    fn show(&mut self, piece: &str) {
        self.held.push_str(piece);
        let keep = self.dir.unfinished_secret(&self.held);
        let ready = self.held.len() - keep;
        eprint!("{}", self.dir.redact(&self.held[..ready]));
        self.held.drain(..ready);
    }

    fn finish(&mut self) {
        eprintln!("{}", self.dir.redact(&std::mem::take(&mut self.held)));
    }
}

/// The provider: one of the template's by name, or a base URL (its key in `api_key_env`).
pub(crate) fn provider(
    given: &str,
    api_key_env: Option<&str>,
    template: Option<&Loaded>,
) -> anyhow::Result<(String, Provider)> {
    if given.starts_with("http://") || given.starts_with("https://") {
        let provider = Provider {
            kind: "openai".to_owned(),
            base_url: given.to_owned(),
            api_key_env: api_key_env.map(|v| manifest::plan::At { value: v.to_owned(), loc: manifest::Loc::default() }),
            ..Provider::default()
        };
        return Ok((given.to_owned(), provider));
    }
    let providers = template.and_then(|t| t.plan.as_ref()).map(|p| &p.providers);
    match providers.and_then(|p| p.get(given)) {
        Some(provider) => Ok((given.to_owned(), provider.clone())),
        None => {
            let known: Vec<&str> = providers.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
            if known.is_empty() {
                bail!("`{given}` is neither a base URL nor a provider of a --template manifest")
            }
            bail!("the template has no provider `{given}`; it has: {}", known.join(", "))
        }
    }
}
