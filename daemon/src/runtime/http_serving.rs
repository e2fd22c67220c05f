//! The one HTTP serving layer under the MCP endpoint (`http`) and the web
//! console's own loopback listener (`console::listener`): the body type,
//! plain-text and JSON answers, and the accept loop. Every connection it
//! accepts runs as a session of the [`StopSignal`], so stopping evod ends
//! it (gracefully, within a moment) and waits for it.
//!
//! It speaks HTTP/1.1 only (hyper's `http1`): a browser opens at most six connections to one host,
//! so more than five console tabs of one browser on one evod leave the rest waiting for their event
//! stream.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::runtime::shutdown::StopSignal;

/// Every response body served.
pub type Body = BoxBody<Bytes, Infallible>;

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to finish once evod stops.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A plain-text answer (a line: the newline is added).
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut message = message.into();
    message.push('\n');
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// A JSON answer.
pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// Accepts on `listener` until evod stops; each connection (at most
/// `limit` at once, when given) runs `connection` as a tracked session.
/// `what` names the listener in logs.
pub async fn accept<F, Fut>(
    listener: TcpListener,
    stop: StopSignal,
    limit: Option<Arc<Semaphore>>,
    what: &'static str,
    connection: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let permit = match &limit {
            Some(limit) => {
                let permit = tokio::select! {
                    p = limit.clone().acquire_owned() => p,
                    () = stop.fired() => return,
                };
                let Ok(permit) = permit else { return };
                Some(permit)
            }
            None => None,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.fired() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let served = connection(stream, peer);
                stop.spawn_session(async move {
                    served.await;
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed on the {what}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves one connection over HTTP/1 until the client is done or evod
/// stops (then the request in flight may finish, briefly).
pub async fn serve_connection<IO, F, Fut>(
    io: IO,
    stop: &StopSignal,
    handle: F,
) -> Result<(), hyper::Error>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let answer = handle(req);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        () = stop.fired() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(STOP_GRACE, conn).await;
            Ok(())
        }
    }
}
