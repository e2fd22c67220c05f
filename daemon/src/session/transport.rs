//! A session's MCP transport: newline-delimited JSON-RPC over the control
//! socket, after the handshake. Unlike a bare codec it answers bad input: a
//! line that is not JSON gets a parse error (-32700), JSON that is not a
//! JSON-RPC message gets an invalid-request error (-32600) with its id when one
//! can be read, an oversized line gets an error and is skipped; the session
//! goes on in every case.

use std::sync::Arc;

use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// Requests of one session being handled at once. Past it the session's
/// socket is not read until an answer goes out, so a client that sends
/// without reading is held back instead of growing the daemon's memory.
pub const MAX_IN_FLIGHT: usize = 64;

/// Permits of the requests in flight, released when their answer is sent
/// (or the client cancels them). A client may reuse an id while a request
/// with it is in flight: each keeps its own slot.
type InFlight = Arc<
    std::sync::Mutex<
        std::collections::HashMap<rmcp::model::RequestId, Vec<tokio::sync::OwnedSemaphorePermit>>,
    >,
>;

/// See the module docs.
pub struct SessionTransport<R, W> {
    lines: LineReader<R>,
    writer: Arc<Mutex<Option<W>>>,
    slots: Arc<tokio::sync::Semaphore>,
    /// A slot taken before reading the next message (cancellation-safe:
    /// taking it consumes nothing from the socket).
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    in_flight: InFlight,
}

impl<R, W> SessionTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(reader: R, writer: W, max_line: usize) -> Self {
        SessionTransport {
            lines: LineReader::new(reader, max_line),
            writer: Arc::new(Mutex::new(Some(writer))),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            slot: None,
            in_flight: Default::default(),
        }
    }

    /// Sends an error reply on its own task, so a cancelled `receive` can
    /// never leave half a reply on the wire. The reply holds the message's
    /// in-flight slot until it is written: a client that sends bad messages
    /// and never reads is held back like one whose calls pile up.
    fn reply(&mut self, value: Value) {
        let writer = self.writer.clone();
        let slot = self.slot.take();
        tokio::spawn(async move {
            let _ = write_line(&writer, &value, "session transport is closed").await;
            drop(slot);
        });
    }
}

/// Newline-delimited reading with a size limit, cancellation-safe: rmcp
/// polls `receive` inside a `select!` and may drop it mid-line, so the line
/// being read lives here, and bytes are consumed only once stored.
pub(crate) struct LineReader<R> {
    reader: R,
    line: Vec<u8>,
    oversized: bool,
    /// The start of the last oversized line, to tell whom it answers.
    head: Vec<u8>,
    pub(crate) max_line: usize,
}

/// Bytes of an oversized line kept to find its JSON-RPC `id`.
const HEAD: usize = 512;

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max_line: usize) -> Self {
        LineReader {
            reader,
            line: Vec::new(),
            oversized: false,
            head: Vec::new(),
            max_line,
        }
    }

    /// The `id` of the last line reported too long, when its start shows
    /// one at the top level (senders put it first), so that request can
    /// still get its one answer.
    pub(crate) fn oversized_id(&self) -> Option<Value> {
        top_level_id(&self.head)
    }

    /// The whole line read by the last successful `next_line`.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.line)
    }

    /// Reads until a whole line is held (see [`Self::take`]). Returns false at end of
    /// stream. A line over the limit is consumed up to its newline and
    /// reported. Cancellation-safe: bytes are consumed only once stored.
    pub(crate) async fn next_line(&mut self) -> Result<bool, LineError> {
        loop {
            let buf = match self.reader.fill_buf().await {
                Ok(b) => b,
                Err(e) => return Err(LineError::Io(e)),
            };
            if buf.is_empty() {
                return if self.oversized {
                    self.oversized = false;
                    Err(LineError::TooLong)
                } else {
                    Ok(!self.line.is_empty())
                };
            }
            let newline = buf.iter().position(|b| *b == b'\n');
            let take = newline.map_or(buf.len(), |i| i + 1);
            if !self.oversized {
                let chunk = &buf[..newline.unwrap_or(buf.len())];
                if self.line.len() + chunk.len() > self.max_line {
                    self.oversized = true;
                    let mut head = std::mem::take(&mut self.line);
                    head.extend_from_slice(&chunk[..chunk.len().min(HEAD)]);
                    head.truncate(HEAD);
                    self.head = head;
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            self.reader.consume(take);
            if newline.is_some() {
                if self.oversized {
                    self.oversized = false;
                    return Err(LineError::TooLong);
                }
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                return Ok(true);
            }
        }
    }
}

/// Writes `value` as one JSON line to a writer that may have been closed
/// (`None`), and flushes. Shared by the session and child transports.
pub(crate) async fn write_line<W, T>(
    writer: &Mutex<Option<W>>,
    value: &T,
    closed: &'static str,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            closed,
        ));
    };
    w.write_all(&bytes).await?;
    w.flush().await
}

