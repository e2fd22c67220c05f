//! What a session holds of a server: its state, its rmcp peer and the calls in
//! flight, published by the ChildServer and read without a round trip. A leaf:
//! it reaches the server's actor only through the messages defined here, held
//! as recipients, so the pure modules that read a link need no actor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use arc_swap::ArcSwapOption;
use rmcp::model::{ProgressToken, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, RoleClient, RoleServer};

use super::direct::DirectCalls;
use super::subscriptions::Subscriptions;
use crate::config::DEFAULT_MAX_RESULT_BYTES;
use crate::oauth::login::Outcome;

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
    /// Waiting for a start slot (`limits.max_concurrent_starts`).
    Queued = 6,
    /// A remote server that needs `evoctl login`.
    LoginRequired = 7,
}

impl ServerState {
    /// The name `evoctl status` shows: the control protocol's.
    pub fn as_str(self) -> &'static str {
        evo_proto::ctl::ServerState::from(self).as_str()
    }

    /// Queued or starting: its tools may yet appear.
    pub fn is_starting(self) -> bool {
        matches!(self, ServerState::Queued | ServerState::Starting)
    }

    fn from_u8(v: u8) -> ServerState {
        match v {
            0 => ServerState::Idle,
            1 => ServerState::Starting,
            2 => ServerState::Ready,
            3 => ServerState::Restarting,
            4 => ServerState::Failed,
            6 => ServerState::Queued,
            7 => ServerState::LoginRequired,
            _ => ServerState::Stopped,
        }
    }
}

impl From<ServerState> for evo_proto::ctl::ServerState {
    fn from(state: ServerState) -> Self {
        use evo_proto::ctl::ServerState as Wire;
        match state {
            ServerState::Idle => Wire::Idle,
            ServerState::Queued => Wire::Queued,
            ServerState::Starting => Wire::Starting,
            ServerState::Ready => Wire::Ready,
            ServerState::Restarting => Wire::Restarting,
            ServerState::Failed => Wire::Failed,
            ServerState::Stopped => Wire::Stopped,
            ServerState::LoginRequired => Wire::LoginRequired,
        }
    }
}

/// Start the child if it is idle and answer with its peer once it is ready;
/// an error names the server and its state.
#[derive(Message)]
#[rtype(result = "Result<Arc<Peer<RoleClient>>, String>")]
pub struct EnsureRunning;

/// A call found the live connection broken. For a remote (HTTP) server this
/// is the only sign it went away: it is treated as down (restart with
/// backoff, state shown as such). A stdio child's exit is reported by its
/// process, with the exit status, so this is ignored for it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnectionLost {
    pub reason: String,
}

/// A session's client can open a URL for its user (URL elicitation): the
/// login under way if there is one, else a new one, the same flow as
/// `evoctl login`.
#[derive(Message)]
#[rtype(result = "Result<LoginUnderWay, String>")]
pub struct OfferLogin;

/// A login evod started for a server: where the person goes, and how it
/// ends. `evoctl login` and a client's URL elicitation share it.
#[derive(Clone)]
pub struct LoginUnderWay {
    pub url: String,
    pub outcome: tokio::sync::watch::Receiver<Outcome>,
}

impl LoginUnderWay {
    /// Still waiting for its redirect.
    pub fn pending(&self) -> bool {
        self.outcome.borrow().is_none() && self.outcome.has_changed().is_ok()
    }

    /// Waits for the outcome: what to tell the person.
    pub async fn outcome(mut self, id: &str) -> Result<String, String> {
        loop {
            if let Some(result) = self.outcome.borrow_and_update().clone() {
                return result;
            }
            if self.outcome.changed().await.is_err() {
                return Err(format!(
                    "the login of server '{id}' was abandoned; run `evoctl login {id}` again"
                ));
            }
        }
    }
}

/// The server's actor as a link sees it: where each of its messages goes.
#[derive(Clone)]
pub struct ServerActor {
    pub ensure_running: Recipient<EnsureRunning>,
    pub connection_lost: Recipient<ConnectionLost>,
    pub offer_login: Recipient<OfferLogin>,
}

