//! The Session actor (one per client connection) and its rmcp face,
//! [`SessionServer`]. The actor owns the session's discovery mode, activation
//! set and last-active time; the rmcp handler serves MCP, reads the catalog
//! snapshot directly and sends proxied calls straight to the child.
//!
//! Sessions send list_changed when a visible tool's definition changes, not only when names come or
//! go: each entry carries a fingerprint (a hash of the tool as listed), compared with the one last
//! sent.
//!
//! `visible_entries` is the one rule for what a session lists: legacy lists every snapshot tool;
//! dynamic lists the snapshot's hot indices, the session's profile's members (resolved by the
//! Catalog when it builds the snapshot, so a list is a merge of sorted indices, never a pattern
//! match) and, before 2026-07-28, the session's activations. Indices keep catalog order, so the
//! same catalog lists in the same order in both eras. The era is the session's own flag, set by the
//! first request that carries the 2026-07-28 envelope (`server/discover` included); on that era
//! `SetActive` is refused (`MODERN_REFUSAL`), exact-name calls do not activate, and
//! `discover_tools` renders cards.
//!
//! Children's log messages (`notifications/message`) go to the sessions that asked with
//! `logging/setLevel`, at that level and above, the logger named `server/logger`; a session that
//! never asked gets none (an agent's context is not the place for every child's chatter). evo
//! advertises `logging`; on 2026-07-28 sessions, where MCP deprecates logging (SEP-2577), none are
//! sent. A session's unsent child log messages are capped at 32 (then dropped) and list_changed is
//! coalesced while one is on its way, so a client that does not read its stream is held back, not
//! buffered.
//!
//! An idle socket session costs about 41 KiB, most of it rmcp's per-session channels and loop task.
//! The session's startup future (the rmcp handshake, about 19 KiB) is boxed so that it is freed
//! once the session is up rather than kept for its life.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use actix::prelude::*;
use arc_swap::ArcSwap;
use rmcp::service::{Peer, RequestContext, RoleServer, SubscriptionSink};

mod approval;
pub mod breaker;
mod call;
pub mod config_trouble;
pub mod disclosure;
mod evidence;
mod login;
pub mod native_tools;
pub mod offers;
pub mod result_limit;
mod run_code;
mod server;
mod startup;
pub mod tool_card;
pub mod transport;

pub use approval::{Answers, Ask};
pub use server::{Asker, SessionServer, unknown_tool_message};

use crate::catalog::CatalogChanged;
use crate::catalog::ChildLog;
use crate::catalog::snapshot::{Snapshot, ToolEntry};
use crate::child::link::ServerLink;
use crate::config::DiscoveryMode;
use crate::console::events::{EventBus, Topic};
use crate::session::native_tools::NAMES;
use crate::supervisor::{SaveNamed, SessionClosed, Supervisor};

/// The set of proxied tools a session has made visible (exposed names).
pub type ActivationSet = BTreeSet<String>;

/// Log messages on their way to a client that its transport has not taken
/// yet; past this many, new ones are dropped, so a client that does not read
/// costs bounded memory (held back, not buffered).
const MAX_UNSENT_LOGS: usize = 32;

/// Notifications a session's client has not taken yet. list_changed is
/// coalesced (one on its way says it all); log messages past
/// [`MAX_UNSENT_LOGS`] are dropped.
#[derive(Default)]
struct Outbox {
    logs: AtomicU64,
    dropped_logs: AtomicU64,
    list_changed: std::sync::atomic::AtomicBool,
}

/// What a session's rmcp handler reads without a round trip to its actor:
/// the activation set (written only by the Session actor) and the time of
/// the last request (written only by the handler), so a proxied call never
/// waits on, or even wakes, the actor thread.
#[derive(Clone, Default)]
pub struct SessionView {
    pub activated: Arc<ArcSwap<ActivationSet>>,
    last_active_ms: Arc<AtomicU64>,
    flags: Arc<SessionFlags>,
    /// Servers where the session (or one of its listen streams, by key)
    /// holds resource subscriptions, ended when the session ends.
    subscribed: Arc<std::sync::Mutex<Subscribed>>,
    /// The name its per-session state has in the shared store (retry-loop
    /// counts): a named session's name, an HTTP session's `Mcp-Session-Id`,
    /// `modern:IDENTITY` for an identity's stateless (2026-07-28) session.
    /// Unset: the state stays in this instance (an unnamed socket session,
    /// or no shared store). Set once, by whoever learns it first.
    pub store_name: Arc<std::sync::OnceLock<String>>,
}

