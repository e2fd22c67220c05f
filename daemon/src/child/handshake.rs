//! A child's MCP handshake, whatever its transport: what a start brings to it
//! ([`Handshake`]), what it yields ([`Connected`]: the client and every page
//! of the child's lists) and how it fails ([`StartError`]).
//!
//! A child lists its resources, templates and prompts right after its tools, each only if its
//! capabilities say it has them (`list_offers`), and again on `resources/list_changed` or
//! `prompts/list_changed` (`events.rs`; on its listen stream for a 2026-07-28 child). A child whose
//! resources or prompts list fails keeps serving its tools; the failure is logged.
//!
//! A tools list rmcp cannot read (one tool whose schema is not an object, as published servers
//! send) is fixed, not fatal, on every transport that allows it: a stdio child's answer line is
//! fixed before rmcp reads it (`io.rs`); a Streamable HTTP child's list is asked again on its
//! direct path as raw JSON and fixed the same way ([`list_tools`]). A legacy SSE child has no
//! direct path: its list fails as rmcp read it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{ListToolsResult, Tool};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, RunningService};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::AuthRequiredError;
use serde_json::{Value, json};

use super::direct::{Direct, DirectCalls};
use super::events::ChildEvents;
use super::io::repair_tools;
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
    /// A Streamable HTTP child's direct path, for a list rmcp cannot read.
    pub direct: Option<Arc<DirectCalls>>,
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
            direct,
        } = self;
        let server = handler.server.clone();
        let client = handler
            .serve_with_lifecycle(LateProbeFilter::new(transport, modern_late), lifecycle)
            .await
            .map_err(|e| match challenge_of(&e) {
                Some(challenge) => StartError::Unauthorized { challenge },
                None => StartError::Other(format!("MCP handshake failed: {}", readable_error(&e))),
            })?;
        let tools = list_tools(client.peer(), direct.as_ref(), &server).await?;
        let offered = list_offers(client.peer(), &server).await;
        Ok((client, tools, offered))
    }
}

/// Most pages a raw tools list is followed through (a child whose cursor
/// never ends is cut off there).
const MAX_PAGES: usize = 1000;

/// Every page of the child's tools. rmcp reads the list; one it cannot read
/// is asked again on `direct` (a Streamable HTTP child's) as raw JSON, each
/// bad tool fixed with a warning naming it (see the module docs).
pub async fn list_tools(
    peer: &Peer<RoleClient>,
    direct: Option<&Arc<DirectCalls>>,
    server: &str,
) -> Result<Vec<Tool>, String> {
    let failed = match peer.list_all_tools().await {
        Ok(tools) => return Ok(tools),
        Err(e) => format!("tools/list failed: {}", readable_error(&e)),
    };
    let Some(direct) = direct.filter(|d| d.is_http()) else {
        return Err(failed);
    };
    if let Some(info) = peer.peer_info() {
        direct.negotiated(info.protocol_version.as_str());
    }
    tracing::info!(
        server,
        "{failed}; asking for the list again to fix what rmcp could not read"
    );
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let Ok(pending) = direct.request("tools/list", params).await else {
            return Err(failed);
        };
        let mut page = match pending.answer::<Value>("tools/list").await {
            Direct::Result(page, _) => page,
            Direct::Error(e) => return Err(format!("{failed}; asked again: {}", e.message)),
            Direct::Gone => return Err(failed),
        };
        if let Some(listed) = page.get_mut("tools").and_then(Value::as_array_mut) {
            repair_tools(server, listed);
        }
        let page: ListToolsResult = serde_json::from_value(page)
            .map_err(|e| format!("{failed}; asked again and fixed, still not a tool list: {e}"))?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!(
        "{failed}; asked again: more than {MAX_PAGES} pages"
    ))
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
