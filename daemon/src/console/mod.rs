//! The web console (`evoctl ui`): a few embedded pages that show evod live
//! and act on it, served under `/ui` on the HTTP front (`serve.http`) or on
//! a loopback listener evod starts for the console alone ([`listener`]).
//!
//! Every action is a control request ([`CtlRequest`]) sent to the
//! Supervisor as `evoctl` sends it (`Ctl`), so the console has no code of
//! its own for approving, trusting or activating. What it adds is the door:
//!
//! - Signing in: a one-time token in the address `evoctl ui` prints (minted
//!   for the person at the control socket, the owner) is exchanged for a
//!   cookie (`HttpOnly`, `SameSite=Strict`, path `/ui`), and works once. On
//!   the HTTP front with `auth`, an API token or OAuth access token signs in
//!   too (the login form, or `Authorization: Bearer` on each request).
//! - Every POST needs the session's CSRF token (`X-CSRF-Token`) besides the
//!   cookie; a stale or forged cookie is a 401 page, a missing or wrong
//!   CSRF token a 403.
//! - The console acts as the owner (as `evoctl` on the socket does). An
//!   identity signed in with an API or OAuth token reads, limited to its
//!   own sessions and approvals, and decides nothing: an agent holding a
//!   token must not approve its own held calls.
//!
//! Live updates: one server-sent event stream per page ([`events`]); the
//! page refetches what a ping names.
//!
//! Sign-in: `evoctl ui` is a control request; the Supervisor has the console mint a one-time token
//! (`access.rs`; 32 random bytes, kept as its SHA-256 for 10 minutes, removed at its first use,
//! valid or not) and answers the link: on the HTTP front's first address (a wildcard address as
//! loopback; `public_url` when set), else on the console's own listener on 127.0.0.1, started then
//! on a free port. The cookie is `Secure` over TLS; the CSRF token is per session, carried by the
//! page in a `<meta>` and compared in constant time. The signed-in page moves on by script
//! (`location.replace`), which takes the link out of the history and makes the next request
//! same-site, which a Strict cookie needs. The link signs in the owner: whoever reads it has the
//! control socket already. A bearer header needs no CSRF token (a header is not an ambient
//! credential); token sessions end when the token is revoked. Pages carry a
//! `Content-Security-Policy` of `'self'` only, `X-Frame-Options: DENY` and `nosniff`; all server
//! text goes into the page as `textContent`.
//!
//! A button posts a control request (`{"cmd":"approve","id":"ap3"}`, the JSON `evoctl` writes on
//! the socket) to `/ui/api/ctl`. The console checks the request against its allow-list (the owner:
//! what a person steers evod with, not `stop` or tokens; a token identity: reads only, its own
//! sessions and approvals) and sends it to the Supervisor; the reply goes back as the `CtlReply`
//! JSON. Log lines ride the same event stream to owner pages.

pub mod access;
pub mod events;
pub mod listener;
pub mod logring;
mod saved;

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use actix::Addr;
use bytes::Bytes;
use evo_proto::ctl::{CtlReply, CtlRequest, ErrorKind};
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{broadcast, mpsc};

use self::access::LOGIN_TTL;
use self::events::EventBus;
use crate::auth::check::{Authenticator, Identity};
use crate::runtime::http_serving::{self as serving, Body};
use crate::runtime::shutdown::StopSignal;
use crate::supervisor::{Ctl, Supervisor};

/// A console session unused this long is signed out.
const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// Largest request body read.
const MAX_BODY: usize = 64 * 1024;
/// A comment line on idle event streams, so proxies keep them open.
const KEEPALIVE: Duration = Duration::from_secs(15);
const COOKIE: &str = "evo_console";
const CSRF_HEADER: &str = "x-csrf-token";

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_CSS: &str = include_str!("assets/console.css");
const CONSOLE_JS: &str = include_str!("assets/console.js");

