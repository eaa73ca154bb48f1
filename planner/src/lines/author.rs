//! [`author_lines`]: a model writes the plan a line at a time, and each line is checked and
//! handed on as it arrives; bad lines are repaired one by one once the answer has ended.

use std::time::Instant;

use model::Endpoint;
use model::dialect::{Constraint, SchemaDialect};
use model::protocol::{ChatRequest, Message, Sampling};
use serde::Serialize;
use serde_json::Value;
use tracing::Instrument as _;

use super::assembler::Assembler;
use super::problem::{LineError, LineProblem};
use super::prompt::{self, Form};
use super::schema::{line_schema, task_line_schema};
use super::splitter::Splitter;
use super::verdict::Verdict;
use crate::author::fit::{self, TooLarge, Windows};
use crate::author::prompt::Parts;
use crate::author::{AttemptRecord, MAX_MODELS, Outcome, Request, render, tokens};

/// The most repair requests one plan gets; lines still bad after that are dropped.
pub const MAX_REPAIRS: usize = 10;

/// What happened to one line, as it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum LineEvent {
    /// A line was taken: the header, a task (with the plan so far), or the model's questions.
    Accepted {
        /// The line's number.
        line: usize,
        /// The line.
        text: String,
        /// [`Verdict::Header`], [`Verdict::Task`] or [`Verdict::Questions`].
        verdict: Verdict,
    },
    /// A line was not taken; once the answer has ended it gets one repair request (or, when it
    /// was rejected only because an earlier line was, it is taken again), and then comes back
    /// as [`LineEvent::Repaired`] or [`LineEvent::Dropped`].
    Rejected(LineProblem),
    /// A rejected line was taken after all: as the model repaired it, or as it was once the
    /// line it needed was repaired.
    Repaired {
        /// The line's number (the rejected line's).
        line: usize,
        /// The line as taken.
        text: String,
        /// [`Verdict::Header`] or [`Verdict::Task`].
        verdict: Verdict,
    },
    /// A rejected line stays out, with its last problem.
    Dropped(LineProblem),
}

/// What [`author_lines`] produced. The accepted lines stay usable whatever went wrong.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinesAuthored {
    /// The manifest of every accepted line, when at least one task was accepted.
    pub manifest: Option<Value>,
    /// Its critic score.
    pub plan_score: Option<f64>,
    /// The model's questions, when it found the request too ambiguous to plan.
    pub questions: Vec<String>,
    /// Every request made: the answers, then the repairs.
    pub attempts: Vec<AttemptRecord>,
    /// The accepted lines, the prefix first: what a resumed run goes on from.
    pub accepted: Vec<String>,
    /// The lines dropped in the end, each with its located problem.
    pub problems: Vec<LineProblem>,
    /// The model whose lines were kept.
    pub model: Option<String>,
    /// Why the plan stopped short: the request failed midway, or no model wrote a task.
    pub failed: Option<String>,
}

/// Has a model write the plan for `request` a line at a time, going on after `prefix` (lines
/// accepted before, such as those a crashed run recorded; numbering continues after them).
/// Each line is handed to `on_line` as it arrives: with `request.stream` while the model is
/// still writing, otherwise once the whole answer is in. After the answer, each rejected line
/// gets one repair request; a line still bad is dropped. The models are tried in order (at
/// most [`MAX_MODELS`]) until one writes a task or asks questions (a model that gives way
/// leaves no line: the next one starts again after `prefix`, with the same numbers);
/// `request.candidates` does not apply (one answer per model). Never fails: what went wrong is in the result.
pub async fn author_lines(
    request: &Request,
    windows: &Windows,
    endpoint: &Endpoint,
    prefix: &[String],
    on_line: &mut (dyn FnMut(LineEvent) + Send),
) -> LinesAuthored {
    let span = tracing::info_span!(
        "author_lines",
        plan = %request.name,
        models = %request.models.join(","),
        prefix = prefix.len(),
        tasks = tracing::field::Empty,
        dropped = tracing::field::Empty
    );
    let authored = write(request, windows, endpoint, prefix, on_line).instrument(span.clone()).await;
    span.record(
        "tasks",
        authored.manifest.as_ref().map_or(0, |m| m["spec"]["workflow"].as_array().map_or(0, Vec::len)),
    );
    span.record("dropped", authored.problems.len());
    authored
}