/// How a session reaches one server's child: the ChildServer publishes its
/// client peer here when the child is ready, so a call goes straight to the
/// child without an actor hop. Only the owning ChildServer writes it.
pub struct ServerLink {
    pub id: String,
    /// Call timeout in milliseconds (`timeout_s`; a reload may change it).
    timeout_ms: AtomicU64,
    /// Largest result passed on whole (`max_result_bytes`, else
    /// `limits.max_result_bytes`; a reload may change it).
    max_result_bytes: AtomicUsize,
    peer: ArcSwapOption<Peer<RoleClient>>,
    /// Direct tool calls on a stdio child (see [`super::direct`]).
    direct: ArcSwapOption<DirectCalls>,
    state: AtomicU8,
    /// `state` for those who wait for it to move ([`ServerLink::past_starting`]).
    states: tokio::sync::watch::Sender<ServerState>,
    /// `None` for a link built outside a running daemon (tests, benchmarks).
    child: Option<ServerActor>,
    /// Calls in flight whose client asked for progress: the child-side
    /// progress token -> the session to tell and the client's own token.
    /// Only calls with a progress token touch it.
    progress: Mutex<HashMap<ProgressToken, ProgressRoute>>,
    /// Calls in flight and the time of the last one, for `idle_timeout_s`.
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    /// Sessions' resource subscriptions at this server.
    pub subscriptions: Subscriptions,
}

/// Marks a call in flight on a server until dropped.
pub struct CallGuard<'a>(&'a ServerLink);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        *self.0.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
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
    pub fn new(id: String, timeout: Duration, child: Option<ServerActor>) -> ServerLink {
        ServerLink {
            id,
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
            max_result_bytes: AtomicUsize::new(DEFAULT_MAX_RESULT_BYTES),
            peer: ArcSwapOption::empty(),
            direct: ArcSwapOption::empty(),
            state: AtomicU8::new(ServerState::Starting as u8),
            states: tokio::sync::watch::Sender::new(ServerState::Starting),
            child,
            progress: Default::default(),
            in_flight: Default::default(),
            last_used: Mutex::new(Instant::now()),
            subscriptions: Default::default(),
        }
    }

    /// The child says a resource changed: the sessions subscribed to it hear.
    pub async fn resource_updated(&self, params: ResourceUpdatedNotificationParam) {
        self.subscriptions.updated(params).await;
    }

    /// What evo does with an update that arrives on one of its listen
    /// streams at a 2026-07-28 child: the same as with a notification.
    pub fn updates(self: &Arc<Self>) -> impl Fn(ResourceUpdatedNotificationParam) + Send + 'static {
        let link = Arc::downgrade(self);
        move |params| {
            if let Some(link) = link.upgrade() {
                tokio::spawn(async move { link.resource_updated(params).await });
            }
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

    pub fn max_result_bytes(&self) -> usize {
        self.max_result_bytes.load(Ordering::Relaxed)
    }

    pub fn set_max_result_bytes(&self, limit: usize) {
        self.max_result_bytes.store(limit, Ordering::Relaxed);
    }

    pub fn state(&self) -> ServerState {
        ServerState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Called by the owning ChildServer only.
    pub(crate) fn publish(
        &self,
        state: ServerState,
        peer: Option<Peer<RoleClient>>,
        direct: Option<Arc<DirectCalls>>,
    ) {
        self.direct.store(direct);
        self.peer.store(peer.map(Arc::new));
        self.state.store(state as u8, Ordering::Release);
        self.states.send_replace(state);
    }

    /// Resolves once the server is past starting (ready, failed, waiting
    /// for a login or a restart, stopped): what a session's first answers
    /// wait for.
    pub async fn past_starting(&self) {
        let mut states = self.states.subscribe();
        let _ = states.wait_for(|s| !s.is_starting()).await;
    }

    /// A call on `used` failed in transport. If that is still the live
    /// connection, the server's actor hears of it (see
    /// [`ConnectionLost`]).
    pub fn connection_failed(&self, used: &Arc<Peer<RoleClient>>, reason: String) {
        let live = self.peer.load();
        if live.as_ref().is_some_and(|p| Arc::ptr_eq(p, used))
            && let Some(child) = &self.child
        {
            child.connection_lost.do_send(ConnectionLost { reason });
        }
    }

    /// Direct calls, when the child is a ready stdio child.
    pub fn direct(&self) -> Option<Arc<DirectCalls>> {
        self.direct.load_full()
    }

    /// The child's peer if it is ready now (nothing is started).
    pub fn peer_if_ready(&self) -> Option<Arc<Peer<RoleClient>>> {
        self.peer.load_full()
    }

    /// A login for this server (see [`OfferLogin`]): the one under way, or a
    /// new one.
    pub async fn offer_login(&self) -> Result<LoginUnderWay, String> {
        let Some(child) = &self.child else {
            return Err(format!("server '{}' has no child in this process", self.id));
        };
        child
            .offer_login
            .send(OfferLogin)
            .await
            .unwrap_or_else(|_| Err(format!("server '{}' is gone", self.id)))
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
        match child.ensure_running.send(EnsureRunning).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "server '{}' is {} (its supervisor is gone); run `evoctl status` to see why",
                self.id,
                self.state().as_str()
            )),
        }
    }
}
