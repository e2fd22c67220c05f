//! Resource subscriptions of one server, shared by its sessions: which
//! sessions subscribed to which URI through evo, and the one subscription
//! evo holds at the child per URI (`resources/subscribe` before 2026-07-28,
//! a `subscriptions/listen` stream on it). The first session to subscribe
//! to a URI makes evo subscribe at the child, the last to leave (or close)
//! ends it; `notifications/resources/updated` reaches exactly the sessions
//! subscribed to its URI.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::{ProtocolVersion, ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, RoleServer, SubscriptionSink};

/// Where one session hears about an updated resource.
#[derive(Clone)]
pub enum Listener {
    /// An initialize-era session: a plain notification to its peer.
    Peer(Peer<RoleServer>),
    /// A 2026-07-28 session: its `subscriptions/listen` stream.
    Sink(SubscriptionSink),
}

/// Evo's own subscription at the child for one URI.
enum AtChild {
    /// `resources/subscribe` was sent (ended with `resources/unsubscribe`).
    Legacy,
    /// A `subscriptions/listen` stream, ended by aborting its task.
    Stream(tokio::task::AbortHandle),
}

#[derive(Default)]
pub struct Subscriptions {
    /// URI → (session id, listener).
    routes: Mutex<HashMap<String, Vec<(String, Listener)>>>,
    at_child: Mutex<HashMap<String, AtChild>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl Subscriptions {
    /// Session `session` subscribes to `uri`; evo subscribes at the child
    /// when it is the first. An error (the child refused) leaves nothing
    /// behind.
    pub async fn subscribe(
        &self,
        peer: &Peer<RoleClient>,
        uri: &str,
        session: &str,
        listener: Listener,
        updates: impl Fn(ResourceUpdatedNotificationParam) + Send + 'static,
    ) -> Result<(), rmcp::ServiceError> {
        let first = {
            let mut routes = lock(&self.routes);
            let list = routes.entry(uri.to_string()).or_default();
            list.retain(|(s, _)| s != session);
            list.push((session.to_string(), listener));
            list.len() == 1
        };
        if first && let Err(e) = self.at_child(peer, uri, updates).await {
            self.forget(uri, session);
            return Err(e);
        }
        Ok(())
    }

    /// Subscribes at the child for `uri`.
    async fn at_child(
        &self,
        peer: &Peer<RoleClient>,
        uri: &str,
        updates: impl Fn(ResourceUpdatedNotificationParam) + Send + 'static,
    ) -> Result<(), rmcp::ServiceError> {
        let held = if modern(peer) {
            let mut filter = SubscriptionFilter::new();
            filter.resource_subscriptions = Some(vec![uri.to_string()]);
            let mut stream = peer.listen(filter).await?;
            let task = tokio::spawn(async move {
                while let Ok(Some(n)) = stream.next().await {
                    if let rmcp::model::ServerNotification::ResourceUpdatedNotification(u) = n {
                        updates(u.params);
                    }
                }
            });
            AtChild::Stream(task.abort_handle())
        } else {
            #[allow(deprecated)] // legacy-only, which is the case here
            peer.subscribe(rmcp::model::SubscribeRequestParams::new(uri))
                .await?;
            AtChild::Legacy
        };
        lock(&self.at_child).insert(uri.to_string(), held);
        Ok(())
    }

    /// Drops `session`'s route to `uri`; true when no session is left on it.
    fn forget(&self, uri: &str, session: &str) -> bool {
        let mut routes = lock(&self.routes);
        let Some(list) = routes.get_mut(uri) else {
            return false;
        };
        let before = list.len();
        list.retain(|(s, _)| s != session);
        let left_empty = list.is_empty() && before > 0;
        if list.is_empty() {
            routes.remove(uri);
        }
        left_empty
    }

    /// Session `session` unsubscribes from `uri`; evo unsubscribes at the
    /// child when it was the last.
    pub async fn unsubscribe(&self, peer: Option<&Peer<RoleClient>>, uri: &str, session: &str) {
        if !self.forget(uri, session) {
            return;
        }
        let held = lock(&self.at_child).remove(uri);
        match (held, peer) {
            (Some(AtChild::Stream(task)), _) => task.abort(),
            (Some(AtChild::Legacy), Some(peer)) => {
                #[allow(deprecated)] // legacy-only, which is the case here
                let _ = peer
                    .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(uri))
                    .await;
            }
            _ => {}
        }
    }

    /// The URIs `session` is subscribed to.
    pub fn of_session(&self, session: &str) -> Vec<String> {
        lock(&self.routes)
            .iter()
            .filter(|(_, l)| l.iter().any(|(s, _)| s == session))
            .map(|(uri, _)| uri.clone())
            .collect()
    }

    /// Tells every session subscribed to the updated URI.
    pub async fn updated(&self, params: ResourceUpdatedNotificationParam) {
        let listeners: Vec<Listener> = lock(&self.routes)
            .get(&params.uri)
            .map(|l| l.iter().map(|(_, l)| l.clone()).collect())
            .unwrap_or_default();
        for l in listeners {
            let _ = match l {
                Listener::Peer(p) => p.notify_resource_updated(params.clone()).await.is_ok(),
                Listener::Sink(s) => s.notify_resource_updated(params.uri.clone()).await.is_ok(),
            };
        }
    }

    /// A new connection to the child (a restart): evo's subscriptions at
    /// the old one are gone; subscribe again for every URI a session holds.
    pub fn uris(&self) -> Vec<String> {
        lock(&self.at_child).clear();
        lock(&self.routes).keys().cloned().collect()
    }

    /// Records evo's subscription at a new connection (see [`Self::uris`]).
    pub async fn resubscribe(
        &self,
        peer: &Peer<RoleClient>,
        uri: &str,
        updates: impl Fn(ResourceUpdatedNotificationParam) + Send + 'static,
    ) -> Result<(), rmcp::ServiceError> {
        self.at_child(peer, uri, updates).await
    }
}
