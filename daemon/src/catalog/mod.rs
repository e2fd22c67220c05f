//! The Catalog actor: merges every server's tools into one index under exposed
//! names, applies the collision policy, and publishes immutable [`Snapshot`]s
//! that sessions read through an `ArcSwap` without a round trip.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use arc_swap::ArcSwap;
use rmcp::model::Tool;

use crate::config::{IntegrityMode, ServerSpec};
use crate::policy::integrity::{Event, PinBook};

pub mod cache;
mod entry;
pub mod refresher;
pub use shared_pins::SharedPins;
pub mod resources;
mod shared_pins;
pub mod snapshot;
#[cfg(test)]
mod tests;

use crate::catalog::cache::CachedServer;
use crate::catalog::refresher::Persist;
use crate::catalog::refresher::PersistPins;
use crate::catalog::resources::OfferKind;
use crate::catalog::resources::Offered;
use crate::catalog::resources::QuarantinedOffers;
use crate::child::link::ServerLink;
use crate::names;
use crate::policy::integrity;
use crate::policy::integrity::Change;
use crate::policy::permissions::Permissions;
use crate::policy::profiles::ProfileBook;
use crate::store::Shared;
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
    /// Tools whose definition changed since pinned (upstream name → the
    /// fields that changed), as the pins had them after the last list.
    changed: BTreeMap<String, Vec<String>>,
    /// Its resources, templates and prompts (live, cached, or none yet).
    offered: Offered,
    /// Offers whose definition changed since pinned (pin key → the fields
    /// that changed).
    held_offers: QuarantinedOffers,
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
    persist: Option<Recipient<Persist>>,
    /// Discoveries waiting for the next publish; answered once it is out.
    acks: Vec<tokio::sync::oneshot::Sender<()>>,
    publish_scheduled: bool,
    permissions: Arc<Permissions>,
    /// Profiles as the config and a person's changes define them; resolved
    /// into every snapshot.
    profiles: Arc<ProfileBook>,
    /// Each server's tool pins; checked when lists arrive, never per call.
    pins: PinBook,
    integrity: IntegrityMode,
    persist_pins: Option<Recipient<PersistPins>>,
    /// How many tool definitions have been handed to the pins to hash: the
    /// work a list costs, which tests read to see that a list that did not
    /// change is not hashed again.
    tool_definitions_hashed: u64,
    /// The Supervisor has said which servers there are: until then nothing
    /// is published (a catalog without its servers would answer "no such
    /// tool" for names a cached list is about to bring, as when the
    /// cache comes from the shared store).
    servers_set: bool,
    /// With Redis: where the pins are shared with the other instances.
    shared: Option<Arc<Shared>>,
}

/// Nothing is held: what servers' quarantine lists are under `warn`/`off`.
static NONE_HELD: BTreeMap<String, Vec<String>> = BTreeMap::new();

/// Which of a server's lists [`Catalog::check_integrity`] checks: those that
/// arrived changed (a config hash change or a new mode: both).
#[derive(Debug, Clone, Copy)]
struct Lists {
    tools: bool,
    offers: bool,
}