/// The value of the top-level `"id"` member in the start of a JSON object,
/// if it is a number or a string and appears there whole. Strings are
/// skipped properly, so an `"id"` nested in params is never taken.
fn top_level_id(head: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let start = i;
                i += 1;
                while i < head.len() && head[i] != b'"' {
                    i += if head[i] == b'\\' { 2 } else { 1 };
                }
                let key = head.get(start..=i)?;
                let rest = head.get(i + 1..)?;
                let after = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                if depth == 1 && key == b"\"id\"" && rest[after] == b':' {
                    let value = &rest[after + 1..];
                    let mut values =
                        serde_json::Deserializer::from_slice(value).into_iter::<Value>();
                    return match values.next()? {
                        Ok(id @ (Value::Number(_) | Value::String(_))) => Some(id),
                        _ => None,
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

pub(crate) enum LineError {
    TooLong,
    Io(std::io::Error),
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl<R, W> Transport<RoleServer> for SessionTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let in_flight = self.in_flight.clone();
        async move {
            // The slot frees once the answer is on its way out.
            let _slot = answered.and_then(|id| {
                let mut map = in_flight.lock().unwrap_or_else(|e| e.into_inner());
                let slots = map.get_mut(&id)?;
                let slot = slots.pop();
                if slots.is_empty() {
                    map.remove(&id);
                }
                slot
            });
            write_line(&writer, &item, "session transport is closed").await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.slot.is_none() {
                self.slot = Some(self.slots.clone().acquire_owned().await.ok()?);
            }
            match self.lines.next_line().await {
                Ok(false) => return None,
                Ok(true) => {}
                Err(LineError::Io(e)) => {
                    tracing::debug!(error = %e, "session read failed");
                    return None;
                }
                Err(LineError::TooLong) => {
                    let msg = format!(
                        "message exceeds the limit of {} bytes and was discarded; send smaller arguments or raise limits.max_message_bytes",
                        self.lines.max_line
                    );
                    // Answered under its own id when its start shows it,
                    // so the request does not wait for an answer forever.
                    let id = self.lines.oversized_id().unwrap_or(Value::Null);
                    self.reply(error_reply(id, -32600, msg));
                    continue;
                }
            }
            let whole = self.lines.take();
            let line = whole.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&whole);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
                Ok(msg) => {
                    let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                    match &msg {
                        // Two requests in flight under one id: the second
                        // could never be told apart in the answers, so it
                        // is refused (the first goes on).
                        JsonRpcMessage::Request(r) if in_flight.contains_key(&r.id) => {
                            drop(in_flight);
                            let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
                            self.reply(error_reply(
                                id.clone(),
                                -32600,
                                format!("request id {id} is already used by a request in flight; give each request its own id"),
                            ));
                            continue;
                        }
                        JsonRpcMessage::Request(r) => {
                            if let Some(slot) = self.slot.take() {
                                in_flight.entry(r.id.clone()).or_default().push(slot);
                            }
                        }
                        // A cancelled request may never be answered.
                        JsonRpcMessage::Notification(n) => {
                            if let ClientNotification::CancelledNotification(c) = &n.notification
                                && let Some(id) = &c.params.request_id
                            {
                                in_flight.remove(id);
                            }
                        }
                        _ => {}
                    }
                    drop(in_flight);
                    return Some(msg);
                }
                Err(parse_err) => {
                    let reply = match serde_json::from_slice::<Value>(line) {
                        Err(e) => Some(error_reply(
                            Value::Null,
                            -32700,
                            format!("parse error: the message is not valid JSON ({e})"),
                        )),
                        Ok(value) => {
                            let id = value.get("id").cloned();
                            let is_notification = id.is_none() && value.get("method").is_some();
                            let is_response =
                                value.get("result").is_some() || value.get("error").is_some();
                            if is_notification || is_response {
                                // Nothing to answer: a bad notification, or a
                                // response to a request never made.
                                tracing::debug!(error = %parse_err, "ignoring malformed notification or stray response");
                                None
                            } else {
                                Some(error_reply(
                                    id.unwrap_or(Value::Null),
                                    -32600,
                                    format!("invalid request: {parse_err}"),
                                ))
                            }
                        }
                    };
                    if let Some(reply) = reply {
                        self.reply(reply);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut guard = self.writer.lock().await;
        if let Some(mut w) = guard.take() {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_id_is_read_from_the_start_of_a_line() {
        let cases: [(&[u8], Option<Value>); 8] = [
            (
                br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"a":"xxxx"#,
                Some(json!(5)),
            ),
            (
                br#"{"id": "evo-7" , "result": {"content": [{"text": "xx"#,
                Some(json!("evo-7")),
            ),
            // An "id" inside params is not the request's.
            (
                br#"{"jsonrpc":"2.0","method":"tools/call","params":{"id":3,"text":"xx"#,
                None,
            ),
            // A string that mentions "id": is skipped whole.
            (br#"{"note":"\"id\":9","id":4,"#, Some(json!(4))),
            (br#"{"method":"x","id":null,"#, None),
            (br#"{"id":{"nested":1},"#, None),
            // Cut before the id's value is whole.
            (br#"{"id":"evo-12"#, None),
            (b"not json at all", None),
        ];
        for (head, want) in cases {
            assert_eq!(
                top_level_id(head),
                want,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }
}
