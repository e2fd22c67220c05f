//! The Catalog actor: merges every server's tools into one index under exposed
//! names, applies the collision policy, and publishes immutable [`Snapshot`]s
//! that sessions read through an `ArcSwap` without a round trip.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use arc_swap::{ArcSwap, ArcSwapOption};
use rmcp::model::{ProgressToken, Tool};
use rmcp::service::{Peer, RoleClient, RoleServer};

use crate::child::{ChildServer, EnsureRunning};
use crate::config::ServerSpec;
use crate::names;
use crate::schema;

/// Lifecycle state of one configured server, readable without a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ServerState {
    /// Listed (from cache) but no child running; started by the first call.
    Idle = 0,
    Starting = 1,
    Ready = 2,
    Restarting = 3,
    Failed = 4,
    Stopped = 5,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Idle => "idle",
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Restarting => "restarting",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
        }
    }

    fn from_u8(v: u8) -> ServerState {
        match v {
            0 => ServerState::Idle,
            1 => ServerState::Starting,
            2 => ServerState::Ready,
            3 => ServerState::Restarting,
            4 => ServerState::Failed,
            _ => ServerState::Stopped,
        }
    }
}

/// How a session reaches one server's child: the ChildServer publishes its
/// client peer here when the child is ready, so a call goes straight to the
/// child without an actor hop. Only the owning ChildServer writes it.
pub struct ServerLink {
    pub id: String,
    /// Call timeout in milliseconds (`timeout_s`; a reload may change it).
    timeout_ms: std::sync::atomic::AtomicU64,
    peer: ArcSwapOption<Peer<RoleClient>>,
    /// Direct tool calls on a stdio child (see [`crate::childio`]).
    direct: ArcSwapOption<crate::childio::DirectCalls>,
    state: AtomicU8,
    /// `None` for a link built outside a running daemon (tests, benchmarks).
    child: Option<Addr<ChildServer>>,
    /// Calls in flight whose client asked for progress: the child-side
    /// progress token -> the session to tell and the client's own token.
    /// Only calls with a progress token touch it.
    progress: std::sync::Mutex<HashMap<ProgressToken, ProgressRoute>>,
    /// Calls in flight and the time of the last one, for `idle_timeout_s`.
    in_flight: std::sync::atomic::AtomicUsize,
    last_used: std::sync::Mutex<std::time::Instant>,
}

/// Marks a call in flight on a server until dropped.
pub struct CallGuard<'a>(&'a ServerLink);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        *self.0.last_used.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }
}

/// Where a child's progress notification for one call goes.
#[derive(Clone)]
pub struct ProgressRoute {
    pub session: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Unregisters a progress route when the call ends, however it ends.
pub struct ProgressGuard<'a> {
    link: &'a ServerLink,
    token: ProgressToken,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        self.link
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.token);
    }
}

impl ServerLink {
    pub fn new(id: String, timeout: Duration, child: Option<Addr<ChildServer>>) -> ServerLink {
        ServerLink {
            id,
            timeout_ms: std::sync::atomic::AtomicU64::new(timeout.as_millis() as u64),
            peer: ArcSwapOption::empty(),
            direct: ArcSwapOption::empty(),
            state: AtomicU8::new(ServerState::Starting as u8),
            child,
            progress: Default::default(),
            in_flight: Default::default(),
            last_used: std::sync::Mutex::new(std::time::Instant::now()),
        }
    }

