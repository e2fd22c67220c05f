//! A session's MCP transport: newline-delimited JSON-RPC over the control
//! socket, after the handshake. Unlike a bare codec it answers bad input: a
//! line that is not JSON gets a parse error (-32700), JSON that is not a
//! JSON-RPC message gets an invalid-request error (-32600) with its id when one
//! can be read, an oversized line gets an error and is skipped; the session
//! goes on in every case.
//!
//! A parse error's id is `null`; a stray response or a bad notification is dropped (nothing to
//! answer).
//!
//! Oversized messages keep "one answer per request": a client request over
//! `limits.max_message_bytes` is refused under its own id (read from the line's first 512 bytes,
//! top level only); a child's answer over the same limit fails that call at once with the reason.
//! Children started before a reload that changes the limit keep the one they started with. A
//! session has at most 64 requests in flight; past that its socket is not read until an answer goes
//! out.

use std::sync::Arc;

use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::runtime::ndjson::{LineError, LineReader, write_line};

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

/// Answers whose `result` goes out as a child wrote it, by request id: a
/// handler that has one (a resource read from a stdio child) files it here
/// and returns a placeholder, and [`SessionTransport::send`] writes these
/// bytes in the placeholder's stead. A 1 MiB resource is then never parsed
/// into strings nor serialised again. Only the socket transport has one;
/// over HTTP rmcp writes answers itself.
#[derive(Clone, Default)]
pub struct RawAnswers(Arc<std::sync::Mutex<Vec<(rmcp::model::RequestId, RawAnswer)>>>);

/// A result's JSON text: `head`, then `body[at]` (borrowed from the child's
/// line), making one JSON object.
pub struct RawAnswer {
    pub head: &'static str,
    pub body: Vec<u8>,
    pub at: std::ops::Range<usize>,
}

/// Raw answers filed and not sent (their requests were cancelled after
/// the handler finished) are dropped past this many.
const RAW_KEPT: usize = MAX_IN_FLIGHT;

impl RawAnswers {
    /// Files `answer` to be sent as the result of request `id`.
    pub fn file(&self, id: rmcp::model::RequestId, answer: RawAnswer) {
        let mut filed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        filed.retain(|(other, _)| *other != id);
        if filed.len() >= RAW_KEPT {
            filed.remove(0);
        }
        filed.push((id, answer));
    }

    fn take(&self, id: &rmcp::model::RequestId) -> Option<RawAnswer> {
        let mut filed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = filed.iter().position(|(other, _)| other == id)?;
        Some(filed.swap_remove(at).1)
    }
}

/// See the module docs.
pub struct SessionTransport<R, W> {
    lines: LineReader<R>,
    raw: RawAnswers,
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
            raw: RawAnswers::default(),
        }
    }

    /// Where handlers file answers this transport sends unparsed.
    pub fn raw_answers(&self) -> RawAnswers {
        self.raw.clone()
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

/// Writes the response to `id` whose result is `raw`, as one line.
async fn write_raw<W: AsyncWrite + Unpin>(
    writer: &Mutex<Option<W>>,
    id: &rmcp::model::RequestId,
    raw: &RawAnswer,
) -> std::io::Result<()> {
    let mut head = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    serde_json::to_writer(&mut head, id)?;
    head.extend_from_slice(br#","result":"#);
    head.extend_from_slice(raw.head.as_bytes());
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "session transport is closed",
        ));
    };
    w.write_all(&head).await?;
    w.write_all(&raw.body[raw.at.clone()]).await?;
    // The result's brace, then the message's.
    w.write_all(b"}}\n").await?;
    w.flush().await
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
        let raw = match &item {
            JsonRpcMessage::Response(r) => self.raw.take(&r.id).map(|raw| (r.id.clone(), raw)),
            _ => None,
        };
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
            match raw {
                Some((id, raw)) => write_raw(&writer, &id, &raw).await,
                None => write_line(&writer, &item, "session transport is closed").await,
            }
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

    #[tokio::test]
    async fn a_raw_answer_is_one_whole_response_line() {
        let line =
            br#"{"jsonrpc":"2.0","id":"evo-7","result":{"contents":[{"uri":"a","text":"x\ny"}]}}"#;
        let result = line.windows(9).position(|w| w == br#""result":"#).unwrap() + 9;
        let inner = result + 1..line.len() - 2;
        let writer = Mutex::new(Some(Vec::new()));
        let raw = RawAnswer {
            head: r#"{"resultType":"complete","#,
            body: line.to_vec(),
            at: inner,
        };
        let id = rmcp::model::RequestId::Number(42);
        write_raw(&writer, &id, &raw).await.unwrap();
        let sent = writer.lock().await.take().unwrap();
        assert_eq!(sent.last(), Some(&b'\n'));
        assert_eq!(sent.iter().filter(|b| **b == b'\n').count(), 1);
        let message: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(
            message,
            json!({"jsonrpc": "2.0", "id": 42, "result": {
                "resultType": "complete",
                "contents": [{"uri": "a", "text": "x\ny"}],
            }})
        );
    }

    #[test]
    fn raw_answers_are_taken_once_and_bounded() {
        let filed = RawAnswers::default();
        let answer = || RawAnswer {
            head: "{",
            body: b"{}".to_vec(),
            at: 1..1,
        };
        for n in 0..(RAW_KEPT as i64 + 5) {
            filed.file(rmcp::model::RequestId::Number(n), answer());
        }
        assert!(filed.take(&rmcp::model::RequestId::Number(0)).is_none());
        let last = rmcp::model::RequestId::Number(RAW_KEPT as i64 + 4);
        assert!(filed.take(&last).is_some());
        assert!(filed.take(&last).is_none());
    }
}
