//! Which Session actor serves an HTTP request, and whose it is.
//!
//! - An `initialize` POST opens a new Session (the front does, before rmcp
//!   sees the request) and rmcp gives it an `Mcp-Session-Id`. The front
//!   hands the session's [`SessionServer`] to rmcp's service factory through
//!   a task-local ([`Prepared`]), since the factory sees no request; the
//!   [`TrackedSessions`] manager records the new id with the identity that
//!   opened it, and ends the Session when rmcp ends the id (DELETE, idle
//!   timeout, shutdown).
//! - A 2026-07-28 request (no sessions in that era) is served by its
//!   identity's one stateless Session, opened on its first request and
//!   ended after `session_timeout_s` without requests or listen streams.
//! - A request naming an id checks it belongs to the caller's identity; an
//!   unknown id, or another identity's, is a 404 alike.
//! - With the shared store (Redis), each initialize-era session's record
//!   (its `initialize` parameters and owner) is kept there through rmcp's
//!   session store ([`SharedSessions`]); a request for an id this instance
//!   does not hold, whose record is the caller's, opens a Session here and
//!   rmcp replays the handshake into it ([`Prepared::restoring`]).
//!
//! A stateless Session is keyed by identity, role and profile, shown `era: 2026-07-28` in `evoctl
//! sessions`, and also ended when its token is revoked. Initialize-era sessions end by DELETE
//! (204), rmcp's idle timeout (the same `serve.http.session_timeout_s`) or revocation.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use actix::Addr;
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState, SessionStore,
    SessionStoreError,
};
use std::time::{Duration, Instant};

use crate::auth::check::Identity;
use crate::session::SessionView;
use crate::session::{self, Session, SessionServer};
use crate::store::Event;
use crate::store::Shared;
use crate::store::events::SharedEvents;
use crate::store::sessions::SessionRecord;
use crate::supervisor::ShareSession;
use crate::supervisor::Supervisor;

/// What the front prepared for the request rmcp is handling in this task.
pub struct Prepared {
    /// The server rmcp's factory takes (at most once).
    server: RefCell<Option<SessionServer>>,
    /// For a new initialize-era session: its owner and actor, recorded
    /// under the id rmcp creates.
    opening: RefCell<Option<(Option<String>, Addr<Session>)>>,
    /// The opening was recorded: rmcp created the session.
    recorded: Cell<bool>,
    /// A session restored from the shared store: its id and the state read
    /// there (so rmcp's `load` costs no second round trip).
    restoring: RefCell<Option<(String, SessionState)>>,
    /// The opening session's view, named after the id rmcp creates.
    view: RefCell<Option<SessionView>>,
}

tokio::task_local! {
    static PREPARED: Prepared;
}

impl Prepared {
    /// Nothing prepared: requests within an existing session.
    pub fn none() -> Prepared {
        Prepared {
            server: RefCell::new(None),
            opening: RefCell::new(None),
            recorded: Cell::new(false),
            restoring: RefCell::new(None),
            view: RefCell::new(None),
        }
    }

    /// The identity's stateless (2026-07-28) session serves the request.
    pub fn stateless(server: SessionServer) -> Prepared {
        Prepared {
            server: RefCell::new(Some(server)),
            ..Prepared::none()
        }
    }

    /// A new initialize-era session of `owner` serves it.
    pub fn opening(server: SessionServer, owner: Option<String>) -> Prepared {
        let addr = server.session.clone();
        let view = server.view.clone();
        Prepared {
            server: RefCell::new(Some(server)),
            opening: RefCell::new(Some((owner, addr))),
            recorded: Cell::new(false),
            restoring: RefCell::new(None),
            view: RefCell::new(Some(view)),
        }
    }

    /// Session `id`, opened on another instance (its record read from the
    /// shared store), served here by `server` from now on.
    pub fn restoring(
        server: SessionServer,
        owner: Option<String>,
        id: String,
        state: SessionState,
    ) -> Prepared {
        let p = Prepared::opening(server, owner);
        *p.restoring.borrow_mut() = Some((id, state));
        p
    }

    /// Runs `fut` (rmcp handling the request) with this prepared. Returns
    /// its output and, for an opening rmcp did not take up (it refused the
    /// request), the Session to close.
    pub async fn run<F: Future>(self, fut: F) -> (F::Output, Option<Addr<Session>>) {
        PREPARED
            .scope(self, async move {
                let out = fut.await;
                let unused = PREPARED.with(|p| {
                    if p.recorded.get() {
                        return None;
                    }
                    p.opening.borrow_mut().take().map(|(_, addr)| addr)
                });
                (out, unused)
            })
            .await
    }
}