/// The console's pages and state; cheap to clone. See the module docs.
#[derive(Clone)]
pub struct Console(Arc<Inner>);

struct Inner {
    supervisor: Addr<Supervisor>,
    /// SHA-256 of each unused sign-in token → when it expires.
    logins: Mutex<HashMap<[u8; 32], Instant>>,
    /// SHA-256 of each session cookie → its session.
    sessions: Mutex<HashMap<[u8; 32], Signed>>,
    /// Names this run of evod, so an open page can tell a restart.
    run: String,
    stop: StopSignal,
    /// What it tells open pages of.
    events: EventBus,
    /// `console.json` (see [`saved`]), and the port written in it.
    file: std::path::PathBuf,
    port: Mutex<Option<u16>>,
}

/// A signed-in browser.
#[derive(Clone)]
struct Signed {
    csrf: String,
    identity: Identity,
    last_seen: Instant,
}

/// How a request reached the console.
pub struct ReachedThrough {
    /// Over TLS: cookies are `Secure`.
    pub secure: bool,
    /// The HTTP front's credential check (API and OAuth tokens); `None` on
    /// the console's own loopback listener, where only `evoctl ui` links
    /// sign in.
    pub auth: Option<Arc<Authenticator>>,
}

/// Who a request is, once through the door.
struct Caller {
    identity: Identity,
    /// The session's CSRF token; `None` for a bearer request (not an
    /// ambient credential, so not forgeable by another site).
    csrf: Option<String>,
}

