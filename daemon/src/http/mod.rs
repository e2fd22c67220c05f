//! The HTTP front (`serve.http`, `evod --http`): MCP over Streamable HTTP,
//! with rmcp's own server side ([`StreamableHttpService`] and its session
//! manager) behind checks of evo's own, on hyper's HTTP/1 server.
//!
//! A request to the MCP path goes: Host and Origin ([`origin`]), the bearer
//! credential (`auth`: API tokens, OAuth access tokens via `jwt`), the
//! identity's role, then for a POST the body: content type, size (413 past
//! `limits.max_message_bytes`, read no further), JSON (400 with a JSON-RPC
//! parse error), no batches. Then the Session that serves it is chosen
//! (`sessions`) and rmcp handles the request. Besides it: `/healthz`,
//! `/readyz`, `/metrics`, and the protected resource metadata (RFC 9728).
//!
//! Everything here runs on the tokio workers; the front reaches actors only
//! by message (opening a session, readiness, metrics), and the Supervisor
//! reaches the front through the [`EndpointControl`] it is handed (tokens,
//! revocation, status), not this module's types.
//!
//! hyper runs the front on the tokio worker, never the actor thread. rmcp's own Host/Origin checks
//! are off: the front's allow loopback origins without a list, which rmcp's do not. Past the checks
//! rmcp runs the same `SessionServer` the socket uses: calls, approvals, permissions (read from the
//! snapshot built for the identity's role).

mod bind;
mod body;
mod sessions;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

pub use self::bind::{Bound, HttpOptions, bind};
use self::body::{
    accepts_both, drain_small, header_str, holding, is_json_content, jsonrpc_error, peek,
    unreadable_message,
};
use self::sessions::{Ownership, Prepared, Registry, TrackedSessions};
use crate::auth::check::{self as auth, Authenticator, Denied, Identity};
use crate::auth::endpoint::{Ending, EndpointControl};
use crate::auth::origin;
use crate::catalog::snapshot::Snapshot;
use crate::config::serve::HttpSettings;
use crate::console::Console;
use crate::console::ReachedThrough;
use crate::metrics::CONTENT_TYPE;
use crate::runtime::http_serving::{self as serving, Body, text};
use crate::runtime::shutdown::StopSignal;
use crate::session::ActivationSet;
use crate::session::Close;
use crate::session::{HttpCaller, SessionServer};
use crate::store::Event;
use crate::store::Shared;
use crate::store::Store;
use crate::store::events::SharedEvents;
use crate::supervisor::{GatherMetrics, OpenSession, Readiness, Supervisor};

/// How long a client may take to send a request's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a TLS handshake may take.
const TLS_TIMEOUT: Duration = Duration::from_secs(10);
/// How often idle stateless sessions are looked for, at most (more often
/// with a short `session_timeout_s`).
const JANITOR_EVERY: Duration = Duration::from_secs(60);
/// How long an answered request's stream stays resumable (see `serve`).
const COMPLETED_STREAM_TTL: Duration = Duration::from_secs(5);

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The running HTTP front; cheap to clone. See the module docs.
#[derive(Clone)]
pub struct McpEndpoint(Arc<Inner>);

struct Inner {
    settings: HttpSettings,
    listening: Vec<SocketAddr>,
    /// Beyond loopback with no auth, by `--insecure-no-auth`.
    insecure: bool,
    hosts: origin::HostPolicy,
    origins: Vec<origin::AllowedOrigin>,
    auth: Arc<Authenticator>,
    registry: Arc<Registry>,
    manager: Arc<TrackedSessions>,
    mcp: StreamableHttpService<SessionServer, TrackedSessions>,
    supervisor: Addr<Supervisor>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    max_body: usize,
    tls: Option<tls::Tls>,
    stop: StopSignal,
    /// The web console, served under `/ui`.
    console: Console,
    /// The shared store, when instances share sessions through Redis.
    shared: Option<Arc<Shared>>,
}

