//! Evo's direct requests on a Streamable HTTP child, the HTTP side of
//! [`super::direct`]: a request's bytes are POSTed with the shared pooled
//! client (`remote_client`, so the connection stays warm)
//! under the headers rmcp's session with the child uses (its session id and
//! protocol version, the server's configured headers, its OAuth token), and
//! the answer, a JSON body or the matching event of an event stream, is
//! handed back as the child wrote it. rmcp's client (its worker task, typed
//! messages built and serialised both ways) is not on the way.
//!
//! What the direct path leaves to rmcp, sending the same request through
//! rmcp's session instead (the child has not run it): a 404 to a session
//! (rmcp re-initializes and retries, as it always did), a 401 that a
//! refreshed token did not cure (rmcp keeps the challenge and the server
//! goes to `login required`), any other 4xx but 429, a tool whose schema
//! carries `x-mcp-header` annotations on a 2026-07-28 child (rmcp builds its
//! `Mcp-Param-*` headers) and a name that would need Base64 in `Mcp-Name`.
//! Other messages on a call's event stream (a log line, a request to the
//! client) are handed to rmcp's side as if they had come on its own
//! connection (`remote::ProgressFirst` reads them). A stream that
//! ends without the answer fails the call as a lost connection: rmcp's
//! resumption with `Last-Event-ID` is not attempted.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::model::{CancelledNotificationParam, ClientRequest, JsonObject, Tool};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RxJsonRpcMessage};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::oauth::Bearer;

/// Messages of a call's event stream handed to rmcp's side at a time.
pub const TO_RMCP: usize = 64;

/// What rmcp's session with the child shows the direct path: the session
/// id it sends, and the tools whose arguments go in headers too.
#[derive(Default)]
pub struct SeenByRmcp {
    session: ArcSwapOption<HeaderValue>,
    annotated: RwLock<HashSet<String>>,
    any_annotated: AtomicBool,
}

impl SeenByRmcp {
    /// rmcp sent a message under `session` (set once the child gave one,
    /// new after rmcp re-initialized an expired one).
    pub fn session(&self, session: &Option<Arc<str>>) {
        let current = self.session.load();
        let new = session.as_deref().map(str::as_bytes);
        if current.as_deref().map(HeaderValue::as_bytes) == new {
            return;
        }
        let value = session
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok())
            .map(Arc::new);
        self.session.store(value);
    }

    /// A page of the child's tools went by: those with `x-mcp-header`
    /// annotations are called through rmcp.
    pub fn tools(&self, tools: &[Tool]) {
        let marked: Vec<String> = tools
            .iter()
            .filter(|t| annotated(&t.input_schema))
            .map(|t| t.name.to_string())
            .collect();
        if marked.is_empty() {
            return;
        }
        self.annotated
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .extend(marked);
        self.any_annotated.store(true, Ordering::Release);
    }

    fn is_annotated(&self, tool: &str) -> bool {
        self.any_annotated.load(Ordering::Acquire)
            && self
                .annotated
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(tool)
    }
}

/// Whether a schema has an `x-mcp-header` anywhere.
fn annotated(schema: &JsonObject) -> bool {
    fn within(value: &Value) -> bool {
        match value {
            Value::Object(o) => o.contains_key("x-mcp-header") || o.values().any(within),
            Value::Array(items) => items.iter().any(within),
            _ => false,
        }
    }
    schema.contains_key("x-mcp-header") || schema.values().any(within)
}

/// How a direct exchange ended; `T` is the answer as the caller read it.
pub enum Exchanged<T> {
    Answer(T),
    /// The child answered with an error, or with something that is not an
    /// answer.
    Error(rmcp::ErrorData),
    /// The connection failed or closed before the answer.
    Gone,
}

/// How to reach one run of a Streamable HTTP child directly.
pub struct HttpWire {
    server: Arc<str>,
    client: reqwest::Client,
    url: Url,
    /// The configured headers, `Accept` and `Content-Type`.
    base: HeaderMap,
    bearer: Option<Arc<Bearer>>,
    pub seen: Arc<SeenByRmcp>,
    /// The negotiated version's header, and whether it has the standard
    /// `Mcp-Method`/`Mcp-Name` headers (2026-07-28).
    version: OnceLock<(HeaderValue, bool)>,
    /// rmcp's session, for what the direct path leaves to it.
    peer: OnceLock<Peer<RoleClient>>,
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    max_message: usize,
}

/// What [`HttpWire::new`] needs.
pub struct WireTarget<'a> {
    pub server: &'a str,
    pub url: &'a str,
    pub headers: &'a BTreeMap<String, String>,
    pub bearer: Option<Arc<Bearer>>,
    pub client: reqwest::Client,
    pub max_message: usize,
}

