//! Evo's direct requests on a child (`tools/call`, `resources/read`): a
//! request is written with an id of its own (`evo-N`), and its answer is
//! handed over here raw, before rmcp would parse it. On a stdio child the
//! request is one line on its stdin and the answer is taken off its stream
//! by the transport (see [`super::io`]); on a Streamable HTTP child it is
//! one POST whose answer is read by the call itself, on the caller's task
//! (see [`super::direct_http`]). What a session holds of a ready child
//! ([`DirectCalls`]); it knows nothing of the link.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{JsonObject, RequestMetaObject};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};
use tokio::process::ChildStdin;
use tokio::sync::{Mutex, oneshot};

use super::direct_http::{Exchanged, HttpWire};
use crate::VERSION;
use crate::runtime::ndjson::write_line;

pub(super) const STDIN_CLOSED: &str = "the child's stdin is closed";
/// Prefix of the ids of direct calls (rmcp's own ids are numbers).
const ID_PREFIX: &str = "evo-";

/// Direct calls in flight on one child, and how to write to it.
pub struct DirectCalls {
    /// The child's stdin, shared with rmcp's side of the transport (`None`
    /// for a Streamable HTTP child).
    pub(super) writer: Arc<Mutex<Option<ChildStdin>>>,
    /// How to POST to a Streamable HTTP child.
    http: Option<Arc<HttpWire>>,
    /// Calls waiting for their answer, and the size of the line it came in.
    waiting: std::sync::Mutex<HashMap<String, oneshot::Sender<(Answer, usize)>>>,
    next: AtomicU64,
    /// The per-request `_meta` a 2026-07-28 child requires; `None` on
    /// handshake-era children.
    envelope: std::sync::OnceLock<Option<Value>>,
}

/// What a child answered to a direct request, still unparsed where it
/// can be.
enum Answer {
    Result(RawResult),
    Error(rmcp::ErrorData),
}

/// A successful answer's `result`, as the child wrote it: the line it came
/// in and where in it the result is. Parsed once, into what its user needs
/// (a typed result), or not at all (a resource read passed through).
pub struct RawResult {
    line: Vec<u8>,
    at: std::ops::Range<usize>,
}

impl RawResult {
    /// The result's JSON text (a valid JSON value, UTF-8).
    pub fn bytes(&self) -> &[u8] {
        &self.line[self.at.clone()]
    }

    /// A result that is all of `text` (tests).
    #[cfg(test)]
    pub fn whole(text: &str) -> RawResult {
        RawResult {
            line: text.as_bytes().to_vec(),
            at: 0..text.len(),
        }
    }

    /// The line and where in it the result is.
    pub fn into_parts(self) -> (Vec<u8>, std::ops::Range<usize>) {
        (self.line, self.at)
    }

    /// The result as a `T`, which messages call `what` ("tool result").
    pub fn parse<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, rmcp::ErrorData> {
        serde_json::from_slice(self.bytes()).map_err(|e| {
            rmcp::ErrorData::internal_error(format!("the answer is not a {what}: {e}"), None)
        })
    }
}

/// How a direct request ended.
pub enum Direct<T> {
    /// The result, and the size of the line it came in (what the child
    /// sent, measured for free).
    Result(T, usize),
    /// The child answered with a JSON-RPC error (or one that is not a `T`).
    Error(rmcp::ErrorData),
    /// The child went away before answering.
    Gone,
}

/// The top of an answer line, read without building its result: serde
/// checks the result is well-formed JSON and says where it is.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    method: Option<serde::de::IgnoredAny>,
    #[serde(borrow)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    error: Option<&'a serde_json::value::RawValue>,
}

/// What one parse of an answer line's top says: `Err` when it is not
/// JSON; `None` when it is not an answer to one of our requests; else the
/// id and where the result lies, or the error.
type Top = Option<(String, Result<std::ops::Range<usize>, rmcp::ErrorData>)>;

fn answer_top(line: &[u8]) -> Result<Top, ()> {
    let envelope = serde_json::from_slice::<Envelope>(line).map_err(|_| ())?;
    let id = match envelope
        .id
        .map(|id| serde_json::from_str::<String>(id.get()))
    {
        // Ours: rmcp's own ids are numbers.
        Some(Ok(id)) if envelope.method.is_none() && id.starts_with(ID_PREFIX) => id,
        _ => return Ok(None),
    };
    let outcome = match (envelope.result, envelope.error) {
        (Some(result), _) => Ok(offset_in(line, result.get())),
        (None, error) => Err(error
            .and_then(|e| serde_json::from_str(e.get()).ok())
            .unwrap_or_else(|| {
                rmcp::ErrorData::internal_error(
                    "an error answer without a valid error object",
                    None,
                )
            })),
    };
    Ok(Some((id, outcome)))
}