/// rmcp's service factory: the server the front prepared for this task.
/// Called without one (rmcp looks up a tool's schema for SEP-2243 header
/// checks) it fails, which rmcp reads as "no schema".
pub fn prepared_server() -> Result<SessionServer, std::io::Error> {
    PREPARED
        .try_with(|p| p.server.borrow_mut().take())
        .ok()
        .flatten()
        .ok_or_else(|| std::io::Error::other("no session prepared for this request"))
}

/// An initialize-era HTTP session: whose it is and its actor.
struct Record {
    owner: Option<String>,
    session: Addr<Session>,
    /// When its shared-store record was last renewed.
    renewed: Instant,
}

/// The front's book of HTTP sessions. See the module docs.
#[derive(Default)]
pub struct Registry {
    by_id: Mutex<HashMap<SessionId, Record>>,
    /// Requests in flight, by session id and JSON-RPC id: rmcp sends a
    /// response to the stream of the last request registered under its id,
    /// so a second request reusing an open id would leave the first one's
    /// stream without an answer (keep-alives only, for ever). The second is
    /// refused instead ([`Registry::claim`]). Kept as a 64-bit hash of
    /// the pair under a per-process random key: a claim costs no
    /// allocation (a collision, about one in 2^64 pairs, would refuse a
    /// request as a reused id).
    in_flight: Mutex<HashSet<u64>>,
    pair_hash: std::hash::RandomState,
    /// Each identity's stateless session (keyed by the whole identity, so
    /// a changed role or profile opens another).
    stateless: tokio::sync::Mutex<HashMap<Identity, SessionServer>>,
}

/// Whether a request naming a session id may use it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The caller's; `renew`: its shared record is due for renewal.
    Yours { renew: bool },
    /// Another identity's: 404.
    NotFound,
    /// Not held here (unknown, ended, or held by another instance).
    NotHere,
}

/// A request's claim on its (session, JSON-RPC id) while its response is
/// being sent; dropped with the response body.
pub struct InFlight {
    registry: Arc<Registry>,
    key: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut open = self
            .registry
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        open.remove(&self.key);
    }
}

impl Registry {
    /// Claims JSON-RPC id `id` in session `session` for one request; `None`
    /// when a request with that id is still open there.
    pub fn claim(self: &Arc<Self>, session: &str, id: &str) -> Option<InFlight> {
        let key = std::hash::BuildHasher::hash_one(&self.pair_hash, (session, id));
        let mut open = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(key).then(|| InFlight {
            registry: Arc::clone(self),
            key,
        })
    }

    /// Whose session `id` is; a record due for renewal after `renew_every`
    /// is marked renewed (the caller renews it).
    pub fn owner_check(&self, id: &str, caller: &Identity, renew_every: Duration) -> Ownership {
        let mut book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        match book.get_mut(id) {
            Some(r) if r.owner == caller.key => {
                let renew = r.renewed.elapsed() >= renew_every;
                if renew {
                    r.renewed = Instant::now();
                }
                Ownership::Yours { renew }
            }
            Some(_) => Ownership::NotFound,
            None => Ownership::NotHere,
        }
    }

    /// The owner of session `id`, when this instance holds it.
    fn owner_of(&self, id: &str) -> Option<Option<String>> {
        let book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        book.get(id).map(|r| r.owner.clone())
    }

    /// Ends this instance's copy of session `id` (it was ended elsewhere).
    pub fn end(&self, id: &str) -> bool {
        let gone = {
            let mut book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
            book.remove(id)
        };
        match gone {
            Some(r) => {
                r.session.do_send(session::Close);
                true
            }
            None => false,
        }
    }

