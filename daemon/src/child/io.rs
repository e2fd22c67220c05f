//! A stdio child's transport, shared by two users: rmcp's client (the
//! handshake, listing, notifications, progress-tracked calls) and evo's
//! direct requests (`tools/call`, `resources/read`, see [`super::direct`]).
//! A direct request's answer is taken off the stream here, raw, before rmcp
//! would parse it: the hot path skips rmcp's request machinery and its
//! untyped-result parsing (which buffers a whole answer and tries each
//! result type in turn: costly for a 1 MiB read).

use std::sync::Arc;

use rmcp::model::ProgressNotificationParam;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use super::direct::{DirectCalls, Finder, STDIN_CLOSED, mentions};
use super::link::ServerLink;
use crate::runtime::ndjson::{LineError, LineReader, write_line};

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
    if !repair_tools(server, tools) {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// Fixes a listed `tools` array of `server` in place as
/// [`repaired_tool_list`] says; whether anything was fixed. Also used on a
/// remote child's list (`handshake::list_tools`).
pub(super) fn repair_tools(server: &str, tools: &mut Vec<Value>) -> bool {
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
    changed
}

const PROGRESS: &[u8] = b"notifications/progress";

static PROGRESS_FINDER: Finder = Finder::new(|| memchr::memmem::Finder::new(PROGRESS));
static TOOLS_KEY: Finder = Finder::new(|| memchr::memmem::Finder::new(b"\"tools\""));
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
    link: Arc<ServerLink>,
}

impl ChildTransport {
    pub fn new(
        link: Arc<ServerLink>,
        stdout: ChildStdout,
        stdin: ChildStdin,
        max_line: usize,
    ) -> (ChildTransport, Arc<DirectCalls>) {
        let calls = Arc::new(DirectCalls::new(stdin));
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