/// The answer to one of our requests that `line` is: its id, the answer
/// and the line's size; else the line back.
fn answer_in(line: Vec<u8>) -> Result<(String, Answer, usize), Vec<u8>> {
    // Cheap test first: only lines that mention one of our ids.
    if !mentions(&line, &QUOTED_ID_PREFIX) {
        return Err(line);
    }
    let (line, top) = match answer_top(&line) {
        Ok(top) => (line, top),
        // Invalid UTF-8 in a string (seen in text results) is replaced,
        // not a reason to lose the whole message.
        Err(()) if std::str::from_utf8(&line).is_err() => {
            let line = String::from_utf8_lossy(&line).into_owned().into_bytes();
            match answer_top(&line) {
                Ok(top) => (line, top),
                Err(()) => return Err(line),
            }
        }
        Err(()) => return Err(line),
    };
    let Some((id, outcome)) = top else {
        return Err(line);
    };
    let size = line.len();
    let answer = match outcome {
        Ok(at) => Answer::Result(RawResult { line, at }),
        Err(error) => Answer::Error(error),
    };
    Ok((id, answer, size))
}

/// The string `params[key]` of a request, if it has one.
fn params_str(request: &Value, key: &str) -> Option<String> {
    request
        .get("params")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

/// Where `part` (borrowed from `line`) lies in it.
fn offset_in(line: &[u8], part: &str) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - line.as_ptr() as usize;
    start..start + part.len()
}

impl DirectCalls {
    /// Direct calls writing to `stdin`; answers come through [`DirectCalls::deliver`].
    pub(super) fn new(stdin: ChildStdin) -> DirectCalls {
        DirectCalls {
            writer: Arc::new(Mutex::new(Some(stdin))),
            http: None,
            waiting: Default::default(),
            next: AtomicU64::new(1),
            envelope: Default::default(),
        }
    }

    /// Direct calls POSTed on `wire`.
    pub(super) fn over_http(wire: Arc<HttpWire>) -> DirectCalls {
        DirectCalls {
            writer: Arc::new(Mutex::new(None)),
            http: Some(wire),
            waiting: Default::default(),
            next: AtomicU64::new(1),
            envelope: Default::default(),
        }
    }

    /// Whether the calls go to a Streamable HTTP child.
    pub fn is_http(&self) -> bool {
        self.http.is_some()
    }

    /// rmcp's session with the child, for what an HTTP child's direct path
    /// leaves to it.
    pub fn through(&self, peer: &Peer<RoleClient>) {
        if let Some(wire) = &self.http {
            wire.through(peer.clone());
        }
    }

