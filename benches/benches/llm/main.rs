//! `llm`: the cost of `llm` tasks, against `testkit::FakeOpenAi` (a local OpenAI-compatible
//! server with scripted replies) over real HTTP.
//!
//! 1. `llm_overhead`: a plan of [`TASKS`] independent one-turn `llm` tasks at
//!    `max_concurrency: 32`, driven to its end with the in-memory store, against the same
//!    [`TASKS`] chat-completion requests (the bodies the engine sent) sent by a plain reqwest
//!    client at 32 concurrent. Both build a new HTTP client per run, as a run does. The
//!    difference per request is the engine's overhead per `llm` task; the target is under 1 ms.
//! 2. Prompt tokens of `examples/research.yaml` (its synthesis gate condensing three long search
//!    answers for the writer) against a variant whose writer reads every search output in full,
//!    counted with o200k over the message contents of every request the server received. This
//!    is a measurement printed once before the timing groups, not a timing loop.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use engine::driver::Driver;
use engine::store::MemoryStore;
use engine::{Command, Event, Outcome, RunState, RunStatus, Start};
use model::tokens::{Tokenizer, count};
use serde_json::Value;
use testkit::{FakeOpenAi, Step};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod answers;

use answers::Answers;

/// Independent `llm` tasks in the overhead plan.
const TASKS: usize = 256;
/// Requests in flight at once, in the plan (`max_concurrency`) and in the direct client.
const CONCURRENCY: usize = 32;
/// Timed runs of each side, after warm-up, for the overhead printed at the end.
const REPETITIONS: usize = 15;
/// The research example, relative to this crate.
const RESEARCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/research.yaml");

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime")
}

/// A validated plan from YAML text.
fn load(name: &str, text: &str) -> Arc<manifest::Plan> {
    let loaded = manifest::load_str(name, "bench", text, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(loaded.is_valid(), "{name} does not load: {errors:#?}");
    Arc::new(loaded.plan.expect("a valid plan"))
}

/// Drives the run in `store` with `first` (a new driver on the store's records) until it ends
/// or pauses.
async fn drive(store: &MemoryStore, first: Command) -> RunState {
    let records = store.records();
    let driver = Driver::new("bench".into(), store.clone(), &records, std::env::temp_dir());
    driver.run(first, CancellationToken::new()).await.expect("the run is driven")
}

/// The median of some durations.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn micros_per_request(time: Duration) -> f64 {
    time.as_secs_f64() * 1e6 / TASKS as f64
}

/// The CPU time (user and system) of this whole process so far (the server's thread included),
/// from `/proc/self/stat` at 100 ticks a second; `None` off Linux.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Runs `once` and adds the CPU time it took to `cpu`; returns its wall time.
fn with_cpu(cpu: &mut Option<Duration>, once: impl FnOnce() -> Duration) -> Duration {
    let before = cpu_time();
    let wall = once();
    *cpu = match (*cpu, before, cpu_time()) {
        (Some(total), Some(before), Some(after)) => Some(total + after.saturating_sub(before)),
        _ => None,
    };
    wall
}

// ---------------------------------------------------------------------------------------------
// 1. Engine overhead per llm task.

/// The overhead plan: one provider at `base_url`, one one-turn agent, [`TASKS`] independent tasks
/// at `concurrency`.
fn overhead_plan(base_url: &str, concurrency: usize) -> Arc<manifest::Plan> {
    let mut text = format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: llm-overhead}}\nspec:\n  providers:\n    \
         fake: {{kind: openai, base_url: \"{base_url}\", model: bench-model}}\n  agent_definitions:\n    \
         terse: {{runtime: llm, provider: fake, system_prompt: \"You are terse. Answer in one word.\", \
         max_turns: 1}}\n  workflow:\n"
    );
    for i in 0..TASKS {
        let _ = writeln!(text, "    - {{id: t{i}, agent: terse, input: \"Task {i}: say ok.\"}}");
    }
    let _ = writeln!(text, "  control_logic: {{max_concurrency: {concurrency}}}");
    load("overhead.yaml", &text)
}

/// A server that answers every request at once with a short answer.
fn quick_server() -> FakeOpenAi {
    FakeOpenAi::start(|_, _| Step::Answer("ok".to_owned()))
}

/// A server that answers every request after `pause`, so concurrent requests overlap on it.
fn slow_server(pause: Duration) -> FakeOpenAi {
    FakeOpenAi::start(move |_, _| Step::Delay(pause, Box::new(Step::Answer("ok".to_owned()))))
}