/// Resource subscriptions a session holds: (key, server) pairs.
type Subscribed = Vec<(String, Arc<ServerLink>)>;
/// Who opened a session over HTTP, as the HTTP front authenticated them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpCaller {
    /// `token:NAME` or `oauth:SUB`; `None` for the local owner (HTTP
    /// without auth, on loopback).
    pub identity: Option<String>,
    /// The permissions role the identity carries; `None`: `active_role`.
    pub role: Option<String>,
    /// Known from the first request: `initialize` opens an initialize-era
    /// session, a 2026-07-28 request the identity's stateless one.
    pub era: evo_proto::ctl::SessionEra,
}

/// What a session's requests tell about its client.
#[derive(Default)]
struct SessionFlags {
    /// The client speaks 2026-07-28 (per-request envelope): list_changed
    /// then goes only to its `subscriptions/listen` streams.
    modern: std::sync::atomic::AtomicBool,
    /// The lowest level of child log messages the client asked for with
    /// `logging/setLevel`, as its rank + 1; 0 until it asks (none sent).
    log_level: std::sync::atomic::AtomicU8,
    /// `subscriptions/listen` streams open now: a session listening is in
    /// use even when it sends nothing else.
    listening: std::sync::atomic::AtomicUsize,
}

/// A log level's rank, lowest (debug) first.
#[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
fn level_rank(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

impl SessionView {
    fn new(activated: &ActivationSet) -> SessionView {
        let view = SessionView {
            activated: Arc::new(ArcSwap::from_pointee(activated.clone())),
            last_active_ms: Arc::new(AtomicU64::new(0)),
            flags: Default::default(),
            subscribed: Default::default(),
            store_name: Default::default(),
        };
        view.touch();
        view
    }

    /// A request arrived: the session is active, and its envelope tells the
    /// protocol era.
    fn request(&self, ctx: &RequestContext<RoleServer>) {
        self.touch();
        if ctx.meta.protocol_version().is_some() {
            self.flags.modern.store(true, Ordering::Relaxed);
        }
    }

    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// The session (under `key`) subscribed to a resource of `server`.
    pub fn subscribed(&self, key: &str, server: &Arc<ServerLink>) {
        let mut held = self.subscribed.lock().unwrap_or_else(|e| e.into_inner());
        if !held.iter().any(|(k, s)| k == key && Arc::ptr_eq(s, server)) {
            held.push((key.to_string(), server.clone()));
        }
    }

    /// Ends the subscriptions held under `key` (all of the session's when
    /// `key` is `None`).
    pub fn end_subscriptions(&self, key: Option<&str>) {
        let ended: Subscribed = {
            let mut held = self.subscribed.lock().unwrap_or_else(|e| e.into_inner());
            let (ended, kept) = held
                .drain(..)
                .partition(|(k, _)| key.is_none_or(|key| key == k));
            *held = kept;
            ended
        };
        if ended.is_empty() {
            return;
        }
        tokio::spawn(async move {
            for (key, server) in ended {
                offers::end_subscriptions(&key, std::slice::from_ref(&server)).await;
            }
        });
    }

    /// The session's requests carry 2026-07-28's per-request envelope.
    pub fn is_modern(&self) -> bool {
        self.flags.modern.load(Ordering::Relaxed)
    }

    pub fn era(&self) -> evo_proto::ctl::SessionEra {
        if self.is_modern() {
            evo_proto::ctl::SessionEra::Modern
        } else {
            evo_proto::ctl::SessionEra::Initialize
        }
    }

    /// Seconds since the session's last request.
    pub fn idle_secs(&self) -> u64 {
        now_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Whether its requests speak 2026-07-28.
    pub fn modern(&self) -> bool {
        self.flags.modern.load(Ordering::Relaxed)
    }

    /// How many `subscriptions/listen` streams the client holds open.
    pub fn listening(&self) -> usize {
        self.flags.listening.load(Ordering::Relaxed)
    }

    /// Milliseconds since the session's last request, for ordering sessions.
    pub fn idle_ms(&self) -> u64 {
        now_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
    }
}

/// Milliseconds since the daemon started.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The Session actor. See the module docs.
pub struct Session {
    pub id: String,
    pub name: Option<String>,
    pub mode: DiscoveryMode,
    /// The profile whose tools it lists, fixed for its life.
    pub profile: Option<String>,
    /// MCP runs on the client's own stdio, handed over by the shim.
    pub stdio: bool,
    /// Set for a session served over HTTP: who opened it.
    pub http: Option<HttpCaller>,
    activated: ActivationSet,
    view: SessionView,
    peer: Option<Peer<RoleServer>>,
    /// `subscriptions/listen` streams of a 2026-07-28 session.
    listeners: Vec<SubscriptionSink>,
    /// What is on its way to the client and not yet taken.
    outbox: Arc<Outbox>,
    supervisor: Addr<Supervisor>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    /// The proxied tools visible at the last list_changed (or start), by
    /// name and definition fingerprint, to tell whether a catalog change
    /// touched this session: a tool added, removed or redefined (a changed
    /// description included).
    visible: Vec<(String, u64)>,
    /// The resources (with templates) and prompts fingerprints at the last
    /// list_changed of each (or start).
    offers_seen: (u64, u64),
    /// What open consoles hear of it; the Supervisor's bus, set by it.
    pub events: EventBus,
}

impl Session {
    pub fn new(
        id: String,
        name: Option<String>,
        mode: DiscoveryMode,
        profile: Option<String>,
        activated: ActivationSet,
        supervisor: Addr<Supervisor>,
        snapshot: Arc<ArcSwap<Snapshot>>,
    ) -> Session {
        let mut s = Session {
            id,
            name,
            mode,
            profile,
            stdio: false,
            http: None,
            view: SessionView::new(&activated),
            activated,
            peer: None,
            listeners: Vec::new(),
            outbox: Default::default(),
            supervisor,
            snapshot,
            visible: Vec::new(),
            offers_seen: (0, 0),
            events: Default::default(),
        };
        if let Some(name) = &s.name {
            let _ = s.view.store_name.set(name.clone());
        }
        let now = s.snapshot.load_full();
        s.visible = s.visible_names(&now);
        s.offers_seen = now.offers.fingerprints;
        s
    }

    /// Marks a session served over HTTP: who opened it decides its role
    /// (and so which tools it sees).
    pub fn over_http(&mut self, caller: HttpCaller) {
        if caller.era == evo_proto::ctl::SessionEra::Modern {
            let who = caller
                .identity
                .as_deref()
                .unwrap_or(evo_proto::ctl::LOCAL_IDENTITY);
            let _ = self.view.store_name.set(format!("modern:{who}"));
        }
        self.http = Some(caller);
        self.visible = self.visible_names(&self.catalog());
    }

    /// The proxied tools this session lists: exposed name and fingerprint.
    fn visible_names(&self, snapshot: &Snapshot) -> Vec<(String, u64)> {
        visible_entries(snapshot, self.visibility())
            .into_iter()
            .map(|e| (e.name.clone(), e.fingerprint))
            .collect()
    }

    /// What decides this session's list besides the catalog.
    fn visibility(&self) -> Visibility<'_> {
        Visibility {
            mode: self.mode,
            activated: &self.activated,
            profile: self.profile.as_deref(),
            modern: self.view.is_modern(),
        }
    }

    /// The permissions role its identity carries (`None`: the role in force).
    pub fn role(&self) -> Option<&str> {
        self.http.as_ref().and_then(|c| c.role.as_deref())
    }

    /// The catalog as this session's identity sees it.
    fn catalog(&self) -> Arc<Snapshot> {
        self.snapshot.load_full().for_role(self.role())
    }

    /// Sends list_changed if the visible set differs from the last one sent.
    fn refresh_visible(&mut self) {
        let now = self.visible_names(&self.catalog());
        if now != self.visible {
            self.visible = now;
            self.notify_list_changed();
        }
    }

    /// `notifications/tools/list_changed`: on the listen streams of a
    /// 2026-07-28 session, else to the peer (older clients declare no
    /// capability for it, so it always goes).
    fn notify_list_changed(&self) {
        if self.listeners.is_empty() && self.view.flags.modern.load(Ordering::Relaxed) {
            return; // a 2026-07-28 client that did not opt in
        }
        if self.outbox.list_changed.swap(true, Ordering::AcqRel) {
            return; // one not yet taken by the client says it already
        }
        let outbox = self.outbox.clone();
        if !self.listeners.is_empty() {
            let sinks = self.listeners.clone();
            tokio::spawn(async move {
                for sink in sinks {
                    let _ = sink.notify_tool_list_changed().await;
                }
                // A change made while this one was on its way is in the
                // list the client fetches when it reads this one.
                outbox.list_changed.store(false, Ordering::Release);
            });
        } else if let Some(peer) = self.peer.clone() {
            tokio::spawn(async move {
                let sent = peer.notify_tool_list_changed().await;
                outbox.list_changed.store(false, Ordering::Release);
                drop(sent);
            });
        } else {
            self.outbox.list_changed.store(false, Ordering::Release);
        }
    }

    /// A named session's activations are saved on every change, so they
    /// survive a daemon restart as well as a reconnect.
    fn save_if_named(&self) {
        if let Some(name) = &self.name {
            self.supervisor.do_send(SaveNamed {
                name: name.clone(),
                activated: self.activated.clone(),
            });
        }
    }

    /// The handles the session's rmcp handler reads.
    pub fn view(&self) -> SessionView {
        self.view.clone()
    }

    pub fn info(&self) -> evo_proto::ctl::SessionInfo {
        evo_proto::ctl::SessionInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            mode: self.mode,
            io: if self.http.is_some() {
                evo_proto::ctl::SessionIo::Http
            } else if self.stdio {
                evo_proto::ctl::SessionIo::Stdio
            } else {
                evo_proto::ctl::SessionIo::Socket
            },
            activated: self.activated.iter().cloned().collect(),
            last_active: self.view.idle_secs(),
            era: match &self.http {
                Some(caller) => caller.era,
                None if self.view.flags.modern.load(Ordering::Relaxed) => {
                    evo_proto::ctl::SessionEra::Modern
                }
                None => evo_proto::ctl::SessionEra::Initialize,
            },
            identity: Some(
                self.http
                    .as_ref()
                    .and_then(|c| c.identity.clone())
                    .unwrap_or_else(|| evo_proto::ctl::LOCAL_IDENTITY.into()),
            ),
            profile: self.profile.clone(),
            role: self.role().map(str::to_owned),
            instance: None,
        }
    }
}