async fn write(
    request: &Request,
    windows: &Windows,
    endpoint: &Endpoint,
    prefix: &[String],
    on_line: &mut (dyn FnMut(LineEvent) + Send),
) -> LinesAuthored {
    let mut authored = LinesAuthored { accepted: prefix.to_vec(), ..LinesAuthored::default() };
    let start = match Assembler::resume(&request.name, request.template.as_ref(), prefix) {
        Ok(start) => start.blocking(request.runs_as_written),
        Err(problem) => {
            authored.failed = Some(format!("the lines to go on from do not hold: {problem}"));
            return authored;
        }
    };
    let models: Vec<&str> = request.models.iter().map(String::as_str).take(MAX_MODELS).collect();
    if models.is_empty() {
        authored.failed = Some("no model was given to write the plan".to_owned());
        return authored;
    }
    // With a schema dialect the server holds the answer to the one-object form; otherwise the
    // lines are asked for as NDJSON, without JSON mode, which would hold the answer to one object.
    let dialect = request.schema_dialect.filter(|dialect| *dialect != SchemaDialect::None);
    let (form, constraint) = match dialect {
        Some(dialect) => {
            let schema = line_schema(request.template.as_ref());
            (Form::Object, Constraint::new(dialect, "runner_plan_lines", &schema))
        }
        None => (Form::Lines, Constraint::default()),
    };
    let writer = Writer { request, windows, endpoint, form, constraint, dialect };
    let mut failures = Vec::new();
    for model in models {
        let mut lines = Lines {
            assembler: start.clone(),
            number: prefix.len(),
            pending: Vec::new(),
            questions: Vec::new(),
            on_line: &mut *on_line,
            dropped: Vec::new(),
        };
        let ending = writer.session(model, &mut lines, &mut authored.attempts).await;
        let wrote = lines.assembler.tasks() > start.tasks();
        // The problems of the answer whose lines count: a model that gives way leaves none.
        authored.problems = lines.take_dropped();
        if !lines.questions.is_empty() {
            authored.questions = lines.questions;
            authored.model = Some(model.to_owned());
            return authored;
        }
        if wrote {
            authored.model = Some(model.to_owned());
            authored.failed = ending.err();
            authored.accepted = lines.assembler.accepted().to_vec();
            let manifest = lines.assembler.manifest_json();
            let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
            let loaded = manifest::load_str("lines.json", &request.name, &text, &|_| false);
            let score = loaded.plan.as_ref().map(|plan| manifest::critic::critique(plan).scores.overall);
            for attempt in &mut authored.attempts {
                if let Outcome::Valid { score: valid, .. } = &mut attempt.outcome {
                    *valid = score.unwrap_or_default();
                }
            }
            authored.plan_score = score;
            authored.manifest = Some(manifest);
            return authored;
        }
        let why = match ending {
            Err(why) => why,
            Ok(()) => "it wrote no task line that holds".to_owned(),
        };
        failures.push(format!("`{model}`: {why}"));
    }
    authored.failed = Some(format!("no model wrote a task: {}", failures.join("; ")));
    authored
}

/// A line rejected while the answer streamed, waiting for its repair: its number, its text
/// (none for a line too long to keep) and its problem.
struct Pending {
    line: usize,
    text: Option<String>,
    problem: LineProblem,
}

/// The lines of one model's answer as they are taken.
struct Lines<'e> {
    assembler: Assembler,
    /// The number of the last line taken.
    number: usize,
    pending: Vec<Pending>,
    questions: Vec<String>,
    on_line: &'e mut (dyn FnMut(LineEvent) + Send),
    dropped: Vec<LineProblem>,
}

impl Lines<'_> {
    /// Takes the next line of the answer, or the error in its place.
    fn take(&mut self, line: Result<String, LineError>) {
        self.number += 1;
        let number = self.number;
        let text = match line {
            Ok(text) => text,
            Err(error) => {
                let problem = LineProblem::new(number, None, &error);
                (self.on_line)(LineEvent::Rejected(problem.clone()));
                self.pending.push(Pending { line: number, text: None, problem });
                return;
            }
        };
        match self.assembler.take(number, &text) {
            Verdict::Rejected(problem) => {
                (self.on_line)(LineEvent::Rejected(problem.clone()));
                self.pending.push(Pending { line: number, text: Some(text), problem });
            }
            verdict => {
                if let Verdict::Questions(questions) = &verdict {
                    self.questions.clone_from(questions);
                }
                (self.on_line)(LineEvent::Accepted { line: number, text, verdict });
            }
        }
    }

    /// Drops a line for good.
    fn drop_line(&mut self, problem: LineProblem) {
        (self.on_line)(LineEvent::Dropped(problem.clone()));
        self.dropped.push(problem);
    }

    /// The lines dropped so far, handed over once.
    fn take_dropped(&mut self) -> Vec<LineProblem> {
        std::mem::take(&mut self.dropped)
    }
}

