//! The Supervisor actor: owns the running config, starts and stops the
//! ChildServer actors, keeps the directory of live sessions (and the saved
//! activations of named ones), answers control requests, and shuts the daemon
//! down.
//!
//! An invalid config or permissions file keeps what is in force and shows in `evoctl status`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use actix::prelude::*;
use arc_swap::ArcSwap;
use evo_proto::ctl;

use crate::auth::endpoint::EndpointControl;
use crate::catalog::snapshot::Snapshot;
use crate::catalog::{Catalog, CatalogChanged, SetServers, Subscribe};
use crate::child::link::ServerLink;
use crate::child::{self, ChildServer};
use crate::config::{self, Config, DiscoveryMode, ServerSpec};
use crate::console::access::ConsoleAccess;
use crate::console::events::{EventBus, Topic};
use crate::runtime::shutdown::StopSignal;
use crate::session::{self, ActivationSet, Session};
use crate::supervisor::watch::FileChanged;

mod reload;
mod requests;
mod sessions;
mod shared_store;
mod tokens;
pub mod watch;
use crate::auth::tokens::TokenTable;
use crate::catalog::CachedTools;
use crate::catalog::ChildLog;
use crate::catalog::SetPermissions;
use crate::catalog::SetProfiles;
use crate::catalog::SharedPins;
use crate::catalog::SubscribeLogs;
use crate::catalog::cache;
use crate::catalog::cache::CachedServer;
use crate::catalog::refresher::FlushNow;
use crate::catalog::refresher::PersistProfiles;
use crate::catalog::refresher::Refresher;
use crate::catalog::refresher::Revalidate;
use crate::child::link::ServerState;
use crate::config::Limits;
use crate::config::serve::ServeSettings;
use crate::metrics::Gathered;
use crate::oauth::store;
use crate::policy::approvals::ApprovalBook;
use crate::policy::approvals::Gate;
use crate::policy::permissions::PermissionEnv;
use crate::policy::permissions::Permissions;
use crate::policy::profiles::PROFILES_FILE;
use crate::policy::profiles::ProfileBook;
use crate::policy::profiles::SavedProfiles;
use crate::search::embedder::Configure;
use crate::search::embedder::Embedder;
use crate::search::embedder::SemanticView;
use crate::search::learned::learned;
use crate::session::config_trouble::ConfigTrouble;
use crate::store::Event;
use crate::store::Store;
use crate::store::instances::PUBLISH_EVERY;
use crate::store::redis::OP_TIMEOUT;
use crate::telemetry;
pub use requests::Ctl;
pub use sessions::{OpenSession, OpenedSession, Refused, SaveNamed, SessionClosed};
pub use shared_store::ShareSession;
pub use tokens::RefreshTokens;

/// Where the daemon's files are and what its command line overrides.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub config_path: PathBuf,
    pub permissions_path: PathBuf,
    pub cache_dir: PathBuf,
    pub socket_path: PathBuf,
    /// `evod --mode`.
    pub mode: Option<DiscoveryMode>,
    /// `EVO_DISCOVERY_MODE` in evod's environment.
    pub env_mode: Option<DiscoveryMode>,
    /// The listener came from systemd, which owns the socket file.
    pub socket_activated: bool,
    /// Where shared state lives (files, or Redis with `store.redis_url`).
    pub store: Store,
    /// What open consoles hear of evod (handed on to sessions and children).
    pub events: EventBus,
}

struct ChildHandle {
    spec: Arc<ServerSpec>,
    addr: Addr<ChildServer>,
    link: Arc<ServerLink>,
}

/// What could not be written to the shared store, by name.
#[derive(Default)]
struct Unsynced {
    activations: std::collections::BTreeSet<String>,
    profiles: std::collections::BTreeSet<String>,
}

struct SessionEntry {
    addr: Addr<Session>,
    name: Option<String>,
    profile: Option<String>,
    view: session::SessionView,
    /// Where its messages travel, for `/metrics`.
    io: evo_proto::ctl::SessionIo,
    /// Its era when it is known from the start (HTTP sessions).
    era: Option<evo_proto::ctl::SessionEra>,
}