    /// Sets the request envelope once the protocol version is known.
    pub fn negotiated(&self, protocol_version: &str) {
        let envelope = (protocol_version >= "2026-07-28").then(|| {
            json!({
                "io.modelcontextprotocol/protocolVersion": protocol_version,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "evo", "version": VERSION},
            })
        });
        let _ = self.envelope.set(envelope);
        if let Some(wire) = &self.http {
            wire.negotiated(protocol_version);
        }
    }

    /// Starts a `tools/call` (with `meta` as its `_meta`: a trace's
    /// `traceparent`); see [`DirectCalls::request`].
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: &JsonObject,
        meta: Option<&RequestMetaObject>,
    ) -> std::io::Result<Pending> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(meta) = meta.filter(|m| !m.0.0.is_empty()) {
            params["_meta"] = Value::Object(meta.0.0.clone());
        }
        self.request("tools/call", params).await
    }

    /// Starts a request of `method` with `params` (an object); the returned
    /// [`Pending`] resolves with the child's answer. Dropping it before it
    /// resolves tells the child the request is cancelled.
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
    ) -> std::io::Result<Pending> {
        let id = format!("{ID_PREFIX}{}", self.next.fetch_add(1, Ordering::Relaxed));
        if let Some(Some(Value::Object(envelope))) = self.envelope.get() {
            match params.get_mut("_meta").and_then(Value::as_object_mut) {
                Some(meta) => meta.extend(envelope.clone()),
                None => params["_meta"] = Value::Object(envelope.clone()),
            }
        }
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Some(wire) = &self.http {
            let body =
                bytes::Bytes::from(serde_json::to_vec(&line).map_err(std::io::Error::other)?);
            let named = ["name", "uri"].iter().find_map(|k| params_str(&line, k));
            let (wire, ours) = (wire.clone(), id.clone());
            let method = method.to_string();
            let exchange = async move {
                let answer = |line: Vec<u8>| match answer_in(line) {
                    Ok((id, answer, size)) if id == ours => Ok((answer, size)),
                    Ok(_) => Err(Vec::new()),
                    Err(line) => Err(line),
                };
                let from_rmcp = |text: Vec<u8>| {
                    let size = text.len();
                    let at = 0..size;
                    (Answer::Result(RawResult { line: text, at }), size)
                };
                match wire
                    .exchange(&method, named.as_deref(), body, answer, from_rmcp)
                    .await
                {
                    Exchanged::Answer(answer) => Some(answer),
                    Exchanged::Error(e) => Some((Answer::Error(e), 0)),
                    Exchanged::Gone => None,
                }
            };
            return Ok(Pending {
                calls: self.clone(),
                id,
                rx: Some(Waiting::Http(Box::pin(exchange))),
            });
        }
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), tx);
        let pending = Pending {
            calls: self.clone(),
            id,
            rx: Some(Waiting::Line(rx)),
        };
        self.write(&line).await?;
        Ok(pending)
    }

    async fn write(&self, value: &Value) -> std::io::Result<()> {
        write_line(&self.writer, value, STDIN_CLOSED).await
    }

    /// Hands an answer line to its waiting call; gives the line back if it
    /// is not ours (rmcp reads it then).
    pub(super) fn deliver(&self, line: Vec<u8>) -> Result<(), Vec<u8>> {
        let (id, answer, size) = answer_in(line)?;
        self.hand_over(&id, answer, size);
        Ok(())
    }

    /// Fails the call `id` with `error` (its answer could not be read);
    /// false if no direct call has that id.
    pub(super) fn deliver_error(&self, id: &Value, error: rmcp::ErrorData) -> bool {
        match id.as_str() {
            Some(id) if id.starts_with(ID_PREFIX) => {
                self.hand_over(id, Answer::Error(error), 0);
                true
            }
            _ => false,
        }
    }

    /// Gives `answer` to the call `id` waits on; a late answer to a
    /// cancelled call is dropped.
    fn hand_over(&self, id: &str, answer: Answer, size: usize) {
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(tx) = waiter {
            let _ = tx.send((answer, size));
        }
    }

    /// Fails every waiting call (the child is gone).
    pub(super) fn fail_all(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// A direct call in flight.
pub struct Pending {
    calls: Arc<DirectCalls>,
    id: String,
    rx: Option<Waiting>,
}

/// Where a call's answer comes from: a stdio child's stream (through the
/// transport), or its own HTTP exchange, run by whoever awaits it (`None`:
/// the child went away).
enum Waiting {
    Line(oneshot::Receiver<(Answer, usize)>),
    Http(BoxFuture<'static, Option<(Answer, usize)>>),
}

impl Pending {
    /// The answer as a `T` (a `CallToolResult`, a `ReadResourceResult`),
    /// which messages call `what` ("tool result"), parsed straight from the
    /// child's line.
    pub async fn answer<T: serde::de::DeserializeOwned>(self, what: &str) -> Direct<T> {
        match self.answer_raw().await {
            Direct::Result(raw, size) => match raw.parse(what) {
                Ok(r) => Direct::Result(r, size),
                Err(e) => Direct::Error(e),
            },
            Direct::Error(e) => Direct::Error(e),
            Direct::Gone => Direct::Gone,
        }
    }

    /// The answer's `result` unparsed, for a caller that reads what it
    /// needs of it itself.
    pub async fn answer_raw(mut self) -> Direct<RawResult> {
        // Still `Some` while waiting: dropped here, the call is cancelled.
        let answer = match self.rx.as_mut() {
            None => None,
            Some(Waiting::Line(rx)) => rx.await.ok(),
            Some(Waiting::Http(exchange)) => exchange.await,
        };
        self.rx = None;
        match answer {
            Some((Answer::Result(raw), size)) => Direct::Result(raw, size),
            Some((Answer::Error(e), _)) => Direct::Error(e),
            None => Direct::Gone,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        match self.rx.take() {
            None => return, // answered
            Some(Waiting::Http(_)) => {
                if let Some(wire) = &self.calls.http {
                    wire.cancel(std::mem::take(&mut self.id));
                }
                return;
            }
            Some(Waiting::Line(_)) => {}
        }
        let waiting = self
            .calls
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        if waiting.is_some() {
            // Not answered: tell the child to stop.
            let calls = self.calls.clone();
            let id = self.id.clone();
            tokio::spawn(async move {
                let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": id, "reason": "cancelled or timed out"}});
                let _ = calls.write(&cancel).await;
            });
        }
    }
}

/// Substring searches over whole lines (a 1 MiB result is scanned three
/// times on its way): SIMD, not a byte-by-byte window.
pub(super) type Finder = std::sync::LazyLock<memchr::memmem::Finder<'static>>;
static QUOTED_ID_PREFIX: Finder =
    Finder::new(|| memchr::memmem::Finder::new(format!("\"{ID_PREFIX}").as_bytes()).into_owned());

pub(super) fn mentions(line: &[u8], what: &Finder) -> bool {
    what.find(line).is_some()
}