impl HttpWire {
    /// The wire of one run, and where it hands rmcp the messages that are
    /// not its answers.
    pub fn new(
        target: WireTarget<'_>,
    ) -> Result<(HttpWire, mpsc::Receiver<RxJsonRpcMessage<RoleClient>>), String> {
        let url = Url::parse(target.url).map_err(|e| format!("url '{}': {e}", target.url))?;
        let mut base = header_map(target.headers)?;
        if target.bearer.is_some() {
            base.remove(AUTHORIZATION); // the OAuth token takes its place
        }
        base.insert(
            ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let (to_rmcp, from_direct) = mpsc::channel(TO_RMCP);
        let wire = HttpWire {
            server: target.server.into(),
            client: target.client,
            url,
            base,
            bearer: target.bearer,
            seen: Default::default(),
            version: OnceLock::new(),
            peer: OnceLock::new(),
            to_rmcp,
            max_message: target.max_message,
        };
        Ok((wire, from_direct))
    }

    /// The protocol version the handshake settled on.
    pub fn negotiated(&self, version: &str) {
        if let Ok(value) = HeaderValue::from_str(version) {
            let _ = self.version.set((value, version >= "2026-07-28"));
        }
    }

    /// rmcp's session with the child, once connected.
    pub fn through(&self, peer: Peer<RoleClient>) {
        let _ = self.peer.set(peer);
    }

    /// The headers of a request of `method` naming `name` (a tool, a URI);
    /// `None` when only rmcp can send it.
    fn headers(&self, method: &str, name: Option<&str>) -> Option<HeaderMap> {
        let mut headers = self.base.clone();
        if let Some(session) = &*self.seen.session.load() {
            headers.insert("mcp-session-id", HeaderValue::clone(session));
        }
        let Some((version, standard)) = self.version.get() else {
            return Some(headers);
        };
        headers.insert("mcp-protocol-version", version.clone());
        if *standard {
            if method == "tools/call" && name.is_some_and(|n| self.seen.is_annotated(n)) {
                return None;
            }
            headers.insert("mcp-method", HeaderValue::from_str(method).ok()?);
            if let Some(name) = name {
                // A value that needs rmcp's Base64 form goes through rmcp.
                let plain = !name.starts_with([' ', '\t'])
                    && !name.ends_with([' ', '\t'])
                    && !name.starts_with("=?base64?")
                    && name.bytes().all(|b| (0x20..0x7f).contains(&b));
                if !plain {
                    return None;
                }
                headers.insert("mcp-name", HeaderValue::from_str(name).ok()?);
            }
        }
        Some(headers)
    }

    /// POSTs `body`, the request `id` of `method` naming `name`, and reads
    /// its answer with `answer` (which gives back a message that is not
    /// it); see the module docs for what goes through rmcp instead.
    pub async fn exchange<T>(
        &self,
        method: &str,
        name: Option<&str>,
        body: Bytes,
        answer: impl Fn(Vec<u8>) -> Result<T, Vec<u8>>,
        from_rmcp: impl FnOnce(Vec<u8>) -> T,
    ) -> Exchanged<T> {
        let Some(headers) = self.headers(method, name) else {
            return self.via_rmcp(method, &body, from_rmcp).await;
        };
        for attempt in 0..2 {
            let mut request = self
                .client
                .post(self.url.clone())
                .headers(headers.clone())
                .body(body.clone());
            let mut sent = None;
            if let Some(bearer) = &self.bearer {
                let Ok(value) = bearer.header().await else {
                    return self.via_rmcp(method, &body, from_rmcp).await;
                };
                request = request.header(AUTHORIZATION, value.clone());
                sent = Some(value);
            }
            let Ok(response) = request.send().await else {
                return Exchanged::Gone;
            };
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED
                && attempt == 0
                && let (Some(bearer), Some(sent)) = (&self.bearer, &sent)
                && bearer.rejected(sent).await.is_some()
            {
                continue; // once, with the refreshed token
            }
            if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
                return self.via_rmcp(method, &body, from_rmcp).await;
            }
            return self.read(response, answer).await;
        }
        self.via_rmcp(method, &body, from_rmcp).await
    }