    /// Counts a call as in flight until the guard drops.
    pub fn begin_call(&self) -> CallGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        CallGuard(self)
    }

    /// How long the server has had no call in flight (`None` while busy).
    pub fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(
            self.last_used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed(),
        )
    }

    /// Routes the child's progress for `child_token` to `route` until the
    /// guard drops.
    pub fn route_progress(
        &self,
        child_token: ProgressToken,
        route: ProgressRoute,
    ) -> ProgressGuard<'_> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(child_token.clone(), route);
        ProgressGuard {
            link: self,
            token: child_token,
        }
    }

    /// The route of a progress notification from the child, if a call of a
    /// session asked for it.
    pub fn progress_route(&self, child_token: &ProgressToken) -> Option<ProgressRoute> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(child_token)
            .cloned()
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    pub fn set_timeout(&self, timeout: Duration) {
        self.timeout_ms
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn state(&self) -> ServerState {
        ServerState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Called by the owning ChildServer only.
    pub(crate) fn publish(
        &self,
        state: ServerState,
        peer: Option<Peer<RoleClient>>,
        direct: Option<Arc<crate::childio::DirectCalls>>,
    ) {
        self.direct.store(direct);
        self.peer.store(peer.map(Arc::new));
        self.state.store(state as u8, Ordering::Release);
    }

    /// A call on `used` failed in transport. If that is still the live
    /// connection, the server's actor hears of it (see
    /// [`crate::child::ConnectionLost`]).
    pub fn connection_failed(&self, used: &Arc<Peer<RoleClient>>, reason: String) {
        let live = self.peer.load();
        if live.as_ref().is_some_and(|p| Arc::ptr_eq(p, used))
            && let Some(child) = &self.child
        {
            child.do_send(crate::child::ConnectionLost { reason });
        }
    }

    /// Direct calls, when the child is a ready stdio child.
    pub fn direct(&self) -> Option<Arc<crate::childio::DirectCalls>> {
        self.direct.load_full()
    }

    /// The child's peer, starting or waiting for the child when it is not
    /// ready. The error names the server and its state.
    pub async fn peer(&self) -> Result<Arc<Peer<RoleClient>>, String> {
        if let Some(peer) = self.peer.load_full() {
            return Ok(peer);
        }
        let Some(child) = &self.child else {
            return Err(format!("server '{}' has no child in this process", self.id));
        };
        match child.send(EnsureRunning).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "server '{}' is {} (its supervisor is gone); run `evoctl status` to see why",
                self.id,
                self.state().as_str()
            )),
        }
    }
}

/// One proxied tool as the catalog exposes it.
pub struct ToolEntry {
    /// Exposed name: `${prefix}_${upstream}`, sanitised.
    pub name: String,
    /// The child's own name for the tool.
    pub upstream: String,
    pub server: Arc<ServerLink>,
    pub domain: String,
    /// First sentence of the description, on one line.
    pub summary: String,
    /// Listed with its full schema from a session's start in dynamic mode.
    pub hot: bool,
    /// The tool as listed to clients: exposed name, normalised schema.
    pub tool: Tool,
    /// Configured parameter aliases for this tool: wrong name → right name.
    pub aliases: std::collections::BTreeMap<String, String>,
    /// The input validator, compiled on first use and kept with the entry
    /// (entries outlive snapshots while their tool is unchanged); `None` when
    /// the schema cannot be compiled and calls go unchecked.
    compiled: std::sync::OnceLock<Option<crate::repair::CompiledSchema>>,
}

/// An immutable view of the merged catalog. A new one is published on every
/// change; readers hold an `Arc` to whichever version they loaded.
#[derive(Default)]
pub struct Snapshot {
    pub version: u64,
    /// In config order, then each child's own order.
    pub tools: Vec<Arc<ToolEntry>>,
    index: HashMap<String, usize>,
    pub duplicates: Vec<evo_proto::ctl::Duplicate>,
    /// Built on the first search of this snapshot, then only read.
    pub search: LazyIndex,
    /// Each server's capabilities (from env flags), in config order.
    pub capabilities: Vec<(String, Vec<String>)>,
    /// Denied tools (absent from `tools`), with the rule that denies them.
    pub denied: HashMap<String, String>,
    /// Tools each call of which a person approves, with the rule.
    pub needs_approval: HashMap<String, String>,
    /// Servers that have listed no tools yet: while one is still starting,
    /// a call naming a tool evo does not know waits for it.
    pub unlisted: Vec<Arc<ServerLink>>,
}

