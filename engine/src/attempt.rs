//! One attempt from start to end, outside the state machine: the agent's work under its time
//! limit, a synthesis gate's cap, verification of the output, and compaction of an error.
//! What the attempt comes to is the list of commands that report it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use manifest::plan::Verification;
use model::tokens::{Tokenizer, count, meter};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::Command;
use crate::context::errors::compact_error;
use crate::context::extract;
use crate::event::{ContextCompacted, ErrorClass, Scope, Tokens};
use crate::runtime::{AgentRuntime, Attempt, Reply};
use crate::verify::{self, Verdict};

/// How long an agent cancelled at its time limit has to report the tokens it used.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Everything one attempt needs, owned, so it can run on its own task.
pub struct Job {
    /// The agent's runtime.
    pub runtime: Arc<dyn AgentRuntime>,
    /// What the agent is given.
    pub request: Attempt,
    /// How long the agent may take.
    pub timeout: Option<Duration>,
    /// The task's check, with the reviewer's runtime for `llm_reviewer`.
    pub check: Option<(Verification, Option<Arc<dyn AgentRuntime>>)>,
    /// Set for synthesis gates: the cap their output is held to.
    pub gate: Option<Gate>,
    /// Errors longer than this many characters are compacted before they are recorded.
    pub error_limit: usize,
    /// Environment variables (API keys) a verification command must not see.
    pub hidden: Arc<[String]>,
    /// When set, a retry's jitter is drawn from this seed, the task and the attempt rather than
    /// the clock, so a run repeats exactly (plan tests).
    pub jitter_seed: Option<u64>,
    /// The span the attempt's span nests in: its task's (none when nobody records spans).
    pub span: tracing::Span,
}

/// A synthesis gate's cap.
pub struct Gate {
    /// The most tokens its output may have.
    pub cap: u32,
    /// The gate's agent, asked once to shorten an output that is too long; `None` for the
    /// built-in gate.
    pub agent: Option<String>,
    /// How its tokens are counted.
    pub tokenizer: Tokenizer,
}

impl Job {
    /// Runs the attempt and returns what to report: a success (after a gate's compaction, if
    /// any), a failed verification, a failure, or a question.
    pub async fn perform(self, cancel: CancellationToken) -> Vec<Command> {
        let span = crate::spans::attempt(&self.span, &self.request.task, self.request.attempt);
        let commands = self.carry_out(cancel).instrument(span.clone()).await;
        if let Some(last) = commands.last() {
            crate::spans::attempt_ended(&span, last);
        }
        commands
    }

