//! The legacy HTTP+SSE transport (MCP 2024-11-05) of a remote child
//! (`"type": "sse"`): one long GET of an event stream whose first `endpoint`
//! event names where to POST messages; every answer and notification comes
//! back on the stream as a `message` event.
//!
//! The stream reader is a task of its own. It hands messages to rmcp in the
//! order they came, progress of a routed call forwarded first (see
//! `remote::forward_progress`), so a call's progress never trails
//! its result. When the stream ends, the reader says why through
//! `on_closed` (the ChildServer takes the server down and reconnects with
//! backoff) and rmcp sees the end of the transport, which fails the calls in
//! flight at once.
//!
//! HTTP+SSE children handshake with `initialize` only: the transport predates 2026-07-28, so there
//! is no `server/discover` probe. The endpoint must be on the stream's origin, because the server's
//! headers and token go there. A message over `limits.max_message_bytes` or not JSON-RPC is dropped
//! with a warning naming the server (its call times out). The stream's end takes the server down at
//! once, without waiting for the ping. A 401 to the stream's GET refreshes the token once and asks
//! again; so does each POST.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use rmcp::service::{ClientLifecycleMode, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use super::direct_http::header_map;
use super::handshake::{Connecting, Handshake, StartError};
use super::link::ServerLink;
use super::remote::{Bearer, ProgressFirst, RemoteTarget, forward_progress, remote_client};
use crate::error_text::readable_error;

/// How long the stream may take to send its `endpoint` event.
pub const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);
/// The parsed event stream.
type Events = futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>;
/// Messages read ahead of rmcp.
const QUEUE: usize = 64;

/// Where and how to POST: the endpoint the stream named, with the
/// server's headers and credential.
struct Poster {
    server: Arc<str>,
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    bearer: Option<Arc<Bearer>>,
}

impl Poster {
    /// POSTs one message; a 401 with a credential refreshes it once and
    /// tries again.
    async fn post(&self, body: Vec<u8>) -> Result<(), std::io::Error> {
        let mut sent = None;
        for attempt in 0..2 {
            let mut request = self
                .client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(bearer) = &self.bearer {
                let value = bearer.header().await.map_err(std::io::Error::other)?;
                request = request.header(reqwest::header::AUTHORIZATION, value.clone());
                sent = Some(value);
            }
            let response = request.send().await.map_err(|e| {
                std::io::Error::other(format!(
                    "server '{}': POST to {} failed: {}",
                    self.server,
                    self.endpoint,
                    readable_error(&e)
                ))
            })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            if status == StatusCode::UNAUTHORIZED
                && attempt == 0
                && let (Some(bearer), Some(sent)) = (&self.bearer, &sent)
            {
                bearer.rejected(sent).await;
                continue;
            }
            return Err(std::io::Error::other(format!(
                "server '{}': POST to {} answered {status}",
                self.server, self.endpoint
            )));
        }
        Err(std::io::Error::other(format!(
            "server '{}': its credential was refused after a refresh",
            self.server
        )))
    }
}

/// rmcp's client transport over HTTP+SSE. See the module docs.
pub struct SseTransport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    poster: Arc<Poster>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A connection being made: what [`SseTransport::connect`] needs.
pub struct SseTarget {
    pub server: Arc<str>,
    pub url: String,
    pub headers: HeaderMap,
    pub bearer: Option<Arc<Bearer>>,
    pub link: Arc<ServerLink>,
    /// Largest message read (`limits.max_message_bytes`).
    pub max_message: usize,
}

