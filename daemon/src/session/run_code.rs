//! `run_code`: an agent's script run against this session's tools, each
//! call through the session's own pipeline ([`SessionServer::call_proxied`]:
//! permissions, approvals, quarantine, repair, result limits, metrics, the
//! retry-loop breaker), so a script reaches exactly what a direct call
//! would, and shows where direct calls show.
//!
//! The engine runs on a thread of its own ([`crate::code_mode::engine`]);
//! this side takes its calls, runs at most [`PARALLEL`] at once on the
//! request's task, and hands the answers back. A call that needs approval
//! is not asked in band (nobody can answer inside a script): it is held for
//! `evoctl approve` and throws with the approval id, and the script can be
//! run again once approved. Past a limit, or when the client cancels, the
//! calls still in flight are cancelled with the run.
//!
//! The result: `console.log` lines, then the returned value as JSON text;
//! `structuredContent` `{"result", "logs", "calls"}`. A run that stopped is
//! an `isError` result saying which limit or error stopped it, after how
//! many calls, with the logs so far.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, JsonObject};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::approval::Answers;
use super::native_tools::{self, NAMES, RUN_CODE};
use super::server::{SessionServer, text_result};
use crate::code_mode::engine::{self, CallAnswer, Limits, Outcome, Stopped, ToolCall};

/// Calls of one run in flight at once; more wait their turn.
pub(super) const PARALLEL: usize = 8;

impl SessionServer {
    /// `run_code {code, timeout_ms?}`.
    pub(super) async fn run_code(
        &self,
        args: Option<&JsonObject>,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let code = match native_tools::string_arg(args, "code", RUN_CODE) {
            Ok(code) => code.to_string(),
            Err(e) => return text_result(e, true),
        };
        let settings = self.code_mode;
        let timeout_ms = args
            .and_then(|a| a.get("timeout_ms"))
            .and_then(Value::as_u64)
            .map_or(settings.timeout_ms, |t| t.clamp(1, settings.timeout_ms));
        let limits = Limits {
            timeout: std::time::Duration::from_millis(timeout_ms),
            memory_bytes: usize::try_from(settings.memory_mb.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            max_calls: usize::try_from(settings.max_calls).unwrap_or(usize::MAX),
        };
        let (call_tx, mut calls) = tokio::sync::mpsc::unbounded_channel::<ToolCall>();
        let (answer_tx, answer_rx) = std::sync::mpsc::channel::<CallAnswer>();
        let (done_tx, mut done) = tokio::sync::oneshot::channel::<Outcome>();
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = cancel.clone();
        let started = std::thread::Builder::new()
            .name("evo-run-code".into())
            .spawn(move || {
                let out = engine::run(
                    &code,
                    limits,
                    move |c| call_tx.send(c).is_ok(),
                    &answer_rx,
                    &stop,
                );
                let _ = done_tx.send(out);
            });
        if let Err(e) = started {
            return text_result(
                format!("run_code could not start its script ({e}); nothing was run, retry"),
                true,
            );
        }
        // The script's calls end with the run.
        let mut within = ctx.clone();
        within.ct = ctx.ct.child_token();
        let mut running = FuturesUnordered::new();
        let mut waiting: VecDeque<ToolCall> = VecDeque::new();
        let outcome = loop {
            tokio::select! {
                out = &mut done => break out.ok(),
                Some(call) = calls.recv() => waiting.push_back(call),
                Some((id, answer)) = running.next(), if !running.is_empty() => {
                    let _ = answer_tx.send(CallAnswer { id, answer });
                }
                () = ctx.ct.cancelled(), if !cancel.load(Ordering::Relaxed) => {
                    cancel.store(true, Ordering::Relaxed);
                }
            }
            while running.len() < PARALLEL
                && let Some(call) = waiting.pop_front()
            {
                running.push(self.script_call(call, &within));
            }
        };
        within.ct.cancel();
        drop(running);
        match outcome {
            Some(out) => shaped(out, limits),
            None => text_result(
                "run_code failed: the script's engine ended without a result (this is a bug in evo; see evod's log)".to_string(),
                true,
            ),
        }
    }

    /// One call of a script, through the session's pipeline: the value the
    /// script gets (JSON text) or the message its `Error` carries.
    async fn script_call(
        &self,
        call: ToolCall,
        ctx: &RequestContext<RoleServer>,
    ) -> (u32, Result<String, String>) {
        let ToolCall { id, tool, args } = call;
        if NAMES.contains(&tool.as_str()) {
            return (
                id,
                Err(format!(
                    "{tool} is one of evo's own tools, which a script cannot call; call it directly"
                )),
            );
        }
        let arguments = match serde_json::from_str::<Value>(&args) {
            Ok(Value::Object(m)) => Some(m),
            _ => {
                return (
                    id,
                    Err(format!(
                        "{tool} takes one object of arguments, e.g. tools.{tool}({{...}})"
                    )),
                );
            }
        };
        let answer = match self
            .call_proxied(&tool, arguments, Answers::from_script(), ctx)
            .await
        {
            Ok(CallToolResponse::Complete(result)) => script_value(&result),
            Ok(CallToolResponse::InputRequired(_)) => Err(format!(
                "{tool} asked the user for input, which a script cannot give; call it directly"
            )),
            Ok(_) => Err(format!(
                "{tool} answered with a task, which a script cannot follow; call it directly"
            )),
            Err(e) => Err(format!("{tool} failed: {}", e.message)),
        };
        (id, answer)
    }
}

/// What a script gets from a result: its `structuredContent` when there is
/// one, else its text; an error result is the `Error`'s message.
fn script_value(result: &CallToolResult) -> Result<String, String> {
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) {
        return Err(text);
    }
    match &result.structured_content {
        Some(v) => Ok(v.to_string()),
        None => Ok(Value::String(text).to_string()),
    }
}