/// The Supervisor actor. See the module docs.
pub struct Supervisor {
    opts: DaemonOptions,
    config: Config,
    config_error: Option<String>,
    /// `serve` as the HTTP endpoint took it at start: it keeps these until
    /// evod restarts, so a reload compares against them, not the last file.
    serving: ServeSettings,
    /// `config_error` as sessions' agents are told it.
    config_trouble: ConfigTrouble,
    /// A version of the config loaded since start (it stays in force while
    /// a later one cannot be read).
    config_loaded: bool,
    permissions: Arc<Permissions>,
    permissions_error: Option<String>,
    /// Whether a permissions file (or its absence) ever loaded: until one
    /// does, an unusable file denies everything.
    permissions_loaded: bool,
    approvals: ApprovalBook,
    children: Vec<ChildHandle>,
    catalog: Addr<Catalog>,
    /// Children starting at once (`limits.max_concurrent_starts`).
    gate: Arc<child::StartGate>,
    refresher: Addr<Refresher>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    /// The semantic search stage: the Embedder and what it publishes.
    embedder: Addr<Embedder>,
    semantic: Arc<ArcSwap<SemanticView>>,
    sessions: HashMap<String, SessionEntry>,
    /// Activations of named sessions, kept across reconnects and restarts.
    named: BTreeMap<String, ActivationSet>,
    /// Changes the shared store missed (it was unreachable): sessions'
    /// activations and profiles, written when it is back.
    unsynced: Unsynced,
    /// This actor's own address (for what finishes off its thread).
    me: Option<Addr<Supervisor>>,
    /// Profiles in force: the config's, with a person's run-time changes.
    profiles: ProfileBook,
    /// Every run-time change to profiles as saved in the cache directory,
    /// kept for profiles the config does not define (now), so taking one
    /// out of the config and back loses nothing.
    saved_profiles: SavedProfiles,
    next_session: u64,
    started: Instant,
    shutting_down: bool,
    /// Keeps the config, env and permissions files' watcher alive.
    watcher: Option<watch::Watcher>,
    /// The files it watches (the env file's path may change on reload).
    watched: Vec<PathBuf>,
    /// Fired when the daemon stops; sessions end with it.
    stop: StopSignal,
    /// The HTTP endpoint, when evod serves `serve.http`.
    endpoint: Option<EndpointControl>,
    /// The API tokens for the HTTP endpoint, as last read or written.
    tokens: Arc<TokenTable>,
    /// Why the tokens file could not be read, when it could not.
    tokens_error: Option<String>,
    /// The API tokens in force came from the shared store (else, with one,
    /// from this machine's copy until it answers).
    tokens_from_store: bool,
    /// The web console, for `evoctl ui`.
    console: Option<Arc<dyn ConsoleAccess>>,
}

/// The semantic search stage the Supervisor configures and sessions read.
pub struct SearchStage {
    pub embedder: Addr<Embedder>,
    pub view: Arc<ArcSwap<SemanticView>>,
}

impl Supervisor {
    /// Tells the Embedder the `search` settings in force.
    fn configure_search(&self) {
        let config_dir = self
            .opts
            .config_path
            .parent()
            .unwrap_or(std::path::Path::new("."));
        let settings = self.config.search.clone();
        learned().set_enabled(settings.learn);
        let model_dir = settings.model_dir(config_dir, &self.opts.cache_dir);
        self.embedder.do_send(Configure {
            settings,
            model_dir,
        });
    }

