//! `runner runs`: the runs under `$RUNNER_HOME`, or of every machine in the database
//! `--store` names, newest first. In the database the list is one query: each run's row keeps
//! what the list shows (docs/events.md); only a run last written before the rows kept it is
//! read and folded.

use crate::diagnostics::print;
use crate::home::{Created, RunDir, fold, runs_dir};
use crate::store::{Run, Runs};

/// One row of the table.
struct Row {
    id: String,
    plan: String,
    status: String,
    tasks: String,
    started: String,
}

/// Prints the table of runs; "no runs" when there are none.
pub fn run(runs: &Runs) -> anyhow::Result<u8> {
    if let Runs::Postgres(_) = runs {
        let rows: Vec<Row> = runs
            .rows()?
            .iter()
            .map(|(run, row)| {
                // A run in the database started when its row was made, just before its first record.
                let started = row.created.replace('T', " ").trim_end_matches('Z').to_owned();
                match &row.summary {
                    Some(summary) => Row {
                        id: row.run_id.clone(),
                        plan: row.plan.clone(),
                        status: shown_row(row).to_owned(),
                        tasks: format!("{}/{}", summary.succeeded, summary.tasks),
                        started,
                    },
                    None => Row { started, ..self::row(run, || row.leased) },
                }
            })
            .collect();
        return table(rows, &runs.place());
    }
    let folder = runs_dir();
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            print(&format!("no runs in {}\n", folder.display()))?;
            return Ok(0);
        }
        Err(error) => anyhow::bail!("cannot list {}: {error}", folder.display()),
    };
    let mut rows = Vec::new();
    for entry in entries.flatten() {
        let id = entry.file_name().to_string_lossy().into_owned();
        let Ok(run) = RunDir::existing(&id) else { continue };
        let run = Run::Dir(run);
        rows.push(row(&run, || run.driver().is_some()));
    }
    table(rows, &folder.display().to_string())
}

/// Prints the rows newest first, or that there are none in `place`.
fn table(mut rows: Vec<Row>, place: &str) -> anyhow::Result<u8> {
    if rows.is_empty() {
        print(&format!("no runs in {place}\n"))?;
        return Ok(0);
    }
    rows.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| b.id.cmp(&a.id)));
    let width = |f: fn(&Row) -> &str, title: &str| rows.iter().map(|r| f(r).len()).max().unwrap_or(0).max(title.len());
    let (w_id, w_plan, w_status, w_tasks) = (
        width(|r| &r.id, "run"),
        width(|r| &r.plan, "plan"),
        width(|r| &r.status, "status"),
        width(|r| &r.tasks, "tasks"),
    );
    let mut out =
        format!("{:<w_id$}  {:<w_plan$}  {:<w_status$}  {:>w_tasks$}  started\n", "run", "plan", "status", "tasks");
    for r in &rows {
        out.push_str(&format!(
            "{:<w_id$}  {:<w_plan$}  {:<w_status$}  {:>w_tasks$}  {}\n",
            r.id, r.plan, r.status, r.tasks, r.started
        ));
    }
    print(&out)?;
    Ok(0)
}

/// The status a run's row shows, as [`crate::status::shown`] gives it from the run's state: a
/// run under way that nobody drives is interrupted.
pub fn shown_row(row: &engine::store::postgres::RunRow) -> &str {
    match row.status.as_str() {
        "running" if !row.leased => crate::status::INTERRUPTED,
        status => status,
    }
}

fn row(run: &Run, driven: impl FnOnce() -> bool) -> Row {
    let unknown = |status: &str| Row {
        id: run.id().to_owned(),
        plan: "?".into(),
        status: status.into(),
        tasks: "-".into(),
        started: String::new(),
    };
    let Ok((records, _)) = run.load() else { return unknown("unreadable") };
    let Some(created) = Created::of(&records) else { return unknown("not started") };
    let state = fold(&records);
    let succeeded = state.succeeded_tasks();
    let status = crate::status::shown(&state, driven).to_owned();
    Row {
        id: run.id().to_owned(),
        plan: created.plan.name,
        status,
        tasks: format!("{succeeded}/{}", state.tasks.len()),
        started: created.at.replace('T', " ").trim_end_matches('Z').to_owned(),
    }
}