/// What decides a session's list of proxied tools besides the catalog.
#[derive(Debug, Clone, Copy)]
pub struct Visibility<'a> {
    pub mode: DiscoveryMode,
    pub activated: &'a ActivationSet,
    pub profile: Option<&'a str>,
    /// A 2026-07-28 session: its list never depends on what it did before
    /// (MCP 2026-07-28, tools "Capabilities"), so activations do not count.
    pub modern: bool,
}

/// The proxied tools a session lists, in catalog order: all in legacy mode;
/// in dynamic mode the hot ones, its profile's, and (before 2026-07-28) the
/// ones it activated. The one place that decides visibility.
pub fn visible_entries<'a>(snapshot: &'a Snapshot, by: Visibility<'_>) -> Vec<&'a Arc<ToolEntry>> {
    if by.mode == DiscoveryMode::Legacy {
        return snapshot.tools.iter().collect();
    }
    let profile = by.profile.and_then(|p| snapshot.profiles.get(p));
    let mut picked: Vec<usize> = snapshot.hot.clone();
    if let Some(profile) = profile {
        picked.extend_from_slice(&profile.members);
    }
    if !by.modern {
        picked.extend(by.activated.iter().filter_map(|n| snapshot.position(n)));
    }
    picked.sort_unstable();
    picked.dedup();
    picked.into_iter().map(|i| &snapshot.tools[i]).collect()
}

