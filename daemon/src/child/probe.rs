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
//! A late *success* says the child speaks 2026-07-28, and such a child may
//! never answer the `initialize` that follows (seen: the Python SDK's
//! servers). Waiting would only run out the start deadline, so the stream
//! is ended at once and [`ModernLate`] is set: the ChildServer starts the
//! child again probing with `server/discover` alone, without rmcp's 10 s
//! fallback.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// A transport whose abandoned `server/discover` probe's answer never
/// reaches rmcp. See the module docs.
pub struct LateProbeFilter<T> {
    inner: T,
    modern_late: ModernLate,
    /// The id of a `server/discover` sent and not yet answered.
    probe: Option<String>,
    /// Ids of probes given up on (`initialize` was sent after them).
    abandoned: HashSet<String>,
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
            }
            _ => {}
        }
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
            let message = self.inner.receive().await?;
            if self.abandoned.is_empty() && self.probe.is_none() {
                return Some(message);
            }
            if self.is_late_answer(&message) {
                if matches!(message, JsonRpcMessage::Response(_)) {
                    tracing::info!(
                        "the child answered the server/discover probe after evod had fallen back to initialize: it speaks 2026-07-28; ending this start to probe it again"
                    );
                    self.modern_late.0.store(true, Ordering::Release);
                    return None;
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
