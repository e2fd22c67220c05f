//! The daemon's one shutdown mechanism. `main` creates a [`StopSignal`] and
//! hands it to the Supervisor (which fires it) and to the control socket
//! (whose sessions end when it fires); a session is tracked from the moment
//! it is served until it has said goodbye, so stopping can wait for them.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

/// Fired once when evod stops; cheap to clone, every clone sees the same
/// signal and the same set of tracked sessions.
#[derive(Clone, Default)]
pub struct StopSignal {
    token: CancellationToken,
    sessions: TaskTracker,
}

impl StopSignal {
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Tells everything that watches the signal to stop.
    pub fn fire(&self) {
        self.token.cancel();
    }

    /// Resolves once [`fire`](Self::fire) has been called.
    pub fn fired(&self) -> WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// Runs a session on the tokio runtime, counted until it has ended.
    pub fn spawn_session<F>(&self, session: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.sessions.spawn(session);
    }

    /// After [`fire`](Self::fire): waits until every tracked session has
    /// ended (and said goodbye), or `within` has passed.
    pub async fn sessions_ended(&self, within: Duration) {
        self.sessions.close();
        let _ = tokio::time::timeout(within, self.sessions.wait()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_sessions_that_end_when_fired() {
        let stop = StopSignal::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let watcher = stop.clone();
        stop.spawn_session(async move {
            watcher.fired().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(());
        });
        stop.fire();
        stop.sessions_ended(Duration::from_secs(5)).await;
        assert!(
            rx.await.is_ok(),
            "the session ran to its end before stop returned"
        );
    }

    #[tokio::test]
    async fn gives_up_on_a_session_that_never_ends() {
        let stop = StopSignal::new();
        stop.spawn_session(std::future::pending());
        stop.fire();
        let started = tokio::time::Instant::now();
        stop.sessions_ended(Duration::from_millis(50)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