/// A session's `tools/list`: the native tools (`run_code` with code mode
/// on), then its proxied tools in catalog order (the same catalog gives the
/// same list, in both eras).
pub fn list_tools(
    snapshot: &Snapshot,
    by: Visibility<'_>,
    code_mode: bool,
) -> Vec<rmcp::model::Tool> {
    let visible = visible_entries(snapshot, by);
    let mut tools = Vec::with_capacity(NAMES.len() + visible.len());
    tools.extend_from_slice(crate::session::native_tools::tools(code_mode));
    tools.extend(visible.into_iter().map(|e| e.tool.clone()));
    tools
}

/// Whether a session lists the tool at `index` without activating it: hot,
/// or in its profile.
pub fn listed_without_activation(snapshot: &Snapshot, profile: Option<&str>, index: usize) -> bool {
    snapshot.tools[index].hot
        || profile
            .and_then(|p| snapshot.profiles.get(p))
            .is_some_and(|p| p.has(index))
}

impl Actor for Session {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.view.end_subscriptions(None);
        self.supervisor.do_send(SessionClosed {
            id: self.id.clone(),
            name: self.name.clone(),
            activated: self.activated.clone(),
        });
    }
}

/// The rmcp service is running: keep its peer for notifications.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Attach(pub Peer<RoleServer>);

