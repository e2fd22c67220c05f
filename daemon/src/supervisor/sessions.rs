//! Sessions opening and closing: the messages sessions and fronts send the
//! Supervisor about them, and the activations of named sessions kept across
//! reconnects.
//!
//! Named sessions' activations live in `<cache dir>/sessions.json`, handed to the Refresher on
//! every change (`PersistNamed`, written at once), so a daemon restart keeps them.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use arc_swap::ArcSwap;

use super::{SessionEntry, Supervisor};
use crate::catalog::refresher::PersistNamed;
use crate::config::DiscoveryMode;
use crate::console::events::{EventBus, Topic};
use crate::search::embedder::SemanticView;
use crate::session::config_trouble::ConfigTrouble;
use crate::session::{self, ActivationSet, Session};
use crate::store::Shared;

impl Supervisor {
    /// The mode for a new session, strongest first: `evoctl shim --mode`,
    /// `evod --mode`, `EVO_DISCOVERY_MODE` (the shim's, which its client
    /// sets for it, then evod's), `discovery.mode`, dynamic.
    pub(super) fn session_mode(
        &self,
        requested: Option<&str>,
        shim_env: Option<&str>,
    ) -> Result<DiscoveryMode, String> {
        if let Some(m) = requested {
            return DiscoveryMode::parse_from(m, "--mode");
        }
        if let Some(m) = self.opts.mode {
            return Ok(m);
        }
        if let Some(m) = shim_env {
            return DiscoveryMode::parse_from(m, "EVO_DISCOVERY_MODE in the shim's environment");
        }
        Ok(self
            .opts
            .env_mode
            .or(self.config.discovery.mode)
            .unwrap_or(DiscoveryMode::Dynamic))
    }

    pub(super) fn save_named(&self) {
        self.refresher.do_send(PersistNamed(self.named.clone()));
    }
}

/// A new MCP connection passed the handshake (or an HTTP request needs a
/// session): create its Session.
#[derive(Message, Default)]
#[rtype(result = "Result<OpenedSession, Refused>")]
pub struct OpenSession {
    pub mode: Option<String>,
    /// `EVO_DISCOVERY_MODE` in the shim's environment.
    pub env_mode: Option<String>,
    pub name: Option<String>,
    /// The profile whose tools it lists; must be defined.
    pub profile: Option<String>,
    /// The client's stdio is handed to the daemon (else MCP runs on the
    /// control socket).
    pub stdio: bool,
    /// Served over HTTP: who the front authenticated.
    pub http: Option<session::HttpCaller>,
    /// Its activations as the shared store has them (an HTTP session
    /// another instance opened), read by the front.
    pub activated: Option<ActivationSet>,
}

/// Why a session was not opened. `usage`: because of how the client was
/// started (an unknown profile), which the shim reports with exit 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub usage: bool,
}

impl From<String> for Refused {
    fn from(message: String) -> Refused {
        Refused {
            message,
            usage: false,
        }
    }
}

pub struct OpenedSession {
    pub id: String,
    pub mode: DiscoveryMode,
    pub profile: Option<String>,
    pub addr: Addr<Session>,
    pub view: session::SessionView,
    pub search_limit: usize,
    pub semantic: Arc<ArcSwap<SemanticView>>,
    pub instructions_budget: usize,
    /// `code_mode.enabled`.
    pub code_mode: bool,
    /// `discovery.startup_wait_ms`.
    pub startup_wait: Duration,
    pub max_message_bytes: usize,
    /// The permissions role of its HTTP identity (`None`: `active_role`).
    pub role: Option<String>,
    /// Its HTTP identity (`None`: the local owner).
    pub identity: Option<String>,
    /// The shared store, for the per-session state kept there.
    pub shared: Option<Arc<Shared>>,
    pub events: EventBus,
    /// Whether the config could not be read, as the agent is told.
    pub config_trouble: ConfigTrouble,
}