    async fn carry_out(mut self, cancel: CancellationToken) -> Vec<Command> {
        let started = Instant::now();
        let (task, attempt) = (self.request.task.clone(), self.request.attempt);
        let request = if self.gate.is_none() && self.check.is_none() {
            // Nothing reads the request after the agent: it is handed over rather than copied.
            let rest = Attempt::new(String::new(), attempt, Arc::clone(&self.request.input), PathBuf::new());
            std::mem::replace(&mut self.request, rest)
        } else {
            self.request.clone()
        };
        let reply = self.ask(request, &cancel).await;
        let (mut text, mut tokens) = match reply {
            Reply::Output { text, tokens } if self.gate.is_some() || self.check.is_some() => (text, tokens),
            reply => {
                let duration_ms = started.elapsed().as_millis() as u64;
                return vec![report(task, attempt, reply, self.error_limit, self.jitter_seed, duration_ms)];
            }
        };
        let mut commands = Vec::new();
        if let Some(gate) = &self.gate {
            let (capped, used, compaction) = self.hold_to_cap(gate, text, &cancel).await;
            text = capped;
            tokens = add(tokens, used);
            commands.extend(compaction);
        }
        if let Some((check, reviewer)) = &self.check {
            let mut subject = verify::Check::new(&task, attempt, &self.request.input, &text, &self.request.workdir)
                .with_hidden(&self.hidden);
            if let Some(reviewer) = reviewer {
                subject = subject.with_reviewer(Arc::clone(reviewer));
            }
            let outcome = verify::verify(check, subject, cancel.clone()).await;
            tokens = add(tokens, outcome.tokens);
            if let Verdict::Fail(reason) = outcome.verdict {
                let reason = compact_error(&reason, self.error_limit);
                let jitter = jitter(self.jitter_seed, &task, attempt);
                commands.push(Command::VerificationFailed { task, attempt, reason, tokens, jitter });
                return commands;
            }
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        commands.push(Command::Succeeded { task, attempt, output: text, tokens, duration_ms });
        commands
    }

    /// Runs the agent once under the time limit. An agent that runs out of time is cancelled
    /// and given [`CANCEL_GRACE`] to say how many tokens it used.
    async fn ask(&self, request: Attempt, cancel: &CancellationToken) -> Reply {
        let mut work = self.runtime.run(request, cancel.clone());
        match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, &mut work).await {
                Ok(reply) => reply,
                Err(_) => {
                    cancel.cancel();
                    let tokens = tokio::time::timeout(CANCEL_GRACE, work).await.ok().and_then(|reply| reply.tokens());
                    let error = format!("timed out after {}", describe(limit));
                    Reply::Failure { error, class: ErrorClass::Timeout, tokens }
                }
            },
            None => work.await,
        }
    }

    /// Holds a gate's output to its cap: a gate agent is asked once to shorten a long output,
    /// and the extractive compactor cuts what is still too long. Returns the output, the tokens
    /// the shortening used (reported with the success), and the compaction to record, if any.
    async fn hold_to_cap(
        &self,
        gate: &Gate,
        text: String,
        cancel: &CancellationToken,
    ) -> (String, Option<Tokens>, Option<Command>) {
        let cap = gate.cap as usize;
        let before = count(&text, gate.tokenizer);
        if before <= cap {
            return (text, None, None);
        }
        let (mut text, mut used, mut by) = (text, None, "extractive".to_owned());
        if let Some(agent) = &gate.agent {
            let request = Attempt {
                input: format!(
                    "This text has {before} tokens, more than the {cap} allowed. Rewrite it in at most {cap} \
                     tokens, keeping every figure, name, source and conclusion:\n\n{text}"
                )
                .into(),
                schema: None,
                may_ask: false,
                ..self.request.clone()
            };
            let reply = self.ask(request, cancel).await;
            used = reply.tokens();
            if let Reply::Output { text: shorter, .. } = reply {
                text = shorter;
                by.clone_from(agent);
            }
        }
        let mut after = count(&text, gate.tokenizer);
        if after > cap {
            let compacted = extract::compact(&text, cap, meter(gate.tokenizer));
            text = compacted.text;
            after = compacted.tokens_after;
            by = "extractive".to_owned();
        }
        let compaction = Command::Compacted(ContextCompacted {
            task: self.request.task.clone(),
            scope: Scope::Gate,
            by,
            tokens_before: before as u64,
            tokens_after: after as u64,
            summary: None,
            tokens: None,
        });
        (text, used, Some(compaction))
    }
}

/// The command that reports a reply as it is, when no gate or check follows the agent: a
/// success (that took `duration_ms`), a failure (its error compacted to `error_limit`
/// characters, its retry jitter drawn from `jitter_seed` as [`Job::jitter_seed`] says), or a
/// question.
pub fn report(
    task: String,
    attempt: u32,
    reply: Reply,
    error_limit: usize,
    jitter_seed: Option<u64>,
    duration_ms: u64,
) -> Command {
    match reply {
        Reply::Output { text, tokens } => Command::Succeeded { task, attempt, output: text, tokens, duration_ms },
        Reply::Failure { error, class, tokens } => {
            let error = compact_error(&error, error_limit);
            let jitter = jitter(jitter_seed, &task, attempt);
            Command::Failed { task, attempt, error, class, tokens, jitter }
        }
        Reply::Question(question, tokens) => Command::NeedsClarification { task, attempt, question, tokens },
    }
}

/// The sum of two token counts, when either is known.
pub fn add(a: Option<Tokens>, b: Option<Tokens>) -> Option<Tokens> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Tokens { prompt: a.prompt + b.prompt, completion: a.completion + b.completion }),
        (a, b) => a.or(b),
    }
}

/// A number in `[0, 1)` for the jitter of a retry's backoff, different for each call, so
/// retries of tasks that failed together do not hit a service together again. Not for
/// anything secret: it mixes the clock with a counter, or, with a seed, the seed with the
/// task and attempt (still different per task, and the same every run).
fn jitter(seed: Option<u64>, task: &str, attempt: u32) -> f64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut x = match seed {
        Some(seed) => {
            task.bytes().fold(seed ^ u64::from(attempt), |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
        }
        None => {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
            (nanos as u64) ^ CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
    };
    // splitmix64's finaliser spreads the bits of nearby inputs.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn describe(limit: Duration) -> String {
    manifest::Duration::from_millis(limit.as_millis() as u64).to_string()
}
