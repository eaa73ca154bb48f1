//! A run's lease: the one process that drives (records into) a run holds it, renews it while
//! it drives, and releases it at the end. Each take adds one to the run's fence, and every
//! write checks the fence it was opened with, so a process whose lease ran out and was taken
//! over cannot record anything more, even if it does not know yet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Database;
use crate::store::StoreError;

/// How long a lease lasts unless renewed, and how often its holder renews it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    /// How long a lease lasts from its last renewal: the time a dead holder keeps a run.
    pub length: Duration,
    /// How often the holder renews it; well under `length`, so a slow renewal does not lose it.
    pub renew: Duration,
}

impl Default for LeaseTimes {
    /// Ten seconds, renewed every three.
    fn default() -> Self {
        LeaseTimes { length: Duration::from_secs(10), renew: Duration::from_secs(3) }
    }
}

impl LeaseTimes {
    fn length_ms(self) -> i64 {
        i64::try_from(self.length.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A held run lease, renewed in the background until released or dropped (dropping releases
/// it too, as far as the connection still runs).
#[derive(Debug)]
pub struct RunLease {
    db: Database,
    run_id: String,
    owner: String,
    fence: i64,
    lost: Arc<AtomicBool>,
    renewer: tokio::task::AbortHandle,
    released: bool,
}

impl RunLease {
    fn start(db: &Database, run_id: &str, owner: &str, fence: i64, times: LeaseTimes) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = db.spawn(renew(db.clone(), run_id.to_owned(), fence, times, Arc::clone(&lost))).abort_handle();
        RunLease {
            db: db.clone(),
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            fence,
            lost,
            renewer,
            released: false,
        }
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The holder this lease was taken for.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The run's fence while this lease is its lease.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// Whether a renewal found the lease taken over: nothing this holder writes is recorded.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// Stops renewing and frees the run for the next process at once (the lease is only
    /// cleared if it is still this one).
    pub async fn release(mut self) -> Result<(), StoreError> {
        self.released = true;
        self.renewer.abort();
        release(&self.db, &self.run_id, self.fence).await
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.renewer.abort();
        if !self.released {
            let (db, run_id, fence) = (self.db.clone(), self.run_id.clone(), self.fence);
            drop(self.db.spawn(async move { release(&db, &run_id, fence).await }));
        }
    }
}

async fn release(db: &Database, run_id: &str, fence: i64) -> Result<(), StoreError> {
    db.client()
        .execute(
            "UPDATE runner_runs SET owner = NULL, lease_until = NULL WHERE run_id = $1 AND fence = $2",
            &[&run_id, &fence],
        )
        .await
        .map_err(|e| db.error("release the run's lease", &e))?;
    Ok(())
}

/// Renews the lease every `times.renew` until it is found taken over. A renewal that fails
/// (the database away for a moment) is tried again at the next tick; if the lease runs out
/// meanwhile and another process takes it, the fence refuses this one's writes.
async fn renew(db: Database, run_id: String, fence: i64, times: LeaseTimes, lost: Arc<AtomicBool>) {
    let mut tick = tokio::time::interval(times.renew);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let renewed = db
            .client()
            .execute(
                "UPDATE runner_runs SET lease_until = now() + $3::bigint * interval '1 millisecond' \
                 WHERE run_id = $1 AND fence = $2",
                &[&run_id, &fence, &times.length_ms()],
            )
            .await;
        if let Ok(0) = renewed {
            lost.store(true, Ordering::Relaxed);
            return;
        }
    }
}

pub(super) async fn create(
    db: &Database,
    run_id: &str,
    plan: &str,
    owner: &str,
    times: LeaseTimes,
) -> Result<RunLease, StoreError> {
    let rows = db
        .client()
        .query(
            "INSERT INTO runner_runs (run_id, plan, owner, lease_until, fence) \
             VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond', 1) \
             ON CONFLICT (run_id) DO NOTHING RETURNING fence",
            &[&run_id, &plan, &owner, &times.length_ms()],
        )
        .await
        .map_err(|e| db.error("create the run", &e))?;
    match rows.first() {
        Some(row) => Ok(RunLease::start(db, run_id, owner, row.get(0), times)),
        None => Err(StoreError::Exists { run_id: run_id.to_owned(), url: db.url().to_owned() }),
    }
}

pub(super) async fn take(db: &Database, run_id: &str, owner: &str, times: LeaseTimes) -> Result<RunLease, StoreError> {
    // A holder can release between the two statements: then the take is tried again.
    for _ in 0..3 {
        let taken = db
            .client()
            .query(
                "UPDATE runner_runs SET owner = $2, lease_until = now() + $3::bigint * interval '1 millisecond', \
                 fence = fence + 1 \
                 WHERE run_id = $1 AND (owner IS NULL OR lease_until IS NULL OR lease_until <= now()) \
                 RETURNING fence",
                &[&run_id, &owner, &times.length_ms()],
            )
            .await
            .map_err(|e| db.error("take the run's lease", &e))?;
        if let Some(row) = taken.first() {
            return Ok(RunLease::start(db, run_id, owner, row.get(0), times));
        }
        let holder = db
            .client()
            .query(
                "SELECT owner, to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
                 FROM runner_runs WHERE run_id = $1 AND lease_until > now()",
                &[&run_id],
            )
            .await
            .map_err(|e| db.error("take the run's lease", &e))?;
        if let Some(row) = holder.first() {
            let owner: Option<String> = row.get(0);
            return Err(StoreError::Leased {
                run_id: run_id.to_owned(),
                owner: owner.unwrap_or_else(|| "another process".to_owned()),
                until: row.get(1),
            });
        }
        db.run(run_id).await?;
    }
    Err(StoreError::Leased {
        run_id: run_id.to_owned(),
        owner: "another process".to_owned(),
        until: "it releases it".to_owned(),
    })
}
