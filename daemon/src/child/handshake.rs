//! A child's MCP handshake, whatever its transport: what a start brings to it
//! ([`Handshake`]), what it yields ([`Connected`]: the client and every page
//! of the child's lists) and how it fails ([`StartError`]).
//!
//! A child lists its resources, templates and prompts right after its tools, each only if its
//! capabilities say it has them (`list_offers`), and again on `resources/list_changed` or
//! `prompts/list_changed` (`events.rs`; on its listen stream for a 2026-07-28 child). A child whose
//! resources or prompts list fails keeps serving its tools; the failure is logged.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::Tool;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, RunningService};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::AuthRequiredError;

use super::events::ChildEvents;
use super::probe::{LateProbeFilter, ModernLate};
use crate::catalog::resources::{OfferCaps, Offered};
use crate::error_text::readable_error;

/// The rmcp client of a connected child.
pub type Client = RunningService<RoleClient, ChildEvents>;
/// A start under way: the connection, handshake and listing of one run.
pub type Connecting = Pin<Box<dyn Future<Output = Result<Connected, StartError>>>>;

/// A child that answered its handshake, with every page of its lists.
pub type Connected = (Client, Vec<Tool>, Offered);

/// Why a start did not connect.
#[derive(Debug)]
pub enum StartError {
    /// The server answered 401: its `WWW-Authenticate` challenge.
    Unauthorized {
        challenge: String,
    },
    Other(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Unauthorized { .. } => f.write_str("answered 401 Unauthorized"),
            StartError::Other(e) => f.write_str(e),
        }
    }
}

impl From<String> for StartError {
    fn from(e: String) -> Self {
        StartError::Other(e)
    }
}

/// The 401 challenge somewhere in an rmcp error's chain, if the failure was
/// the server asking for authorization.
pub fn challenge_of(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(a) = err.downcast_ref::<AuthRequiredError>() {
            return Some(a.www_authenticate_header.clone());
        }
        cur = err.source();
    }
    None
}

/// What a start brings to its handshake: the handler of the child's
/// notifications, how to open the session (probe `server/discover`, fall
/// back to `initialize`, or either alone), and the flag a late answer to the
/// probe sets.
pub struct Handshake {
    pub handler: ChildEvents,
    pub lifecycle: ClientLifecycleMode,
    pub modern_late: ModernLate,
}

impl Handshake {
    /// Runs the MCP handshake on `transport` and lists every page of tools,
    /// then of resources, templates and prompts as the child supports them.
    pub async fn over<T, E>(self, transport: T) -> Result<Connected, StartError>
    where
        T: Transport<RoleClient, Error = E> + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let Handshake {
            handler,
            lifecycle,
            modern_late,
        } = self;
        let server = handler.server.clone();
        let client = handler
            .serve_with_lifecycle(LateProbeFilter::new(transport, modern_late), lifecycle)
            .await
            .map_err(|e| match challenge_of(&e) {
                Some(challenge) => StartError::Unauthorized { challenge },
                None => StartError::Other(format!("MCP handshake failed: {}", readable_error(&e))),
            })?;
        let tools = client
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {}", readable_error(&e)))?;
        let offered = list_offers(client.peer(), &server).await;
        Ok((client, tools, offered))
    }
}

/// Every page of the child's resources, templates and prompts, each asked
/// only when the child says it has them. A list that fails is logged and
/// left empty: the child's tools still serve.
pub async fn list_offers(peer: &Peer<RoleClient>, server: &str) -> Offered {
    let caps = peer
        .peer_info()
        .map(|info| OfferCaps::of(&info.capabilities))
        .unwrap_or_default();
    let mut offered = Offered {
        caps,
        ..Default::default()
    };
    if caps.resources {
        match peer.list_all_resources().await {
            Ok(r) => offered.resources = r,
            Err(e) => {
                tracing::warn!(server = %server, error = %readable_error(&e), "resources/list failed; listing none")
            }
        }
        match peer.list_all_resource_templates().await {
            Ok(t) => offered.templates = t,
            Err(e) => {
                tracing::debug!(server = %server, error = %readable_error(&e), "resources/templates/list failed; listing none")
            }
        }
    }
    if caps.prompts {
        match peer.list_all_prompts().await {
            Ok(p) => offered.prompts = p,
            Err(e) => {
                tracing::warn!(server = %server, error = %readable_error(&e), "prompts/list failed; listing none")
            }
        }
    }
    offered
}