    pub fn new(
        opts: DaemonOptions,
        catalog: Addr<Catalog>,
        refresher: Addr<Refresher>,
        snapshot: Arc<ArcSwap<Snapshot>>,
        search: SearchStage,
        stop: StopSignal,
    ) -> Supervisor {
        // With the shared store both live there (read once it answers).
        let (named, saved_profiles) = if opts.store.shared().is_some() {
            Default::default()
        } else {
            (
                load_named_sessions(&named_sessions_path(&opts)),
                load_saved_profiles(&opts.cache_dir.join(PROFILES_FILE)),
            )
        };
        Supervisor {
            opts,
            config: Config::default(),
            config_error: None,
            serving: ServeSettings::default(),
            config_trouble: ConfigTrouble::default(),
            config_loaded: false,
            permissions: Default::default(),
            permissions_error: None,
            permissions_loaded: false,
            approvals: Default::default(),
            children: Vec::new(),
            catalog,
            gate: child::StartGate::new(crate::config::default_max_concurrent_starts()),
            refresher,
            snapshot,
            embedder: search.embedder,
            semantic: search.view,
            sessions: HashMap::new(),
            named,
            unsynced: Default::default(),
            me: None,
            profiles: Default::default(),
            saved_profiles,
            next_session: 0,
            started: Instant::now(),
            shutting_down: false,
            watcher: None,
            watched: Vec::new(),
            stop,
            endpoint: None,
            tokens: Default::default(),
            tokens_error: None,
            tokens_from_store: false,
            console: None,
        }
    }

    fn load_config(&mut self) {
        match config::load(&self.opts.config_path) {
            Ok(cfg) => {
                self.log_problems(&cfg);
                self.config_error = None;
                self.config_trouble.clear();
                self.config_loaded = true;
                self.serving = cfg.serve.clone();
                self.config = cfg;
                self.apply_profiles();
            }
            Err(e) => {
                // At start there is no last good config to keep.
                tracing::error!(
                    "{e}; running with no servers until the file is fixed (saving it applies it)"
                );
                self.config_error = Some(e.to_string());
                self.config_trouble
                    .set(&self.opts.config_path, &e.to_string(), false);
            }
        }
    }

    /// Loads permissions.yml; an invalid file keeps the permissions in
    /// force, and at start, when none are, denies every tool until it is
    /// fixed. Returns whether they changed.
    fn load_permissions(&mut self) -> Result<bool, String> {
        let env = PermissionEnv::from_process();
        match Permissions::load(&self.opts.permissions_path, &env) {
            Ok(p) => {
                for w in p.warnings() {
                    tracing::warn!(permissions = %self.opts.permissions_path.display(), "{w}");
                }
                self.permissions_error = None;
                self.permissions_loaded = true;
                if *self.permissions == p {
                    return Ok(false);
                }
                tracing::info!(role = ?p.active_role(), "permissions loaded");
                self.permissions = Arc::new(p);
                self.catalog
                    .do_send(SetPermissions(self.permissions.clone()));
                Ok(true)
            }
            Err(e) => {
                let msg = e.to_string();
                self.permissions_error = Some(msg.clone());
                if !self.permissions_loaded {
                    tracing::error!("{msg}; denying every tool until the file is fixed");
                    self.permissions = Arc::new(Permissions::unusable(&msg));
                    self.catalog
                        .do_send(SetPermissions(self.permissions.clone()));
                    return Err(format!("{msg}; every tool is denied until it is fixed"));
                }
                tracing::error!("{msg}; keeping the permissions in force");
                Err(format!("{msg}; the permissions in force stay"))
            }
        }
    }

    /// Starts a ChildServer per server. A server whose cached entry has a
    /// matching config hash is listed from the cache at once and its child
    /// is not spawned until a call needs it (lazy start); a stale entry is
    /// re-discovered in the background.
    fn start_children(&mut self, mut cache: HashMap<String, CachedServer>) {
        let max_age = self.config.cache.max_age();
        let around = self.surroundings(&self.config.limits);
        let mut cached = HashMap::new();
        let mut stale = Vec::new();
        for spec in &self.config.servers {
            let spec = Arc::new(spec.clone());
            let hit = cache
                .remove(&spec.id)
                .filter(|c| c.config_hash == spec.hash.to_string() && !c.tools.is_empty());
            let (addr, link) = ChildServer::launch(spec.clone(), &around, hit.is_some());
            if let Some(c) = hit {
                let fetched_at =
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(c.fetched_at);
                let age = SystemTime::now()
                    .duration_since(fetched_at)
                    .unwrap_or_default();
                tracing::info!(server = %spec.id, tools = c.tools.len(), age_s = age.as_secs(), "listed from cache; child starts on first call");
                if age > max_age {
                    stale.push((spec.id.clone(), addr.clone()));
                }
                cached.insert(
                    spec.id.clone(),
                    CachedTools {
                        tools: c.tools,
                        offered: c.offered,
                        fetched_at,
                    },
                );
            }
            self.children.push(ChildHandle { spec, addr, link });
        }
        self.send_servers(cached, HashMap::new());
        if !stale.is_empty() {
            self.refresher.do_send(Revalidate(stale));
        }
    }