impl Lists {
    const BOTH: Lists = Lists {
        tools: true,
        offers: true,
    };
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
            servers_set: false,
            permissions: Default::default(),
            profiles: Default::default(),
            pins: PinBook::default(),
            integrity: IntegrityMode::default(),
            persist_pins: None,
            tool_definitions_hashed: 0,
            shared: None,
        }
    }

    /// The pins read from the cache directory, and where changes go.
    pub fn with_pins(mut self, pins: PinBook, to: Recipient<PersistPins>) -> Catalog {
        self.pins = pins;
        self.persist_pins = Some(to);
        self
    }

    /// Checks slot `i`'s tools and/or its prompts, resources and templates
    /// (as `lists` says) against their pins (pinning what is new), logs what
    /// that found, and records what changed. Runs when a list arrives (from
    /// the child or the cache); its cost is a hash per item checked, on the
    /// catalog's thread, so only the lists that changed are checked; the
    /// same lists again change nothing.
    fn check_integrity(&mut self, i: usize, lists: Lists) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        if self.integrity == IntegrityMode::Off {
            slot.changed.clear();
            slot.held_offers.clear();
            return;
        }
        let id = slot.spec.id.clone();
        let hash = slot.spec.hash.to_string();
        let now = crate::catalog::cache::unix_secs(SystemTime::now());
        let mut tool_events = Vec::new();
        if lists.tools {
            self.tool_definitions_hashed += slot.tools.len() as u64;
            tool_events = self.pins.observe(&id, &hash, &slot.tools, now);
        }
        let mut offer_events = Vec::new();
        if lists.offers {
            let offered = integrity::offer_definitions(&slot.offered);
            offer_events = self.pins.observe_offers(&id, &hash, offered, now);
        }
        let (spec, prefix) = (&slot.spec, &slot.spec.prefix);
        for event in &tool_events {
            log_integrity_event(&id, event, self.integrity, "tool", &|tool| {
                spec.exposed_name(tool)
            });
        }
        for event in &offer_events {
            log_integrity_event(&id, event, self.integrity, "offer", &|key| {
                offer_shown(prefix, key)
            });
        }
        Self::record_changes(&self.pins, slot);
        if !tool_events.is_empty() || !offer_events.is_empty() {
            self.save_pins(&id);
        }
    }

    /// What `slot`'s pins hold back, as the snapshot build reads it.
    fn record_changes(pins: &PinBook, slot: &mut ServerSlot) {
        let id = &slot.spec.id;
        let fields = |(key, c): (&str, &Change)| (key.to_owned(), c.fields.clone());
        slot.changed = pins.changes(id).map(fields).collect();
        slot.held_offers = pins.offer_changes(id).map(fields).collect();
    }

    /// Writes the pins file, and with the shared store `server`'s pins there.
    fn save_pins(&self, server: &str) {
        if let Some(to) = &self.persist_pins {
            to.do_send(PersistPins(self.pins.to_file()));
        }
        self.share_pins(server);
    }

    /// Publishes soon, coalescing bursts (many children coming up at once)
    /// into one snapshot build.
    fn publish_soon(&mut self, ctx: &mut Context<Self>) {
        if !self.publish_scheduled {
            self.publish_scheduled = true;
            ctx.run_later(PUBLISH_COALESCE, |act, _| act.publish());
        }
    }

    pub fn with_persistence(mut self, to: Recipient<Persist>) -> Catalog {
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
            .map(|s| CachedServer {
                id: s.spec.id.clone(),
                config_hash: s.spec.hash.to_string(),
                fetched_at: s.fetched_at.map_or(0, crate::catalog::cache::unix_secs),
                capabilities: s.spec.capabilities.iter().cloned().collect(),
                tools: s.tools.clone(),
                offered: s.offered.clone(),
            })
            .collect();
        to.do_send(Persist(servers));
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
                held: if self.integrity == IntegrityMode::Pin {
                    &s.changed
                } else {
                    &NONE_HELD
                },
                held_offers: if self.integrity == IntegrityMode::Pin {
                    &s.held_offers
                } else {
                    &NONE_HELD
                },
                offered: &s.offered,
                heard: s.source != ToolSource::None,
            })
            .collect();
        let snapshot = Arc::new(Snapshot::build_all(
            self.version,
            &servers,
            &self.permissions,
            &self.profiles,
        ));
        let before = self.published.load();
        for d in &snapshot.duplicates {
            if !before.duplicates.contains(d) {
                tracing::warn!(tool = %d.name, kept = %d.kept, skipped = %d.skipped.join(", "), "tool name collision: the first registration in config order wins");
            }
        }
        self.published.store(snapshot.clone());
        before.mark_superseded();
        for role in before.by_role.values() {
            role.mark_superseded();
        }
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
    /// The config's `integrity`.
    pub integrity: IntegrityMode,
}

