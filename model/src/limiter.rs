//! The per-provider request limiter shared by every agent on a provider.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The window `requests_per_minute` counts request starts in.
const WINDOW: Duration = Duration::from_secs(60);

/// How long to wait before asking a [`SharedWindow`] that failed again.
const SHARED_RETRY: Duration = Duration::from_secs(1);

/// Holds a provider to `max_concurrency` requests in flight and `requests_per_minute` starts
/// in any 60-second window. Waiting is a plain future: dropping it gives up the wait.
#[derive(Debug)]
pub struct Limiter {
    in_flight: Option<Arc<Semaphore>>,
    per_minute: Option<(usize, Window)>,
}

/// Where the starts of the last minute are counted.
#[derive(Debug)]
enum Window {
    /// In this process.
    Here(Mutex<VecDeque<Instant>>),
    /// Outside it, shared with every process that sends requests of the same run.
    Shared { window: Arc<dyn SharedWindow>, provider: String },
}

/// A `requests_per_minute` window kept outside this process, which every process sending
/// requests for the same run consults: the cluster's database (docs/workers.md).
pub trait SharedWindow: Send + Sync + std::fmt::Debug {
    /// Records a request start of `provider` and gives `None` when fewer than `limit` started
    /// in the last minute; otherwise records nothing and gives how long until one may.
    fn start<'a>(&'a self, provider: &'a str, limit: u32) -> SharedStart<'a>;
}

/// What [`SharedWindow::start`] gives: the wait, if any, or why the window could not be read.
pub type SharedStart<'a> = Pin<Box<dyn Future<Output = Result<Option<Duration>, String>> + Send + 'a>>;

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
            per_minute: positive(requests_per_minute)
                .map(|n| (n, Window::Here(Mutex::new(VecDeque::with_capacity(n))))),
        }
    }

    /// This limiter with its `requests_per_minute` counted in `window`, under `provider`.
    pub fn shared(self, window: Arc<dyn SharedWindow>, provider: &str) -> Self {
        let per_minute = self.per_minute.map(|(n, _)| (n, Window::Shared { window, provider: provider.to_owned() }));
        Limiter { per_minute, ..self }
    }

    /// Waits until a request may start, and records its start.
    pub async fn acquire(&self) -> Permit {
        // The concurrency slot first: a start is recorded only when the request really starts.
        let in_flight = match &self.in_flight {
            // The semaphore is never closed, so acquiring fails only if it were.
            Some(semaphore) => Arc::clone(semaphore).acquire_owned().await.ok(),
            None => None,
        };
        match &self.per_minute {
            Some((limit, Window::Here(starts))) => loop {
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
            },
            Some((limit, Window::Shared { window, provider })) => loop {
                // The limit came from a u32.
                match window.start(provider, *limit as u32).await {
                    Ok(None) => break,
                    Ok(Some(wait)) => tokio::time::sleep(wait).await,
                    Err(reason) => {
                        tracing::warn!(provider, %reason, "cannot count the request in the cluster's window; trying again");
                        tokio::time::sleep(SHARED_RETRY).await;
                    }
                }
            },
            None => {}
        }
        Permit { _in_flight: in_flight }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::{Limiter, SharedStart, SharedWindow};

    /// A window that says, for each ask in turn, wait this long, fail, or go.
    #[derive(Debug)]
    struct Scripted {
        answers: Vec<Result<Option<Duration>, String>>,
        asked: AtomicUsize,
    }

    impl SharedWindow for Scripted {
        fn start<'a>(&'a self, provider: &'a str, limit: u32) -> SharedStart<'a> {
            assert_eq!((provider, limit), ("p", 3), "the window is asked for the provider's own limit");
            let n = self.asked.fetch_add(1, Ordering::SeqCst);
            let answer = self.answers.get(n).cloned().unwrap_or(Ok(None));
            Box::pin(async move { answer })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_window_is_asked_until_it_lets_the_request_start() {
        let window = Arc::new(Scripted {
            answers: vec![Ok(Some(Duration::from_secs(7))), Err("the database is gone".into()), Ok(None)],
            asked: AtomicUsize::new(0),
        });
        let limiter = Limiter::new(None, Some(3)).shared(Arc::clone(&window) as Arc<dyn SharedWindow>, "p");
        let start = tokio::time::Instant::now();
        limiter.acquire().await;
        assert_eq!(window.asked.load(Ordering::SeqCst), 3);
        assert_eq!(start.elapsed(), Duration::from_secs(8), "the wait it gave, then a second after the failure");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_window_is_not_asked_without_a_requests_per_minute() {
        let window = Arc::new(Scripted { answers: vec![Err("asked".into())], asked: AtomicUsize::new(0) });
        let limiter = Limiter::new(Some(2), None).shared(Arc::clone(&window) as Arc<dyn SharedWindow>, "p");
        limiter.acquire().await;
        assert_eq!(window.asked.load(Ordering::SeqCst), 0);
    }

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