    /// Re-reads the config and applies it as a diff: removed servers stop,
    /// added ones start, changed ones (config hash) restart, a renamed id or
    /// a changed prefix re-prefixes that server's tools (activations follow),
    /// and unchanged children keep running untouched. An invalid file leaves
    /// the running config in force.
    fn reload(&mut self) -> Result<ctl::ActionReport, String> {
        // Config and permissions health show on the console either way.
        self.opts.events.changed(Topic::Servers);
        let permissions = self.load_permissions();
        let mut report = self.reload_config()?;
        match permissions {
            Ok(true) => report.message.push_str("; permissions changed"),
            Ok(false) => {}
            Err(e) => return Err(e),
        }
        Ok(report)
    }

    /// What the children launched under `limits` share; the start gate
    /// takes the (possibly new) limit.
    fn surroundings(&self, limits: &Limits) -> child::SharedByChildren {
        self.gate.set_limit(limits.max_concurrent_starts);
        child::SharedByChildren {
            catalog: self.catalog.clone(),
            gate: self.gate.clone(),
            max_line: limits.max_message_bytes,
            max_result: limits.max_result_bytes,
            events: self.opts.events.clone(),
        }
    }

    /// Logs a loaded config's env file (the names it set, never the
    /// values), its warnings and its entries that cannot be used.
    fn log_problems(&self, cfg: &Config) {
        if let Some(env) = cfg.env_file.as_ref().filter(|e| e.found) {
            tracing::info!(env_file = %env.path.display(), variables = ?env.names, "env file read");
        }
        for w in &cfg.warnings {
            tracing::warn!("config warning: {w}");
        }
        for e in &cfg.failed {
            tracing::error!(config = %self.opts.config_path.display(), server = %e.server, "{e}");
        }
    }