impl Handler<OpenSession> for Supervisor {
    type Result = Result<OpenedSession, Refused>;
    fn handle(&mut self, msg: OpenSession, ctx: &mut Context<Self>) -> Self::Result {
        if self.shutting_down {
            return Err(String::from("evod is shutting down").into());
        }
        let mode = self.session_mode(msg.mode.as_deref(), msg.env_mode.as_deref())?;
        if let Some(name) = &msg.name
            && (name.is_empty() || name.len() > 128 || name.chars().any(char::is_control))
        {
            return Err(String::from("a session name is 1 to 128 printable characters").into());
        }
        if let Some(profile) = &msg.profile
            && self.profiles.get(profile).is_none()
        {
            return Err(Refused {
                message: self.profiles.unknown(profile),
                usage: true,
            });
        }
        self.next_session += 1;
        let shared = self.opts.store.shared().cloned();
        // With the shared store, ids name their instance too: `evoctl`
        // on any instance reaches a session by the id it lists.
        let id = match &shared {
            Some(shared) => format!("s{}@{}", self.next_session, shared.tag()),
            None => format!("s{}", self.next_session),
        };
        let activated = msg
            .activated
            .clone()
            .or_else(|| {
                msg.name
                    .as_ref()
                    .filter(|_| shared.is_none())
                    .and_then(|n| self.named.get(n).cloned())
            })
            .unwrap_or_default();
        let mut session = Session::new(
            id.clone(),
            msg.name.clone(),
            mode,
            msg.profile.clone(),
            activated,
            ctx.address(),
            self.snapshot.clone(),
        );
        session.stdio = msg.stdio;
        session.events = self.opts.events.clone();
        let (role, identity) = match &msg.http {
            Some(c) => (c.role.clone(), c.identity.clone()),
            None => (None, None),
        };
        let io = match (&msg.http, msg.stdio) {
            (Some(_), _) => evo_proto::ctl::SessionIo::Http,
            (None, true) => evo_proto::ctl::SessionIo::Stdio,
            (None, false) => evo_proto::ctl::SessionIo::Socket,
        };
        let era = msg.http.as_ref().map(|c| c.era);
        if let Some(caller) = msg.http {
            session.over_http(caller);
        }
        let view = session.view();
        let addr = session.start();
        // A named session's activations live in the shared store: read
        // them (the session starts with none for the moment that takes).
        if let (Some(shared), Some(name), None) = (&shared, &msg.name, &msg.activated) {
            let (shared, name, to) = (shared.clone(), name.clone(), addr.clone());
            tokio::spawn(async move {
                match shared.activations_get(&name).await {
                    Ok(set) => to.do_send(session::SetActivations(set)),
                    Err(e) => tracing::warn!(session = %name, "activations not read: {e}"),
                }
            });
        }
        self.sessions.insert(
            id.clone(),
            SessionEntry {
                addr: addr.clone(),
                name: msg.name,
                profile: msg.profile.clone(),
                view: view.clone(),
                io,
                era,
            },
        );
        tracing::info!(
            session = %id,
            mode = mode.as_str(),
            io = io.as_str(),
            identity = identity.as_deref().unwrap_or(evo_proto::ctl::LOCAL_IDENTITY),
            profile = ?msg.profile,
            "session opened"
        );
        self.opts.events.changed(Topic::Sessions);
        Ok(OpenedSession {
            id,
            mode,
            profile: msg.profile,
            addr,
            view,
            search_limit: self.config.discovery.search_limit,
            semantic: self.semantic.clone(),
            instructions_budget: self.config.discovery.instructions_budget,
            code_mode: self.config.code_mode.enabled,
            startup_wait: Duration::from_millis(self.config.discovery.startup_wait_ms),
            max_message_bytes: self.config.limits.max_message_bytes,
            role,
            identity,
            shared,
            events: self.opts.events.clone(),
            config_trouble: self.config_trouble.clone(),
        })
    }
}

/// A Session actor stopped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SessionClosed {
    pub id: String,
    pub name: Option<String>,
    pub activated: ActivationSet,
}

impl Handler<SessionClosed> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: SessionClosed, _: &mut Context<Self>) {
        self.sessions.remove(&msg.id);
        if let (Some(shared), Some(name)) = (self.opts.store.shared(), &msg.name) {
            shared.ended_here(name);
        }
        tracing::info!(session = %msg.id, "session closed");
        self.opts.events.changed(Topic::Sessions);
        if let Some(name) = msg.name
            && self.named.get(&name) != Some(&msg.activated)
        {
            self.named.insert(name, msg.activated);
            self.save_named();
        }
    }
}

/// A named session's activations changed: persist them.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SaveNamed {
    pub name: String,
    pub activated: ActivationSet,
}

impl Handler<SaveNamed> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: SaveNamed, ctx: &mut Context<Self>) {
        if self.opts.store.shared().is_some() {
            self.named.insert(msg.name.clone(), msg.activated);
            self.share_activations(msg.name, ctx);
            return;
        }
        if self.named.get(&msg.name) != Some(&msg.activated) {
            self.named.insert(msg.name, msg.activated);
            self.save_named();
        }
    }
}
