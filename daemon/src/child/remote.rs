//! What remote (Streamable HTTP and HTTP+SSE) children share: the HTTP
//! client ([`remote_client`]), the OAuth credential on every request
//! ([`Authed`], around rmcp's reqwest client), and progress forwarded in
//! order ([`ProgressFirst`]); and how a Streamable HTTP child is connected
//! ([`connect`]).
//!
//! A remote (Streamable HTTP) server has no process to watch: while ready its ChildServer pings it
//! every 10 s (10 s to answer), and a lost ping or a call that fails in transport on its live
//! connection marks it down; it is reconnected with backoff and never marked failed
//! (`restarts.rs`). Remote children share one pooled reqwest client (rmcp's default disables
//! pooling, so every message opened a TCP connection).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ProgressNotificationParam};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;
use tokio::sync::mpsc;

use super::direct::DirectCalls;
use super::direct_http::{HttpWire, SeenByRmcp, WireTarget};
use super::handshake::{Connecting, Handshake, StartError};
use super::link::ServerLink;
pub use crate::oauth::Bearer;
use crate::runtime::log_tag::TaskTag;

/// How long forwarding one progress notification may hold up the server's
/// next message (a session that stopped reading loses it instead).
const PROGRESS_SEND: Duration = Duration::from_millis(100);

/// Sends a progress notification of a routed call to its session, under the
/// client's own token; false if `message` is not one (rmcp reads it).
pub async fn forward_progress(link: &ServerLink, message: &[u8]) -> bool {
    if memchr::memmem::find(message, b"notifications/progress").is_none() {
        return false;
    }
    let Ok(mut note) = serde_json::from_slice::<Value>(message) else {
        return false;
    };
    forward_progress_value(link, &mut note).await
}

async fn forward_progress_value(link: &ServerLink, note: &mut Value) -> bool {
    if note.get("method").and_then(Value::as_str) != Some("notifications/progress") {
        return false;
    }
    let Some(params) = note.get_mut("params").map(Value::take) else {
        return false;
    };
    let Ok(mut params) = serde_json::from_value::<ProgressNotificationParam>(params) else {
        return false;
    };
    let Some(route) = link.progress_route(&params.progress_token) else {
        return false;
    };
    params.progress_token = route.token;
    let _ = tokio::time::timeout(PROGRESS_SEND, route.session.notify_progress(params)).await;
    true
}

/// A transport whose routed progress notifications are forwarded as they
/// are received, before the next message reaches rmcp (which runs each
/// notification on a task of its own, so a call's last progress could
/// trail its result).
pub struct ProgressFirst<T> {
    inner: T,
    link: Arc<ServerLink>,
    /// Messages a direct call read on its own event stream (not its answer).
    from_direct: Option<mpsc::Receiver<RxJsonRpcMessage<RoleClient>>>,
    /// What the direct calls need to see go by (the tools' header annotations).
    seen: Option<Arc<SeenByRmcp>>,
}

impl<T> ProgressFirst<T> {
    pub fn new(inner: T, link: Arc<ServerLink>) -> Self {
        ProgressFirst {
            inner,
            link,
            from_direct: None,
            seen: None,
        }
    }

    /// Also takes in the messages direct calls read, and shows them the
    /// tool lists.
    pub fn with_direct(
        self,
        from_direct: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
        seen: Arc<SeenByRmcp>,
    ) -> Self {
        ProgressFirst {
            from_direct: Some(from_direct),
            seen: Some(seen),
            ..self
        }
    }
}