    fn reload_config(&mut self) -> Result<ctl::ActionReport, String> {
        let cfg = match config::load(&self.opts.config_path) {
            Ok(cfg) => cfg,
            Err(e) => {
                let msg = e.to_string();
                tracing::error!("{msg}; keeping the running config");
                self.config_error = Some(msg.clone());
                self.config_trouble
                    .set(&self.opts.config_path, &msg, self.config_loaded);
                return Err(format!("{msg}; the running config stays in force"));
            }
        };
        // As at start: an entry that cannot be used fails that server alone
        // (shown failed with its error); the valid ones apply.
        self.log_problems(&cfg);
        let mut report = ctl::ActionReport {
            warnings: cfg.warnings.iter().map(ToString::to_string).collect(),
            ..Default::default()
        };
        if cfg.serve != self.serving {
            let why = "serve.http changed: the HTTP endpoint keeps its listener and auth settings until evod restarts (the tokens file is read again now)";
            tracing::warn!("{why}");
            report.restart_needed.push(why.to_string());
        }
        if let Some(why) = telemetry::restart_needed(&cfg.telemetry) {
            tracing::warn!("{why}");
            report.restart_needed.push(why.to_string());
        }
        self.config_error = None;
        self.config_trouble.clear();
        self.config_loaded = true;
        // Children started by this reload read messages up to the new limit.
        let around = self.surroundings(&cfg.limits);
        let snapshot = self.snapshot.load_full();
        let plan = {
            let running: Vec<&ServerSpec> = self.children.iter().map(|h| &*h.spec).collect();
            reload::plan(&running, &cfg.servers)
        };
        let mut old: Vec<Option<ChildHandle>> = self.children.drain(..).map(Some).collect();
        let mut renames: HashMap<String, String> = HashMap::new();
        let mut next = Vec::with_capacity(plan.steps.len());
        for (spec, step) in cfg.servers.iter().zip(&plan.steps) {
            let spec = Arc::new(spec.clone());
            let launch = |spec: &Arc<ServerSpec>| ChildServer::launch(spec.clone(), &around, false);
            match *step {
                reload::Step::Keep { old: i, reprefixed } => {
                    let Some(h) = old[i].take() else { continue };
                    if reprefixed {
                        report.reprefixed.push(spec.id.clone());
                    } else if h.spec.tools != spec.tools {
                        // The child runs on; its exposed tools are derived anew.
                        report
                            .reprefixed
                            .push(format!("{} (tool overrides)", spec.id));
                    }
                    h.link.set_timeout(spec.timeout);
                    h.link.set_max_result_bytes(
                        spec.max_result_bytes.unwrap_or(cfg.limits.max_result_bytes),
                    );
                    h.addr.do_send(child::Retune(spec.clone()));
                    // "Failed until reload or refresh": a reload retries it.
                    if h.link.state() == ServerState::Failed {
                        h.addr.do_send(child::Restart);
                        report.restarted.push(spec.id.clone());
                    }
                    next.push(ChildHandle {
                        spec,
                        addr: h.addr,
                        link: h.link,
                    });
                }
                reload::Step::Restart { old: i } => {
                    if let Some(h) = old[i].take() {
                        h.addr.do_send(child::Shutdown);
                    }
                    report.restarted.push(spec.id.clone());
                    let (addr, link) = launch(&spec);
                    next.push(ChildHandle { spec, addr, link });
                }
                reload::Step::Rename { old: i } => {
                    if let Some(h) = old[i].take() {
                        renames.insert(spec.id.clone(), h.spec.id.clone());
                        report
                            .reprefixed
                            .push(format!("{} (was {})", spec.id, h.spec.id));
                        h.addr.do_send(child::Shutdown);
                        // A remote server keeps its OAuth tokens under its new id.
                        store::rename(&h.spec.id, &spec.id);
                    }
                    let (addr, link) = launch(&spec);
                    next.push(ChildHandle { spec, addr, link });
                }
                reload::Step::Add => {
                    report.added.push(spec.id.clone());
                    let (addr, link) = launch(&spec);
                    next.push(ChildHandle { spec, addr, link });
                }
            }
        }
        for h in plan.removed.iter().filter_map(|&i| old[i].take()) {
            report.removed.push(h.spec.id.clone());
            h.addr.do_send(child::Shutdown);
        }
        // How activations follow: old exposed name -> new one.
        let mut remap = HashMap::new();
        let mut dropped = Vec::new();
        for e in &snapshot.tools {
            let new_spec = next.iter().find(|h| {
                h.spec.id == e.server.id || renames.get(&h.spec.id) == Some(&e.server.id)
            });
            match new_spec {
                Some(h) => {
                    let name = h.spec.exposed_name(&e.upstream);
                    if name != e.name {
                        remap.insert(e.name.clone(), name);
                    }
                }
                None => dropped.push(e.name.clone()),
            }
        }
        report.failed = cfg.failed.iter().map(|e| e.to_string()).collect();
        self.children = next;
        self.config = cfg;
        if self.saved_profiles.rename(&remap) {
            self.save_profiles();
        }
        self.apply_profiles();
        self.configure_search();
        self.send_servers(HashMap::new(), renames);
        for s in self.sessions.values() {
            s.addr.do_send(session::Remap {
                renamed: remap.clone(),
                dropped: dropped.clone(),
            });
        }
        let changes = report.added.len()
            + report.removed.len()
            + report.restarted.len()
            + report.reprefixed.len();
        report.message = if changes == 0 {
            "config reloaded: no server changed".into()
        } else {
            format!("config reloaded: {changes} server(s) changed")
        };
        if !report.failed.is_empty() {
            report.message.push_str(&format!(
                "; {} server(s) cannot be used until their entries are fixed",
                report.failed.len()
            ));
        }
        if !report.restart_needed.is_empty() {
            report
                .message
                .push_str("; some changes apply only when evod restarts");
        }
        tracing::info!(added = ?report.added, removed = ?report.removed, restarted = ?report.restarted, reprefixed = ?report.reprefixed, "{}", report.message);
        Ok(report)
    }