    /// Reads the answer out of the child's response.
    async fn read<T>(
        &self,
        mut response: reqwest::Response,
        answer: impl Fn(Vec<u8>) -> Result<T, Vec<u8>>,
    ) -> Exchanged<T> {
        let status = response.status();
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if kind.starts_with("text/event-stream") && status.is_success() {
            return self.read_events(response, answer).await;
        }
        let json = kind.starts_with("application/json");
        if !json || matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Exchanged::Error(rmcp::ErrorData::internal_error(
                format!(
                    "server '{}' answered HTTP {status} ({kind}) without a JSON-RPC answer",
                    self.server
                ),
                None,
            ));
        }
        let capacity = response.content_length().unwrap_or(0) as usize;
        let mut body = Vec::with_capacity(capacity.min(self.max_message));
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() > self.max_message => {
                    return Exchanged::Error(self.oversized());
                }
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(_) => return Exchanged::Gone,
            }
        }
        match answer(body) {
            Ok(t) => Exchanged::Answer(t),
            Err(_) => Exchanged::Error(rmcp::ErrorData::internal_error(
                format!(
                    "server '{}' answered HTTP {status} with JSON that is not the answer",
                    self.server
                ),
                None,
            )),
        }
    }

    /// Reads an event stream until the answer; every other message goes to
    /// rmcp's side.
    async fn read_events<T>(
        &self,
        response: reqwest::Response,
        answer: impl Fn(Vec<u8>) -> Result<T, Vec<u8>>,
    ) -> Exchanged<T> {
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        while let Some(event) = events.next().await {
            let Ok(event) = event else {
                return Exchanged::Gone;
            };
            if !matches!(event.event.as_deref(), None | Some("message")) {
                continue;
            }
            let Some(data) = event.data.filter(|d| !d.is_empty()) else {
                continue;
            };
            if data.len() > self.max_message {
                // Whether it was the answer cannot be told without reading
                // it: the call fails with the reason rather than hang.
                return Exchanged::Error(self.oversized());
            }
            let other = match answer(data.into_bytes()) {
                Ok(t) => return Exchanged::Answer(t),
                Err(other) => other,
            };
            match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(&other) {
                Ok(message) => {
                    let _ = self.to_rmcp.send(message).await;
                }
                Err(e) => {
                    tracing::debug!(server = %self.server, error = %e, "an event that is not JSON-RPC; ignored")
                }
            }
        }
        Exchanged::Gone
    }

    fn oversized(&self) -> rmcp::ErrorData {
        let limit = self.max_message;
        rmcp::ErrorData::internal_error(
            format!(
                "server '{}' answered with more than {limit} bytes (limits.max_message_bytes); the answer was discarded: ask for less (a smaller range, a filter, a page)",
                self.server
            ),
            None,
        )
    }

    /// Sends the request in `body` through rmcp's session instead; its
    /// result's JSON text is made the answer by `from_rmcp`.
    async fn via_rmcp<T>(
        &self,
        method: &str,
        body: &[u8],
        from_rmcp: impl FnOnce(Vec<u8>) -> T,
    ) -> Exchanged<T> {
        let Some(peer) = self.peer.get() else {
            return Exchanged::Gone;
        };
        let mut params = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|mut v| v.get_mut("params").map(Value::take))
            .unwrap_or_default();
        // rmcp gives the request its own progress token; the rest of `_meta`
        // (a `traceparent`, say) goes on as the direct request had it.
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("progressToken");
        }
        let request = serde_json::json!({"method": method, "params": params});
        let Ok(request) = serde_json::from_value::<ClientRequest>(request) else {
            return Exchanged::Error(rmcp::ErrorData::internal_error(
                format!("a {method} request evo cannot send through rmcp"),
                None,
            ));
        };
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(_) => return Exchanged::Gone,
        };
        let mut abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let result = handle.await_response().await;
        abandoned.peer = None;
        match result.map(|r| serde_json::to_vec(&r)) {
            Ok(Ok(text)) => Exchanged::Answer(from_rmcp(text)),
            Ok(Err(e)) => Exchanged::Error(rmcp::ErrorData::internal_error(e.to_string(), None)),
            Err(rmcp::ServiceError::McpError(e)) => Exchanged::Error(e),
            Err(_) => Exchanged::Gone,
        }
    }

    /// Tells the child request `id` is cancelled (its caller dropped it),
    /// on a task of its own.
    pub fn cancel(self: &Arc<Self>, id: String) {
        let wire = self.clone();
        tokio::spawn(async move {
            let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "cancelled or timed out"}});
            let Some(headers) = wire.headers("notifications/cancelled", None) else {
                return;
            };
            let mut request = wire
                .client
                .post(wire.url.clone())
                .headers(headers)
                .body(note.to_string());
            if let Some(bearer) = &wire.bearer
                && let Ok(value) = bearer.header().await
            {
                request = request.header(AUTHORIZATION, value);
            }
            let _ = request.send().await;
        });
    }
}

/// A request sent through rmcp whose caller went away before the answer:
/// the child is told it is cancelled.
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let id = self.id.clone();
            tokio::spawn(async move {
                let note = CancelledNotificationParam::new(Some(id), Some("cancelled".into()));
                let _ = peer.notify_cancelled(note).await;
            });
        }
    }
}

/// A server's configured headers as a header map; an invalid name or value
/// is an error naming the header (never its value: a secret).
pub fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name '{k}' is not valid"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("value of header '{k}' is not a valid header value"))?;
        map.insert(name, value);
    }
    Ok(map)
}
