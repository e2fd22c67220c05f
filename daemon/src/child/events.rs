//! What a connected child tells evo: its notifications (progress, logs,
//! changed lists, updated resources), taken by [`ChildEvents`], rmcp's
//! client handler, and the changes a 2026-07-28 child announces only on a
//! `subscriptions/listen` stream. Changed lists go to the server's actor as
//! [`Relist`]; nothing here knows that actor.

use std::sync::Arc;

use actix::prelude::*;
use rmcp::ClientHandler;
#[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
    ResourceUpdatedNotificationParam, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, Peer, RoleClient};

use super::link::ServerLink;
use crate::VERSION;
use crate::catalog::resources::OfferCaps;
use crate::catalog::{Catalog, ChildLog};
use crate::error_text::readable_error;

/// What a child said changed, and so what is listed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// Its tools (`notifications/tools/list_changed`).
    Tools,
    /// Its resources, templates and prompts (`resources/list_changed`,
    /// `prompts/list_changed`).
    Offers,
}

/// Re-list what the child says changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Relist {
    pub generation: u64,
    pub lists: Lists,
}

/// The rmcp client handler of one child: turns the child's notifications into
/// messages to its ChildServer.
pub struct ChildEvents {
    pub server: String,
    pub generation: u64,
    /// Where the changed lists go: the server's actor.
    pub relist: Recipient<Relist>,
    pub link: Arc<ServerLink>,
    pub catalog: Addr<Catalog>,
}

impl ClientHandler for ChildEvents {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("evo", VERSION),
        )
    }

    /// Progress of a call goes to the session that made it, under the
    /// client's own progress token, and nowhere else.
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        if let Some(route) = self.link.progress_route(&params.progress_token) {
            let mut params = params;
            params.progress_token = route.token;
            let _ = route.session.notify_progress(params).await;
        }
    }

    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.catalog.do_send(ChildLog {
            server: self.server.clone(),
            params,
        });
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its tool list changed; re-listing");
        self.relist.do_send(Relist {
            generation: self.generation,
            lists: Lists::Tools,
        });
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its resource list changed; re-listing");
        self.relist.do_send(Relist {
            generation: self.generation,
            lists: Lists::Offers,
        });
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its prompt list changed; re-listing");
        self.relist.do_send(Relist {
            generation: self.generation,
            lists: Lists::Offers,
        });
    }

    /// A subscribed resource changed: every session that subscribed to it
    /// through evo hears it, and no other.
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.link.resource_updated(params).await;
    }
}

/// A 2026-07-28 child announces tool changes only on a `subscriptions/listen`
/// stream (older ones send a plain notification to [`ChildEvents`]): open one
/// and turn its events into re-listing.
pub fn listen_for_changes(
    peer: Peer<RoleClient>,
    server: String,
    generation: u64,
    relist: Recipient<Relist>,
) {
    let Some(info) = peer.peer_info() else { return };
    let modern = info.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
    let tools = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    let offers = OfferCaps::of(&info.capabilities);
    if !modern || !(tools || offers.resources_changed || offers.prompts_changed) {
        return;
    }
    tokio::spawn(async move {
        let mut filter = SubscriptionFilter::builder();
        if tools {
            filter = filter.tools_list_changed();
        }
        if offers.resources_changed {
            filter = filter.resources_list_changed();
        }
        if offers.prompts_changed {
            filter = filter.prompts_list_changed();
        }
        let filter = filter.build();
        let mut sub = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(server = %server, error = %e, "child refused subscriptions/listen");
                return;
            }
        };
        while let Ok(Some(n)) = sub.next().await {
            match n {
                ServerNotification::ToolListChangedNotification(_) => {
                    tracing::info!(server = %server, "child says its tool list changed; re-listing");
                    relist.do_send(Relist {
                        generation,
                        lists: Lists::Tools,
                    });
                }
                ServerNotification::ResourceListChangedNotification(_)
                | ServerNotification::PromptListChangedNotification(_) => {
                    tracing::info!(server = %server, "child says its resources or prompts changed; re-listing");
                    relist.do_send(Relist {
                        generation,
                        lists: Lists::Offers,
                    });
                }
                _ => {}
            }
        }
    });
}

/// A new connection to the child: evo subscribes again to every resource a
/// session is subscribed to (the old connection's subscriptions are gone).
pub fn resubscribe(peer: Peer<RoleClient>, link: Arc<ServerLink>) {
    let uris = link.subscriptions.uris();
    if uris.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for uri in uris {
            if let Err(e) = link
                .subscriptions
                .resubscribe(&peer, &uri, link.updates())
                .await
            {
                tracing::warn!(server = %link.id, uri = %uri, error = %readable_error(&e), "could not subscribe again after a restart; sessions hear no updates of it");
            }
        }
    });
}