impl Handler<Attach> for Session {
    type Result = ();
    fn handle(&mut self, msg: Attach, _: &mut Context<Self>) {
        self.peer = Some(msg.0);
    }
}

/// After a reload: activations follow renamed tools and drop removed ones.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Remap {
    pub renamed: std::collections::HashMap<String, String>,
    pub dropped: Vec<String>,
}

impl Handler<Remap> for Session {
    type Result = ();
    fn handle(&mut self, msg: Remap, _: &mut Context<Self>) {
        let before = self.activated.clone();
        self.activated = before
            .iter()
            .filter(|n| !msg.dropped.contains(n))
            .map(|n| msg.renamed.get(n).cloned().unwrap_or_else(|| n.clone()))
            .collect();
        if self.activated != before {
            self.view.activated.store(Arc::new(self.activated.clone()));
            self.save_if_named();
            self.refresh_visible();
        }
    }
}

/// A 2026-07-28 client opened (or closed) a `subscriptions/listen` stream.
#[derive(Message)]
#[rtype(result = "()")]
pub enum Listener {
    Add(SubscriptionSink),
    Remove(rmcp::model::RequestId),
}

impl Handler<Listener> for Session {
    type Result = ();
    fn handle(&mut self, msg: Listener, _: &mut Context<Self>) {
        match msg {
            Listener::Add(sink) => self.listeners.push(sink),
            Listener::Remove(id) => self.listeners.retain(|s| *s.id() != id),
        }
    }
}

/// The client went away.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Close;

impl Handler<Close> for Session {
    type Result = ();
    fn handle(&mut self, _: Close, ctx: &mut Context<Self>) {
        self.peer = None;
        ctx.stop();
    }
}

