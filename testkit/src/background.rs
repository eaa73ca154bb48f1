//! An axum app served on `127.0.0.1` from a thread with its own tokio runtime, so synchronous
//! tests, async tests and other processes can all reach it over real HTTP.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use axum::Router;
use tokio::sync::oneshot;

/// A server running on its own thread, stopped when dropped.
pub struct Background {
    /// Where it listens.
    pub address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Serves `app` on a free local port.
    ///
    /// # Panics
    /// When no local port can be bound or no runtime built: the test cannot go on.
    pub fn serve(app: Router) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("testkit: cannot bind 127.0.0.1:0");
        let address = listener.local_addr().expect("testkit: a bound listener has an address");
        listener.set_nonblocking(true).expect("testkit: cannot make the listener non-blocking");
        let (shutdown, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("testkit: cannot build a tokio runtime");
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => panic!("testkit: cannot use the listener: {error}"),
                };
                // No graceful shutdown: hanging requests would hold it forever. Dropping the
                // runtime cancels every connection.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        });
        Background { address, shutdown: Some(shutdown), thread: Some(thread) }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