impl<T> Transport<RoleClient> for ProgressFirst<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = match &mut self.from_direct {
                Some(from_direct) => tokio::select! {
                    message = self.inner.receive() => message?,
                    Some(message) = from_direct.recv() => message,
                },
                None => self.inner.receive().await?,
            };
            if let (Some(seen), rmcp::model::JsonRpcMessage::Response(r)) = (&self.seen, &message)
                && let rmcp::model::ServerResult::ListToolsResult(list) = &r.result
            {
                seen.tools(&list.tools);
            }
            if let rmcp::model::JsonRpcMessage::Notification(n) = &message
                && let rmcp::model::ServerNotification::ProgressNotification(p) = &n.notification
                && let Some(route) = self.link.progress_route(&p.params.progress_token)
            {
                let mut params = p.params.clone();
                params.progress_token = route.token;
                let _ = tokio::time::timeout(PROGRESS_SEND, route.session.notify_progress(params))
                    .await;
                continue;
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

/// rmcp's Streamable HTTP client as a remote child uses it: with the
/// server's OAuth credential on every request, if it has one (the current
/// token is read without a lock; a 401 refreshes it once, one refresh in
/// flight per server, and the request is sent again), and the server's 401
/// challenge kept for the ChildServer (rmcp's handshake error loses it).
#[derive(Clone)]
pub struct Authed<C> {
    /// The server id, for the log lines of rmcp's tasks (`crate::runtime::log_tag`).
    pub tag: Arc<TaskTag>,
    pub inner: C,
    pub bearer: Option<Arc<Bearer>>,
    pub challenge: Arc<OnceLock<String>>,
    /// Where the direct calls learn the session id rmcp uses.
    pub seen: Option<Arc<SeenByRmcp>>,
}

impl<C: StreamableHttpClient + Sync> Authed<C> {
    /// Runs `call` with the OAuth token, or without OAuth with `given` (the
    /// configured `Authorization: Bearer` header, if any).
    async fn with_token<T, F, Fut>(
        &self,
        given: Option<String>,
        call: F,
    ) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        self.tag.tag_current_task();
        let Some(bearer) = &self.bearer else {
            return self.noted(call(given).await);
        };
        let token = bearer
            .token()
            .await
            .map_err(|e| StreamableHttpError::UnexpectedServerResponse(e.into()))?;
        let result = match call(Some(token.to_string())).await {
            Err(StreamableHttpError::AuthRequired(challenge)) => {
                let header = HeaderValue::from_str(&format!("Bearer {token}")).ok();
                let fresh = match header {
                    Some(h) => bearer.rejected(&h).await,
                    None => None,
                };
                match fresh {
                    Some(fresh) if *fresh != *token => call(Some(fresh.to_string())).await,
                    _ => Err(StreamableHttpError::AuthRequired(challenge)),
                }
            }
            other => other,
        };
        self.noted(result)
    }

    /// Keeps the session id rmcp sends, for the direct calls.
    fn saw(&self, session_id: &Option<Arc<str>>) {
        if let Some(seen) = &self.seen {
            seen.session(session_id);
        }
    }

    /// Keeps a 401's challenge.
    fn noted<T>(
        &self,
        result: Result<T, StreamableHttpError<C::Error>>,
    ) -> Result<T, StreamableHttpError<C::Error>> {
        if let Err(StreamableHttpError::AuthRequired(c)) = &result {
            let _ = self.challenge.set(c.www_authenticate_header.clone());
        }
        result
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Authed<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.saw(&session_id);
        self.with_token(auth, |token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.saw(&session_id);
        self.with_token(auth, |token| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.saw(&session_id);
        self.with_token(auth, |token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.with_token(auth, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.with_token(auth, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.with_token(auth, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max,
            )
        })
        .await
    }
}

/// A remote server to connect to: what both its transports need.
pub struct RemoteTarget<'a> {
    pub server: &'a str,
    pub url: &'a str,
    /// Its configured `headers`.
    pub headers: &'a BTreeMap<String, String>,
    /// Its OAuth credential for this run, if it has one.
    pub bearer: Option<Arc<Bearer>>,
    pub link: Arc<ServerLink>,
}

/// Starts `handshake` with a Streamable HTTP server, answers up to
/// `max_message` bytes; also returns the direct calls on it (see
/// [`super::direct_http`]). A start that fails after the server answered
/// 401 fails as [`StartError::Unauthorized`], with its challenge.
pub fn connect(
    target: RemoteTarget<'_>,
    max_message: usize,
    mut handshake: Handshake,
) -> Result<(Connecting, Arc<DirectCalls>), String> {
    let config = http_config(target.url, target.headers)?;
    let (wire, from_direct) = HttpWire::new(WireTarget {
        server: target.server,
        url: target.url,
        headers: target.headers,
        bearer: target.bearer.clone(),
        client: remote_client(),
        max_message,
    })?;
    let seen = wire.seen.clone();
    let direct = Arc::new(DirectCalls::over_http(Arc::new(wire)));
    handshake.direct = Some(direct.clone());
    let challenge = Arc::new(OnceLock::new());
    let client = Authed {
        tag: Arc::new(TaskTag::new(target.server.into())),
        inner: remote_client(),
        bearer: target.bearer,
        challenge: challenge.clone(),
        seen: Some(seen.clone()),
    };
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let transport = ProgressFirst::new(transport, target.link).with_direct(from_direct, seen);
    let connecting: Connecting = Box::pin(async move {
        let connected = handshake.over(transport).await;
        match (connected, challenge.get()) {
            (Err(StartError::Other(_)), Some(challenge)) => Err(StartError::Unauthorized {
                challenge: challenge.clone(),
            }),
            (other, _) => other,
        }
    });
    Ok((connecting, direct))
}

/// The HTTP client of remote (Streamable HTTP) children, one for the
/// process. Unlike rmcp's default it keeps connections alive between calls
/// (rmcp's opens a new TCP connection per message: measured at ~400 µs a
/// call on loopback); Nagle is off (reqwest's default), so a reused
/// connection does not wait on a delayed ACK. Redirects: rmcp's rule,
/// same-origin 307/308 only (a POST keeps its body, credentials stay home).
pub fn remote_client() -> reqwest::Client {
    static CLIENT: std::sync::LazyLock<reqwest::Client> = std::sync::LazyLock::new(|| {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("exceeded 10 redirects")
            } else {
                attempt.follow()
            }
        });
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .redirect(policy)
            .build()
            .unwrap_or_default()
    });
    CLIENT.clone()
}

/// rmcp's configuration of a Streamable HTTP connection to `url` with the
/// server's configured `headers` (a bearer token among them goes where rmcp
/// expects it); an invalid header is an error naming it, never its value.
fn http_config(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    let mut custom = HashMap::new();
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("authorization")
            && let Some(token) = v.strip_prefix("Bearer ")
        {
            config = config.auth_header(token.to_string());
            continue;
        }
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name '{k}' is not valid"))?;
        // The value is a secret: never echo it.
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("value of header '{k}' is not a valid header value"))?;
        custom.insert(name, value);
    }
    Ok(config.custom_headers(custom))
}