/// One run of the overhead plan through the driver; returns its wall time.
fn engine_once(rt: &Runtime, plan: &Arc<manifest::Plan>) -> Duration {
    let started = Instant::now();
    let state = rt.block_on(async {
        let driver = Driver::new("bench".into(), MemoryStore::new(), &[], std::env::temp_dir());
        driver.run(Command::Start(Start::plan(Arc::clone(plan))), CancellationToken::new()).await
    });
    let spent = started.elapsed();
    let state = state.expect("the run is driven");
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded));
    spent
}

/// The same requests sent by a plain reqwest client (a new one, as each run makes its own),
/// `concurrency` at a time; returns the wall time.
fn direct_once(rt: &Runtime, url: &Arc<str>, bodies: &Arc<[Value]>, concurrency: usize) -> Duration {
    let started = Instant::now();
    rt.block_on(async {
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build().expect("a client");
        let permits = Arc::new(Semaphore::new(concurrency));
        let mut requests = JoinSet::new();
        for i in 0..bodies.len() {
            let permit = Arc::clone(&permits).acquire_owned().await.expect("the semaphore is open");
            let (http, url, bodies) = (http.clone(), Arc::clone(url), Arc::clone(bodies));
            requests.spawn(async move {
                let response = http.post(&*url).json(&bodies[i]).send().await.expect("the request is sent");
                assert!(response.status().is_success(), "{}", response.status());
                let answer: Value = response.json().await.expect("a JSON answer");
                drop(permit);
                assert!(answer["choices"][0]["message"]["content"].is_string());
            });
        }
        while let Some(done) = requests.join_next().await {
            done.expect("the request task ends");
        }
    });
    started.elapsed()
}

/// A fresh server with the overhead plan on it, and the request bodies the engine sends (taken
/// from one untimed run), for the direct client.
struct Setup {
    server: FakeOpenAi,
    plan: Arc<manifest::Plan>,
    url: Arc<str>,
    bodies: Arc<[Value]>,
    concurrency: usize,
}

impl Setup {
    fn new(rt: &Runtime, server: FakeOpenAi, concurrency: usize) -> Self {
        let plan = overhead_plan(&server.base_url(), concurrency);
        engine_once(rt, &plan);
        let bodies: Arc<[Value]> = server.requests().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), TASKS, "one request a task");
        let url = format!("{}/chat/completions", server.base_url()).into();
        Setup { server, plan, url, bodies, concurrency }
    }

    fn direct(&self, rt: &Runtime) -> Duration {
        direct_once(rt, &self.url, &self.bodies, self.concurrency)
    }

    fn engine(&self, rt: &Runtime) -> Duration {
        engine_once(rt, &self.plan)
    }
}

fn llm_overhead(c: &mut Criterion, rt: &Runtime) {
    // The bodies never change; the server (and so the URL) is fresh per batch of iterations, so
    // its record of requests does not grow across the whole measurement.
    let mut group = c.benchmark_group("llm_overhead");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(TASKS as u64));
    group.bench_function(format!("direct_reqwest/{TASKS}x{CONCURRENCY}"), |b| {
        b.iter_custom(|iters| {
            let setup = Setup::new(rt, quick_server(), CONCURRENCY);
            (0..iters).map(|_| setup.direct(rt)).sum()
        });
    });
    group.bench_function(format!("engine/{TASKS}x{CONCURRENCY}"), |b| {
        b.iter_custom(|iters| {
            let setup = Setup::new(rt, quick_server(), CONCURRENCY);
            (0..iters).map(|_| setup.engine(rt)).sum()
        });
    });
    group.finish();
}

