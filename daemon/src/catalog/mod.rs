//! The Catalog actor: merges every server's tools into one index under exposed
//! names, applies the collision policy, and publishes immutable [`Snapshot`]s
//! that sessions read through an `ArcSwap` without a round trip.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use arc_swap::ArcSwap;
use rmcp::model::Tool;

use crate::config::ServerSpec;

pub mod snapshot;

use crate::child::link::ServerLink;
use snapshot::{ServerTools, Snapshot, ToolEntry, ToolSource, entries_for};

/// The catalog's record of one configured server.
struct ServerSlot {
    spec: Arc<ServerSpec>,
    link: Arc<ServerLink>,
    /// The last good tool list.
    tools: Vec<Tool>,
    /// `tools` under exposed names; rebuilt when the tools or spec change.
    entries: Vec<Arc<ToolEntry>>,
    source: ToolSource,
    live: Option<usize>,
    cached: Option<usize>,
    fetched_at: Option<SystemTime>,
}

/// The Catalog actor. See the module docs.
pub struct Catalog {
    slots: Vec<ServerSlot>,
    discovery_hot: Vec<String>,
    published: Arc<ArcSwap<Snapshot>>,
    version: u64,
    on_change: Vec<Recipient<CatalogChanged>>,
    /// Where children's log messages go (the Supervisor, to sessions).
    logs: Option<Recipient<ChildLog>>,
    persist: Option<Recipient<crate::refresher::Persist>>,
    /// Discoveries waiting for the next publish; answered once it is out.
    acks: Vec<tokio::sync::oneshot::Sender<()>>,
    publish_scheduled: bool,
    permissions: Arc<crate::permissions::Permissions>,
}

impl Catalog {
    pub fn new(published: Arc<ArcSwap<Snapshot>>) -> Catalog {
        Catalog {
            slots: Vec::new(),
            discovery_hot: Vec::new(),
            published,
            version: 0,
            on_change: Vec::new(),
            logs: None,
            persist: None,
            acks: Vec::new(),
            publish_scheduled: false,
            permissions: Default::default(),
        }
    }

    /// Publishes soon, coalescing bursts (many children coming up at once)
    /// into one snapshot build.
    fn publish_soon(&mut self, ctx: &mut Context<Self>) {
        if !self.publish_scheduled {
            self.publish_scheduled = true;
            ctx.run_later(PUBLISH_COALESCE, |act, _| act.publish());
        }
    }

    pub fn with_persistence(mut self, to: Recipient<crate::refresher::Persist>) -> Catalog {
        self.persist = Some(to);
        self
    }

    /// Hands every server's last good live list to the Refresher; what is
    /// handed over is what `evoctl status` reports as cached.
    fn persist(&mut self) {
        let Some(to) = &self.persist else { return };
        for slot in self.slots.iter_mut().filter(|s| !s.tools.is_empty()) {
            slot.cached = Some(slot.tools.len());
        }
        let servers = self
            .slots
            .iter()
            .filter(|s| !s.tools.is_empty())
            .map(|s| crate::cache::CachedServer {
                id: s.spec.id.clone(),
                config_hash: s.spec.hash.to_string(),
                fetched_at: s.fetched_at.map_or(0, crate::cache::unix_secs),
                capabilities: s.spec.capabilities.iter().cloned().collect(),
                tools: s.tools.clone(),
            })
            .collect();
        to.do_send(crate::refresher::Persist(servers));
    }

    fn publish(&mut self) {
        self.publish_scheduled = false;
        self.version += 1;
        let servers: Vec<ServerTools<'_>> = self
            .slots
            .iter()
            .map(|s| ServerTools {
                spec: &s.spec,
                link: &s.link,
                entries: &s.entries,
            })
            .collect();
        let snapshot = Arc::new(Snapshot::build(self.version, &servers, &self.permissions));
        let before = self.published.load();
        for d in &snapshot.duplicates {
            if !before.duplicates.contains(d) {
                tracing::warn!(tool = %d.name, kept = %d.kept, skipped = %d.skipped.join(", "), "tool name collision: the first registration in config order wins");
            }
        }
        self.published.store(snapshot.clone());
        prebuild_search_index(self.published.clone(), snapshot.version);
        for r in &self.on_change {
            r.do_send(CatalogChanged {
                snapshot: snapshot.clone(),
            });
        }
        for ack in self.acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

impl Actor for Catalog {
    type Context = Context<Self>;
}

/// Builds the search index of snapshot `version` on a blocking thread once
/// it has stood for a moment (bursts of publishes at start-up build none), so
/// the first `discover_tools` does not pay for it on the sessions' thread.
fn prebuild_search_index(published: Arc<ArcSwap<Snapshot>>, version: u64) {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let current = published.load_full();
        if current.version == version {
            let _ = tokio::task::spawn_blocking(move || {
                let _ = &*current.search;
            })
            .await;
        }
    });
}

/// How long discoveries are gathered into one snapshot build.
const PUBLISH_COALESCE: Duration = Duration::from_millis(10);

/// Sent to subscribers after a new snapshot is published.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct CatalogChanged {
    pub snapshot: Arc<Snapshot>,
}

/// Subscribe to [`CatalogChanged`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe(pub Recipient<CatalogChanged>);

impl Handler<Subscribe> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.on_change.push(msg.0);
    }
}

/// A log message (`notifications/message`) a child sent, relayed by the
/// Catalog to whoever subscribed with [`SubscribeLogs`].
#[derive(Message, Clone)]
#[rtype(result = "()")]
#[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
pub struct ChildLog {
    pub server: String,
    pub params: rmcp::model::LoggingMessageNotificationParam,
}

/// Subscribe to [`ChildLog`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribeLogs(pub Recipient<ChildLog>);

