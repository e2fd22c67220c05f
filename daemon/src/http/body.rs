//! What the endpoint checks of a request before rmcp reads it: the POST
//! body (JSON, one message, not a batch) and the `Accept` and
//! `Content-Type` headers, with the JSON-RPC errors it answers.
//!
//! Bad input is answered here, before rmcp: rmcp would answer a body that is not a JSON-RPC message
//! with 415 and plain text, so the front checks the content type itself and turns such a 415 into
//! 400 with the JSON-RPC error (`-32600`, under the message's id). A refused request's small body
//! (at most 64 KiB) is read before the refusal so the connection stays usable; a larger one is not
//! read and the connection closes.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};

use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::runtime::http_serving::{self as serving, Body};

/// A JSON-RPC error as the whole answer to a POST that could not be served.
pub(super) fn jsonrpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: String,
) -> Response<Body> {
    serving::json(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

/// `response` with `held` kept alive until its body is sent or dropped.
pub(super) fn holding<G: Send + Sync + Unpin + 'static>(
    response: Response<Body>,
    held: G,
) -> Response<Body> {
    response.map(|inner| Holding { inner, held }.boxed())
}

/// A body that keeps something alive as long as itself.
struct Holding<G> {
    inner: Body,
    #[allow(dead_code, reason = "held for its Drop")]
    held: G,
}

impl<G: Unpin> hyper::body::Body for Holding<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a POST body is, read just far enough to route it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Peeked {
    pub(super) method: Option<String>,
    /// A request's id (string or number), as its JSON text.
    pub(super) id: Option<String>,
}

/// Refusals of a body rmcp would not read: not JSON (-32700), a batch or
/// not an object (-32600). `Ok` carries the method, when there is one.
pub(super) fn peek(body: &[u8]) -> Result<Peeked, Box<Response<Body>>> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(default)]
        id: Option<Value>,
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return Err(Box::new(match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Err(e) => parse_error(&e),
            Ok(_) => jsonrpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32600,
                "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per request".into(),
            ),
        }));
    }
    match serde_json::from_slice::<Head<'_>>(body) {
        Ok(head) => Ok(Peeked {
            id: head
                .id
                .filter(|id| id.is_string() || id.is_number())
                .map(|id| id.to_string()),
            method: head.method.map(std::borrow::Cow::into_owned),
        }),
        Err(e) if e.is_syntax() || e.is_eof() => Err(Box::new(parse_error(&e))),
        Err(e) => Err(Box::new(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            format!("invalid request: a JSON-RPC message is a JSON object ({e})"),
        ))),
    }
}

pub(super) fn parse_error(e: &serde_json::Error) -> Response<Body> {
    jsonrpc_error(
        StatusCode::BAD_REQUEST,
        Value::Null,
        -32700,
        format!("parse error: the body is not valid JSON ({e})"),
    )
}

/// A body rmcp could not read as a JSON-RPC message (it answers 415): the
/// JSON-RPC invalid-request error, under the message's id when it has one.
pub(super) fn unreadable_message(body: &[u8]) -> Response<Body> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    let mut problem = "it is not a JSON-RPC 2.0 request, notification or response".to_string();
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        problem = "\"jsonrpc\": \"2.0\" is missing".into();
    } else if value.get("method").is_some_and(|m| !m.is_string()) {
        problem = "\"method\" must be a string".into();
    }
    jsonrpc_error(
        StatusCode::BAD_REQUEST,
        id,
        -32600,
        format!("invalid request: {problem}"),
    )
}

/// Largest body read (and dropped) before a refusal, so the client's
/// connection stays usable; a larger one closes it instead.
const DRAIN_LIMIT: u64 = 64 * 1024;

/// Reads a refused request's small body, so the connection can serve the
/// client's next request.
pub(super) async fn drain_small(req: Request<Incoming>) {
    let small = header_str(req.headers(), header::CONTENT_LENGTH)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n <= DRAIN_LIMIT);
    if small {
        let body = Limited::new(req.into_body(), DRAIN_LIMIT as usize);
        let _ = tokio::time::timeout(Duration::from_secs(2), body.collect()).await;
    }
}

pub(super) fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `Accept` names both what a Streamable HTTP POST may answer with.
pub(super) fn accepts_both(headers: &HeaderMap) -> bool {
    let mut json = false;
    let mut sse = false;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(v) = value.to_str() else { continue };
        for item in v.split(',') {
            let essence = item.split(';').next().unwrap_or("").trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

pub(super) fn is_json_content(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_and_body(r: Result<Peeked, Box<Response<Body>>>) -> (u16, Value) {
        let r = r.unwrap_err();
        let status = r.status().as_u16();
        let body = futures::executor::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn bodies_rmcp_would_not_read_get_their_json_rpc_error() {
        assert_eq!(
            peek(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).unwrap(),
            Peeked {
                id: Some("1".into()),
                method: Some("initialize".into())
            }
        );
        assert_eq!(
            peek(br#"{"id":1}"#).unwrap(),
            Peeked {
                method: None,
                id: Some("1".into())
            }
        );
        for (body, code) in [
            (&b"{not json"[..], -32700),
            (b"", -32700),
            (
                b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
                -32600,
            ),
            (b"[1,", -32700),
            (b"42", -32600),
            (b"\"initialize\"", -32600),
        ] {
            let (status, v) = status_and_body(peek(body));
            assert_eq!(status, 400, "{}", String::from_utf8_lossy(body));
            assert_eq!(
                v["error"]["code"],
                code,
                "{}: {v}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(v["id"], Value::Null);
        }
        let r = unreadable_message(br#"{"id": 7, "method": "tools/list"}"#);
        assert_eq!(r.status(), 400);
        let body = futures::executor::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(7), json!(-32600))
        );
        assert!(v["error"]["message"].as_str().unwrap().contains("jsonrpc"));
    }

    #[test]
    fn accept_and_content_type_are_read_like_rmcp_reads_them() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            "application/json, text/event-stream".parse().unwrap(),
        );
        h.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(accepts_both(&h) && is_json_content(&h));
        h.insert(header::ACCEPT, "application/json".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!accepts_both(&h) && !is_json_content(&h));
    }
}
