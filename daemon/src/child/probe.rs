//! The `server/discover` probe's late answer, kept out of the handshake.
//!
//! rmcp's client probes a child with `server/discover` (MCP 2026-07-28) and,
//! when no answer comes within 10 s, falls back to `initialize` on the same
//! stream. A child that is merely slow (a loaded machine, a cold `uvx`)
//! reads both requests and answers the probe first; rmcp, now waiting for
//! the answer to `initialize`, took that late answer for it and failed the
//! whole start ("conflict initialized response id: expected 1, got 0").
//! This transport wrapper remembers the probe's id and, once `initialize`
//! has been sent in its place, drops the probe's answer when it arrives.
//!
//! A late *success* says the child speaks 2026-07-28. Some such children
//! answer the `initialize` that follows too (rmcp's own servers), some refuse
//! it (the Python SDK's: "connection is serving the 2026-07-28 protocol"). So
//! `initialize` gets [`LATE_INIT_GRACE`] more to be answered; if it is
//! refused or not answered, the stream is ended and [`ModernLate`] is set: the
//! ChildServer starts the child again probing with `server/discover` alone,
//! without rmcp's 10 s fallback, instead of waiting out the start deadline.
//!
//! The wrapper is put around every child transport by the shared handshake (`handshake.rs`).
//! Besides the failed start, the late answer made npx children die of EPIPE after a slow cold
//! start. Starting again with the probe alone is not counted as a crash; rmcp's own servers answer
//! `initialize` and go on.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long a child that answered the probe late has to answer the
/// `initialize` sent in its place.
pub const LATE_INIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// A transport whose abandoned `server/discover` probe's answer never
/// reaches rmcp. See the module docs.
pub struct LateProbeFilter<T> {
    inner: T,
    modern_late: ModernLate,
    /// The id of a `server/discover` sent and not yet answered.
    probe: Option<String>,
    /// Ids of probes given up on (`initialize` was sent after them).
    abandoned: HashSet<String>,
    /// The id of the `initialize` sent, until it is answered.
    initialize: Option<String>,
    /// Set after a late success: when `initialize` must be answered by.
    grace: Option<tokio::time::Instant>,
}

/// Set when a child answered the probe with success after `initialize` was
/// sent instead (see the module docs).
#[derive(Clone, Default)]
pub struct ModernLate(Arc<AtomicBool>);

impl ModernLate {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl<T> LateProbeFilter<T> {
    pub fn new(inner: T, modern_late: ModernLate) -> Self {
        LateProbeFilter {
            inner,
            modern_late,
            probe: None,
            abandoned: HashSet::new(),
            initialize: None,
            grace: None,
        }
    }

    /// Notes what goes out: a probe, or the `initialize` that replaces it.
    fn sent(&mut self, message: &TxJsonRpcMessage<RoleClient>) {
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        match &request.request {
            ClientRequest::DiscoverRequest(_) => self.probe = Some(request.id.to_string()),
            ClientRequest::InitializeRequest(_) => {
                if let Some(id) = self.probe.take() {
                    self.abandoned.insert(id);
                }
                self.initialize = Some(request.id.to_string());
            }
            _ => {}
        }
    }

    /// Whether `message` answers the `initialize` sent (which ends the wait).
    fn answers_initialize(&mut self, message: &RxJsonRpcMessage<RoleClient>) -> bool {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(response.id.to_string()),
            JsonRpcMessage::Error(error) => error.id.as_ref().map(ToString::to_string),
            _ => None,
        };
        let answered = id.is_some() && id == self.initialize;
        if answered {
            self.initialize = None;
        }
        answered
    }

    /// Whether an incoming message is the late answer to an abandoned
    /// probe (dropped); an answered probe is forgotten.
    fn is_late_answer(&mut self, message: &RxJsonRpcMessage<RoleClient>) -> bool {
        let id: Option<&RequestId> = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let Some(id) = id.map(ToString::to_string) else {
            return false;
        };
        if self.probe.as_ref() == Some(&id) {
            self.probe = None;
            return false;
        }
        self.abandoned.remove(&id)
    }
}

impl<T> Transport<RoleClient> for LateProbeFilter<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.sent(&item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = match self.grace {
                None => self.inner.receive().await?,
                Some(by) => match tokio::time::timeout_at(by, self.inner.receive()).await {
                    Ok(message) => message?,
                    Err(_) => {
                        tracing::info!(
                            "the child answered the server/discover probe late and not the initialize sent instead: it speaks 2026-07-28 only; ending this start to probe it again"
                        );
                        self.modern_late.0.store(true, Ordering::Release);
                        return None;
                    }
                },
            };
            if self.grace.is_some() && self.answers_initialize(&message) {
                self.grace = None;
                if matches!(message, JsonRpcMessage::Error(_)) {
                    // Refused (the Python SDK: "connection is serving the
                    // 2026-07-28 protocol"): it speaks the new era only.
                    tracing::info!(
                        "the child answered the server/discover probe late and refused the initialize sent instead: it speaks 2026-07-28 only; ending this start to probe it again"
                    );
                    self.modern_late.0.store(true, Ordering::Release);
                    return None;
                }
            }
            if self.abandoned.is_empty() && self.probe.is_none() {
                return Some(message);
            }
            if self.is_late_answer(&message) {
                if matches!(message, JsonRpcMessage::Response(_)) && self.initialize.is_some() {
                    tracing::info!(
                        "the child answered the server/discover probe after evod had fallen back to initialize: it speaks 2026-07-28; giving initialize {}s more",
                        LATE_INIT_GRACE.as_secs()
                    );
                    self.grace = Some(tokio::time::Instant::now() + LATE_INIT_GRACE);
                    continue;
                }
                tracing::info!(
                    "the child answered the server/discover probe after evod had fallen back to initialize; ignoring that answer"
                );
                continue;
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}
