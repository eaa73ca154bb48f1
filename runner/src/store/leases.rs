//! How long a lease lasts in the database, for runs (their coordinator's) and attempts (their
//! worker's) alike.

use std::time::Duration;

use engine::cluster::Leases;
use engine::store::postgres::LeaseTimes;

/// The environment variable that sets the length of every lease, in milliseconds (attempts'
/// and runs'; default 10 s): tests shorten it.
const LEASE_MS: &str = "RUNNER_LEASE_MS";

/// The lease timings of this process: [`LEASE_MS`] when set, else the defaults.
pub fn leases() -> (Leases, LeaseTimes) {
    let length = std::env::var(LEASE_MS).ok().and_then(|ms| ms.trim().parse::<u64>().ok()).filter(|&ms| ms > 0);
    match length {
        Some(ms) => {
            let leases = Leases::of(Duration::from_millis(ms));
            (leases, LeaseTimes { length: leases.lease, renew: leases.renew })
        }
        None => (Leases::default(), LeaseTimes::default()),
    }
}
