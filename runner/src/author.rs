//! `runner plan --provider`: a model writes the plan. This module picks the provider and the
//! order of the models, runs the author, records every prompt and answer in the plan's
//! provenance folder and every attempt in the models' records, and falls back to the
//! deterministic planner when no model gives a valid plan.

use anyhow::{Context as _, bail};
use engine::llm::client::Endpoint;
use manifest::Loaded;
use manifest::plan::Provider;
use planner::author::{Authored, Outcome as Attempted, PROMPT_VERSION, Request, author};
use planner::deterministic::Bindings;

use crate::models::{Attempted as Counted, Models};
use crate::plan::{ModelOrder, Outcome, PlanArgs, deterministic};
use crate::provenance::{Attempt, PlanDir, Provenance};

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
    let (provider_name, provider) = provider(provider_arg, args.api_key_env.as_deref(), template)?;
    let key = match &provider.api_key_env {
        Some(variable) => Some(std::env::var(&variable.value).map_err(|_| {
            anyhow::anyhow!(
                "the environment variable `{}` (the API key of `{provider_name}`) is not set",
                variable.value
            )
        })?),
        None => None,
    };
    let dir = dir.with_secret(key.clone());
    let endpoint =
        Endpoint::for_provider(&provider_name, &provider, key).map_err(|error| anyhow::anyhow!("{error}"))?;
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
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut stream = Stream { dir: &dir, held: String::new() };
    let mut show = |piece: &str| stream.show(piece);
    let authored: Authored = runtime.block_on(author(&authoring, &endpoint, &mut show));
    if args.stream {
        stream.finish();
    }
    let mut provenance = Provenance {
        planner: "llm".to_owned(),
        prompt_version: Some(PROMPT_VERSION.to_owned()),
        provider: Some(provider_name),
        temperature: Some(args.temperature),
        candidates: usize::from(args.candidates),
        questions: authored.questions.clone(),
        ..Provenance::default()
    };
    let mut counts = Models::default();
    for (n, attempt) in authored.attempts.iter().enumerate() {
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
            prompt_file,
            output_file,
        });
    }
    counts.add_to_file()?;
    if let Some(manifest) = &authored.manifest {
        let value: serde_json::Value =
            serde_json::from_str(manifest).context("the author handed over a manifest that is not JSON")?;
        return Ok(Outcome { yaml: planner::yaml::to_yaml(&value), provenance });
    }
    if !authored.questions.is_empty() {
        return Ok(Outcome { yaml: String::new(), provenance });
    }
    let why = authored.fallback.unwrap_or_else(|| "no model gave a valid plan".to_owned());
    eprintln!("warning: {why}; falling back to the deterministic planner");
    let mut outcome = deterministic(request, name, bindings, Some(why));
    outcome.provenance.prompt_version = provenance.prompt_version;
    outcome.provenance.provider = provenance.provider;
    outcome.provenance.temperature = provenance.temperature;
    outcome.provenance.candidates = provenance.candidates;
    outcome.provenance.attempts = provenance.attempts;
    Ok(outcome)
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
fn provider(given: &str, api_key_env: Option<&str>, template: Option<&Loaded>) -> anyhow::Result<(String, Provider)> {
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