/// The tool result of a run.
fn shaped(out: Outcome, limits: Limits) -> CallToolResult {
    let Outcome { value, logs, calls } = out;
    let value = match value {
        Ok(json_text) => serde_json::from_str::<Value>(&json_text).unwrap_or(Value::Null),
        Err(stopped) => {
            let why = match stopped {
                Stopped::Timeout => format!(
                    "it ran past its time ({} ms; code_mode.timeout_ms caps it) and its calls in flight were cancelled; do less per run, or pass a larger timeout_ms",
                    limits.timeout.as_millis()
                ),
                Stopped::Memory => format!(
                    "it used more than its memory ({} MiB, code_mode.memory_mb); keep less in memory at once",
                    limits.memory_bytes >> 20
                ),
                Stopped::MaxCalls => format!(
                    "it tried to make more than {} tool calls (code_mode.max_calls); split the work into several runs",
                    limits.max_calls
                ),
                Stopped::Cancelled => "the request was cancelled".to_string(),
                Stopped::Threw(e) => format!("the script threw {e}"),
                Stopped::NotJson(e) => format!(
                    "its return value has no JSON form ({e}); return objects, arrays, strings, numbers, booleans or null"
                ),
                Stopped::Stalled => "it awaits a promise nothing will settle (scripts have no timers or events: await tool calls only)".to_string(),
            };
            let mut text = format!("run_code stopped after {calls} tool call(s): {why}.");
            if !logs.is_empty() {
                text.push_str("\nLogs so far:\n");
                text.push_str(&logs.join("\n"));
            }
            let mut result = text_result(text, true);
            result.structured_content = Some(json!({"error": why, "logs": logs, "calls": calls}));
            return result;
        }
    };
    let mut content: Vec<ContentBlock> = Vec::new();
    if !logs.is_empty() {
        content.push(ContentBlock::text(logs.join("\n")));
    }
    content.push(ContentBlock::text(value.to_string()));
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json!({"result": value, "logs": logs, "calls": calls}));
    result
}