/// Starts serving on the bound listeners.
pub fn serve(
    bound: Bound,
    supervisor: Addr<Supervisor>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    stop: StopSignal,
    console: Console,
    store: Store,
) -> McpEndpoint {
    let listening = bound.addrs();
    let loopback = bound.loopback();
    let shown = bound.shown();
    let Bound {
        settings,
        listeners,
        max_message_bytes,
        tls,
        jwt,
        ..
    } = bound;
    let opts_max = max_message_bytes;
    let auth = Arc::new(Authenticator::new(settings.auth.is_some(), jwt.clone()));
    let registry = Arc::new(Registry::default());
    let events = store
        .shared()
        .map(|s| Arc::new(SharedEvents::new(s.clone(), settings.session_timeout_s)));
    let mut local = LocalSessionManager::default();
    if let Some(events) = &events {
        local = local.with_event_store(events.clone());
    }
    local.session_config.keep_alive = Some(Duration::from_secs(settings.session_timeout_s));
    // rmcp keeps each answered request's stream (its channel and cached
    // messages) for a late resumption, 60 s by default, and drops old ones
    // only when the session sees its next message: after a burst an idle
    // session held every stream of its last minute (about 250 KiB per
    // session after 16 clients' load; 5 s keeps about a twelfth of that).
    // A client told to retry after 3 s resumes within this; under
    // scale-out the store replays instead.
    local.session_config.completed_cache_ttl = COMPLETED_STREAM_TTL;
    let manager = Arc::new(TrackedSessions {
        inner: local,
        registry: registry.clone(),
        share_with: store.shared().map(|_| supervisor.clone()),
        events,
    });
    let cancel = tokio_util::sync::CancellationToken::new();
    {
        let (cancel, stop) = (cancel.clone(), stop.clone());
        tokio::spawn(async move {
            stop.fired().await;
            cancel.cancel();
        });
    }
    // Host and Origin are checked by the front (loopback origins allowed by
    // default), so rmcp's own checks are off.
    let mut config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_json_response(true)
        .with_max_request_body_bytes(opts_max)
        .with_cancellation_token(cancel);
    let shared = store.shared().cloned();
    if let Some(shared) = &shared {
        config.session_store = Some(Arc::new(sessions::SharedSessions {
            shared: shared.clone(),
            registry: registry.clone(),
            ttl_s: settings.session_timeout_s,
        }));
    }
    let mcp = StreamableHttpService::new(sessions::prepared_server, manager.clone(), config);
    let origins = settings
        .allowed_origins
        .iter()
        .filter_map(|o| origin::AllowedOrigin::parse(o))
        .collect();
    let hosts = origin::HostPolicy {
        loopback_only: loopback,
        allowed: settings
            .allowed_hosts
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
    };
    let connections = Arc::new(Semaphore::new(settings.max_connections));
    let front = McpEndpoint(Arc::new(Inner {
        listening,
        insecure: !loopback && settings.auth.is_none(),
        hosts,
        origins,
        auth,
        registry,
        manager,
        mcp,
        supervisor,
        snapshot,
        max_body: opts_max,
        tls,
        stop,
        settings,
        console,
        shared,
    }));
    // Past `max_connections` at once, new connections wait in the kernel's
    // queue (held back, not buffered here).
    for listener in listeners {
        let (stop, front) = (front.0.stop.clone(), front.clone());
        tokio::spawn(serving::accept(
            listener,
            stop,
            Some(connections.clone()),
            "HTTP listener",
            move |stream, peer| {
                let front = front.clone();
                async move { front.connection(stream, peer).await }
            },
        ));
    }
    if let Some(jwt) = jwt {
        tokio::spawn(async move { jwt.refresh(true).await });
    }
    tokio::spawn(janitor(front.clone()));
    let scheme = if front.0.tls.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(
        "serving MCP over Streamable HTTP at {scheme}://{shown}{} (auth: {})",
        front.0.settings.path,
        front.auth_kinds().join(", ").as_str().if_empty("none")
    );
    front
}