fn random_hex(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    if getrandom::fill(&mut raw).is_err() {
        // No randomness: nothing to sign in with (refused below).
        return String::new();
    }
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl Console {
    /// The console, with the owner's browsers a previous run of evod
    /// signed in (from `cache_dir`).
    pub fn new(
        supervisor: Addr<Supervisor>,
        stop: StopSignal,
        events: EventBus,
        cache_dir: &std::path::Path,
    ) -> Console {
        let file = saved::path(cache_dir);
        let kept = saved::load(&file);
        let now = Instant::now();
        let sessions = kept
            .sessions
            .iter()
            .filter_map(|s| {
                Some((
                    saved::unhex(&s.cookie_sha256)?,
                    Signed {
                        csrf: s.csrf.clone(),
                        identity: Identity::owner(),
                        last_seen: now,
                    },
                ))
            })
            .collect();
        Console(Arc::new(Inner {
            supervisor,
            logins: Mutex::default(),
            sessions: Mutex::new(sessions),
            run: format!("{}-{}", std::process::id(), random_hex(6)),
            stop,
            events,
            file,
            port: Mutex::new(kept.port),
        }))
    }

    /// The loopback port the console listened on before (to listen there
    /// again), when it did.
    pub fn saved_port(&self) -> Option<u16> {
        *self.0.port.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the port its own listener got.
    pub fn set_port(&self, port: u16) {
        *self.0.port.lock().unwrap_or_else(|e| e.into_inner()) = Some(port);
        self.persist();
    }

    /// Whether browsers of a previous run are signed in (their pages try
    /// to reconnect).
    pub fn has_saved_sessions(&self) -> bool {
        self.signed_in() > 0
    }

    /// Signs out every browser of identity `key` (its token was revoked).
    pub fn end_identity(&self, key: &str) {
        self.0
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, s| s.identity.key.as_deref() != Some(key));
    }

    /// Writes the owner's sessions and the port to `console.json`.
    fn persist(&self) {
        let sessions = self
            .0
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, s)| s.identity.key.is_none())
            .map(|(k, s)| saved::SavedSession {
                cookie_sha256: saved::hex(k),
                csrf: s.csrf.clone(),
            })
            .collect();
        let kept = saved::Saved {
            version: 1,
            port: self.saved_port(),
            sessions,
        };
        if let Err(e) = saved::store(&self.0.file, &kept) {
            tracing::warn!(
                "console sessions not saved (browsers sign in again after a restart): {e}"
            );
        }
    }

    /// A new one-time sign-in token (`evoctl ui`), for the owner.
    pub fn mint_login(&self) -> Result<String, String> {
        let token = random_hex(32);
        if token.is_empty() {
            return Err("no randomness from the operating system to make a sign-in token".into());
        }
        let now = Instant::now();
        let mut logins = self.0.logins.lock().unwrap_or_else(|e| e.into_inner());
        logins.retain(|_, expires| *expires > now);
        logins.insert(digest(&token), now + LOGIN_TTL);
        Ok(token)
    }

    /// Open console sessions (signed-in browsers).
    pub fn signed_in(&self) -> usize {
        self.0
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn start_session(&self, identity: Identity) -> (String, String) {
        let cookie = random_hex(32);
        let csrf = random_hex(24);
        let now = Instant::now();
        let owner = identity.key.is_none();
        {
            let mut sessions = self.0.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.retain(|_, s| now.duration_since(s.last_seen) < SESSION_IDLE);
            sessions.insert(
                digest(&cookie),
                Signed {
                    csrf: csrf.clone(),
                    identity,
                    last_seen: now,
                },
            );
        }
        if owner {
            self.persist();
        }
        (cookie, csrf)
    }

    /// The session a request's cookie names, touched.
    fn session_of(&self, headers: &HeaderMap) -> Option<Signed> {
        let value = cookie(headers, COOKIE)?;
        let mut sessions = self.0.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let key = digest(value);
        let now = Instant::now();
        let s = sessions.get_mut(&key)?;
        if now.duration_since(s.last_seen) >= SESSION_IDLE {
            sessions.remove(&key);
            return None;
        }
        s.last_seen = now;
        Some(s.clone())
    }

    /// Serves a request under `/ui` (Host and Origin already checked).
    pub async fn handle(&self, req: Request<Incoming>, reached: ReachedThrough) -> Response<Body> {
        let path = req.uri().path().to_string();
        let method = req.method().clone();
        match (method, path.as_str()) {
            (Method::GET, "/ui/console.css") => asset(CONSOLE_CSS, "text/css; charset=utf-8"),
            (Method::GET, "/ui/console.js") => asset(CONSOLE_JS, "text/javascript; charset=utf-8"),
            (Method::GET, "/ui/login") => self.login_link(req.uri(), &reached),
            (Method::POST, "/ui/login") => self.login_form(req, &reached).await,
            (Method::GET, "/ui" | "/ui/") => match self.caller(req.headers(), &reached).await {
                Ok(c) => self.index(&c),
                Err(r) => r,
            },
            (Method::GET, "/ui/events") => match self.caller(req.headers(), &reached).await {
                Ok(c) => self.events(&c),
                Err(r) => r,
            },
            (Method::POST, "/ui/api/ctl") => match self.caller(req.headers(), &reached).await {
                Ok(c) => self.ctl(req, c).await,
                Err(r) => r,
            },
            (Method::POST, "/ui/logout") => match self.caller(req.headers(), &reached).await {
                Ok(c) => {
                    if let Some(r) = csrf_refusal(req.headers(), &c) {
                        return r;
                    }
                    if let Some(v) = cookie(req.headers(), COOKIE) {
                        self.0
                            .sessions
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&digest(v));
                        self.persist();
                    }
                    let mut r = page(
                        StatusCode::OK,
                        "Signed out",
                        "<p>This browser is signed out of the evo console. Run <code>evoctl ui</code> to sign in again.</p>",
                    );
                    set_cookie(&mut r, "", reached.secure, true);
                    r
                }
                Err(r) => r,
            },
            (_, "/ui" | "/ui/" | "/ui/events" | "/ui/login" | "/ui/logout" | "/ui/api/ctl") => {
                serving::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
            }
            _ => serving::text(
                StatusCode::NOT_FOUND,
                "not found: the console is at /ui/ (run `evoctl ui` for a sign-in link)",
            ),
        }
    }

    /// The cookie's session, or a bearer credential (HTTP front with auth).
    async fn caller(
        &self,
        headers: &HeaderMap,
        reached: &ReachedThrough,
    ) -> Result<Caller, Response<Body>> {
        if let (Some(auth), Some(raw)) = (&reached.auth, headers.get(header::AUTHORIZATION))
            && auth.required
        {
            return match auth.authenticate(Some(raw.as_bytes())).await {
                Ok(identity) => Ok(Caller {
                    identity,
                    csrf: None,
                }),
                Err(_) => Err(signed_out(
                    "The credential in the Authorization header is not valid here.",
                )),
            };
        }
        match self.session_of(headers) {
            Some(s) => Ok(Caller {
                identity: s.identity,
                csrf: Some(s.csrf),
            }),
            None if cookie(headers, COOKIE).is_some() => Err(signed_out(
                "This browser's console session is not known to evod: it expired, you signed out, evod restarted, or the cookie was not made here.",
            )),
            None => Err(signed_out("This browser is not signed in to the console.")),
        }
    }

    /// `GET /ui/login?token=…`: a one-time link from `evoctl ui`; or,
    /// without a token on the HTTP front with auth, the sign-in form.
    fn login_link(&self, uri: &http::Uri, reached: &ReachedThrough) -> Response<Body> {
        let token = uri.query().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("token="))
                .map(str::to_owned)
        });
        let Some(token) = token else {
            if reached.auth.as_ref().is_some_and(|a| a.required) {
                return login_form_page(None);
            }
            return signed_out("This address has no sign-in token.");
        };
        let now = Instant::now();
        let fresh = {
            let mut logins = self.0.logins.lock().unwrap_or_else(|e| e.into_inner());
            // Taken out whatever happens next: a token works once.
            logins.remove(&digest(&token)).is_some_and(|exp| exp > now)
        };
        if !fresh {
            tracing::info!("console sign-in refused: a used, expired or unknown one-time link");
            return page(
                StatusCode::UNAUTHORIZED,
                "Sign-in link not valid",
                "<p>This sign-in link was already used, has expired, or was not made by this evod. A link works once.</p><p>Run <code>evoctl ui</code> for a new one.</p>",
            );
        }
        tracing::info!("console signed in with a one-time link");
        self.signed_in_response(Identity::owner(), reached.secure)
    }

    /// A cookie for a new session, and a page that moves on to the console
    /// (by script, so the link leaves the history and the next request is
    /// same-site, which a `SameSite=Strict` cookie needs).
    fn signed_in_response(&self, identity: Identity, secure: bool) -> Response<Body> {
        let (cookie, _) = self.start_session(identity);
        let mut r = page(
            StatusCode::OK,
            "Signed in",
            "<p>Signed in. <a id=\"go\" href=\"/ui/\">Open the console</a>.</p><script src=\"/ui/console.js\" data-redirect=\"/ui/\"></script>",
        );
        set_cookie(&mut r, &cookie, secure, false);
        r.headers_mut().insert(
            header::REFERRER_POLICY,
            http::HeaderValue::from_static("no-referrer"),
        );
        r
    }

    /// `POST /ui/login` (form `token=…`): an API or OAuth token signs in.
    async fn login_form(&self, req: Request<Incoming>, reached: &ReachedThrough) -> Response<Body> {
        let Some(auth) = reached.auth.as_ref().filter(|a| a.required) else {
            return serving::text(
                StatusCode::NOT_FOUND,
                "not found: sign in with the link `evoctl ui` prints",
            );
        };
        let Ok(body) = read_body(req).await else {
            return serving::text(StatusCode::BAD_REQUEST, "bad request: unreadable form");
        };
        let token = form_value(&body, "token").unwrap_or_default();
        let header = format!("Bearer {}", token.trim());
        match auth.authenticate(Some(header.as_bytes())).await {
            Ok(identity) => {
                tracing::info!(
                    identity = identity.label(),
                    "console signed in with a token"
                );
                self.signed_in_response(identity, reached.secure)
            }
            Err(_) => login_form_page(Some("That token is not valid here.")),
        }
    }

    fn index(&self, c: &Caller) -> Response<Body> {
        let who = c.identity.key.as_deref().unwrap_or("owner");
        let html = INDEX_HTML
            .replace("{{CSRF}}", c.csrf.as_deref().unwrap_or(""))
            .replace("{{WHO}}", &html_escape(who))
            .replace(
                "{{OWNER}}",
                if c.identity.key.is_none() {
                    "true"
                } else {
                    "false"
                },
            );
        let mut r = Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            .header(header::CACHE_CONTROL, "no-store")
            .body(Full::new(Bytes::from(html)).boxed())
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
        harden(r.headers_mut());
        r
    }

    /// `POST /ui/api/ctl`: one control request, as `evoctl` sends it.
    async fn ctl(&self, req: Request<Incoming>, c: Caller) -> Response<Body> {
        if let Some(r) = csrf_refusal(req.headers(), &c) {
            return r;
        }
        let refused = |status: StatusCode, message: String| {
            json_response(
                status,
                &serde_json::to_value(CtlReply::error(ErrorKind::InvalidRequest, message))
                    .unwrap_or_default(),
            )
        };
        let Ok(body) = read_body(req).await else {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over {MAX_BODY} bytes or could not be read"),
            );
        };
        let request = match CtlRequest::parse(&body) {
            Ok(r) => r,
            Err(e) => return refused(StatusCode::BAD_REQUEST, e),
        };
        let owner = c.identity.key.is_none();
        if let Err(why) = permitted(&request, owner) {
            return refused(StatusCode::FORBIDDEN, why);
        }
        let answered = self.0.supervisor.send(Ctl(request.clone())).await;
        let mut answer = answered.unwrap_or_else(|_| {
            CtlReply::error(ErrorKind::Internal, "evod is shutting down".to_string())
        });
        if !owner && let Some(data) = answer.data.as_mut() {
            keep_own(&request, data, c.identity.key.as_deref().unwrap_or(""));
        }
        reply(&answer)
    }

    /// `GET /ui/events`: the event stream (see [`events`]).
    fn events(&self, c: &Caller) -> Response<Body> {
        let (tx, rx) = mpsc::channel::<Bytes>(16);
        let mut bus = self.0.events.subscribe();
        let owner = c.identity.key.is_none();
        let run = self.0.run.clone();
        let stop = self.0.stop.clone();
        tokio::spawn(async move {
            let hello = json!({"run": run, "owner": owner});
            if tx.send(sse("hello", &hello.to_string())).await.is_err() {
                return;
            }
            if owner {
                let lines = logring::recent();
                let mut backlog = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
                backlog.push('[');
                for (i, l) in lines.iter().enumerate() {
                    if i > 0 {
                        backlog.push(',');
                    }
                    backlog.push_str(l);
                }
                backlog.push(']');
                if tx.send(sse("backlog", &backlog)).await.is_err() {
                    return;
                }
            }
            let mut keepalive = tokio::time::interval(KEEPALIVE);
            keepalive.tick().await;
            loop {
                let first = tokio::select! {
                    e = bus.recv() => e,
                    _ = keepalive.tick() => {
                        if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    () = tx.closed() => return,
                    () = stop.fired() => return,
                };
                // What is already queued goes out as one ping.
                let mut topics: Vec<&'static str> = Vec::new();
                let mut logs: Vec<Arc<str>> = Vec::new();
                let mut take = |e: Result<events::Event, broadcast::error::RecvError>,
                                topics: &mut Vec<&'static str>|
                 -> bool {
                    match e {
                        Ok(events::Event::Changed(t)) => {
                            if !topics.contains(&t.as_str()) {
                                topics.push(t.as_str());
                            }
                        }
                        Ok(events::Event::Log(line)) => {
                            if owner {
                                logs.push(line);
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => topics.push("all"),
                        Err(broadcast::error::RecvError::Closed) => return false,
                    }
                    true
                };
                if !take(first, &mut topics) {
                    return;
                }
                loop {
                    match bus.try_recv() {
                        Ok(e) => {
                            take(Ok(e), &mut topics);
                        }
                        Err(broadcast::error::TryRecvError::Lagged(n)) => {
                            take(Err(broadcast::error::RecvError::Lagged(n)), &mut topics);
                        }
                        Err(_) => break,
                    }
                }
                let mut out = Vec::new();
                for l in logs {
                    out.extend_from_slice(&sse("log", &l));
                }
                if !topics.is_empty() {
                    out.extend_from_slice(&sse("changed", &json!({"topics": topics}).to_string()));
                }
                if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
                    return;
                }
            }
        });
        let mut r = Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-store")
            .body(BodyExt::boxed(Stream(rx)))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
        harden(r.headers_mut());
        r
    }
}

/// What the console may send: the owner everything a person steers evod
/// with except stopping it and managing tokens (the CLI's); another
/// identity only reads.
fn permitted(request: &CtlRequest, owner: bool) -> Result<(), String> {
    use CtlRequest as R;
    let read = matches!(
        request,
        R::Status
            | R::List { all: true, .. }
            | R::Search { .. }
            | R::Describe { .. }
            | R::Profiles
            | R::Approvals
            | R::Sessions
    );
    let steer = matches!(
        request,
        R::List { .. }
            | R::Activate { .. }
            | R::Deactivate { .. }
            | R::Approve { .. }
            | R::Deny { .. }
            | R::Diff { .. }
            | R::Trust { .. }
            | R::Reload
            | R::Refresh { .. }
    );
    if read || (owner && steer) {
        Ok(())
    } else if steer {
        Err("this console is signed in with a token, which reads only: approving, trusting and activating are for the owner of evod (`evoctl ui` on its machine, or evoctl)".into())
    } else {
        Err("the console does not do that; use evoctl".into())
    }
}

/// Another identity's view: only its own sessions and approvals.
fn keep_own(request: &CtlRequest, data: &mut Value, key: &str) {
    let list = match request {
        CtlRequest::Status | CtlRequest::Sessions => "sessions",
        CtlRequest::Approvals => "approvals",
        _ => return,
    };
    if let Some(items) = data.get_mut(list).and_then(Value::as_array_mut) {
        items.retain(|i| i.get("identity").and_then(Value::as_str) == Some(key));
    }
}

/// The refusal of a POST whose CSRF token is missing or wrong, if it is.
fn csrf_refusal(headers: &HeaderMap, c: &Caller) -> Option<Response<Body>> {
    let expected = c.csrf.as_ref()?;
    let sent = headers
        .get(CSRF_HEADER)
        .map(http::HeaderValue::as_bytes)
        .unwrap_or_default();
    use subtle::ConstantTimeEq;
    if !sent.is_empty() && bool::from(sent.ct_eq(expected.as_bytes())) {
        None
    } else {
        let why = if sent.is_empty() {
            "forbidden: a console request that changes anything needs the page's CSRF token (X-CSRF-Token); reload the console"
        } else {
            "forbidden: the CSRF token does not match this console session; reload the console"
        };
        Some(json_response(
            StatusCode::FORBIDDEN,
            &json!({"ok": false, "kind": "invalid_request", "error": why}),
        ))
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ()> {
    let collected = tokio::time::timeout(
        Duration::from_secs(30),
        Limited::new(req.into_body(), MAX_BODY).collect(),
    )
    .await;
    match collected {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        _ => Err(()),
    }
}

/// A value of an `application/x-www-form-urlencoded` body.
fn form_value(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit() =>
            {
                let hex = [bytes[i + 1], bytes[i + 2]];
                let hex = std::str::from_utf8(&hex).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of cookie `name`.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name && !v.is_empty()).then_some(v)
        })
}

fn set_cookie(r: &mut Response<Body>, value: &str, secure: bool, clear: bool) {
    let mut c = format!("{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Strict");
    if secure {
        c.push_str("; Secure");
    }
    if clear {
        c.push_str("; Max-Age=0");
    }
    if let Ok(v) = http::HeaderValue::from_str(&c) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
}

/// Headers every console page carries: no framing, no other origin's
/// scripts, no sniffing.
fn harden(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        http::HeaderValue::from_static("DENY"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
}

fn sse(event: &str, data: &str) -> Bytes {
    let mut s = String::with_capacity(data.len() + event.len() + 16);
    s.push_str("event: ");
    s.push_str(event);
    s.push('\n');
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    Bytes::from(s)
}

/// An event stream's body: what its task sends, until either side ends.
struct Stream(mpsc::Receiver<Bytes>);

impl hyper::body::Body for Stream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

fn asset(text: &'static str, kind: &'static str) -> Response<Body> {
    let mut r = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, kind)
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
    harden(r.headers_mut());
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let mut r = serving::json(status, v);
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

fn reply(r: &CtlReply) -> Response<Body> {
    json_response(StatusCode::OK, &serde_json::to_value(r).unwrap_or_default())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A small page of the console's own style.
fn page(status: StatusCode, title: &str, body: &str) -> Response<Body> {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} · evo console</title><link rel=\"stylesheet\" href=\"/ui/console.css\"></head><body class=\"plain\"><main><h1>{title}</h1>{body}</main></body></html>"
    );
    let mut r = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Full::new(Bytes::from(html)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
    harden(r.headers_mut());
    r
}

/// 401: not signed in (or no longer), and how to sign in.
fn signed_out(why: &str) -> Response<Body> {
    page(
        StatusCode::UNAUTHORIZED,
        "Not signed in",
        &format!(
            "<p>{}</p><p>Run <code>evoctl ui</code> on the machine evod runs on: it prints a link that signs this browser in once.</p>",
            html_escape(why)
        ),
    )
}

fn login_form_page(problem: Option<&str>) -> Response<Body> {
    let note = problem
        .map(|p| format!("<p class=\"error\" role=\"alert\">{}</p>", html_escape(p)))
        .unwrap_or_default();
    page(
        if problem.is_some() {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::OK
        },
        "Sign in",
        &format!(
            "{note}<form method=\"post\" action=\"/ui/login\"><p><label for=\"token\">API token or OAuth access token</label><br><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required></p><p><button type=\"submit\">Sign in</button></p></form><p>A token signs in to read. To decide approvals and trust tools, run <code>evoctl ui</code> on evod's machine.</p>"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_forms_are_read() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "a=1; evo_console=abc; b=".parse().unwrap());
        assert_eq!(cookie(&h, COOKIE), Some("abc"));
        assert_eq!(cookie(&h, "b"), None);
        assert_eq!(
            form_value(b"x=1&token=evo_a%2Bb+c", "token").as_deref(),
            Some("evo_a+b c")
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn the_console_steers_as_the_owner_and_reads_as_anyone_else() {
        let approve = CtlRequest::Approve { id: "ap1".into() };
        assert!(permitted(&approve, true).is_ok());
        assert!(permitted(&approve, false).is_err());
        assert!(permitted(&CtlRequest::Stop, true).is_err());
        assert!(permitted(&CtlRequest::TokenList, true).is_err());
        assert!(permitted(&CtlRequest::Status, false).is_ok());
        let mut data = json!({"approvals": [{"id": "ap1", "identity": "token:a"}, {"id": "ap2", "identity": "local"}]});
        keep_own(&CtlRequest::Approvals, &mut data, "token:a");
        assert_eq!(data["approvals"].as_array().map(Vec::len), Some(1));
    }
}
