//! The LLM plan author: asks a model for a manifest, checks it as `runner critic` would,
//! repairs it once, falls back to the next model, and picks the best of several candidates.
//!
//! [`author_within`] takes a [`Request`], the models' context [`Windows`] and an [`Endpoint`]
//! ([`author`] assumes the default window) and returns [`Authored`]: the chosen
//! manifest (JSON text) with its critic score, or the model's questions, or the reason to fall
//! back to the deterministic planner; and an [`AttemptRecord`] per request for provenance and
//! per-model reliability. It does no file IO, and no record holds the API key.
//!
//! Policy: for each model in turn (at most [`MAX_MODELS`]), `candidates` requests are made,
//! concurrently unless streaming; an answer that does not parse, load or validate gets one
//! repair request carrying the problems. The first model with a valid candidate wins, and its
//! best-scoring candidate (ties: fewer tasks, then the earlier candidate) is chosen. A model
//! that only asks questions ends the search with the questions. Every prompt is fitted to the
//! model's context window first ([`fit`]); one that cannot fit is not sent.

pub(crate) mod check;
pub(crate) mod extract;
pub mod fit;
pub(crate) mod prompt;

pub use extract::{Answer, ExtractError, extract};
pub use fit::{DEFAULT_CONTEXT_WINDOW, Window, Windows};
pub use prompt::PROMPT_VERSION;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use machine::Tokens;
use model::Endpoint;
use model::dialect::{Constraint, SchemaDialect};
use model::protocol::{ChatRequest, Message, Sampling, Usage};
use serde::Serialize;
use tracing::Instrument as _;

use check::Accepted;

/// The most models tried for one request.
pub const MAX_MODELS: usize = 3;

/// What to author.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The request in plain words; it becomes the plan's mission.
    pub text: String,
    /// The plan's `metadata.name`.
    pub name: String,
    /// A plan whose providers, tools and agents the authored plan may use; without one the
    /// author writes placeholder mock agents.
    pub template: Option<manifest::Plan>,
    /// The models to ask, in order; at most [`MAX_MODELS`] are tried.
    pub models: Vec<String>,
    /// How many plans to ask each model for (at least one is).
    pub candidates: usize,
    /// Whether to stream the answers to the `on_text` callback as they are written.
    pub stream: bool,
    /// The sampling temperature.
    pub temperature: f32,
    /// How the server is asked to hold the answer to a JSON Schema: with a dialect, the plan's
    /// schema ([`crate::lines::schema`]) is sent in it; `None`: plain JSON mode.
    pub schema_dialect: Option<SchemaDialect>,
    /// Whether the plan runs while it is written (`runner do`): the line author then rejects a
    /// task that may call a destructive tool with no human review before it, since no later
    /// line can put one there.
    pub runs_as_written: bool,
}

/// What came of one request to a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    /// No JSON object could be taken from the answer.
    ParseFailed(String),
    /// The object is not a valid plan: the problems, one per line (`code: message (at path)`).
    Invalid(String),
    /// A valid plan, with its critic score and number of tasks.
    Valid {
        /// The critic's overall score, 0-10.
        score: f64,
        /// How many tasks it has.
        tasks: usize,
    },
    /// The model asked these questions instead of planning.
    Questions(Vec<String>),
    /// The request itself failed (HTTP, network, timeout), with the redacted error.
    Failed(String),
}

/// One request to a model, with everything provenance and reliability tracking need. The API
/// key is redacted from every text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptRecord {
    /// The model asked.
    pub model: String,
    /// The candidate it was for, from 0.
    pub candidate: usize,
    /// Whether it was the repair request.
    pub repair: bool,
    /// The messages sent, each under a `[role]` line.
    pub prompt: String,
    /// The optional parts of the prompt left out to fit the model's context window (empty
    /// when none was).
    pub left_out: String,
    /// The text the model answered (empty when the request failed).
    pub raw: String,
    /// How long the request took.
    pub latency_ms: u64,
    /// What came of it.
    pub outcome: Outcome,
    /// Tokens used, when the server reported them.
    pub tokens: Option<Tokens>,
}