impl Handler<SubscribeLogs> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: SubscribeLogs, _: &mut Context<Self>) {
        self.logs = Some(msg.0);
    }
}

impl Handler<ChildLog> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: ChildLog, _: &mut Context<Self>) {
        if let Some(to) = &self.logs {
            to.do_send(msg);
        }
    }
}

/// The configured servers, in config order (from the Supervisor). Tools of a
/// server that stays (same id and config hash) are kept.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetServers {
    pub servers: Vec<(Arc<ServerSpec>, Arc<ServerLink>)>,
    pub discovery_hot: Vec<String>,
    /// Tools from the cache file for servers whose config hash matched.
    pub cached: HashMap<String, CachedTools>,
    /// Renamed servers, new id -> old id: their tools carry over under the
    /// new prefix until the child re-lists them.
    pub renamed: HashMap<String, String>,
}

/// A server's tool list as the cache file had it.
pub struct CachedTools {
    pub tools: Vec<Tool>,
    pub fetched_at: SystemTime,
}

impl Handler<SetServers> for Catalog {
    type Result = ();
    fn handle(&mut self, mut msg: SetServers, _: &mut Context<Self>) {
        let mut old: HashMap<String, ServerSlot> = self
            .slots
            .drain(..)
            .map(|s| (s.spec.id.clone(), s))
            .collect();
        for (new_id, old_id) in &msg.renamed {
            if let Some(prev) = old.remove(old_id) {
                msg.cached.insert(
                    new_id.clone(),
                    CachedTools {
                        tools: prev.tools,
                        fetched_at: prev.fetched_at.unwrap_or_else(SystemTime::now),
                    },
                );
            }
        }
        self.slots = msg
            .servers
            .into_iter()
            .map(|(spec, link)| match old.remove(&spec.id) {
                Some(prev) if prev.spec.hash == spec.hash => {
                    let unchanged = *prev.spec == *spec
                        && Arc::ptr_eq(&prev.link, &link)
                        && self.discovery_hot == msg.discovery_hot;
                    let entries = if unchanged {
                        prev.entries
                    } else {
                        entries_for(&spec, &link, &prev.tools, &msg.discovery_hot)
                    };
                    ServerSlot {
                        spec,
                        link,
                        entries,
                        ..prev
                    }
                }
                _ => match msg.cached.remove(&spec.id) {
                    Some(c) => ServerSlot {
                        entries: entries_for(&spec, &link, &c.tools, &msg.discovery_hot),
                        spec,
                        link,
                        cached: Some(c.tools.len()),
                        tools: c.tools,
                        source: ToolSource::Cache,
                        live: None,
                        fetched_at: Some(c.fetched_at),
                    },
                    None => ServerSlot {
                        spec,
                        link,
                        tools: Vec::new(),
                        entries: Vec::new(),
                        source: ToolSource::None,
                        live: None,
                        cached: None,
                        fetched_at: None,
                    },
                },
            })
            .collect();
        self.discovery_hot = msg.discovery_hot;
        self.publish();
    }
}

/// New permissions (loaded by the Supervisor): republish.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetPermissions(pub Arc<crate::permissions::Permissions>);

impl Handler<SetPermissions> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: SetPermissions, _: &mut Context<Self>) {
        self.permissions = msg.0;
        self.publish();
    }
}

/// A server's tools, discovered live from its child.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ToolsDiscovered {
    pub server: String,
    pub tools: Vec<Tool>,
}

impl Handler<ToolsDiscovered> for Catalog {
    /// Answers once the tools are in a published snapshot.
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: ToolsDiscovered, ctx: &mut Context<Self>) -> Self::Result {
        let done = || -> ResponseFuture<()> { Box::pin(async {}) };
        let Some(slot) = self.slots.iter_mut().find(|s| s.spec.id == msg.server) else {
            return done();
        };
        slot.live = Some(msg.tools.len());
        slot.fetched_at = Some(SystemTime::now());
        if msg.tools.is_empty() && !slot.tools.is_empty() {
            tracing::warn!(server = %msg.server, kept = slot.tools.len(), "child listed no tools; keeping the last good list");
            return done();
        }
        if slot.tools == msg.tools {
            if slot.source != ToolSource::Live {
                slot.source = ToolSource::Live;
                self.persist();
            }
            return done();
        }
        slot.entries = entries_for(&slot.spec, &slot.link, &msg.tools, &self.discovery_hot);
        slot.tools = msg.tools;
        slot.source = ToolSource::Live;
        self.persist();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.acks.push(tx);
        self.publish_soon(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

/// What the catalog knows of each server, for `evoctl status`.
#[derive(Debug, Clone)]
pub struct ServerCatalogInfo {
    pub id: String,
    pub tools: usize,
    pub source: ToolSource,
    pub live: Option<usize>,
    pub cached: Option<usize>,
    pub fetched_at: Option<SystemTime>,
}

#[derive(Message)]
#[rtype(result = "Vec<ServerCatalogInfo>")]
pub struct CatalogStatus;

impl Handler<CatalogStatus> for Catalog {
    type Result = MessageResult<CatalogStatus>;
    fn handle(&mut self, _: CatalogStatus, _: &mut Context<Self>) -> Self::Result {
        let snapshot = self.published.load();
        MessageResult(
            self.slots
                .iter()
                .map(|s| ServerCatalogInfo {
                    id: s.spec.id.clone(),
                    tools: snapshot
                        .tools
                        .iter()
                        .filter(|t| t.server.id == s.spec.id)
                        .count(),
                    source: s.source,
                    live: s.live,
                    cached: s.cached,
                    fetched_at: s.fetched_at,
                })
                .collect(),
        )
    }
}
