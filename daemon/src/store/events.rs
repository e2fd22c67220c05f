//! Resumable SSE streams across instances: rmcp's [`EventStore`] on Redis,
//! so a client that reconnects with `Last-Event-ID` to another instance
//! gets the events it missed.
//!
//! Key (under the prefix): `ev:<stream id>`, a Redis stream of the SSE
//! stream's messages (the JSON-RPC message, or a retry hint), at most
//! [`MAX_EVENTS`] (older ones are trimmed) and expiring `ttl_s` after the
//! last one. An event's id is `<stream id>/<Redis entry id>`: it names its
//! stream, and entries of one stream compare in order. Stream ids are
//! rmcp's: `<Mcp-Session-Id>:common` for a session's standalone stream, a
//! random UUID for a request's; both are known only to their client.
//!
//! Priming events (no message) are not written: their id is the stream's
//! last one (`<stream>/0-0` before any), which replays exactly what follows
//! it. While Redis is known to be down an event gets a local id
//! (`<stream>/local-N`) and goes out at once: the client is served, only
//! a later resumption from that id finds nothing to replay.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use serde::{Deserialize, Serialize};

use super::redis::{Shared, StoreError};

/// Events kept per stream.
pub const MAX_EVENTS: usize = 1000;
/// Streams whose last id is remembered for their priming events.
const REMEMBERED: usize = 10_000;

/// An event as stored: the message (`M`: borrowed when written, owned
/// when read back) or a retry hint.
#[derive(Serialize, Deserialize)]
struct Stored<M> {
    #[serde(skip_serializing_if = "Option::is_none")]
    m: Option<M>,
    /// Retry hint, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    r: Option<u64>,
}

/// The event store of every instance's Streamable HTTP sessions.
pub struct SharedEvents {
    shared: Arc<Shared>,
    ttl_s: u64,
    /// Each stream's last event id (for priming events).
    last: Mutex<HashMap<String, String>>,
    local: AtomicU64,
}

impl SharedEvents {
    pub fn new(shared: Arc<Shared>, ttl_s: u64) -> SharedEvents {
        SharedEvents {
            shared,
            ttl_s: ttl_s.max(60),
            last: Mutex::new(HashMap::new()),
            local: AtomicU64::new(0),
        }
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn remember(&self, stream: &str, id: &str) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.len() >= REMEMBERED && !last.contains_key(stream) {
            last.clear();
        }
        last.insert(stream.to_string(), id.to_string());
    }

    async fn append(&self, stream: &str, event: &ServerSseMessage) -> Result<String, StoreError> {
        let stored = Stored {
            m: event.message.as_deref(),
            r: event.retry.map(|d| d.as_millis() as u64),
        };
        let text =
            serde_json::to_string(&stored).map_err(|e| StoreError(format!("SSE event: {e}")))?;
        let key = self.shared.key(&format!("ev:{stream}"));
        let mut pipe = redis::pipe();
        pipe.cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(MAX_EVENTS)
            .arg("*")
            .arg("d")
            .arg(text)
            .cmd("EXPIRE")
            .arg(&key)
            .arg(self.ttl_s)
            .ignore();
        let (entry,): (String,) = self.shared.pipeline(&pipe).await?;
        Ok(entry)
    }

    /// The events of `stream` after entry `after`, in order.
    pub async fn after(
        &self,
        stream: &str,
        after: &str,
    ) -> Result<Vec<ServerSseMessage>, StoreError> {
        let key = self.shared.key(&format!("ev:{stream}"));
        let entries: Vec<(String, Vec<String>)> = self
            .shared
            .query(
                redis::cmd("XRANGE")
                    .arg(&key)
                    .arg(format!("({after}"))
                    .arg("+")
                    .arg("COUNT")
                    .arg(MAX_EVENTS),
            )
            .await?;
        let mut out = Vec::with_capacity(entries.len());
        for (entry, fields) in entries {
            let Some(text) = fields.get(1) else { continue };
            let Ok(stored) = serde_json::from_str::<Stored<ServerJsonRpcMessage>>(text) else {
                tracing::debug!(stream, entry, "unreadable SSE event in the store skipped");
                continue;
            };
            let mut m = ServerSseMessage::default();
            m.event_id = Some(format!("{stream}/{entry}"));
            m.message = stored.m.map(Arc::new);
            m.retry = stored.r.map(Duration::from_millis);
            out.push(m);
        }
        Ok(out)
    }
}

/// `<stream>/<entry>` split; `None` for ids this store did not give (or a
/// local one, which has nothing stored).
pub fn parse_event_id(id: &str) -> Option<(&str, &str)> {
    let (stream, entry) = id.rsplit_once('/')?;
    let (ms, seq) = entry.split_once('-')?;
    (ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok()).then_some((stream, entry))
}

/// Redis entry ids in order (`ms-seq`).
pub fn entry_order(entry: &str) -> (u64, u64) {
    entry
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .unwrap_or((0, 0))
}

#[async_trait::async_trait]
impl EventStore for SharedEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        if event.message.is_none() {
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(last
                .get(stream_id)
                .cloned()
                .unwrap_or_else(|| format!("{stream_id}/0-0")));
        }
        if self.shared.health().0 {
            match self.append(stream_id, event).await {
                Ok(entry) => {
                    let id = format!("{stream_id}/{entry}");
                    self.remember(stream_id, &id);
                    return Ok(id);
                }
                Err(e) => {
                    tracing::debug!(stream = stream_id, "SSE event not stored, sent anyway: {e}")
                }
            }
        }
        let n = self.local.fetch_add(1, Ordering::Relaxed);
        Ok(format!("{stream_id}/local-{n}"))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let Some((stream, entry)) = parse_event_id(last_event_id) else {
            return Err(Box::new(StoreError(format!(
                "event id '{last_event_id}' has nothing stored to replay"
            ))));
        };
        let events = self.after(stream, entry).await?;
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_written_borrowed_reads_back_whole() {
        let message: ServerJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 7,
            "result": {"content": [{"type": "text", "text": "hi"}], "isError": false}
        }))
        .unwrap();
        let text = serde_json::to_string(&Stored {
            m: Some(&message),
            r: None,
        })
        .unwrap();
        assert!(!text.contains("\"r\""), "{text}");
        let back: Stored<ServerJsonRpcMessage> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(back.m.unwrap()).unwrap(),
            serde_json::to_value(&message).unwrap()
        );
        // A retry hint alone.
        let text = serde_json::to_string(&Stored::<&ServerJsonRpcMessage> {
            m: None,
            r: Some(3000),
        })
        .unwrap();
        let back: Stored<ServerJsonRpcMessage> = serde_json::from_str(&text).unwrap();
        assert!(back.m.is_none());
        assert_eq!(back.r, Some(3000));
    }
}