/// A server's tool list as the cache file had it.
pub struct CachedTools {
    pub tools: Vec<Tool>,
    pub offered: Offered,
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
                        offered: prev.offered,
                        fetched_at: prev.fetched_at.unwrap_or_else(SystemTime::now),
                    },
                );
            }
        }
        let mut kept = std::collections::HashSet::new();
        self.slots = msg
            .servers
            .into_iter()
            .map(|(spec, link)| match old.remove(&spec.id) {
                Some(prev) if prev.spec.hash == spec.hash => {
                    kept.insert(spec.id.clone());
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
                        changed: BTreeMap::new(),
                        offered: c.offered,
                        held_offers: BTreeMap::new(),
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
                        changed: BTreeMap::new(),
                        offered: Default::default(),
                        held_offers: BTreeMap::new(),
                    },
                },
            })
            .collect();
        self.discovery_hot = msg.discovery_hot;
        // Cached lists are checked like live ones: a change that reached
        // the cache before a restart is still held after it. A server kept
        // with its list (same config hash) was checked when the list came,
        // unless the mode changed since.
        let mode_changed = self.integrity != msg.integrity;
        self.integrity = msg.integrity;
        self.servers_set = true;
        for i in 0..self.slots.len() {
            if mode_changed || !kept.contains(&self.slots[i].spec.id) {
                self.check_integrity(i, Lists::BOTH);
            }
        }
        self.publish();
    }
}

/// New permissions (loaded by the Supervisor): republish.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetPermissions(pub Arc<Permissions>);

impl Handler<SetPermissions> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: SetPermissions, _: &mut Context<Self>) {
        self.permissions = msg.0;
        if self.servers_set {
            self.publish();
        }
    }
}

/// Profiles changed (a config edit, `evoctl activate --profile`): republish,
/// so sessions using a changed profile hear list_changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetProfiles(pub Arc<ProfileBook>);

impl Handler<SetProfiles> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: SetProfiles, _: &mut Context<Self>) {
        if *self.profiles != *msg.0 {
            self.profiles = msg.0;
            if self.servers_set {
                self.publish();
            }
        }
    }
}

/// A server's tools, discovered live from its child.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ToolsDiscovered {
    pub server: String,
    pub tools: Vec<Tool>,
    /// Its resources, templates and prompts, when listed with the tools
    /// (a start); `None` keeps the ones known.
    pub offered: Option<Offered>,
}

impl Handler<ToolsDiscovered> for Catalog {
    /// Answers once the tools are in a published snapshot.
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: ToolsDiscovered, ctx: &mut Context<Self>) -> Self::Result {
        let done = || -> ResponseFuture<()> { Box::pin(async {}) };
        let Some(i) = self.slots.iter().position(|s| s.spec.id == msg.server) else {
            return done();
        };
        let slot = &mut self.slots[i];
        slot.live = Some(msg.tools.len());
        slot.fetched_at = Some(SystemTime::now());
        let offers_changed = msg.offered.as_ref().is_some_and(|o| *o != slot.offered);
        if let Some(offered) = msg.offered {
            slot.offered = offered;
        }
        let empty_relist = msg.tools.is_empty() && !slot.tools.is_empty();
        if empty_relist {
            tracing::warn!(server = %msg.server, kept = slot.tools.len(), "child listed no tools; keeping the last good list");
        }
        let tools_changed = !empty_relist && slot.tools != msg.tools;
        if !tools_changed && !offers_changed {
            if slot.source != ToolSource::Live && !empty_relist {
                // A first list that brings nothing (no tools, no offers)
                // still says what the server offers: published, so sessions
                // stop waiting for it and advertising offers on its behalf.
                let first = slot.source == ToolSource::None;
                slot.source = ToolSource::Live;
                self.persist();
                if first {
                    self.publish();
                }
            }
            return done();
        }
        if tools_changed {
            slot.entries = entries_for(&slot.spec, &slot.link, &msg.tools, &self.discovery_hot);
            slot.tools = msg.tools;
        }
        if !empty_relist {
            slot.source = ToolSource::Live;
        }
        let lists = Lists {
            tools: tools_changed,
            offers: offers_changed,
        };
        self.check_integrity(i, lists);
        self.persist();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.acks.push(tx);
        self.publish_soon(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

/// A server's resources, templates or prompts changed (it said so with
/// `notifications/resources/list_changed` or `prompts/list_changed`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct OffersDiscovered {
    pub server: String,
    pub offered: Offered,
}

impl Handler<OffersDiscovered> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: OffersDiscovered, ctx: &mut Context<Self>) {
        let Some(i) = self.slots.iter().position(|s| s.spec.id == msg.server) else {
            return;
        };
        let slot = &mut self.slots[i];
        if slot.offered != msg.offered {
            slot.offered = msg.offered;
            let lists = Lists {
                tools: false,
                offers: true,
            };
            self.check_integrity(i, lists);
            self.persist();
            self.publish_soon(ctx);
        }
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
    /// How many resources, templates and prompts it lists.
    pub offered: (usize, usize, usize),
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
                    offered: (
                        s.offered.resources.len(),
                        s.offered.templates.len(),
                        s.offered.prompts.len(),
                    ),
                })
                .collect(),
        )
    }
}

