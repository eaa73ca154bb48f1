//! Model reliability: per model, how its plan-writing attempts went, kept in
//! `$RUNNER_HOME/models.json` across `runner plan` calls, and `runner models`, which shows it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::diagnostics::print;
use crate::home::home;

/// The counts of one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Answers that held no JSON object.
    pub parse_failures: u64,
    /// Answers whose plan had errors.
    pub validation_failures: u64,
    /// Repair prompts sent.
    pub repairs: u64,
    /// Requests that failed (HTTP or network).
    pub request_failures: u64,
    /// Answers that gave a valid plan (or questions).
    pub successes: u64,
    /// Answers received, for the mean latency.
    pub answers: u64,
    /// The sum of the answers' latencies.
    pub total_latency_ms: u64,
}

impl Record {
    /// Adds another record's counts to this one.
    fn add(&mut self, other: &Record) {
        self.parse_failures += other.parse_failures;
        self.validation_failures += other.validation_failures;
        self.repairs += other.repairs;
        self.request_failures += other.request_failures;
        self.successes += other.successes;
        self.answers += other.answers;
        self.total_latency_ms += other.total_latency_ms;
    }

    /// Every attempt counted.
    pub fn attempts(&self) -> u64 {
        self.parse_failures + self.validation_failures + self.request_failures + self.successes
    }

    /// Successes over the answers received; 0.5 for a model with none, so it is neither first
    /// nor last. A failed request (a server or network fault, such as a stream that broke off)
    /// says nothing about the model and is left out.
    pub fn success_rate(&self) -> f64 {
        match self.attempts() - self.request_failures {
            0 => 0.5,
            attempts => self.successes as f64 / attempts as f64,
        }
    }

    /// The mean latency of an answer, in milliseconds.
    pub fn mean_latency_ms(&self) -> Option<u64> {
        self.total_latency_ms.checked_div(self.answers)
    }
}

/// How one attempt of a model went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempted {
    /// No JSON object in the answer.
    ParseFailure,
    /// A plan with errors.
    ValidationFailure,
    /// The request failed.
    RequestFailure,
    /// A valid plan, or questions.
    Success,
}

/// Every model's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Models(BTreeMap<String, Record>);

impl Models {
    /// The file the records live in.
    pub fn path() -> PathBuf {
        home().join("models.json")
    }

