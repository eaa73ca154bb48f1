//! The lease timings of the attempts queue.

use std::time::Duration;

/// How long a claim lasts without renewal, how often a worker renews it, and how often a
/// party looks at the queue when no notification has come (the fallback for a lost one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leases {
    /// A claim not renewed for this long expires and the attempt is queued again.
    pub lease: Duration,
    /// How often a worker renews the claims of the attempts it runs.
    pub renew: Duration,
    /// How often the queue is looked at without a notification.
    pub poll: Duration,
}

impl Leases {
    /// A lease of `lease`, renewed three times within it, polled as often as renewed.
    pub fn of(lease: Duration) -> Self {
        let renew = lease / 3;
        Leases { lease, renew, poll: renew.min(Duration::from_secs(1)) }
    }
}

impl Default for Leases {
    fn default() -> Self {
        Leases::of(Duration::from_secs(10))
    }
}