impl Snapshot {
    /// A snapshot of stdio servers with default settings (by id, in order)
    /// and their tools, built the way the Catalog builds one, with no child
    /// behind it: for benchmarks and tests that need a catalog.
    pub fn of_tools(servers: &[(String, Vec<Tool>)]) -> Snapshot {
        let config: serde_json::Map<String, serde_json::Value> = servers
            .iter()
            .map(|(id, _)| (id.clone(), serde_json::json!({"command": "unused"})))
            .collect();
        let text = serde_json::json!({ "mcpServers": config }).to_string();
        let parsed = crate::config::parse(&text, std::path::Path::new("snapshot.json"), &|_| None)
            .map(|c| c.servers)
            .unwrap_or_default();
        let servers: Vec<(ServerSpec, Arc<ServerLink>, Vec<Arc<ToolEntry>>)> = parsed
            .into_iter()
            .zip(servers)
            .map(|(spec, (_, tools))| {
                let link = Arc::new(ServerLink::new(spec.id.clone(), spec.timeout, None));
                let entries = entries_for(&spec, &link, tools, &[]);
                (spec, link, entries)
            })
            .collect();
        let views: Vec<ServerTools<'_>> = servers
            .iter()
            .map(|(spec, link, entries)| ServerTools {
                spec,
                link,
                entries,
            })
            .collect();
        Snapshot::build(1, &views, &Default::default())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// Whether a server that has listed no tools yet is starting, so a name
    /// this snapshot lacks may yet appear. One waiting out a restart backoff
    /// does not count: a crash loop must not hold up every unknown name.
    pub fn still_listing(&self) -> bool {
        self.unlisted
            .iter()
            .any(|l| l.state() == ServerState::Starting)
    }

    /// Why `name` may not be called, when permissions deny it.
    pub fn refusal(&self, name: &str) -> Option<String> {
        self.denied.get(name).map(|rule| {
            format!("'{name}' is denied by the permissions ({rule}); ask the person who runs evo to allow it in permissions.yml")
        })
    }

    /// Merges each server's entries, in config order: the first
    /// registration of a name wins, later ones are recorded as duplicates
    /// (a native tool's name is always taken).
    /// Entries are shared with earlier snapshots, so what they compile lazily
    /// (input validators) is compiled once.
    pub fn build(
        version: u64,
        servers: &[ServerTools<'_>],
        permissions: &crate::permissions::Permissions,
    ) -> Snapshot {
        use crate::permissions::Permission;
        let mut denied = HashMap::new();
        let mut needs_approval = HashMap::new();
        let mut tools: Vec<Arc<ToolEntry>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut duplicates: Vec<evo_proto::ctl::Duplicate> = Vec::new();
        for server in servers {
            for entry in server.entries {
                let native = crate::native::NAMES.contains(&entry.name.as_str());
                if native || index.contains_key(&entry.name) {
                    let kept = match index.get(&entry.name) {
                        Some(&i) if !native => {
                            format!("{}:{}", tools[i].server.id, tools[i].upstream)
                        }
                        _ => crate::native::OWNER.to_string(),
                    };
                    let origin = format!("{}:{}", entry.server.id, entry.upstream);
                    match duplicates.iter_mut().find(|d| d.name == entry.name) {
                        Some(d) => d.skipped.push(origin),
                        None => duplicates.push(evo_proto::ctl::Duplicate {
                            name: entry.name.clone(),
                            kept,
                            skipped: vec![origin],
                        }),
                    }
                    continue;
                }
                // Resolved once per snapshot, never per call.
                let decision = permissions.decide(&entry.name);
                match decision.permission {
                    Permission::Deny => {
                        denied.insert(entry.name.clone(), decision.source);
                        continue;
                    }
                    Permission::RequireApproval => {
                        needs_approval.insert(entry.name.clone(), decision.source);
                    }
                    Permission::Allow => {}
                }
                index.insert(entry.name.clone(), tools.len());
                tools.push(entry.clone());
            }
        }
        let capabilities: Vec<(String, Vec<String>)> = servers
            .iter()
            .map(|s| {
                (
                    s.spec.id.clone(),
                    s.spec.capabilities.iter().cloned().collect(),
                )
            })
            .collect();
        let unlisted = servers
            .iter()
            .filter(|s| s.entries.is_empty())
            .map(|s| s.link.clone())
            .collect();
        let search = LazyIndex {
            index: std::sync::OnceLock::new(),
            tools: tools.clone(),
            capabilities: capabilities.iter().cloned().collect(),
        };
        Snapshot {
            version,
            tools,
            index,
            duplicates,
            search,
            capabilities,
            denied,
            needs_approval,
            unlisted,
        }
    }
}

/// A snapshot's search index, built on first use: a burst of publishes (many
/// children coming up) costs no index builds, and a snapshot nobody searches
/// never builds one.
#[derive(Default)]
pub struct LazyIndex {
    index: std::sync::OnceLock<crate::search::Index>,
    tools: Vec<Arc<ToolEntry>>,
    capabilities: HashMap<String, Vec<String>>,
}

impl std::ops::Deref for LazyIndex {
    type Target = crate::search::Index;
    fn deref(&self) -> &crate::search::Index {
        self.index
            .get_or_init(|| crate::search::Index::build(&self.tools, &self.capabilities))
    }
}

/// The entries of one server's tools under their exposed names. A tool name
/// the child listed twice keeps its first listing.
pub fn entries_for(
    spec: &ServerSpec,
    link: &Arc<ServerLink>,
    tools: &[Tool],
    discovery_hot: &[String],
) -> Vec<Arc<ToolEntry>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        if !seen.insert(tool.name.as_ref()) {
            tracing::warn!(server = %spec.id, tool = %tool.name, "child listed the same tool name twice; keeping the first");
            continue;
        }
        let name = names::exposed_name(&spec.prefix, &tool.name);
        out.push(Arc::new(ToolEntry::new(
            name,
            tool,
            spec,
            link.clone(),
            discovery_hot,
        )));
    }
    out
}