/// Logs what a check of a server's list against its pins found. A change is
/// logged once, when first seen; a held tool that changes again is logged
/// at debug level only (a child that changes it on every list would flood
/// the log), its drift counter in `evoctl status` telling the rest.
fn log_integrity_event(
    server: &str,
    event: &Event,
    mode: IntegrityMode,
    kind: &str,
    exposed: &dyn Fn(&str) -> String,
) {
    if kind != "tool" {
        return log_offer_event(server, event, mode, exposed);
    }
    match event {
        Event::NewServer { tools } => {
            tracing::info!(
                server,
                tools,
                "first list of this server: its tool definitions are pinned"
            );
        }
        Event::Repinned { tools, released } if *released > 0 => {
            tracing::warn!(
                server,
                tools,
                released,
                "the server's config changed (upgraded or edited), so its tools were re-pinned and its quarantined tools released: integrity guards against a server changing under the same config, not against your own edits"
            );
        }
        Event::Repinned { tools, .. } => {
            tracing::info!(
                server,
                tools,
                "the server's config changed (upgraded or edited), so its tools were re-pinned without quarantine"
            );
        }
        Event::NewTools(names) => {
            tracing::info!(server, tools = %names.join(", "), "new tools of a known server: pinned");
        }
        Event::Changed { tool, fields } => {
            let name = exposed(tool);
            let changed = fields.join(", ");
            match mode {
                IntegrityMode::Pin => {
                    tracing::warn!(server, tool = %tool, name = %name, changed = %changed, "a pinned tool's definition changed: quarantined (hidden from lists and search, calls refused); `evoctl diff {server} {tool}` shows the change, `evoctl trust {server} {tool}` accepts it")
                }
                IntegrityMode::Warn => {
                    tracing::warn!(server, tool = %tool, name = %name, changed = %changed, "a pinned tool's definition changed; integrity is `warn`, so it stays usable; `evoctl diff {server} {tool}` shows the change, `evoctl trust {server} {tool}` accepts it")
                }
                IntegrityMode::Off => {}
            }
        }
        Event::Drifted { tool, drift } => {
            tracing::debug!(server, tool = %tool, drift, "a changed tool's definition changed again");
        }
    }
}

/// [`log_integrity_event`] for prompts, resources and templates; events
/// name them by pin key. Re-pins are logged with the tools'.
fn log_offer_event(
    server: &str,
    event: &Event,
    mode: IntegrityMode,
    exposed: &dyn Fn(&str) -> String,
) {
    let Event::Changed { tool: key, fields } = event else {
        if let Event::NewTools(keys) = event {
            tracing::info!(server, offers = %keys.join(", "), "new prompts or resources of a known server: pinned");
        }
        return;
    };
    let Some((kind, id)) = OfferKind::of_key(key) else {
        return;
    };
    let (noun, name, changed) = (kind.noun(), exposed(key), fields.join(", "));
    match mode {
        IntegrityMode::Pin => {
            tracing::warn!(server, offer = %id, name = %name, changed = %changed, "a pinned {noun}'s definition changed: quarantined (hidden from lists, refused); `evoctl diff {server} {key}` shows the change, `evoctl trust {server} {key}` accepts it")
        }
        IntegrityMode::Warn => {
            tracing::warn!(server, offer = %id, name = %name, changed = %changed, "a pinned {noun}'s definition changed; integrity is `warn`, so it stays usable; `evoctl diff {server} {key}` shows the change, `evoctl trust {server} {key}` accepts it")
        }
        IntegrityMode::Off => {}
    }
}