    /// Tells the Catalog the servers now configured, in config order.
    fn send_servers(&self, cached: HashMap<String, CachedTools>, renamed: HashMap<String, String>) {
        self.catalog.do_send(SetServers {
            servers: self
                .children
                .iter()
                .map(|c| (c.spec.clone(), c.link.clone()))
                .collect(),
            discovery_hot: self.config.discovery.hot.clone(),
            cached,
            renamed,
            integrity: self.config.integrity,
        });
    }

    /// Watches the config, its env file and the permissions file, anew
    /// when the env file's path changed (`env_file` was edited).
    fn watch_files(&mut self, ctx: &mut Context<Self>) {
        let mut files = vec![
            self.opts.config_path.clone(),
            self.opts.permissions_path.clone(),
        ];
        if let Some(env) = &self.config.env_file {
            files.push(env.path.clone());
        }
        if self.watcher.is_some() && files == self.watched {
            return;
        }
        self.watcher = None;
        match watch::watch(files.clone(), ctx.address().recipient()) {
            Ok(w) => {
                self.watcher = Some(w);
                self.watched = files;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the config files; use `evoctl reload` after editing them")
            }
        }
    }

    /// Profiles from the config with the saved changes: to the Catalog,
    /// which resolves them into every snapshot (sessions using a changed
    /// one hear list_changed).
    fn apply_profiles(&mut self) {
        let book = ProfileBook::new(&self.config.profiles, &self.saved_profiles);
        if book != self.profiles {
            self.profiles = book;
            self.catalog
                .do_send(SetProfiles(Arc::new(self.profiles.clone())));
        }
    }

    /// Adds (`active`) tools to a profile or takes them out, saves the
    /// change and republishes; returns the names whose membership changed.
    fn change_profile(&mut self, profile: &str, tools: &[String], active: bool) -> Vec<String> {
        let changed = self.profiles.change(profile, tools, active);
        if !changed.is_empty() {
            if let Some(p) = self.profiles.get(profile) {
                self.saved_profiles.set(profile, p.changes.clone());
            }
            if self.opts.store.shared().is_some() {
                self.unsynced.profiles.insert(profile.to_string());
                self.sync_profiles();
            } else {
                self.save_profiles();
            }
            self.catalog
                .do_send(SetProfiles(Arc::new(self.profiles.clone())));
        }
        changed
    }

    fn save_profiles(&self) {
        if let Some(shared) = self.opts.store.shared().cloned() {
            let saved = self.saved_profiles.clone();
            tokio::spawn(async move {
                for (name, changes) in &saved.profiles {
                    if let Err(e) = shared.profile_put(name, Some(changes)).await {
                        tracing::error!(profile = %name, "profile changes not written to the store: {e}");
                    }
                }
                shared.publish(Event::Profiles).await;
            });
            return;
        }
        self.refresher
            .do_send(PersistProfiles(self.saved_profiles.clone()));
    }

    /// Live sessions using `profile`.
    fn sessions_using(&self, profile: &str) -> usize {
        self.sessions
            .values()
            .filter(|s| s.profile.as_deref() == Some(profile))
            .count()
    }
}

/// Written by the Refresher (`PersistNamed`).
fn named_sessions_path(opts: &DaemonOptions) -> PathBuf {
    opts.cache_dir.join("sessions.json")
}

fn load_named_sessions(path: &std::path::Path) -> BTreeMap<String, ActivationSet> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "named sessions file is corrupt; starting without it");
            BTreeMap::new()
        }),
        Err(_) => BTreeMap::new(),
    }
}

