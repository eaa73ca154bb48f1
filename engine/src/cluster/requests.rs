//! A run's `requests_per_minute` windows in the database (`runner_request_starts`), so that a
//! provider's limit holds for the run's requests from every worker and its coordinator together.

use std::time::Duration;

use model::limiter::{SharedStart, SharedWindow};

use crate::store::postgres::Database;

/// The request windows of one run's providers.
#[derive(Debug)]
pub(crate) struct RequestWindow {
    db: Database,
    run_id: String,
}

impl RequestWindow {
    /// The windows of run `run_id`'s providers in `db`.
    pub(crate) fn new(db: Database, run_id: &str) -> Self {
        RequestWindow { db, run_id: run_id.to_owned() }
    }
}

impl SharedWindow for RequestWindow {
    fn start<'a>(&'a self, provider: &'a str, limit: u32) -> SharedStart<'a> {
        Box::pin(async move {
            let limit = i32::try_from(limit).unwrap_or(i32::MAX);
            // Run again after a lost connection, a start the first run recorded counts twice,
            // which only makes the window more careful.
            let sql = "SELECT runner_request_start($1, $2, $3)";
            let rows = self
                .db
                .query("count a request against the provider's limit", sql, &[&self.run_id, &provider, &limit])
                .await
                .map_err(|error| error.to_string())?;
            let row = rows.first().ok_or("the request window gave no row")?;
            let wait: f64 = row.get(0);
            Ok((wait > 0.0).then(|| Duration::from_secs_f64(wait)))
        })
    }
}