impl ToolEntry {
    fn new(
        name: String,
        upstream: &Tool,
        spec: &ServerSpec,
        link: Arc<ServerLink>,
        discovery_hot: &[String],
    ) -> ToolEntry {
        let meta = upstream.meta.as_ref();
        let meta_str = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let meta_hot = meta
            .and_then(|m| m.get("hot"))
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
            || meta_str("tier").as_deref() == Some("hot");
        let hot = meta_hot
            || spec.hot.iter().any(|h| h == upstream.name.as_ref())
            || discovery_hot.contains(&name);
        let domain = meta_str("domain").unwrap_or_else(|| spec.domain.clone());
        let (input_schema, fixed) = schema::normalize_input_schema(&upstream.input_schema);
        if fixed {
            tracing::debug!(server = %spec.id, tool = %upstream.name, "input schema had no \"type\": \"object\"; added it");
        }
        let mut tool = upstream.clone();
        tool.name = name.clone().into();
        tool.input_schema = input_schema;
        ToolEntry {
            summary: schema::summary(upstream.description.as_deref()),
            name,
            upstream: upstream.name.to_string(),
            server: link,
            domain,
            hot,
            aliases: spec
                .aliases
                .get(upstream.name.as_ref())
                .cloned()
                .unwrap_or_default(),
            tool,
            compiled: std::sync::OnceLock::new(),
        }
    }

    /// The compiled input schema (compiled once, on first use).
    pub fn compiled(&self) -> Option<&crate::repair::CompiledSchema> {
        self.compiled
            .get_or_init(|| {
                crate::repair::CompiledSchema::compile(&self.name, &self.tool.input_schema)
            })
            .as_ref()
    }

    /// Whether the tool has no description (its summary is a placeholder).
    pub fn summary_missing(&self) -> bool {
        self.summary == schema::NO_SUMMARY
    }

    /// Whether the input schema declares `param` at the top level.
    pub fn declares(&self, param: &str) -> bool {
        self.tool
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .is_some_and(|p| p.contains_key(param))
    }

    /// Does the input schema require `param`?
    pub fn requires(&self, param: &str) -> bool {
        self.tool
            .input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(param)))
    }
}

/// One server's contribution to a snapshot build.
pub struct ServerTools<'a> {
    pub spec: &'a ServerSpec,
    pub link: &'a Arc<ServerLink>,
    pub entries: &'a [Arc<ToolEntry>],
}

/// Where a server's listed tools came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    None,
    Cache,
    Live,
}

impl ToolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::None => "none",
            ToolSource::Cache => "cache",
            ToolSource::Live => "live",
        }
    }
}

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
            .map(|s| crate::refresher::CachedServer {
                id: s.spec.id.clone(),
                config_hash: s.spec.hash.to_string(),
                fetched_at: s.fetched_at.map_or(0, crate::refresher::unix_secs),
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