fn load_saved_profiles(path: &std::path::Path) -> SavedProfiles {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "saved profile changes are unreadable; starting from the config's profiles (the file is replaced at the next change)");
            Default::default()
        }),
        Err(_) => Default::default(),
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.catalog.do_send(Subscribe(ctx.address().recipient()));
        self.catalog
            .do_send(SubscribeLogs(ctx.address().recipient()));
        self.catalog
            .do_send(Subscribe(self.embedder.clone().recipient()));
        self.me = Some(ctx.address());
        if let Some(shared) = self.opts.store.shared() {
            shared.set_listener(ctx.address().recipient());
            ctx.run_interval(PUBLISH_EVERY, |act, _| act.publish_sessions());
        }
        self.load_config();
        self.configure_search();
        let _ = self.load_permissions();
        self.reload_tokens();
        let file = cache::load_cache(&self.opts.cache_dir);
        let Some(shared) = self.opts.store.shared().cloned() else {
            self.start_children(file);
            self.watch_files(ctx);
            return;
        };
        let wanted: Vec<(String, String)> = self
            .config
            .servers
            .iter()
            .map(|s| (s.id.clone(), s.hash.to_string()))
            .collect();
        // The catalog other instances discovered: read before anything
        // else is handled, so the first session sees it.
        ctx.wait(
            async move {
                shared.wait_connected(OP_TIMEOUT).await;
                let pins = shared.pins_get(None).await;
                (pins, shared.catalog_get(&wanted).await)
            }
            .into_actor(self)
            .map(move |(pins, got), act, ctx| {
                // The pins first: a list is checked against them.
                match pins {
                    Ok(servers) => act.catalog.do_send(SharedPins {
                        servers,
                        at_start: true,
                    }),
                    Err(e) => tracing::warn!("tool pins not read from the store ({e}); using this instance's file until it is back"),
                }
                let cache = match got {
                    Ok(mut shared) => {
                        // This instance's own file fills what the store lacks.
                        for (id, entry) in file {
                            shared.entry(id).or_insert(entry);
                        }
                        shared
                    }
                    Err(e) => {
                        tracing::warn!("catalog cache not read from the store ({e}); using this instance's file");
                        file
                    }
                };
                act.start_children(cache);
                act.watch_files(ctx);
            }),
        );
    }
}

/// The HTTP endpoint is serving: it takes its tokens from the Supervisor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AttachEndpoint(pub EndpointControl);

impl Handler<AttachEndpoint> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: AttachEndpoint, _: &mut Context<Self>) {
        msg.0.set_tokens(self.tokens.clone());
        self.endpoint = Some(msg.0);
    }
}

/// The web console, made in `main` once the Supervisor runs.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AttachConsole(pub Arc<dyn ConsoleAccess>);

impl Handler<AttachConsole> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: AttachConsole, _: &mut Context<Self>) {
        self.console = Some(msg.0);
    }
}

/// `/readyz`: is the config loaded (and, later, the store reachable)?
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct Readiness;

impl Handler<Readiness> for Supervisor {
    type Result = Result<(), String>;
    fn handle(&mut self, _: Readiness, _: &mut Context<Self>) -> Self::Result {
        if self.shutting_down {
            return Err("evod is shutting down".into());
        }
        if let Some(e) = &self.config_error {
            return Err(format!("the config did not load: {e}"));
        }
        match self.opts.store.not_ready() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

/// `/metrics`: the states of a scrape (sessions, children, restarts).
#[derive(Message)]
#[rtype(result = "crate::metrics::Gathered")]
pub struct GatherMetrics;

impl Handler<GatherMetrics> for Supervisor {
    type Result = ResponseFuture<Gathered>;
    fn handle(&mut self, _: GatherMetrics, _: &mut Context<Self>) -> Self::Result {
        use evo_proto::ctl::SessionEra;
        let sessions = self
            .sessions
            .values()
            .map(|e| {
                let era = match e.era {
                    Some(era) => era.as_str(),
                    None if e.view.modern() => SessionEra::Modern.as_str(),
                    None => SessionEra::Initialize.as_str(),
                };
                (e.io.as_str(), era)
            })
            .collect();
        let children: Vec<(String, Addr<ChildServer>)> = self
            .children
            .iter()
            .map(|c| (c.spec.id.clone(), c.addr.clone()))
            .collect();
        let states = self
            .children
            .iter()
            .map(|c| evo_proto::ctl::ServerState::from(c.link.state()).as_str())
            .collect();
        Box::pin(async move {
            let mut restarts = Vec::with_capacity(children.len());
            for (id, addr) in children {
                if let Ok(st) = addr.send(child::GetStatus).await {
                    restarts.push((id, st.restarts));
                }
            }
            Gathered {
                sessions,
                children: states,
                restarts,
            }
        })
    }
}

impl Handler<ChildLog> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ChildLog, _: &mut Context<Self>) {
        for s in self.sessions.values() {
            s.addr.do_send(msg.clone());
        }
    }
}