/// Times both sides outside Criterion (interleaved, after warm-up) at 32 concurrent and, for
/// the latency a task adds when nothing overlaps it, at 1; prints the overhead per request.
fn print_overhead(rt: &Runtime) {
    // With answers that take 5 ms, requests overlap on the (single-threaded) server, which shows
    // that both sides really keep 32 in flight; with instant answers it handles one at a time.
    let slow = Setup::new(rt, slow_server(Duration::from_millis(5)), CONCURRENCY);
    let engine_in_flight = slow.server.max_in_flight();
    let slow = Setup::new(rt, slow_server(Duration::from_millis(5)), CONCURRENCY);
    slow.direct(rt);
    let direct_in_flight = slow.server.max_in_flight();
    eprintln!(
        "\nllm_overhead: {TASKS} one-turn llm tasks, median of {REPETITIONS} runs each side; with 5 ms answers the \
         server saw at most {engine_in_flight} requests in flight from the engine, {direct_in_flight} from reqwest"
    );
    for concurrency in [CONCURRENCY, 1] {
        let setup = Setup::new(rt, quick_server(), concurrency);
        for _ in 0..3 {
            setup.direct(rt);
            setup.engine(rt);
        }
        let (mut direct, mut engine) = (Vec::new(), Vec::new());
        let (mut direct_cpu, mut engine_cpu) = (Some(Duration::ZERO), Some(Duration::ZERO));
        for _ in 0..REPETITIONS {
            direct.push(with_cpu(&mut direct_cpu, || setup.direct(rt)));
            engine.push(with_cpu(&mut engine_cpu, || setup.engine(rt)));
        }
        let (direct, engine) = (micros_per_request(median(direct)), micros_per_request(median(engine)));
        let cpu =
            |total: Option<Duration>| total.map_or(f64::NAN, |total| micros_per_request(total) / REPETITIONS as f64);
        let (direct_cpu, engine_cpu) = (cpu(direct_cpu), cpu(engine_cpu));
        eprintln!("  {concurrency} concurrent (wall time per request; CPU time of the process, server included):");
        eprintln!("    direct reqwest (the server's own time): {direct:.1} us wall, {direct_cpu:.1} us CPU");
        eprintln!("    engine (Driver, MemoryStore):           {engine:.1} us wall, {engine_cpu:.1} us CPU");
        eprintln!(
            "    engine overhead per llm task:           {:.1} us wall, {:.1} us CPU (target: under 1000 us)",
            engine - direct,
            engine_cpu - direct_cpu
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Prompt tokens of the research example, gate against full outputs.

/// Which agent (and task) a request is from, by its system prompt and user message.
fn role(body: &Value) -> &'static str {
    let content = |i: usize| body["messages"][i]["content"].as_str().unwrap_or("");
    let (system, user) = (content(0), content(1));
    if system.contains("editor") {
        if user.starts_with("This text has") { "editor (shorten)" } else { "editor" }
    } else if system.contains("business writer") {
        "writer"
    } else if system.contains("financial analyst") {
        "search_filings"
    } else if user.contains("competitors") {
        "search_competitors"
    } else {
        "search_news"
    }
}

/// The research example at `base_url`, with no API key.
fn research_text(base_url: &str) -> String {
    let text = std::fs::read_to_string(RESEARCH).expect("examples/research.yaml is readable");
    let replace = |text: String, from: &str, to: &str| {
        assert!(text.contains(from), "examples/research.yaml no longer contains {from:?}");
        text.replace(from, to)
    };
    let text = replace(text, "http://localhost:11434/v1", base_url);
    replace(text, "      api_key_env: OLLAMA_API_KEY\n", "")
}

/// The research example without its gate: the review follows the searches and the writer reads
/// every search output in full.
fn full_outputs_text(base_url: &str) -> String {
    let text = research_text(base_url);
    let start = text.find("    - id: synthesize\n").expect("the synthesize task");
    let end = text.find("    - id: approve\n").expect("the approve task");
    let text = format!("{}{}", &text[..start], &text[end..]);
    let mut text = text;
    for (from, to) in [
        (
            "critical_path: [search_news, synthesize, approve, write_brief]",
            "critical_path: [search_news, approve, write_brief]",
        ),
        ("depends_on: [synthesize]", "depends_on: [search_news, search_filings, search_competitors]"),
        (
            "        {{ tasks.synthesize.output }}\n",
            "        ## search_news\n        {{ tasks.search_news.output }}\n\n        \
             ## search_filings\n        {{ tasks.search_filings.output }}\n\n        \
             ## search_competitors\n        {{ tasks.search_competitors.output }}\n",
        ),
        ("depends_on: [approve]", "depends_on: [approve, search_news, search_filings, search_competitors]"),
    ] {
        assert!(text.contains(from), "examples/research.yaml no longer contains {from:?}");
        text = text.replace(from, to);
    }
    text
}

/// What one research run sent.
struct Figures {
    /// `(role, prompt tokens)` of every request, in arrival order.
    requests: Vec<(&'static str, usize)>,
    /// The gate's compaction: `by`, tokens before and after.
    compaction: Option<(String, u64, u64)>,
}

impl Figures {
    fn total(&self) -> usize {
        self.requests.iter().map(|(_, tokens)| tokens).sum()
    }

    fn writer(&self) -> usize {
        self.requests.iter().filter(|(role, _)| *role == "writer").map(|(_, tokens)| tokens).sum()
    }

    fn breakdown(&self) -> String {
        let mut by_role: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (role, tokens) in &self.requests {
            let entry = by_role.entry(role).or_default();
            entry.0 += 1;
            entry.1 += tokens;
        }
        let parts: Vec<String> = self
            .requests
            .iter()
            .map(|(role, _)| *role)
            .fold(Vec::new(), |mut seen, role| {
                if !seen.contains(&role) {
                    seen.push(role);
                }
                seen
            })
            .into_iter()
            .map(|role| {
                let (n, tokens) = by_role[role];
                if n == 1 { format!("{role} {tokens}") } else { format!("{role} {tokens} ({n} requests)") }
            })
            .collect();
        parts.join(", ")
    }
}

/// Runs one research plan against a scripted server, approving the review, and counts the
/// prompt tokens the server received.
fn research_run(rt: &Runtime, full_outputs: bool, answers: &Arc<Answers>) -> Figures {
    let scripted = Arc::clone(answers);
    let server = FakeOpenAi::start(move |body, _| {
        let answers = &scripted;
        Step::Answer(
            match role(body) {
                "search_news" => &answers.news,
                "search_filings" => &answers.filings,
                "search_competitors" => &answers.competitors,
                "writer" => &answers.brief,
                _ => &answers.editor,
            }
            .clone(),
        )
    });
    let text = if full_outputs { full_outputs_text(&server.base_url()) } else { research_text(&server.base_url()) };
    let plan = load("research.yaml", &text);
    let store = MemoryStore::new();
    let state = rt.block_on(async {
        let mut state = drive(&store, Command::Start(Start::plan(plan))).await;
        for _ in 0..4 {
            if state.status != RunStatus::Paused {
                break;
            }
            drive(&store, Command::Decide { task: "approve".into(), approved: true, comment: None }).await;
            state = drive(&store, Command::Continue).await;
        }
        state
    });
    assert_eq!(state.status, RunStatus::Finished(Outcome::Succeeded), "{:#?}", state.tasks);
    let compaction = store.records().into_iter().find_map(|record| match record.event {
        Event::ContextCompacted(c) if c.task == "synthesize" => Some((c.by, c.tokens_before, c.tokens_after)),
        _ => None,
    });
    let requests = server
        .requests()
        .iter()
        .map(|request| {
            let messages = request.body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
            let tokens =
                messages.iter().filter_map(|m| m["content"].as_str()).map(|text| count(text, Tokenizer::O200k)).sum();
            (role(&request.body), tokens)
        })
        .collect();
    Figures { requests, compaction }
}

fn print_token_figures(rt: &Runtime) {
    let answers = Arc::new(Answers::new());
    let tokens = |text: &str| count(text, Tokenizer::O200k);
    let gate = research_run(rt, false, &answers);
    let full = research_run(rt, true, &answers);
    eprintln!("research.yaml prompt tokens (o200k, every message content of every request the server received):");
    eprintln!(
        "  answers: search_news {}, search_filings {}, search_competitors {}, editor {}, writer {} tokens",
        tokens(&answers.news),
        tokens(&answers.filings),
        tokens(&answers.competitors),
        tokens(&answers.editor),
        tokens(&answers.brief)
    );
    for (name, figures) in [("with the synthesis gate", &gate), ("every output in full  ", &full)] {
        eprintln!(
            "  {name}: {} requests, {} prompt tokens in all, {} in the writer's request",
            figures.requests.len(),
            figures.total(),
            figures.writer()
        );
        eprintln!("    by request: {}", figures.breakdown());
    }
    if let Some((by, before, after)) = &gate.compaction {
        eprintln!("  the gate's cap (1500): compacted by {by}, {before} -> {after} tokens");
    }
    eprintln!(
        "  ratio full / gate: {:.2}x in all, {:.2}x for the writer's request\n",
        full.total() as f64 / gate.total() as f64,
        full.writer() as f64 / gate.writer() as f64
    );
}

fn main() {
    let rt = runtime();
    print_token_figures(&rt);
    let mut criterion = Criterion::default().configure_from_args();
    llm_overhead(&mut criterion, &rt);
    criterion.final_summary();
    print_overhead(&rt);
}