/// How sessions see the offer under pin `key`: a prompt by its exposed
/// name, a resource or template as listed.
fn offer_shown(prefix: &str, key: &str) -> String {
    match OfferKind::of_key(key) {
        Some((OfferKind::Prompt, name)) => names::exposed_name(prefix, name),
        Some((_, id)) => id.to_owned(),
        None => key.to_owned(),
    }
}

/// A server's tool or offer that `evoctl diff`/`trust` named, as its
/// upstream name or pin key: the exposed name, the doubled form, the
/// upstream name itself; for an offer its pin key, its exposed prompt
/// name, its URI or template.
fn resolve_tool(pins: &PinBook, spec: &ServerSpec, wanted: &str) -> Option<String> {
    pins.tools(&spec.id)
        .find(|t| {
            *t == wanted
                || spec.exposed_name(t) == wanted
                || spec.doubled_name(t).as_deref() == Some(wanted)
        })
        .or_else(|| {
            pins.offer_keys(&spec.id).find(|key| {
                *key == wanted
                    || offer_shown(&spec.prefix, key) == wanted
                    || OfferKind::of_key(key).is_some_and(|(_, id)| id == wanted)
            })
        })
        .map(str::to_owned)
}

/// A refusal of `evoctl diff`/`trust`: its kind and the message.
pub type IntegrityRefusal = (evo_proto::ctl::ErrorKind, String);

impl Catalog {
    /// The slot of `server` and the upstream name `tool` means, or why not.
    fn integrity_target(
        &self,
        server: &str,
        tool: Option<&str>,
    ) -> Result<(usize, Option<String>), IntegrityRefusal> {
        use evo_proto::ctl::ErrorKind;
        let Some(i) = self.slots.iter().position(|s| s.spec.id == server) else {
            return Err((
                ErrorKind::UnknownServer,
                format!("no server '{server}'; `evoctl status` lists them"),
            ));
        };
        let Some(wanted) = tool else {
            return Ok((i, None));
        };
        match resolve_tool(&self.pins, &self.slots[i].spec, wanted) {
            Some(t) => Ok((i, Some(t))),
            None => Err((
                ErrorKind::UnknownTool,
                format!(
                    "server '{server}' has no pinned tool '{wanted}'; give its exposed or its upstream name (`evoctl status` lists quarantined tools)"
                ),
            )),
        }
    }
}

/// `evoctl status`: the integrity setting and the tools whose definition
/// changed since pinned.
#[derive(Message)]
#[rtype(result = "(IntegrityMode, Vec<evo_proto::ctl::QuarantinedTool>)")]
pub struct IntegrityStatus;

impl Handler<IntegrityStatus> for Catalog {
    type Result = MessageResult<IntegrityStatus>;
    fn handle(&mut self, _: IntegrityStatus, _: &mut Context<Self>) -> Self::Result {
        if self.integrity == IntegrityMode::Off {
            return MessageResult((IntegrityMode::Off, Vec::new()));
        }
        let held = self
            .slots
            .iter()
            .flat_map(|s| {
                let tools = self
                    .pins
                    .changes(&s.spec.id)
                    .map(|(tool, c)| (s.spec.exposed_name(tool), tool, c));
                let offers = self
                    .pins
                    .offer_changes(&s.spec.id)
                    .map(|(key, c)| (offer_shown(&s.spec.prefix, key), key, c));
                tools
                    .chain(offers)
                    .map(|(name, tool, c)| evo_proto::ctl::QuarantinedTool {
                        server: s.spec.id.clone(),
                        tool: tool.to_owned(),
                        name,
                        changed: c.fields.clone(),
                        drift: c.drift,
                    })
            })
            .collect();
        MessageResult((self.integrity, held))
    }
}

/// `evoctl diff SERVER [TOOL]`.
#[derive(Message)]
#[rtype(result = "Result<evo_proto::ctl::DiffReport, IntegrityRefusal>")]
pub struct DiffTools {
    pub server: String,
    pub tool: Option<String>,
}

