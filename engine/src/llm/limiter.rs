//! The per-provider request limiter shared by every agent on a provider.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The window `requests_per_minute` counts request starts in.
const WINDOW: Duration = Duration::from_secs(60);

/// Holds a provider to `max_concurrency` requests in flight and `requests_per_minute` starts
/// in any 60-second window. Waiting is a plain future: dropping it gives up the wait.
#[derive(Debug)]
pub struct Limiter {
    in_flight: Option<Arc<Semaphore>>,
    per_minute: Option<(usize, Mutex<VecDeque<Instant>>)>,
}

/// Leave to send one request; the request counts as in flight until it is dropped.
#[derive(Debug)]
pub struct Permit {
    _in_flight: Option<OwnedSemaphorePermit>,
}

impl Limiter {
    /// A limiter; `None` (or 0) means no limit of that kind.
    pub fn new(max_concurrency: Option<u32>, requests_per_minute: Option<u32>) -> Self {
        let positive = |n: Option<u32>| n.filter(|&n| n > 0).map(|n| n as usize);
        Limiter {
            in_flight: positive(max_concurrency).map(|n| Arc::new(Semaphore::new(n))),
            per_minute: positive(requests_per_minute).map(|n| (n, Mutex::new(VecDeque::with_capacity(n)))),
        }
    }

    /// Waits until a request may start, and records its start.
    pub async fn acquire(&self) -> Permit {
        // The concurrency slot first: a start is recorded only when the request really starts.
        let in_flight = match &self.in_flight {
            // The semaphore is never closed, so acquiring fails only if it were.
            Some(semaphore) => Arc::clone(semaphore).acquire_owned().await.ok(),
            None => None,
        };
        if let Some((limit, starts)) = &self.per_minute {
            loop {
                let mut starts = starts.lock().await;
                let now = Instant::now();
                while starts.front().is_some_and(|&start| now.duration_since(start) >= WINDOW) {
                    starts.pop_front();
                }
                if starts.len() < *limit {
                    starts.push_back(now);
                    break;
                }
                let Some(&oldest) = starts.front() else { break };
                drop(starts);
                tokio::time::sleep_until(oldest + WINDOW).await;
            }
        }
        Permit { _in_flight: in_flight }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Limiter;

    #[tokio::test(start_paused = true)]
    async fn requests_per_minute_waits_for_the_window() {
        let limiter = Limiter::new(None, Some(2));
        let start = tokio::time::Instant::now();
        limiter.acquire().await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        limiter.acquire().await;
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_secs(60), "the third start waits for the first to leave the window");
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_secs(70));
    }

    #[tokio::test]
    async fn max_concurrency_holds_permits_until_dropped() {
        let limiter = Limiter::new(Some(1), None);
        let first = limiter.acquire().await;
        assert!(tokio::time::timeout(Duration::from_millis(50), limiter.acquire()).await.is_err());
        drop(first);
        assert!(tokio::time::timeout(Duration::from_millis(50), limiter.acquire()).await.is_ok());
    }
}
