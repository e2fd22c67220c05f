//! A stdio child's transport, shared by two users: rmcp's client (the
//! handshake, listing, notifications, progress-tracked calls) and evo's
//! direct requests (`tools/call`, `resources/read`). A direct request writes
//! one line with an id of its own (`evo-N`) and its answer is taken off the
//! stream here, raw, before rmcp would parse it: the hot path skips rmcp's
//! request machinery and its untyped-result parsing (which buffers a whole
//! answer and tries each result type in turn: costly for a 1 MiB read).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{JsonObject, ProgressNotificationParam};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{Mutex, oneshot};

use crate::runtime::ndjson::{LineError, LineReader, write_line};

const STDIN_CLOSED: &str = "the child's stdin is closed";
/// Prefix of the ids of direct calls (rmcp's own ids are numbers).
const ID_PREFIX: &str = "evo-";

/// Direct calls in flight on one child, and how to write to it.
pub struct DirectCalls {
    writer: Arc<Mutex<Option<ChildStdin>>>,
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

/// Where `part` (borrowed from `line`) lies in it.
fn offset_in(line: &[u8], part: &str) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - line.as_ptr() as usize;
    start..start + part.len()
}

impl DirectCalls {
    /// Sets the request envelope once the protocol version is known.
    pub fn negotiated(&self, protocol_version: &str) {
        let envelope = (protocol_version >= "2026-07-28").then(|| {
            json!({
                "io.modelcontextprotocol/protocolVersion": protocol_version,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "evo", "version": crate::VERSION},
            })
        });
        let _ = self.envelope.set(envelope);
    }

    /// Starts a `tools/call`; see [`DirectCalls::request`].
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: &JsonObject,
    ) -> std::io::Result<Pending> {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
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
        if let Some(Some(envelope)) = self.envelope.get() {
            params["_meta"] = envelope.clone();
        }
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), tx);
        let pending = Pending {
            calls: self.clone(),
            id,
            rx: Some(rx),
        };
        self.write(&line).await?;
        Ok(pending)
    }

    async fn write(&self, value: &Value) -> std::io::Result<()> {
        write_line(&self.writer, value, STDIN_CLOSED).await
    }

    /// Hands an answer line to its waiting call; gives the line back if it
    /// is not ours (rmcp reads it then).
    fn deliver(&self, line: Vec<u8>) -> Result<(), Vec<u8>> {
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
        self.hand_over(&id, answer, size);
        Ok(())
    }

    /// Fails the call `id` with `error` (its answer could not be read);
    /// false if no direct call has that id.
    fn deliver_error(&self, id: &Value, error: rmcp::ErrorData) -> bool {
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
    fn fail_all(&self) {
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
    rx: Option<oneshot::Receiver<(Answer, usize)>>,
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
        let Some(rx) = self.rx.as_mut() else {
            return Direct::Gone;
        };
        // Still `Some` while waiting: dropped here, the call is cancelled.
        let answer = rx.await;
        self.rx = None;
        match answer {
            Ok((Answer::Result(raw), size)) => Direct::Result(raw, size),
            Ok((Answer::Error(e), _)) => Direct::Error(e),
            Err(_) => Direct::Gone,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.rx.is_none() {
            return; // answered
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

/// When rmcp drops the transport (the child is gone or stopped), calls
/// still waiting learn it at once.
impl Drop for ChildTransport {
    fn drop(&mut self) {
        self.calls.fail_all();
    }
}

/// A `tools/list` answer rmcp would misread because of one bad tool (a
/// schema that is not an object, seen in published servers), fixed: such
/// an `inputSchema` becomes `{"type": "object"}`, other fields that must be
/// objects and are not are dropped, a tool without a name is dropped; each
/// with a warning naming the server and tool. The rest of the list stands.
/// `None` when the line is not such an answer or needs no fix.
fn repaired_tool_list(server: &str, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let mut value: Value = serde_json::from_slice(line).ok()?;
    let tools = value.get_mut("result")?.get_mut("tools")?.as_array_mut()?;
    let mut changed = false;
    tools.retain_mut(|tool| {
        let Some(tool) = tool.as_object_mut() else {
            tracing::warn!(server, "a listed tool is not an object; skipped");
            changed = true;
            return false;
        };
        let Some(name) = tool.get("name").and_then(Value::as_str).map(str::to_owned) else {
            tracing::warn!(server, "a listed tool has no name; skipped");
            changed = true;
            return false;
        };
        if !tool.get("inputSchema").is_some_and(Value::is_object) {
            tracing::warn!(server, tool = %name, "inputSchema is not a JSON object; using {{\"type\": \"object\"}}");
            tool.insert("inputSchema".into(), json!({"type": "object"}));
            changed = true;
        }
        for field in ["outputSchema", "annotations", "_meta", "execution"] {
            if tool.get(field).is_some_and(|v| !v.is_object()) {
                tracing::warn!(server, tool = %name, field, "not a JSON object; dropped");
                tool.remove(field);
                changed = true;
            }
        }
        // Hints are booleans; one of another type (seen: "yes") is no
        // claim at all, and the MCP default applies.
        if let Some(annotations) = tool.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.retain(|field, value| {
                let wrong = match field.as_str() {
                    "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint" => {
                        !value.is_boolean()
                    }
                    "title" => !value.is_string(),
                    _ => false,
                };
                if wrong {
                    tracing::warn!(server, tool = %name, field = %field, "annotation of the wrong type ignored (the MCP default applies)");
                    changed = true;
                }
                !wrong
            });
        }
        for field in ["title", "description"] {
            if tool.get(field).is_some_and(|v| !v.is_string()) {
                tracing::warn!(server, tool = %name, field, "not a string; dropped");
                tool.remove(field);
                changed = true;
            }
        }
        true
    });
    if !changed {
        return None;
    }
    serde_json::from_value(value).ok()
}

const PROGRESS: &[u8] = b"notifications/progress";

/// Substring searches over whole lines (a 1 MiB result is scanned three
/// times on its way): SIMD, not a byte-by-byte window.
type Finder = std::sync::LazyLock<memchr::memmem::Finder<'static>>;
static PROGRESS_FINDER: Finder = Finder::new(|| memchr::memmem::Finder::new(PROGRESS));
static TOOLS_KEY: Finder = Finder::new(|| memchr::memmem::Finder::new(b"\"tools\""));
static QUOTED_ID_PREFIX: Finder =
    Finder::new(|| memchr::memmem::Finder::new(format!("\"{ID_PREFIX}").as_bytes()).into_owned());

fn mentions(line: &[u8], what: &Finder) -> bool {
    what.find(line).is_some()
}
/// How long forwarding one progress notification may hold up this child's
/// next message (a session that stopped reading loses it instead).
const PROGRESS_SEND: std::time::Duration = std::time::Duration::from_millis(100);

impl ChildTransport {
    /// Sends a progress notification of a routed call to its session, under
    /// the client's own token; false if `line` is not one (rmcp reads it).
    async fn forward_progress(&self, line: &[u8]) -> bool {
        let Ok(mut note) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        if note.get("method").and_then(Value::as_str) != Some("notifications/progress") {
            return false;
        }
        let Some(params) = note.get_mut("params").map(Value::take) else {
            return false;
        };
        let Ok(mut params) = serde_json::from_value::<ProgressNotificationParam>(params) else {
            return false;
        };
        let Some(route) = self.link.progress_route(&params.progress_token) else {
            return false;
        };
        params.progress_token = route.token;
        let _ = tokio::time::timeout(PROGRESS_SEND, route.session.notify_progress(params)).await;
        true
    }
}

/// The transport rmcp's client runs on; see the module docs.
pub struct ChildTransport {
    lines: LineReader<BufReader<ChildStdout>>,
    calls: Arc<DirectCalls>,
    /// The server's link: its id names it in warnings, and its progress
    /// routes are followed here.
    link: Arc<crate::child::link::ServerLink>,
}

impl ChildTransport {
    pub fn new(
        link: Arc<crate::child::link::ServerLink>,
        stdout: ChildStdout,
        stdin: ChildStdin,
        max_line: usize,
    ) -> (ChildTransport, Arc<DirectCalls>) {
        let calls = Arc::new(DirectCalls {
            writer: Arc::new(Mutex::new(Some(stdin))),
            waiting: Default::default(),
            next: AtomicU64::new(1),
            envelope: Default::default(),
        });
        (
            ChildTransport {
                lines: LineReader::new(BufReader::new(stdout), max_line),
                calls: calls.clone(),
                link,
            },
            calls,
        )
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.calls.writer.clone();
        async move { write_line(&writer, &item, STDIN_CLOSED).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.lines.next_line().await {
                Ok(true) => {}
                Ok(false) | Err(LineError::Io(_)) => {
                    self.calls.fail_all();
                    return None;
                }
                Err(LineError::TooLong) => {
                    let limit = self.lines.max_line;
                    tracing::warn!(server = %self.link.id, "the child sent a message over {limit} bytes (limits.max_message_bytes); discarded");
                    // If it answers a request, that request fails now with
                    // the reason, rather than waiting out its timeout.
                    let Some(id) = self.lines.oversized_id() else {
                        continue;
                    };
                    let reason = format!(
                        "server '{}' answered with more than {limit} bytes (limits.max_message_bytes); the answer was discarded: ask for less (a smaller range, a filter, a page)",
                        self.link.id
                    );
                    if self
                        .calls
                        .deliver_error(&id, rmcp::ErrorData::internal_error(reason.clone(), None))
                    {
                        continue;
                    }
                    let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": reason}});
                    match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(error) {
                        Ok(msg) => return Some(msg),
                        Err(_) => continue,
                    }
                }
            }
            let mut line = self.lines.take();
            if line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Err(line) = self.calls.deliver(line) else {
                continue;
            };
            let line = &line[..];
            // Progress goes to its session here, in the order the child sent
            // it: handed to rmcp, each notification would run on a task of
            // its own and could reach the session after the call's result.
            if mentions(line, &PROGRESS_FINDER) && self.forward_progress(line).await {
                continue;
            }
            // A tool list is checked before rmcp reads it: one bad tool would
            // make rmcp read the whole answer as something else and drop the
            // child. Tool lists are rare; calls never come this way.
            if mentions(line, &TOOLS_KEY)
                && let Some(msg) = repaired_tool_list(&self.link.id, line)
            {
                return Some(msg);
            }
            let parsed =
                serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line).or_else(|e| {
                    // Invalid UTF-8 in a string (seen in text results): replaced,
                    // not a reason to lose the whole message.
                    match std::str::from_utf8(line) {
                        Ok(_) => Err(e),
                        Err(_) => serde_json::from_str(&String::from_utf8_lossy(line)),
                    }
                });
            match parsed {
                Ok(msg) => return Some(msg),
                // Children print garbage too (seen in published servers).
                Err(e) => {
                    tracing::debug!(error = %e, "skipping a line from a child that is not JSON-RPC")
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut guard = self.calls.writer.lock().await;
        if let Some(mut w) = guard.take() {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}