/// What the author produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Authored {
    /// The chosen manifest as JSON text, when a model wrote a valid plan.
    pub manifest: Option<String>,
    /// The chosen manifest's critic score.
    pub plan_score: Option<f64>,
    /// The model's questions, when it found the request too ambiguous to plan.
    pub questions: Vec<String>,
    /// Every request made, in order per model and candidate.
    pub attempts: Vec<AttemptRecord>,
    /// The index in `attempts` of the chosen manifest's answer.
    pub chosen: Option<usize>,
    /// Why the caller should fall back to the deterministic planner; set exactly when there
    /// is neither a manifest nor questions.
    pub fallback: Option<String>,
}

/// [`author_within`] with every model's context window the default, [`DEFAULT_CONTEXT_WINDOW`]
/// tokens, counted with the default tokenizer.
pub async fn author(request: &Request, endpoint: &Endpoint, on_text: &mut (dyn FnMut(&str) + Send)) -> Authored {
    author_within(request, &Windows::default(), endpoint, on_text).await
}

/// Authors a plan for `request` on `endpoint`, fitting each prompt to the model's window in
/// `windows`. With `request.stream`, each piece of every answer is handed to `on_text` as it
/// arrives (candidates then run one after another); otherwise `on_text` is not called. Never
/// fails: what went wrong is in the result.
pub async fn author_within(
    request: &Request,
    windows: &Windows,
    endpoint: &Endpoint,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Authored {
    let span = tracing::info_span!(
        "author",
        plan = %request.name,
        models = %request.models.join(","),
        candidates = request.candidates,
        attempts = tracing::field::Empty,
        outcome = tracing::field::Empty
    );
    let authored = write(request, windows, endpoint, on_text).instrument(span.clone()).await;
    span.record("attempts", authored.attempts.len());
    let outcome = if authored.manifest.is_some() {
        "planned"
    } else if authored.questions.is_empty() {
        "fallback"
    } else {
        "questions"
    };
    span.record("outcome", outcome);
    authored
}

async fn write(
    request: &Request,
    windows: &Windows,
    endpoint: &Endpoint,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Authored {
    let models: Vec<&str> = request.models.iter().map(String::as_str).take(MAX_MODELS).collect();
    let mut authored = Authored::default();
    if models.is_empty() {
        authored.fallback = Some("no model was given to write the plan".to_owned());
        return authored;
    }
    let author = Author { request, endpoint, windows, user: prompt::user(&request.text) };
    let candidates = request.candidates.max(1);
    let mut failures = Vec::new();
    for model in models {
        let first = match author.fit(model, &[]) {
            Ok(first) => first,
            Err(too_large) => {
                failures.push(format!("`{model}`: {too_large}"));
                continue;
            }
        };
        let chains: Vec<Chain> = if request.stream {
            let mut chains = Vec::with_capacity(candidates);
            for candidate in 0..candidates {
                chains.push(author.chain(model, candidate, first.clone(), &mut *on_text).await);
            }
            chains
        } else {
            let mut sinks: Vec<fn(&str)> = vec![|_| {}; candidates];
            let chains = sinks
                .iter_mut()
                .enumerate()
                .map(|(candidate, sink)| author.chain(model, candidate, first.clone(), sink));
            join_all(chains.collect()).await
        };
        let mut best: Option<(Accepted, usize, usize)> = None;
        let mut questions: Vec<String> = Vec::new();
        for chain in chains {
            let offset = authored.attempts.len();
            let candidate = chain.candidate;
            authored.attempts.extend(chain.records);
            match chain.ending {
                Ending::Plan(accepted, index) => {
                    let better = best.as_ref().is_none_or(|(b, _, c)| {
                        accepted.score.total_cmp(&b.score).then(b.tasks.cmp(&accepted.tasks)).then(c.cmp(&candidate))
                            == std::cmp::Ordering::Greater
                    });
                    if better {
                        best = Some((accepted, offset + index, candidate));
                    }
                }
                Ending::Questions(asked) => {
                    for question in asked {
                        if !questions.contains(&question) {
                            questions.push(question);
                        }
                    }
                }
                Ending::Failed(why) => failures.push(format!("`{model}` (candidate {}): {why}", candidate + 1)),
            }
        }
        if let Some((accepted, index, _)) = best {
            authored.plan_score = Some(accepted.score);
            authored.manifest = Some(accepted.manifest);
            authored.chosen = Some(index);
            return authored;
        }
        if !questions.is_empty() {
            authored.questions = questions;
            return authored;
        }
    }
    authored.fallback = Some(format!("no model wrote a valid plan: {}", failures.join("; ")));
    authored
}

/// The gist of why a candidate failed, on one line.
fn summary(outcome: Option<Outcome>) -> String {
    let text = match outcome {
        Some(Outcome::ParseFailed(reason)) => format!("the answer does not parse: {reason}"),
        Some(Outcome::Invalid(problems)) => format!("the plan is invalid: {}", problems.replace('\n', "; ")),
        Some(Outcome::Failed(error)) => format!("the request failed: {error}"),
        Some(Outcome::Valid { .. } | Outcome::Questions(_)) | None => "no answer".to_owned(),
    };
    model::redact::excerpt(&text, 300)
}

/// What one candidate chain (an answer and at most one repair) ended with.
enum Ending {
    /// A valid plan, and the index of its record in the chain.
    Plan(Accepted, usize),
    /// Questions instead of a plan.
    Questions(Vec<String>),
    /// No valid plan, and why.
    Failed(String),
}

/// One candidate's requests to one model.
struct Chain {
    candidate: usize,
    records: Vec<AttemptRecord>,
    ending: Ending,
}

/// What every request of one authoring run shares.
struct Author<'a> {
    request: &'a Request,
    endpoint: &'a Endpoint,
    windows: &'a Windows,
    user: String,
}

impl Author<'_> {
    /// The messages for `model`, ending with `tail`, with as much of the system message as fits
    /// its window.
    fn fit(&self, model: &str, tail: &[Message]) -> Result<(Vec<Message>, prompt::Parts), fit::TooLarge> {
        let system = |parts| prompt::system(&self.request.name, self.request.template.as_ref(), parts);
        fit::fit(model, self.windows, &system, &self.user, tail)
    }

    /// Asks `model` for candidate `candidate` with `messages`, and once more with the problems
    /// if the answer cannot be used.
    async fn chain(
        &self,
        model: &str,
        candidate: usize,
        first: (Vec<Message>, prompt::Parts),
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Chain {
        let (mut messages, mut parts) = first;
        let mut records: Vec<AttemptRecord> = Vec::new();
        for repair in [false, true] {
            let (mut record, result) = self.ask(model, candidate, repair, &messages, &mut *on_text).await;
            record.left_out = parts.left_out().to_owned();
            let raw = record.raw.clone();
            records.push(record);
            let problems = match result {
                Step::Accepted(accepted) => {
                    let index = records.len() - 1;
                    return Chain { candidate, records, ending: Ending::Plan(accepted, index) };
                }
                Step::Questions(questions) => {
                    return Chain { candidate, records, ending: Ending::Questions(questions) };
                }
                Step::Unusable(problems) => problems,
                Step::Failed => break,
            };
            if repair {
                break;
            }
            let tail = [
                Message::Assistant { content: raw, tool_calls: Vec::new() },
                Message::User { content: prompt::repair(&problems) },
            ];
            (messages, parts) = match self.fit(model, &tail) {
                Ok(fitted) => fitted,
                Err(too_large) => return Chain { candidate, records, ending: Ending::Failed(too_large.to_string()) },
            };
        }
        let why = summary(records.last().map(|r| r.outcome.clone()));
        Chain { candidate, records, ending: Ending::Failed(why) }
    }

    /// One request and what came of it.
    async fn ask(
        &self,
        model: &str,
        candidate: usize,
        repair: bool,
        messages: &[Message],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> (AttemptRecord, Step) {
        let redactor = &self.endpoint.redactor;
        let constraint = match self.request.schema_dialect {
            Some(dialect) => Constraint::new(
                dialect,
                "runner_plan",
                &crate::lines::schema::manifest_schema(self.request.template.as_ref()),
            ),
            None => Constraint::json_mode(),
        };
        let chat = ChatRequest {
            model,
            messages,
            tools: &[],
            tool_choice: None,
            response_format: constraint.response_format,
            format: constraint.format,
        };
        let limit = fit::answer_limit(model, self.windows, messages);
        let sampling = Sampling {
            temperature: Some(self.request.temperature),
            max_tokens: Some(u32::try_from(limit).unwrap_or(u32::MAX)),
            seed: None,
        };
        let started = Instant::now();
        let answer = if self.request.stream {
            let mut forward = |piece: &str| on_text(&redactor.apply(piece));
            self.endpoint.complete_streaming(&chat, sampling, &mut forward).await
        } else {
            self.endpoint.complete_with(&chat, sampling).await.map(|response| {
                let text = response.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
                (text, response.usage)
            })
        };
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut record = AttemptRecord {
            model: model.to_owned(),
            candidate,
            repair,
            prompt: redactor.apply(&render(messages)),
            left_out: String::new(),
            raw: String::new(),
            latency_ms,
            outcome: Outcome::Failed(String::new()),
            tokens: None,
        };
        let (text, usage) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                record.outcome = Outcome::Failed(redactor.apply(&error.to_string()));
                return (record, Step::Failed);
            }
        };
        record.tokens = usage.map(tokens);
        record.raw = redactor.apply(&text);
        let step = match extract(&record.raw) {
            Err(error) => {
                let reason = error.to_string();
                record.outcome = Outcome::ParseFailed(reason.clone());
                Step::Unusable(format!("author::parse: {reason}"))
            }
            Ok(Answer::Questions(questions)) => {
                record.outcome = Outcome::Questions(questions.clone());
                Step::Questions(questions)
            }
            Ok(Answer::Manifest(object)) => {
                match check::check(&object, &self.request.name, candidate + 1, self.request.template.as_ref()) {
                    Ok(accepted) => {
                        record.outcome = Outcome::Valid { score: accepted.score, tasks: accepted.tasks };
                        Step::Accepted(accepted)
                    }
                    Err(rejected) => {
                        let problems = rejected.to_string();
                        record.outcome = Outcome::Invalid(problems.clone());
                        Step::Unusable(problems)
                    }
                }
            }
        };
        (record, step)
    }
}

/// What one request gave.
enum Step {
    Accepted(Accepted),
    Questions(Vec<String>),
    /// The answer cannot be used; the problems to send in the repair.
    Unusable(String),
    /// The request failed; a repair cannot help.
    Failed,
}

pub(crate) fn tokens(usage: Usage) -> Tokens {
    Tokens { prompt: usage.prompt_tokens.unwrap_or(0), completion: usage.completion_tokens.unwrap_or(0) }
}

/// The messages as text, each under a `[role]` line.
pub(crate) fn render(messages: &[Message]) -> String {
    let parts: Vec<String> = messages
        .iter()
        .map(|message| match message {
            Message::System { content } => format!("[system]\n{content}"),
            Message::User { content } => format!("[user]\n{content}"),
            Message::Assistant { content, .. } => format!("[assistant]\n{content}"),
            Message::Tool { content, .. } => format!("[tool]\n{content}"),
        })
        .collect();
    parts.join("\n\n")
}

/// Runs the futures concurrently on the current task and returns their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