trait IfEmpty {
    fn if_empty<'a>(&'a self, or: &'a str) -> &'a str;
}

impl IfEmpty for str {
    fn if_empty<'a>(&'a self, or: &'a str) -> &'a str {
        if self.is_empty() { or } else { self }
    }
}

/// Ends stateless sessions nobody uses any more.
async fn janitor(front: McpEndpoint) {
    let idle = front.0.settings.session_timeout_s;
    let every = JANITOR_EVERY.min(Duration::from_secs(idle.div_ceil(2).max(1)));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = front.0.stop.fired() => return,
        }
        front
            .0
            .registry
            .end_stateless(|_, s| s.view.idle_secs() >= idle && s.view.listening() == 0)
            .await;
    }
}

impl McpEndpoint {
    /// Ends every session of identity `key` (a revoked token's).
    fn end_identity(&self, key: &str) {
        self.0.console.end_identity(key);
        let front = self.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            use rmcp::transport::streamable_http_server::session::SessionManager as _;
            for id in front.0.registry.ids_of(&key) {
                let _ = front.0.manager.close_session(&id).await;
            }
            front
                .0
                .registry
                .end_stateless(|who, _| who.key.as_deref() == Some(key.as_str()))
                .await;
            tracing::info!(identity = %key, "sessions of a revoked credential ended");
        });
    }

    fn auth_kinds(&self) -> Vec<String> {
        let mut kinds = Vec::new();
        if self.0.auth.required {
            kinds.push("tokens".to_string());
        }
        if self.0.auth.jwt.is_some() {
            kinds.push("oauth".to_string());
        }
        kinds
    }

    /// `evoctl status`'s `http`; [`EndpointControl::status`] adds the OAuth
    /// keys' problem when asked.
    fn status(&self) -> evo_proto::ctl::HttpStatus {
        let i = &self.0;
        evo_proto::ctl::HttpStatus {
            listen: i
                .listening
                .iter()
                .map(SocketAddr::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            path: i.settings.path.clone(),
            tls: i.tls.is_some(),
            auth: self.auth_kinds(),
            insecure_no_auth: i.insecure,
            warning: i.insecure.then(|| "the HTTP endpoint is reachable from other machines and has no authentication (--insecure-no-auth): anyone who reaches it can call every tool".into()),
        }
    }

    /// What the Supervisor holds of this endpoint: the token table it
    /// swaps, the sessions it ends, what status and `evoctl ui` show.
    pub fn control(&self) -> EndpointControl {
        let front = self.clone();
        EndpointControl::new(
            self.0.auth.clone(),
            self.status(),
            self.console_base(),
            move |ending| match ending {
                Ending::Identity(key) => front.end_identity(&key),
                Ending::Session(id) => front.end_session(&id),
            },
        )
    }

    /// The addresses it listens on (the first is what tests connect to).
    pub fn listening(&self) -> &[SocketAddr] {
        &self.0.listening
    }

    async fn connection(&self, stream: tokio::net::TcpStream, peer: SocketAddr) {
        match &self.0.tls {
            Some(tls) => {
                let acceptor = tls.acceptor();
                match tokio::time::timeout(TLS_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(s)) => self.serve(s, peer).await,
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            }
            None => self.serve(stream, peer).await,
        }
    }

    async fn serve<IO>(&self, io: IO, peer: SocketAddr)
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let front = self.clone();
        let served = serving::serve_connection(io, &self.0.stop, move |req| {
            let front = front.clone();
            async move {
                let response = front.handle(req, peer).await;
                crate::metrics::metrics().http_response(response.status().as_u16());
                response
            }
        })
        .await;
        if let Err(e) = served {
            tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
        }
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = req.uri().path();
        if path == self.0.settings.path {
            return self.mcp(req, peer).await;
        }
        if path == "/ui" || path.starts_with("/ui/") {
            return self.ui(req).await;
        }
        match path {
            "/healthz" => text(StatusCode::OK, "ok"),
            "/readyz" => self.readyz().await,
            "/metrics" => self.metrics(req, peer).await,
            p if p == METADATA_PATH || p.starts_with("/.well-known/oauth-protected-resource/") => {
                self.resource_metadata(req.headers())
            }
            _ => text(
                StatusCode::NOT_FOUND,
                format!("not found: MCP is served at {}", self.0.settings.path),
            ),
        }
    }

    /// The web console: Host and Origin as for MCP; the console checks
    /// its own sign-in (a cookie, or a bearer credential).
    async fn ui(&self, req: Request<Incoming>) -> Response<Body> {
        let host = header_str(req.headers(), header::HOST)
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        if let Err(why) = self.0.hosts.check(host) {
            return text(StatusCode::FORBIDDEN, format!("forbidden: {why}"));
        }
        let origin = req.headers().get(header::ORIGIN).map(|v| v.as_bytes());
        if let Err(why) = origin::check_origin(origin, &self.0.origins) {
            return text(StatusCode::FORBIDDEN, format!("forbidden: {why}"));
        }
        let reached = ReachedThrough {
            secure: self.0.tls.is_some(),
            auth: Some(self.0.auth.clone()),
        };
        self.0.console.handle(req, reached).await
    }

    /// Where browsers reach the console on this listener: `public_url`'s
    /// origin, else the first address (a wildcard one as loopback).
    fn console_base(&self) -> String {
        let s = &self.0.settings;
        if let Some(public) = &s.public_url
            && let Ok(uri) = public.parse::<http::Uri>()
            && let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority())
        {
            return format!("{scheme}://{authority}");
        }
        let scheme = if self.0.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let addr = self.0.listening.first().map_or_else(
            || "127.0.0.1".to_string(),
            |a| match a.ip() {
                std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
                    format!("127.0.0.1:{}", a.port())
                }
                std::net::IpAddr::V6(ip) if ip.is_unspecified() => format!("[::1]:{}", a.port()),
                _ => a.to_string(),
            },
        );
        format!("{scheme}://{addr}")
    }

    async fn readyz(&self) -> Response<Body> {
        let mut problems = Vec::new();
        match self.0.supervisor.send(Readiness).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) => problems.push(why),
            Err(_) => problems.push("evod is shutting down".to_string()),
        }
        if let Some(p) = self.0.auth.jwt.as_ref().and_then(|j| j.problem()) {
            problems.push(p);
        }
        if problems.is_empty() {
            text(StatusCode::OK, "ready")
        } else {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {}", problems.join("; ")),
            )
        }
    }

    /// Who is on the other end, for the log: the peer, or with
    /// `trust_forwarded` the first `X-Forwarded-For` entry a proxy set.
    fn client(&self, headers: &HeaderMap, peer: SocketAddr) -> String {
        if self.0.settings.trust_forwarded
            && let Some(first) = header_str(headers, "x-forwarded-for")
                .and_then(|v| v.split(',').next())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        {
            return first.to_string();
        }
        peer.ip().to_string()
    }

    /// Host and Origin, then the credential: the identity, or the refusal.
    async fn admit(
        &self,
        headers: &HeaderMap,
        uri: &http::Uri,
        peer: SocketAddr,
    ) -> Result<Identity, Response<Body>> {
        let host =
            header_str(headers, header::HOST).or_else(|| uri.authority().map(|a| a.as_str()));
        if let Err(why) = self.0.hosts.check(host) {
            tracing::debug!(host = ?host, client = %self.client(headers, peer), "HTTP request refused: {why}");
            return Err(text(StatusCode::FORBIDDEN, format!("forbidden: {why}")));
        }
        let origin = headers.get(header::ORIGIN).map(|v| v.as_bytes());
        if let Err(why) = origin::check_origin(origin, &self.0.origins) {
            tracing::debug!(client = %self.client(headers, peer), "HTTP request refused: {why}");
            return Err(text(StatusCode::FORBIDDEN, format!("forbidden: {why}")));
        }
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        let who = match self.0.auth.authenticate(authorization).await {
            Ok(who) => who,
            Err(denied) => return Err(self.refuse(headers, &denied, peer)),
        };
        if let Some(role) = &who.role {
            let snapshot = self.0.snapshot.load();
            let known = snapshot.role.as_deref() == Some(role.as_str())
                || snapshot.by_role.contains_key(role);
            if !known {
                tracing::warn!(identity = who.label(), role = %role, "refused: the identity's role is not in permissions.yml");
                return Err(text(
                    StatusCode::FORBIDDEN,
                    format!(
                        "forbidden: your role '{role}' is not defined in evo's permissions.yml; ask the person who runs evo to add it under `roles`"
                    ),
                ));
            }
        }
        Ok(who)
    }

    /// 401 (no or a bad credential) or 403 (scopes), with the challenge.
    fn refuse(&self, headers: &HeaderMap, denied: &Denied, peer: SocketAddr) -> Response<Body> {
        let (status, error, description) = match denied {
            Denied::Missing => (
                StatusCode::UNAUTHORIZED,
                "invalid_request",
                auth::MISSING_CREDENTIAL.to_string(),
            ),
            Denied::Invalid(why) => (StatusCode::UNAUTHORIZED, "invalid_token", why.clone()),
            Denied::Scope(scopes) => (
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                format!("the token lacks a required scope ({})", scopes.join(" ")),
            ),
        };
        // Never the credential itself: only why it was refused.
        tracing::debug!(
            status = status.as_u16(),
            client = %self.client(headers, peer),
            "HTTP request refused: {description}"
        );
        let challenge = auth::challenge(
            denied,
            &self.metadata_url(headers),
            self.0.auth.jwt.is_some(),
        );
        let mut response = serving::json(
            status,
            &json!({"error": error, "error_description": description}),
        );
        if let Ok(v) = http::HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        response
    }

    /// `scheme://host` clients reach evo at: `public_url`, else this
    /// request's (trusting `X-Forwarded-Proto`/`-Host` only when
    /// `trust_forwarded` is set).
    fn base_url(&self, headers: &HeaderMap) -> String {
        let s = &self.0.settings;
        if let Some(public) = &s.public_url
            && let Ok(uri) = public.parse::<http::Uri>()
            && let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority())
        {
            return format!("{scheme}://{authority}");
        }
        let first = |name: &str| {
            header_str(headers, name)
                .and_then(|v| v.split(',').next())
                .map(str::trim)
        };
        let mut scheme = if self.0.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut host = header_str(headers, header::HOST)
            .unwrap_or("localhost")
            .to_string();
        if s.trust_forwarded {
            if let Some(p) = first("x-forwarded-proto").filter(|p| matches!(*p, "http" | "https")) {
                scheme = if p == "https" { "https" } else { "http" };
            }
            if let Some(h) = first("x-forwarded-host").filter(|h| !h.is_empty()) {
                host = h.to_string();
            }
        }
        format!("{scheme}://{host}")
    }

    /// The endpoint's resource identifier (RFC 9728): `public_url`, else the
    /// OAuth audience when it is a URL (tokens are bound to it), else this
    /// request's base URL and the MCP path.
    fn resource(&self, headers: &HeaderMap) -> String {
        let s = &self.0.settings;
        if let Some(public) = &s.public_url {
            return public.clone();
        }
        if let Some(aud) = s
            .auth
            .as_ref()
            .and_then(|a| a.oauth.as_ref())
            .map(|o| o.audience.clone())
            .filter(|a| evo_proto::entry::has_http_scheme(a))
        {
            return aud;
        }
        format!("{}{}", self.base_url(headers), s.path)
    }

    /// Where the protected resource metadata of [`McpEndpoint::resource`] is: the
    /// well-known path inserted between its origin and its path.
    fn metadata_url(&self, headers: &HeaderMap) -> String {
        let resource = self.resource(headers);
        match resource.parse::<http::Uri>() {
            Ok(uri) if uri.scheme_str().is_some() && uri.authority().is_some() => {
                let path = uri.path().trim_end_matches('/');
                format!(
                    "{}://{}{METADATA_PATH}{path}",
                    uri.scheme_str().unwrap_or("http"),
                    uri.authority().map_or("", |a| a.as_str())
                )
            }
            _ => format!("{}{METADATA_PATH}", self.base_url(headers)),
        }
    }

    /// RFC 9728 protected resource metadata: with OAuth configured, the
    /// authorization servers to log in at; with API tokens only, none (the
    /// member is optional): the resource and how a token is sent.
    fn resource_metadata(&self, headers: &HeaderMap) -> Response<Body> {
        let mut doc = json!({
            "resource": self.resource(headers),
            "bearer_methods_supported": ["header"],
            "resource_name": "evo",
        });
        if let Some(oauth) = self.0.settings.auth.as_ref().and_then(|a| a.oauth.as_ref()) {
            let servers = if oauth.authorization_servers.is_empty() {
                vec![oauth.issuer.clone()]
            } else {
                oauth.authorization_servers.clone()
            };
            doc["authorization_servers"] = json!(servers);
            if !oauth.required_scopes.is_empty() {
                doc["scopes_supported"] = json!(oauth.required_scopes);
            }
        }
        let mut response = serving::json(StatusCode::OK, &doc);
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            http::HeaderValue::from_static("max-age=300"),
        );
        response
    }

    async fn metrics(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        if !self.0.settings.metrics_public
            && let Err(refused) = self.admit(req.headers(), req.uri(), peer).await
        {
            return refused;
        }
        let gathered = self
            .0
            .supervisor
            .send(GatherMetrics)
            .await
            .unwrap_or_default();
        let body = crate::metrics::metrics().render(&gathered);
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, CONTENT_TYPE)
            .body(Full::new(Bytes::from(body)).boxed())
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
    }

    async fn mcp(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let who = match self.admit(req.headers(), req.uri(), peer).await {
            Ok(who) => who,
            Err(refused) => {
                drain_small(req).await;
                return refused;
            }
        };
        let session = header_str(req.headers(), SESSION_HEADER).map(str::to_owned);
        let not_found = || {
            text(
                StatusCode::NOT_FOUND,
                "not found: no such session (it ended, evod restarted, or it is not yours); initialize a new one",
            )
        };
        let mut restoring = None;
        if let Some(id) = &session {
            let renew_every = Duration::from_secs(self.0.settings.session_timeout_s / 4);
            match self.0.registry.owner_check(id, &who, renew_every) {
                Ownership::Yours { renew } => {
                    if renew && let Some(shared) = self.0.shared.clone() {
                        let (id, ttl) = (id.clone(), self.0.settings.session_timeout_s);
                        tokio::spawn(async move {
                            let _ = shared.session_touch(&id, ttl).await;
                        });
                    }
                }
                Ownership::NotFound => return not_found(),
                Ownership::NotHere => match self.restorable(id, &who, req.method()).await {
                    Ok(Some(prepared)) => restoring = Some(prepared),
                    Ok(None) => return not_found(),
                    Err(refused) => return refused,
                },
            }
        }
        if req.method() != Method::POST {
            // GET (the session's stream), DELETE (end it), others (405): rmcp.
            let delete = req.method() == Method::DELETE;
            let prepared = restoring.unwrap_or_else(Prepared::none);
            let (mut response, unused) = prepared.run(self.0.mcp.handle(req)).await;
            if let Some(session) = unused {
                session.do_send(Close);
            }
            if delete && response.status() == StatusCode::ACCEPTED {
                // Ended, nothing to say: what clients expect of a DELETE.
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            return response;
        }
        self.post(req, who, session.as_deref(), restoring).await
    }

    /// A session this instance does not hold: with the shared store, the
    /// caller's session opened on another instance is served here from now
    /// on (a Session opens, rmcp replays the handshake). `Ok(None)`: no
    /// such session of the caller's (404).
    async fn restorable(
        &self,
        id: &str,
        who: &Identity,
        method: &Method,
    ) -> Result<Option<Prepared>, Response<Body>> {
        let Some(shared) = &self.0.shared else {
            return Ok(None);
        };
        let (record, activated) = match shared.session_get(id).await {
            Ok(Some(r)) if r.owner == who.key => match shared.activations_get(id).await {
                Ok(set) => (r, set),
                Err(e) => {
                    return Err(text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "service unavailable: this session was opened on another evod instance and {e}; retry, or initialize a new session"
                        ),
                    ));
                }
            },
            Ok(_) => return Ok(None),
            Err(e) => {
                return Err(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "service unavailable: this session was opened on another evod instance and {e}; retry, or initialize a new session"
                    ),
                ));
            }
        };
        if method == Method::DELETE {
            // Ended here for every instance: nothing to restore.
            let _ = shared.session_delete(id).await;
            shared
                .publish(Event::SessionEnded { id: id.to_string() })
                .await;
            return Err(Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Full::new(Bytes::new()).boxed())
                .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())));
        }
        let server = self
            .open_as(
                who,
                evo_proto::ctl::SessionEra::Initialize,
                Some((id.to_string(), activated)),
            )
            .await?;
        tracing::info!(http_session = %id, session = %server.id, identity = who.label(), "HTTP session opened on another instance is served here");
        Ok(Some(Prepared::restoring(
            server,
            who.key.clone(),
            id.to_string(),
            record.state,
        )))
    }

    /// Ends this instance's copy of HTTP session `id` (ended on another).
    fn end_session(&self, id: &str) {
        if self.0.registry.end(id) {
            let manager = self.0.manager.clone();
            let id: rmcp::transport::streamable_http_server::session::SessionId =
                id.to_string().into();
            tokio::spawn(async move {
                let _ = manager.inner.close_session(&id).await;
            });
        }
    }

    async fn post(
        &self,
        req: Request<Incoming>,
        who: Identity,
        session: Option<&str>,
        restoring: Option<Prepared>,
    ) -> Response<Body> {
        let (parts, body) = req.into_parts();
        if !is_json_content(&parts.headers) {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported media type: send the JSON-RPC message with Content-Type: application/json",
            );
        }
        if !accepts_both(&parts.headers) {
            return text(
                StatusCode::NOT_ACCEPTABLE,
                "not acceptable: a Streamable HTTP client must send Accept: application/json, text/event-stream",
            );
        }
        let max = self.0.max_body;
        let too_large = || {
            jsonrpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                format!(
                    "message exceeds the limit of {max} bytes (limits.max_message_bytes) and was not read; send smaller arguments or raise the limit"
                ),
            )
        };
        let declared = header_str(&parts.headers, header::CONTENT_LENGTH)
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > max as u64) {
            return too_large();
        }
        let bytes =
            match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, max).collect()).await {
                Ok(Ok(collected)) => collected.to_bytes(),
                Ok(Err(e))
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some() =>
                {
                    return too_large();
                }
                Ok(Err(e)) => {
                    return text(
                        StatusCode::BAD_REQUEST,
                        format!("bad request: the body could not be read ({e})"),
                    );
                }
                Err(_) => {
                    return text(
                        StatusCode::REQUEST_TIMEOUT,
                        format!(
                            "request timeout: the body did not arrive within {} s",
                            BODY_TIMEOUT.as_secs()
                        ),
                    );
                }
            };
        let peeked = match peek(&bytes) {
            Ok(p) => p,
            Err(refused) => return *refused,
        };
        // One open request per id and session (see `Registry::claim`).
        let claim = match (session, &peeked.method, &peeked.id) {
            (Some(session), Some(_), Some(id)) => match self.0.registry.claim(session, id) {
                Some(claim) => Some(claim),
                None => {
                    return jsonrpc_error(
                        StatusCode::CONFLICT,
                        Value::Null,
                        -32600,
                        format!(
                            "invalid request: request id {id} is still in flight in this session, and an id must not be reused while its request is open; send this request with a fresh id"
                        ),
                    );
                }
            },
            _ => None,
        };
        let prepared = if let Some(restoring) = restoring {
            restoring
        } else if session.is_some() {
            Prepared::none()
        } else if peeked.method.as_deref() == Some("initialize") {
            match self
                .open(&who, evo_proto::ctl::SessionEra::Initialize)
                .await
            {
                Ok(server) => Prepared::opening(server, who.key.clone()),
                Err(refused) => return refused,
            }
        } else if self.stateless_request(&parts.headers, &bytes, peeked.method.as_deref()) {
            let opened = self
                .0
                .registry
                .stateless(&who, || async {
                    self.open(&who, evo_proto::ctl::SessionEra::Modern)
                        .await
                        .map_err(|_| "evod is not opening sessions".to_string())
                })
                .await;
            match opened {
                Ok(server) => {
                    server.view.touch();
                    Prepared::stateless(server)
                }
                Err(why) => return text(StatusCode::SERVICE_UNAVAILABLE, why),
            }
        } else {
            Prepared::none()
        };
        let request = Request::from_parts(parts, Full::new(bytes.clone()));
        let (response, unused) = prepared.run(self.0.mcp.handle(request)).await;
        if let Some(session) = unused {
            session.do_send(Close);
        }
        if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            // The content type was checked above: rmcp could not read the
            // JSON as a JSON-RPC message.
            return unreadable_message(&bytes);
        }
        match claim {
            Some(claim) => holding(response, claim),
            None => response,
        }
    }

    /// A request of the 2026-07-28 era, which has no sessions: its
    /// identity's stateless session serves it.
    fn stateless_request(&self, headers: &HeaderMap, body: &[u8], method: Option<&str>) -> bool {
        method == Some("server/discover")
            || header_str(headers, PROTOCOL_HEADER).is_some_and(|v| v >= "2026-07-28")
            || memchr::memmem::find(body, b"io.modelcontextprotocol/protocolVersion").is_some()
    }

    async fn open(
        &self,
        who: &Identity,
        era: evo_proto::ctl::SessionEra,
    ) -> Result<SessionServer, Response<Body>> {
        self.open_as(who, era, None).await
    }

    /// Opens a Session; `shared`: an HTTP session another instance opened
    /// (its id, under which its activations are kept, and those).
    async fn open_as(
        &self,
        who: &Identity,
        era: evo_proto::ctl::SessionEra,
        shared: Option<(String, ActivationSet)>,
    ) -> Result<SessionServer, Response<Body>> {
        let (name, activated) = shared.unzip();
        let opened = self
            .0
            .supervisor
            .send(OpenSession {
                http: Some(HttpCaller {
                    identity: who.key.clone(),
                    role: who.role.clone(),
                    era,
                }),
                profile: who.profile.clone(),
                name,
                activated,
                ..Default::default()
            })
            .await;
        match opened {
            Ok(Ok(o)) => Ok(SessionServer::open(
                &o,
                self.0.supervisor.clone(),
                self.0.snapshot.clone(),
            )),
            // The credential names a profile the config does not define.
            Ok(Err(why)) if why.usage => Err(text(
                StatusCode::FORBIDDEN,
                format!("this credential's {}", why.message),
            )),
            Ok(Err(why)) => Err(text(StatusCode::SERVICE_UNAVAILABLE, why.message)),
            Err(_) => Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "evod is shutting down",
            )),
        }
    }

    /// Open initialize-era sessions (for tests and status).
    pub fn open_sessions(&self) -> usize {
        self.0.registry.open_sessions()
    }
}
