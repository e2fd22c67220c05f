//! A session's first answers on a fresh start. Right after evod starts (a
//! shim autostarted it) with nothing cached, the configured servers are still
//! starting: an `initialize` answered then would advertise no resources and
//! list no tools, and a client that honours what it was told never asks
//! again. So `initialize` and the first lists wait for servers that are
//! starting and have said nothing yet, up to `discovery.startup_wait_ms` from
//! the session's start; with a cache (their lists known) nothing waits.
//!
//! Waiting is on events, never on a timer loop: a newer snapshot
//! ([`Snapshot::superseded`]) or the servers waited for moving past starting
//! ([`ServerLink::past_starting`]), whichever comes first.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::SessionServer;
use crate::catalog::snapshot::Snapshot;
use crate::child::link::ServerLink;

/// Resolves when `snapshot` is superseded, when every one of `starting` is
/// past starting, at `until`, or when `cancelled` fires, whichever is first.
/// With nothing in `starting` only the other three end it.
pub(super) async fn next_change(
    snapshot: &Snapshot,
    starting: &[Arc<ServerLink>],
    until: Instant,
    cancelled: &CancellationToken,
) {
    let settled = async {
        if starting.is_empty() {
            std::future::pending::<()>().await;
        }
        futures::future::join_all(starting.iter().map(|l| l.past_starting())).await;
    };
    tokio::select! {
        () = snapshot.superseded() => {}
        () = settled => {}
        () = tokio::time::sleep_until(until.into()) => {}
        () = cancelled.cancelled() => {}
    }
}

impl SessionServer {
    /// Waits, up to the session's startup bound, until no configured server
    /// that has said nothing yet is starting (see the module docs). Returns
    /// at once when none is, as on every request past the first answers.
    pub(super) async fn first_answers(&self, cancelled: &CancellationToken) {
        loop {
            let snapshot = self.snapshot.load_full();
            if !snapshot.first_answers_pending()
                || Instant::now() >= self.first_answers_by
                || cancelled.is_cancelled()
            {
                return;
            }
            let starting: Vec<Arc<ServerLink>> = snapshot.starting_unheard().cloned().collect();
            next_change(&snapshot, &starting, self.first_answers_by, cancelled).await;
        }
    }
}

/// The note the instructions end with when servers were still starting as
/// they were written: which, and that their tools come with list_changed.
pub(super) fn still_starting_note(snapshot: &Snapshot) -> Option<String> {
    let ids: Vec<&str> = snapshot.starting_unheard().map(|l| l.id.as_str()).collect();
    if ids.is_empty() {
        return None;
    }
    Some(format!(
        "\n\nServers still starting (their tools, resources and prompts are not listed above yet; list_changed announces them): {}. A call by exact name to one of them waits for it.",
        ids.join(", ")
    ))
}