/// Whether a line was rejected only because another line was: it is taken again as it is once
/// the other has been repaired.
fn consequential(problem: &LineProblem) -> bool {
    problem.code == LineError::UpstreamDropped { id: String::new(), on: String::new(), line: 0 }.code()
        || problem.code == LineError::Order { what: String::new() }.code()
}

/// What every request for one plan shares.
struct Writer<'a> {
    request: &'a Request,
    windows: &'a Windows,
    endpoint: &'a Endpoint,
    form: Form,
    /// What holds the answer's shape: a schema in the server's dialect, or nothing.
    constraint: Constraint,
    /// The server's schema dialect, when one holds answers to a schema.
    dialect: Option<SchemaDialect>,
}

impl Writer<'_> {
    /// The messages for `model` going on after `accepted`, ending with `tail`.
    fn fit(&self, model: &str, accepted: &[String], tail: &[Message]) -> Result<(Vec<Message>, Parts), TooLarge> {
        let system = |parts| prompt::system(&self.request.name, self.request.template.as_ref(), parts, self.form);
        fit::fit(model, self.windows, &system, &prompt::user(&self.request.text, accepted), tail)
    }

    /// One model's answer, its lines taken as they arrive, then the repairs; an error when the
    /// request could not be made or failed midway.
    async fn session(
        &self,
        model: &str,
        lines: &mut Lines<'_>,
        attempts: &mut Vec<AttemptRecord>,
    ) -> Result<(), String> {
        let accepted = lines.assembler.accepted().to_vec();
        let (messages, parts) = self.fit(model, &accepted, &[]).map_err(|too_large| too_large.to_string())?;
        let before = lines.assembler.tasks();
        let mut splitter = Splitter::new();
        let redactor = &self.endpoint.redactor;
        let mut received = String::new();
        let (mut record, answer) = if self.request.stream {
            let mut forward = |piece: &str| {
                let piece = redactor.apply(piece);
                received.push_str(&piece);
                for line in splitter.push(&piece) {
                    lines.take(line);
                }
            };
            self.ask(model, false, &messages, &self.constraint, Some(&mut forward)).await
        } else {
            self.ask(model, false, &messages, &self.constraint, None).await
        };
        record.left_out = parts.left_out().to_owned();
        if answer.is_err() {
            // What arrived before the request failed: the lines taken from it stay.
            record.raw = received;
        }
        let result = match answer {
            Ok(text) => {
                if !self.request.stream {
                    for line in splitter.push(&text) {
                        lines.take(line);
                    }
                }
                if let Some(line) = splitter.finish() {
                    lines.take(line);
                }
                Ok(())
            }
            Err(error) => Err(format!("the request failed midway: {error}")),
        };
        record.outcome = match (&result, lines.questions.is_empty()) {
            (Err(error), _) => Outcome::Failed(error.clone()),
            (Ok(()), false) => Outcome::Questions(lines.questions.clone()),
            (Ok(()), true) if lines.assembler.tasks() > before => {
                Outcome::Valid { score: 0.0, tasks: lines.assembler.tasks() }
            }
            (Ok(()), true) if lines.number == accepted.len() => {
                Outcome::ParseFailed("the answer holds no line".to_owned())
            }
            (Ok(()), true) => {
                Outcome::Invalid(lines.pending.iter().map(|p| p.problem.to_string()).collect::<Vec<_>>().join("\n"))
            }
        };
        attempts.push(record);
        let pending = std::mem::take(&mut lines.pending);
        if result.is_err() || !lines.questions.is_empty() {
            for Pending { problem, .. } in pending {
                lines.drop_line(problem);
            }
            return result;
        }
        let mut repairs = 0;
        for Pending { line, text, problem } in pending {
            let Some(text) = text else {
                lines.drop_line(problem);
                continue;
            };
            let mut problem = problem;
            if consequential(&problem) {
                match lines.assembler.take(line, &text) {
                    verdict @ (Verdict::Header | Verdict::Task { .. }) => {
                        (lines.on_line)(LineEvent::Repaired { line, text, verdict });
                        continue;
                    }
                    Verdict::Rejected(again) if !consequential(&again) => problem = again,
                    Verdict::Rejected(again) => {
                        lines.drop_line(again);
                        continue;
                    }
                    Verdict::Questions(_) => {
                        lines.drop_line(problem);
                        continue;
                    }
                }
            }
            // Prose around the lines is no line to repair.
            if !text.trim_start().starts_with('{') || repairs == MAX_REPAIRS {
                lines.drop_line(problem);
                continue;
            }
            repairs += 1;
            let fixed = self.repair(model, lines.assembler.accepted(), &problem, &text, attempts).await;
            let Some(fixed) = fixed else {
                lines.drop_line(problem);
                continue;
            };
            match lines.assembler.take(line, &fixed) {
                verdict @ (Verdict::Header | Verdict::Task { .. }) => {
                    if let Some(record) = attempts.last_mut() {
                        record.outcome = Outcome::Valid { score: 0.0, tasks: lines.assembler.tasks() };
                    }
                    (lines.on_line)(LineEvent::Repaired { line, text: fixed, verdict });
                }
                Verdict::Rejected(again) => {
                    if let Some(record) = attempts.last_mut() {
                        record.outcome = Outcome::Invalid(again.to_string());
                    }
                    lines.drop_line(again);
                }
                Verdict::Questions(_) => lines.drop_line(problem),
            }
        }
        result
    }

    /// One repair request for a rejected line: the corrected line, if the answer holds one.
    async fn repair(
        &self,
        model: &str,
        accepted: &[String],
        problem: &LineProblem,
        text: &str,
        attempts: &mut Vec<AttemptRecord>,
    ) -> Option<String> {
        let tail = [Message::User { content: prompt::repair(problem, text, accepted) }];
        let (messages, parts) = self.fit(model, accepted, &tail).ok()?;
        // The repair is one line, one object: a schema holds it to a task line whose
        // dependencies are tasks already taken, where the server honours one; else plain JSON
        // mode holds it to one object.
        let constraint = match self.dialect {
            Some(dialect) => {
                let schema = task_line_schema(self.request.template.as_ref(), &task_ids(accepted));
                Constraint::new(dialect, "runner_plan_line", &schema)
            }
            None => Constraint::json_mode(),
        };
        let (mut record, answer) = self.ask(model, true, &messages, &constraint, None).await;
        record.left_out = parts.left_out().to_owned();
        let fixed = match answer {
            Ok(answer) => {
                let mut splitter = Splitter::new();
                let mut found = splitter.push(&answer);
                found.extend(splitter.finish());
                // Prose around the line (`Here it is:`) is passed over.
                let first = found.into_iter().filter_map(Result::ok).find(|line| line.starts_with('{'));
                record.outcome = match &first {
                    Some(_) => Outcome::Invalid(String::new()),
                    None => Outcome::ParseFailed("the repair holds no line".to_owned()),
                };
                first
            }
            Err(error) => {
                record.outcome = Outcome::Failed(error);
                None
            }
        };
        attempts.push(record);
        fixed
    }

    /// One request, its answer held by `constraint`; with `on_text`, streamed to it piece by
    /// piece. The answer's text, or the redacted error.
    async fn ask(
        &self,
        model: &str,
        repair: bool,
        messages: &[Message],
        constraint: &Constraint,
        on_text: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> (AttemptRecord, Result<String, String>) {
        let redactor = &self.endpoint.redactor;
        let chat = ChatRequest {
            model,
            messages,
            tools: &[],
            tool_choice: None,
            response_format: constraint.response_format.clone(),
            format: constraint.format.clone(),
        };
        let limit = fit::answer_limit(model, self.windows, messages);
        let sampling = Sampling {
            temperature: Some(self.request.temperature),
            max_tokens: Some(u32::try_from(limit).unwrap_or(u32::MAX)),
            seed: None,
        };
        let started = Instant::now();
        let answer = match on_text {
            Some(on_text) => self.endpoint.complete_streaming(&chat, sampling, on_text).await,
            None => self.endpoint.complete_with(&chat, sampling).await.map(|response| {
                let text = response.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
                (text, response.usage)
            }),
        };
        let mut record = AttemptRecord {
            model: model.to_owned(),
            candidate: 0,
            repair,
            prompt: redactor.apply(&render(messages)),
            left_out: String::new(),
            raw: String::new(),
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            outcome: Outcome::Failed(String::new()),
            tokens: None,
        };
        match answer {
            Ok((text, usage)) => {
                record.tokens = usage.map(tokens);
                record.raw = redactor.apply(&text);
                let raw = record.raw.clone();
                (record, Ok(raw))
            }
            Err(error) => {
                let error = redactor.apply(&error.to_string());
                record.outcome = Outcome::Failed(error.clone());
                (record, Err(error))
            }
        }
    }
}

/// The ids of the tasks of `lines` (lines of the protocol), in order.
fn task_ids(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["task"]["id"].as_str().map(str::to_owned))
        .collect()
}
