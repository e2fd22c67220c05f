//! What remote (Streamable HTTP and HTTP+SSE) children share: how a start
//! fails ([`StartError`]), the OAuth credential on every request
//! ([`Authed`], around rmcp's reqwest client), and progress forwarded in
//! order ([`ProgressFirst`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ProgressNotificationParam};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;

use super::link::ServerLink;
pub use crate::oauth::Bearer;

/// How long forwarding one progress notification may hold up the server's
/// next message (a session that stopped reading loses it instead).
const PROGRESS_SEND: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a start did not connect.
#[derive(Debug)]
pub enum StartError {
    /// The server answered 401: its `WWW-Authenticate` challenge.
    Unauthorized {
        challenge: String,
    },
    Other(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Unauthorized { .. } => f.write_str("answered 401 Unauthorized"),
            StartError::Other(e) => f.write_str(e),
        }
    }
}

impl From<String> for StartError {
    fn from(e: String) -> Self {
        StartError::Other(e)
    }
}

/// The 401 challenge somewhere in an rmcp error's chain, if the failure was
/// the server asking for authorization.
pub fn challenge_of(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(a) =
            err.downcast_ref::<rmcp::transport::streamable_http_client::AuthRequiredError>()
        {
            return Some(a.www_authenticate_header.clone());
        }
        cur = err.source();
    }
    None
}

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
}

impl<T> ProgressFirst<T> {
    pub fn new(inner: T, link: Arc<ServerLink>) -> Self {
        ProgressFirst { inner, link }
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
            let message = self.inner.receive().await?;
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
    pub tag: Arc<crate::runtime::log_tag::TaskTag>,
    pub inner: C,
    pub bearer: Option<Arc<Bearer>>,
    pub challenge: Arc<std::sync::OnceLock<String>>,
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
