//! A login offered to the client: a call to a tool of a server in `login
//! required`, on an initialize-era session whose client declared URL-mode
//! elicitation (MCP 2025-11-25 `elicitation: { url: {} }`), sends the
//! server's login page as `elicitation/create` mode `url`. The login is the
//! one `evoctl login` runs (`child::link::OfferLogin`: the login under way, or a
//! new one; same redirect listener, `state`/`iss` checks and token file).
//!
//! The same goes for a name under the prefix of such a server that has
//! listed no tools yet (nothing cached): after the login the name is looked
//! up again in the catalog the server's listing built.
//!
//! What the call answers: once the user accepted, it waits for the login to
//! end, at most the server's `timeout_s` (or the client's cancellation), and
//! then runs on the freshly started server; a login still not done by then
//! gets an `isError` result saying the login was offered and to retry the
//! call after finishing it. When the login succeeds, whenever that is, the
//! client is sent `notifications/elicitation/complete` with the
//! elicitation's id. A declined or cancelled offer, or a client that cannot
//! be asked, answers at once.
//!
//! Only the local owner's sessions (the socket, HTTP without `auth`) are
//! offered a login: a server's tokens serve every session, so an HTTP
//! identity (`token:NAME`, `oauth:SUB`) must not choose whose account they
//! are. The redirect goes to evod's loopback listener, so the browser that
//! completes the login runs on evod's machine.
//!
//! `notifications/elicitation/complete` is sent as a custom notification: rmcp has no type for it.
//! Sessions that are not offered a login (2026-07-28 sessions, clients without URL elicitation,
//! HTTP identities) get the `evoctl login ID` text instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{CustomNotification, ElicitRequestParams, ElicitationAction, ServerNotification};
use rmcp::service::{ElicitationMode, Peer, RequestContext, RoleClient, RoleServer};

use super::approval::ASK_TTL;
use super::server::SessionServer;
use crate::child::link::{ServerLink, ServerState};

/// The method the spec names for a finished URL elicitation.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

impl SessionServer {
    /// The server's peer after a login offered to the client, when the
    /// server needs one and the client can open a URL; else `unavailable`
    /// (the reason the server cannot be called) back, as the answer.
    pub(super) async fn after_login_offer(
        &self,
        server: &ServerLink,
        tool: &str,
        unavailable: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Peer<RoleClient>>, String> {
        let sid = server.id.as_str();
        // The tokens serve every session: only the local owner (who could
        // run `evoctl login`) is offered the login, never an HTTP identity.
        if server.state() != ServerState::LoginRequired
            || self.identity.is_some()
            || ctx.meta.protocol_version().is_some()
            || !ctx
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Url)
        {
            return Err(unavailable);
        }
        let login = server
            .offer_login()
            .await
            .map_err(|e| format!("{unavailable} (the login could not be offered: {e})"))?;
        let elicitation_id = elicitation_id(sid);
        let offer = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "Server '{sid}' needs you to log in (OAuth) before {tool} can run. Open the page to log in; evo keeps the tokens."
            ),
            url: login.url.clone(),
            elicitation_id: elicitation_id.clone(),
        };
        let cancelled = || format!("{tool} cancelled by the client");
        let asked = tokio::select! {
            biased;
            _ = ctx.ct.cancelled() => return Err(cancelled()),
            r = ctx.peer.create_elicitation_with_timeout(offer, Some(ASK_TTL)) => r,
        };
        match asked {
            Ok(r) if r.action == ElicitationAction::Accept => {}
            Ok(r) => {
                return Err(format!(
                    "{tool} not called: server '{sid}' needs a login and the user did not open it ({:?}); call again to be offered it, or a person runs `evoctl login {sid}`",
                    r.action
                ));
            }
            Err(e) => {
                tracing::debug!(server = %sid, error = %e, "the client could not be offered the login");
                return Err(unavailable);
            }
        }
        tracing::info!(server = %sid, elicitation = %elicitation_id, "login offered to a client");
        let peer = ctx.peer.clone();
        let (watch, id) = (login.clone(), sid.to_string());
        tokio::spawn(async move {
            if watch.outcome(&id).await.is_ok() {
                let done = CustomNotification::new(
                    ELICITATION_COMPLETE,
                    Some(serde_json::json!({ "elicitationId": elicitation_id })),
                );
                let _ = peer
                    .send_notification(ServerNotification::CustomNotification(done))
                    .await;
            }
        });
        let wait = server.timeout();
        let outcome = tokio::select! {
            biased;
            _ = ctx.ct.cancelled() => return Err(cancelled()),
            r = tokio::time::timeout(wait, login.outcome(sid)) => r,
        };
        match outcome {
            Err(_) => Err(format!(
                "{tool} not called: server '{sid}' needs a login, which was offered to the user; it was not completed within {}s. Call again once the login in the browser is done (evo sends notifications/elicitation/complete then), or a person runs `evoctl login {sid}`.",
                wait.as_secs()
            )),
            Ok(Err(e)) => Err(format!("{tool} not called: {e}")),
            Ok(Ok(_)) => server
                .peer()
                .await
                .map_err(|e| format!("{tool} not called: the login succeeded, but {e}")),
        }
    }
}

/// An id unique within this evod: the server's id and a counter.
fn elicitation_id(server: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "evo-login-{server}-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