impl Handler<CatalogChanged> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: CatalogChanged, _: &mut Context<Self>) {
        for s in self.sessions.values() {
            s.addr.do_send(msg.clone());
        }
        self.opts.events.changed(Topic::Catalog);
        self.opts.events.changed(Topic::Servers);
    }
}

/// A session's call needs a person's approval: consult the book (this
/// instance's, in memory; the shared store's is asked by the session).
#[derive(Message)]
#[rtype(result = "crate::policy::approvals::Gate")]
pub struct CheckApproval {
    pub tool: String,
    pub key: u64,
    pub preview: String,
    /// The calling session's identity (`None`: the local owner).
    pub identity: Option<String>,
}

impl Handler<CheckApproval> for Supervisor {
    type Result = MessageResult<CheckApproval>;
    fn handle(&mut self, msg: CheckApproval, _: &mut Context<Self>) -> Self::Result {
        // With the shared store, sessions ask it themselves.
        let gate = self.approvals.check(
            &msg.tool,
            msg.key,
            msg.identity.as_deref(),
            &msg.preview,
            Instant::now(),
        );
        log_held(&self.opts.events, &msg, &gate);
        MessageResult(gate)
    }
}

/// Logs a held call and tells open consoles the approvals changed.
pub(crate) fn log_held(events: &EventBus, msg: &CheckApproval, gate: &Gate) {
    events.changed(Topic::Approvals);
    if let Gate::Pending(id) = gate {
        tracing::warn!(id = %id, tool = %msg.tool, identity = msg.identity.as_deref().unwrap_or(evo_proto::ctl::LOCAL_IDENTITY), "call held for approval: run `evoctl approve {id}` or `evoctl deny {id}`");
    }
}

impl Handler<FileChanged> for Supervisor {
    type Result = ();
    fn handle(&mut self, _: FileChanged, ctx: &mut Context<Self>) {
        if self.shutting_down {
            return;
        }
        tracing::info!(config = %self.opts.config_path.display(), "config, env or permissions file changed; reloading");
        let _ = self.reload();
        self.reload_tokens();
        self.watch_files(ctx);
    }
}

/// Shut the daemon down: stop every child (whole process trees), remove the
/// socket, stop the system. Sent by SIGTERM/SIGINT and `evoctl stop`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<Shutdown> for Supervisor {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) -> Self::Result {
        if self.shutting_down {
            return Box::pin(actix::fut::ready(()));
        }
        self.shutting_down = true;
        tracing::info!("shutting down: stopping {} children", self.children.len());
        let stops: Vec<_> = self
            .children
            .iter()
            .map(|c| c.addr.send(child::Shutdown))
            .collect();
        let socket = (!self.opts.socket_activated).then(|| self.opts.socket_path.clone());
        let refresher = self.refresher.clone();
        let stop = self.stop.clone();
        Box::pin(
            async move {
                futures::future::join_all(stops).await;
                let _ = refresher.send(FlushNow).await;
                // Let answers to calls that failed with the children reach
                // their sessions, then end the sessions (each says goodbye).
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                stop.fire();
                stop.sessions_ended(std::time::Duration::from_secs(2)).await;
                if let Some(socket) = socket {
                    let _ = std::fs::remove_file(&socket);
                }
            }
            .into_actor(self)
            .map(|_, _, _| {
                tracing::info!("evod stopped");
                System::current().stop();
            }),
        )
    }
}