impl SseTransport {
    /// Opens the stream and waits (up to [`ENDPOINT_TIMEOUT`]) for its
    /// `endpoint` event. `on_closed` hears why the stream ended, once.
    pub async fn connect(
        target: SseTarget,
        client: reqwest::Client,
        on_closed: impl FnOnce(String) + Send + 'static,
    ) -> Result<SseTransport, StartError> {
        let SseTarget {
            server,
            url,
            headers,
            bearer,
            link,
            max_message,
        } = target;
        let url = Url::parse(&url)
            .map_err(|e| StartError::Other(format!("url '{url}' is not valid: {e}")))?;
        // A 401 to the token sent refreshes it once (one refresh in flight
        // per server) and the stream is asked for again.
        let mut refreshed = false;
        let response = loop {
            let mut request = client
                .get(url.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream");
            let mut sent = None;
            if let Some(bearer) = &bearer {
                let value = bearer.header().await.map_err(StartError::Other)?;
                request = request.header(reqwest::header::AUTHORIZATION, value.clone());
                sent = Some(value);
            }
            let response = request.send().await.map_err(|e| {
                StartError::Other(format!(
                    "GET {url} (the SSE stream) failed: {}",
                    readable_error(&e)
                ))
            })?;
            if response.status() != StatusCode::UNAUTHORIZED {
                break response;
            }
            if !refreshed
                && let (Some(bearer), Some(sent)) = (&bearer, &sent)
                && bearer.rejected(sent).await.is_some()
            {
                refreshed = true;
                continue;
            }
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            return Err(StartError::Unauthorized { challenge });
        };
        let status = response.status();
        if !status.is_success() {
            let hint = if matches!(
                status,
                StatusCode::METHOD_NOT_ALLOWED
                    | StatusCode::BAD_REQUEST
                    | StatusCode::NOT_ACCEPTABLE
            ) {
                "; if it is a Streamable HTTP server, set \"type\": \"http\""
            } else {
                ""
            };
            return Err(StartError::Other(format!(
                "GET {url} (the SSE stream) answered {status}{hint}"
            )));
        }
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        if !kind.starts_with("text/event-stream") {
            return Err(StartError::Other(format!(
                "GET {url} answered with content type '{kind}', not an SSE stream (text/event-stream); if it is a Streamable HTTP server, set \"type\": \"http\""
            )));
        }
        let mut events: Events =
            sse_stream::SseStream::from_bytes_stream(response.bytes_stream()).boxed();
        let endpoint = tokio::time::timeout(ENDPOINT_TIMEOUT, async {
            while let Some(event) = events.next().await {
                match event {
                    Ok(e) if e.event.as_deref() == Some("endpoint") => {
                        return Ok(e.data.unwrap_or_default());
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return Err(format!("the SSE stream at {url} is not valid SSE: {e}"));
                    }
                }
            }
            Err(format!(
                "the SSE stream at {url} ended before its `endpoint` event"
            ))
        })
        .await
        .map_err(|_| {
            StartError::Other(format!(
                "the SSE stream at {url} sent no `endpoint` event within {} s; is it an HTTP+SSE server? (a Streamable HTTP server takes \"type\": \"http\")",
                ENDPOINT_TIMEOUT.as_secs()
            ))
        })?
        .map_err(StartError::Other)?;
        let endpoint = url.join(endpoint.trim()).map_err(|e| {
            StartError::Other(format!(
                "the SSE stream at {url} named an endpoint that is not a URL ('{}'): {e}",
                endpoint.trim()
            ))
        })?;
        // The endpoint gets the server's headers and credential: it must be
        // the server itself.
        if endpoint.origin() != url.origin() {
            return Err(StartError::Other(format!(
                "the SSE stream at {url} named an endpoint on another origin ({}); evo does not send the server's headers there",
                endpoint.origin().ascii_serialization()
            )));
        }
        tracing::debug!(server = %server, endpoint = %endpoint, "SSE stream open");
        let (tx, incoming) = mpsc::channel(QUEUE);
        let reader = tokio::spawn(read_stream(
            events,
            tx,
            link,
            server.clone(),
            max_message,
            on_closed,
        ));
        Ok(SseTransport {
            incoming,
            poster: Arc::new(Poster {
                server,
                client,
                endpoint,
                headers,
                bearer,
            }),
            reader,
        })
    }
}

/// Reads `message` events until the stream ends, then says why.
async fn read_stream(
    mut events: Events,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    link: Arc<ServerLink>,
    server: Arc<str>,
    max_message: usize,
    on_closed: impl FnOnce(String) + Send + 'static,
) {
    let reason = loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => break format!("the SSE stream failed: {e}"),
            None => break "the server closed the SSE stream".to_string(),
        };
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        if data.len() > max_message {
            tracing::warn!(server = %server, bytes = data.len(), limit = max_message, "dropped an SSE message over limits.max_message_bytes");
            continue;
        }
        if forward_progress(&link, data.as_bytes()).await {
            continue;
        }
        match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
            Ok(message) => {
                if tx.send(message).await.is_err() {
                    return; // the client is gone: nobody to tell
                }
            }
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "the SSE stream sent a message that is not JSON-RPC; ignored")
            }
        }
    };
    drop(tx);
    on_closed(reason);
}

impl Transport<RoleClient> for SseTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let poster = self.poster.clone();
        async move {
            let body = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            poster.post(body).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

/// Starts `handshake` with a legacy HTTP+SSE server, messages up to
/// `max_message` bytes; `on_closed` hears why its stream ended.
pub fn connect(
    target: RemoteTarget<'_>,
    max_message: usize,
    handshake: Handshake,
    on_closed: impl FnOnce(String) + Send + 'static,
) -> Result<Connecting, String> {
    let link = target.link;
    let target = SseTarget {
        server: target.server.into(),
        url: target.url.to_string(),
        headers: header_map(target.headers)?,
        bearer: target.bearer,
        link: link.clone(),
        max_message,
    };
    // HTTP+SSE is the 2024-11-05 transport: no probe.
    let handshake = Handshake {
        lifecycle: ClientLifecycleMode::Initialize,
        ..handshake
    };
    Ok(Box::pin(async move {
        let transport = SseTransport::connect(target, remote_client(), on_closed).await?;
        handshake.over(ProgressFirst::new(transport, link)).await
    }))
}