/// A child's log message goes to sessions that asked for logs at its level
/// (`logging/setLevel`), with the server id leading its logger name.
impl Handler<ChildLog> for Session {
    type Result = ();
    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    fn handle(&mut self, msg: ChildLog, _: &mut Context<Self>) {
        let wanted = self.view.flags.log_level.load(Ordering::Relaxed);
        let modern = self.view.flags.modern.load(Ordering::Relaxed);
        if wanted == 0 || modern || level_rank(msg.params.level) + 1 < wanted {
            return;
        }
        let Some(peer) = self.peer.clone() else {
            return;
        };
        let outbox = self.outbox.clone();
        if outbox.logs.fetch_add(1, Ordering::AcqRel) >= MAX_UNSENT_LOGS as u64 {
            outbox.logs.fetch_sub(1, Ordering::AcqRel);
            let dropped = outbox.dropped_logs.fetch_add(1, Ordering::Relaxed);
            if dropped.is_power_of_two() || dropped == 0 {
                tracing::debug!(session = %self.id, dropped = dropped + 1, "the client is not reading: child log messages dropped");
            }
            return;
        }
        let mut params = msg.params;
        params.logger = Some(match params.logger.take() {
            Some(logger) => format!("{}/{logger}", msg.server),
            None => msg.server,
        });
        tokio::spawn(async move {
            let _ = peer.notify_logging_message(params).await;
            outbox.logs.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

impl Handler<CatalogChanged> for Session {
    type Result = ();
    fn handle(&mut self, msg: CatalogChanged, _: &mut Context<Self>) {
        // Activations of tools missing from this snapshot are kept: after a
        // daemon restart a named session's tools come back as servers start.
        self.refresh_visible();
        let (resources, prompts) = msg.snapshot.offers.fingerprints;
        let (seen_resources, seen_prompts) = self.offers_seen;
        self.offers_seen = (resources, prompts);
        if resources != seen_resources {
            self.notify_offers(Offer::Resources);
        }
        if prompts != seen_prompts {
            self.notify_offers(Offer::Prompts);
        }
    }
}

/// Which list of a session's offers changed.
#[derive(Debug, Clone, Copy)]
enum Offer {
    Resources,
    Prompts,
}

impl Session {
    /// `notifications/resources/list_changed` or `prompts/list_changed`,
    /// delivered like the tools' (listen streams on 2026-07-28, which filter
    /// what each opted into; the peer before).
    fn notify_offers(&self, which: Offer) {
        if self.listeners.is_empty() && self.view.is_modern() {
            return;
        }
        let sinks = self.listeners.clone();
        let peer = self.peer.clone();
        tokio::spawn(async move {
            if !sinks.is_empty() {
                for sink in sinks {
                    let _ = match which {
                        Offer::Resources => sink.notify_resource_list_changed().await,
                        Offer::Prompts => sink.notify_prompt_list_changed().await,
                    };
                }
            } else if let Some(peer) = peer {
                let _ = match which {
                    Offer::Resources => peer.notify_resource_list_changed().await,
                    Offer::Prompts => peer.notify_prompt_list_changed().await,
                };
            }
        });
    }
}

/// Activate or deactivate tools (exposed names, already checked to exist).
/// Answers with the names whose state changed and sends list_changed if the
/// visible set changed.
#[derive(Message)]
#[rtype(result = "Result<ActivationChange, String>")]
pub struct SetActive {
    pub tools: Vec<String>,
    pub active: bool,
    /// From a request of the session itself (not `evoctl`).
    pub touch: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ActivationChange {
    pub changed: Vec<String>,
    pub activated: Vec<String>,
}

/// Why a 2026-07-28 session refuses activations: its list must not vary
/// by connection.
pub const MODERN_REFUSAL: &str = "this session speaks MCP 2026-07-28, whose tool list must not vary per connection, so tools are not activated in it; add them to its profile for every session using it (`evoctl activate --profile NAME TOOL`), or let the agent call them by exact name or through call_tool";

impl Handler<SetActive> for Session {
    type Result = MessageResult<SetActive>;
    fn handle(&mut self, msg: SetActive, _: &mut Context<Self>) -> Self::Result {
        if msg.touch {
            self.view.touch();
        }
        if self.view.is_modern() {
            return MessageResult(Err(MODERN_REFUSAL.to_string()));
        }
        let mut changed = Vec::new();
        for t in msg.tools {
            let did = if msg.active {
                self.activated.insert(t.clone())
            } else {
                self.activated.remove(&t)
            };
            if did {
                changed.push(t);
            }
        }
        if !changed.is_empty() {
            self.view.activated.store(Arc::new(self.activated.clone()));
            self.refresh_visible();
            self.save_if_named();
            self.events.changed(Topic::Sessions);
        }
        MessageResult(Ok(ActivationChange {
            changed,
            activated: self.activated.iter().cloned().collect(),
        }))
    }
}

/// From now on the session's activations are kept in the shared store
/// under `name` (an HTTP session's `Mcp-Session-Id`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ShareAs {
    pub name: String,
}

impl Handler<ShareAs> for Session {
    type Result = ();
    fn handle(&mut self, msg: ShareAs, _: &mut Context<Self>) {
        let _ = self.view.store_name.set(msg.name.clone());
        self.name = Some(msg.name);
        if !self.activated.is_empty() {
            self.save_if_named();
        }
    }
}

/// The session's activations as the shared store has them (another
/// instance changed them): taken as they are, not saved back.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetActivations(pub ActivationSet);

impl Handler<SetActivations> for Session {
    type Result = ();
    fn handle(&mut self, msg: SetActivations, _: &mut Context<Self>) {
        if self.view.is_modern() || msg.0 == self.activated {
            return;
        }
        self.activated = msg.0;
        self.view.activated.store(Arc::new(self.activated.clone()));
        self.refresh_visible();
    }
}

/// The session's own view: mode, activations, info.
#[derive(Message)]
#[rtype(result = "(evo_proto::ctl::SessionInfo, ActivationSet)")]
pub struct Describe;

impl Handler<Describe> for Session {
    type Result = MessageResult<Describe>;
    fn handle(&mut self, _: Describe, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.info(), self.activated.clone()))
    }
}
