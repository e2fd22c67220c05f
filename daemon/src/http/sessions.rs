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

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix::Addr;
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use super::auth::Identity;
use crate::session::{self, Session, SessionServer};

/// What the front prepared for the request rmcp is handling in this task.
pub struct Prepared {
    /// The server rmcp's factory takes (at most once).
    server: RefCell<Option<SessionServer>>,
    /// For a new initialize-era session: its owner and actor, recorded
    /// under the id rmcp creates.
    opening: RefCell<Option<(Option<String>, Addr<Session>)>>,
    /// The opening was recorded: rmcp created the session.
    recorded: Cell<bool>,
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
        Prepared {
            server: RefCell::new(Some(server)),
            opening: RefCell::new(Some((owner, addr))),
            recorded: Cell::new(false),
        }
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
}

/// The front's book of HTTP sessions. See the module docs.
#[derive(Default)]
pub struct Registry {
    by_id: Mutex<HashMap<SessionId, Record>>,
    /// Each identity's stateless session (keyed by the whole identity, so
    /// a changed role or profile opens another).
    stateless: tokio::sync::Mutex<HashMap<Identity, SessionServer>>,
}

/// Whether a request naming a session id may use it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ownership {
    Yours,
    /// Unknown, ended, or another identity's: all answer 404.
    NotFound,
}

impl Registry {
    pub fn owner_check(&self, id: &str, caller: &Identity) -> Ownership {
        let book = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        match book.get(id) {
            Some(r) if r.owner == caller.key => Ownership::Yours,
            _ => Ownership::NotFound,
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
        book.insert(id, Record { owner, session });
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
}

impl SessionManager for TrackedSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let _ = PREPARED.try_with(|p| {
            if let Some((owner, session)) = p.opening.borrow_mut().take() {
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

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}