    /// The records so far; none when the file does not exist yet.
    pub fn load() -> anyhow::Result<Self> {
        let path = Models::path();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| format!("cannot read {}", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Models::default()),
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Adds these counts to the file's under a lock, so `runner plan` processes that run at
    /// once all keep their counts.
    pub fn add_to_file(&self) -> anyhow::Result<()> {
        let path = Models::path();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        // Held until the file is replaced: another process adding its counts waits here. The
        // operating system releases it if this process dies.
        let lock_path = path.with_extension("json.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        lock.lock().with_context(|| format!("cannot lock {}", lock_path.display()))?;
        let mut records = Models::load()?;
        for (model, counts) in &self.0 {
            records.0.entry(model.clone()).or_default().add(counts);
        }
        records.save()
    }

    /// Writes the records, replacing the file in one step so a crash never leaves half a file.
    fn save(&self) -> anyhow::Result<()> {
        let path = Models::path();
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", partial.display()))?;
        std::fs::rename(&partial, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Counts one attempt of `model`; a repair prompt also counts as a repair.
    pub fn count(&mut self, model: &str, attempted: Attempted, repair: bool, latency_ms: Option<u64>) {
        let record = self.0.entry(model.to_owned()).or_default();
        match attempted {
            Attempted::ParseFailure => record.parse_failures += 1,
            Attempted::ValidationFailure => record.validation_failures += 1,
            Attempted::RequestFailure => record.request_failures += 1,
            Attempted::Success => record.successes += 1,
        }
        record.repairs += u64::from(repair);
        if let Some(latency) = latency_ms {
            record.answers += 1;
            record.total_latency_ms += latency;
        }
    }

    /// `models` best first: the higher success rate, then the lower mean latency; models with
    /// equal records keep the order they were given in.
    pub fn best_first(&self, models: &[String]) -> Vec<String> {
        let mut ordered = models.to_vec();
        let record = |model: &String| self.0.get(model).copied().unwrap_or_default();
        ordered.sort_by(|a, b| {
            let (a, b) = (record(a), record(b));
            b.success_rate()
                .total_cmp(&a.success_rate())
                .then(a.mean_latency_ms().unwrap_or(u64::MAX).cmp(&b.mean_latency_ms().unwrap_or(u64::MAX)))
        });
        ordered
    }

    /// The table `runner models` prints.
    pub fn table(&self) -> String {
        if self.0.is_empty() {
            return "no model has written a plan yet (`runner plan TEXT --provider P --model M`)\n".to_owned();
        }
        let width = self.0.keys().map(String::len).max().unwrap_or(5).max(5);
        let mut out = format!(
            "{:<width$}  {:>8}  {:>9}  {:>6}  {:>10}  {:>7}  {:>8}  {:>12}\n",
            "model", "attempts", "successes", "parse", "validation", "repairs", "requests", "mean latency"
        );
        for (model, r) in &self.0 {
            let latency = r.mean_latency_ms().map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms"));
            out.push_str(&format!(
                "{model:<width$}  {:>8}  {:>9}  {:>6}  {:>10}  {:>7}  {:>8}  {latency:>12}\n",
                r.attempts(),
                r.successes,
                r.parse_failures,
                r.validation_failures,
                r.repairs,
                r.request_failures,
            ));
        }
        out.push_str("(parse, validation, requests: failures of each kind; repairs: repair prompts sent)\n");
        out
    }
}

/// `runner models`: the reliability table; with a plan, the plan's providers.
pub fn run(plan: Option<&Path>) -> anyhow::Result<u8> {
    let Some(path) = plan else {
        print(&Models::load()?.table())?;
        return Ok(0);
    };
    let loaded = manifest::load_file(path);
    let Some(plan) = loaded.plan.as_ref().filter(|_| loaded.is_valid()) else {
        print(&crate::diagnostics::render_loaded(&loaded, crate::diagnostics::color_stdout()))?;
        return Ok(crate::validate::exit_code(&loaded, path));
    };
    print(&providers(plan))?;
    Ok(0)
}

/// A plan's providers: each one's model, context window and price.
fn providers(plan: &manifest::Plan) -> String {
    if plan.providers.is_empty() {
        return "the plan defines no provider\n".to_owned();
    }
    let width = plan.providers.keys().map(String::len).max().unwrap_or(8).max(8);
    let mut out = format!(
        "{:<width$}  {:<24}  {:>14}  price per million tokens (prompt / completion)\n",
        "provider", "model", "context window"
    );
    for (name, provider) in &plan.providers {
        let model = provider.model.as_deref().unwrap_or("-");
        let window = provider.context_window.map_or_else(|| "-".to_owned(), |w| w.to_string());
        let price = provider.price.as_ref().map_or_else(
            || "none given (forecasts count tokens only)".to_owned(),
            |p| format!("{} {} / {} {}", p.input_per_mtok, p.currency, p.output_per_mtok, p.currency),
        );
        out.push_str(&format!("{name:<width$}  {model:<24}  {window:>14}  {price}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Attempted, Models};

    #[test]
    fn the_model_with_the_better_record_goes_first_and_untried_models_sit_in_between() {
        let mut models = Models::default();
        for _ in 0..3 {
            models.count("flaky", Attempted::ParseFailure, false, Some(100));
        }
        models.count("flaky", Attempted::Success, true, Some(100));
        models.count("steady", Attempted::Success, false, Some(900));
        let given = ["flaky".to_owned(), "new".to_owned(), "steady".to_owned()];
        assert_eq!(models.best_first(&given), ["steady", "new", "flaky"]);
        models.count("quick", Attempted::Success, false, Some(50));
        let given = ["steady".to_owned(), "quick".to_owned()];
        assert_eq!(models.best_first(&given), ["quick", "steady"], "equal rates: the faster first");
        let table = models.table();
        assert!(table.contains("flaky") && table.contains("100 ms") && table.contains("900 ms"), "{table}");
    }

    #[test]
    fn failed_requests_do_not_count_against_a_model() {
        let mut models = Models::default();
        models.count("behind_a_broken_server", Attempted::Success, false, Some(100));
        for _ in 0..5 {
            models.count("behind_a_broken_server", Attempted::RequestFailure, false, None);
        }
        models.count("sloppy", Attempted::Success, false, Some(100));
        models.count("sloppy", Attempted::ParseFailure, false, Some(100));
        let given = ["sloppy".to_owned(), "behind_a_broken_server".to_owned()];
        assert_eq!(models.best_first(&given), ["behind_a_broken_server", "sloppy"]);
    }
}
