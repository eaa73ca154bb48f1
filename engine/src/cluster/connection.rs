//! A connection to the queue's database whose notifications (`LISTEN`) come out on a channel,
//! and the lease timings every party uses.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::ClusterError;

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

/// Connects to `url` and listens on `channels`; notifications arrive on the receiver, which
/// closes when the connection is lost.
pub(crate) async fn connect(
    url: &str,
    channels: &[&str],
) -> Result<(Client, mpsc::UnboundedReceiver<tokio_postgres::Notification>), ClusterError> {
    let (client, mut connection) =
        tokio_postgres::connect(url, NoTls).await.map_err(|error| ClusterError::Connect(error.to_string()))?;
    let (sender, receiver) = mpsc::unbounded_channel();
    // Polling for messages is also what drives the connection's queries.
    tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(note) = message {
                // Nobody listening any more is no reason to stop serving the queries.
                let _ = sender.send(note);
            }
        }
    });
    for channel in channels {
        client.batch_execute(&format!("LISTEN {channel}")).await?;
    }
    Ok((client, receiver))
}