impl Handler<DiffTools> for Catalog {
    type Result = Result<evo_proto::ctl::DiffReport, IntegrityRefusal>;
    fn handle(&mut self, msg: DiffTools, _: &mut Context<Self>) -> Self::Result {
        let (i, only) = self.integrity_target(&msg.server, msg.tool.as_deref())?;
        let spec = &self.slots[i].spec;
        let server = &spec.id;
        let tools = self
            .pins
            .changes(server)
            .map(|(tool, c)| (spec.exposed_name(tool), tool, c));
        let offers = self
            .pins
            .offer_changes(server)
            .map(|(key, c)| (offer_shown(&spec.prefix, key), key, c));
        let tools: Vec<evo_proto::ctl::ToolDiff> = tools
            .chain(offers)
            .filter(|(_, tool, _)| only.as_deref().is_none_or(|o| o == *tool))
            .filter_map(|(name, tool, change)| {
                let pin = self.pins.pin(server, tool)?;
                Some(evo_proto::ctl::ToolDiff {
                    tool: tool.to_owned(),
                    name,
                    changed: change.fields.clone(),
                    drift: change.drift,
                    old: pin.pinned.json.clone(),
                    new: change.seen.json.clone(),
                    diff: integrity::unified_diff(
                        &pin.pinned,
                        &change.seen,
                        &format!("{server} {tool} (pinned)"),
                        &format!("{server} {tool} (listed now)"),
                    ),
                })
            })
            .collect();
        let message = match (tools.len(), &only) {
            (0, Some(t)) => format!("{server} {t}: the definition matches its pin"),
            (0, None) => format!("no tool of {server} changed since it was pinned"),
            (n, _) => {
                let names: Vec<&str> = tools.iter().map(|t| t.tool.as_str()).collect();
                let state = match self.integrity {
                    IntegrityMode::Pin => "quarantined",
                    IntegrityMode::Warn => "still usable (integrity: warn)",
                    IntegrityMode::Off => "not checked (integrity: off)",
                };
                format!(
                    "{n} tool(s) of {server} changed since pinned, {state}: {}; `evoctl trust {server} TOOL` accepts the new definition",
                    names.join(", ")
                )
            }
        };
        Ok(evo_proto::ctl::DiffReport {
            server: server.clone(),
            tools,
            message,
        })
    }
}

/// `evoctl trust SERVER [TOOL]`: the new definitions become the pins, and
/// the tools are listed again at once.
#[derive(Message)]
#[rtype(result = "Result<evo_proto::ctl::ActionReport, IntegrityRefusal>")]
pub struct TrustTools {
    pub server: String,
    pub tool: Option<String>,
}

impl Handler<TrustTools> for Catalog {
    type Result = Result<evo_proto::ctl::ActionReport, IntegrityRefusal>;
    fn handle(&mut self, msg: TrustTools, _: &mut Context<Self>) -> Self::Result {
        let (i, only) = self.integrity_target(&msg.server, msg.tool.as_deref())?;
        let server = self.slots[i].spec.id.clone();
        let trusted = self.pins.trust(
            &server,
            only.as_deref(),
            crate::catalog::cache::unix_secs(SystemTime::now()),
        );
        if trusted.is_empty() {
            let message = match only {
                Some(t) => format!("nothing to trust: {server} {t} matches its pin"),
                None => {
                    format!("nothing to trust: no tool of {server} changed since it was pinned")
                }
            };
            return Ok(evo_proto::ctl::ActionReport {
                message,
                ..Default::default()
            });
        }
        tracing::info!(server = %server, tools = %trusted.join(", "), "a person trusted the new tool definitions; they are pinned and listed again");
        self.save_pins(&server);
        Self::record_changes(&self.pins, &mut self.slots[i]);
        self.publish();
        Ok(evo_proto::ctl::ActionReport {
            message: format!(
                "trusted the new definition of {} of {server}: pinned and listed again",
                trusted.join(", ")
            ),
            trusted: trusted.iter().map(|t| format!("{server}:{t}")).collect(),
            ..Default::default()
        })
    }
}