    /// Ids of the initialize-era sessions of identity `key`.
    pub fn ids_of(&self, key: &str) -> Vec<SessionId> {
        let book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        book.iter()
            .filter(|(_, r)| r.owner.as_deref() == Some(key))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How many initialize-era sessions are open.
    pub fn open_sessions(&self) -> usize {
        self.by_id.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn record(&self, id: SessionId, owner: Option<String>, session: Addr<Session>) {
        let mut book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        book.insert(
            id,
            Record {
                owner,
                session,
                renewed: Instant::now(),
            },
        );
    }

    fn forget(&self, id: &SessionId) {
        let gone = {
            let mut book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
            book.remove(id)
        };
        if let Some(r) = gone {
            r.session.do_send(session::Close);
        }
    }

    /// The identity's stateless session, opened with `open` on first use.
    pub async fn stateless<F, Fut>(&self, who: &Identity, open: F) -> Result<SessionServer, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<SessionServer, String>>,
    {
        let mut map = self.stateless.lock().await;
        if let Some(s) = map.get(who) {
            return Ok(s.clone());
        }
        let server = open().await?;
        map.insert(who.clone(), server.clone());
        Ok(server)
    }

    /// Ends the stateless sessions `ends` picks (an idle one, a revoked
    /// identity's).
    pub async fn end_stateless(&self, ends: impl Fn(&Identity, &SessionServer) -> bool) {
        let mut map = self.stateless.lock().await;
        map.retain(|who, server| {
            if ends(who, server) {
                tracing::info!(session = %server.id, identity = who.label(), "stateless HTTP session ended");
                server.session.do_send(session::Close);
                false
            } else {
                true
            }
        });
    }
}

/// rmcp's in-memory session manager, with the front's [`Registry`] kept in
/// step: a created id is recorded with its owner, a closed one ends its
/// Session actor.
pub struct TrackedSessions {
    pub inner: LocalSessionManager,
    pub registry: Arc<Registry>,
    /// With the shared store: each session's activations are kept there
    /// under its id (the Supervisor names the session after it).
    pub share_with: Option<Addr<Supervisor>>,
    /// With the shared store: the SSE events of every stream (also
    /// `inner`'s event store), for resumption on any instance.
    pub events: Option<Arc<SharedEvents>>,
}

impl SessionManager for TrackedSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let _ = PREPARED.try_with(|p| {
            if let Some((owner, session)) = p.opening.borrow_mut().take() {
                if let (Some(events), Some(view)) = (&self.events, p.view.borrow_mut().take()) {
                    // Named at once: its first call already shares counts.
                    let _ = view.store_name.set(id.to_string());
                    events.shared().breaker_begun(&id);
                }
                if let Some(supervisor) = &self.share_with {
                    supervisor.do_send(ShareSession {
                        session: session.clone(),
                        name: id.to_string(),
                    });
                }
                self.registry.record(id.clone(), owner, session);
                p.recorded.set(true);
            }
        });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let outcome = self.inner.restore_session(id.clone()).await?;
        if matches!(outcome, RestoreOutcome::Restored(_)) {
            let _ = PREPARED.try_with(|p| {
                if let Some((owner, session)) = p.opening.borrow_mut().take() {
                    self.registry.record(id.clone(), owner, session);
                    p.recorded.set(true);
                }
            });
        }
        Ok(outcome)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.registry.forget(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    /// With the shared store, a session's standalone stream resumed on
    /// any instance: the events it missed (from the store), then the live
    /// stream here; an event both hold goes out once. Other streams (a
    /// request's) replay what the store holds, as rmcp does.
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        use crate::store::events::{entry_order, parse_event_id};
        use futures::StreamExt;
        if let Some(events) = &self.events
            && let Some((stream, entry)) = parse_event_id(&last_event_id)
            && stream == format!("{id}:common")
        {
            // Live first: what arrives meanwhile is in both, and dropped
            // from the live side.
            let live = self.inner.create_standalone_stream(id).await?;
            let missed = match events.after(stream, entry).await {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(http_session = %id, "missed SSE events not replayed: {e}");
                    Vec::new()
                }
            };
            let seen = missed
                .last()
                .and_then(|m| m.event_id.as_deref())
                .and_then(parse_event_id)
                .map_or_else(|| entry_order(entry), |(_, e)| entry_order(e));
            let live = live.filter(move |m| {
                let fresh = m
                    .event_id
                    .as_deref()
                    .and_then(parse_event_id)
                    .is_none_or(|(_, e)| entry_order(e) > seen);
                std::future::ready(fresh)
            });
            tracing::debug!(http_session = %id, replayed = missed.len(), "standalone stream resumed");
            return Ok(futures::stream::iter(missed).chain(live).left_stream());
        }
        Ok(self.inner.resume(id, last_event_id).await?.right_stream())
    }

    fn event_store(
        &self,
    ) -> Option<Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.inner.event_store()
    }
}

/// rmcp's session store on the shared store: what another instance needs
/// to serve a session this one opened. See the module docs.
pub struct SharedSessions {
    pub shared: Arc<Shared>,
    pub registry: Arc<Registry>,
    pub ttl_s: u64,
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let preloaded = PREPARED
            .try_with(|p| {
                p.restoring
                    .borrow_mut()
                    .take_if(|(id, _)| id == session_id)
                    .map(|(_, state)| state)
            })
            .ok()
            .flatten();
        if let Some(state) = preloaded {
            return Ok(Some(state));
        }
        let record = self.shared.session_get(session_id).await?;
        Ok(record.map(|r| r.state))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let Some(owner) = self.registry.owner_of(session_id) else {
            return Ok(());
        };
        let record = SessionRecord {
            owner,
            state: state.clone(),
        };
        self.shared
            .session_put(session_id, &record, self.ttl_s)
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.shared.session_delete(session_id).await?;
        self.shared
            .publish(Event::SessionEnded {
                id: session_id.to_string(),
            })
            .await;
        Ok(())
    }
}
