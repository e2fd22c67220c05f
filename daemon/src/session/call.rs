//! A proxied call from a session: permission, validation and repair, the
//! retry-loop breaker, forwarding with timeout and cancellation, and the
//! error a failure turns into.
//!
//! `session_id` filling applies to a parameter named exactly `session_id` (servers' own `sessionId`
//! parameters are theirs, not ours). A caller that sends its own value under another spelling
//! (`sessionId`) has it renamed, not replaced.
//!
//! A call naming a tool evo does not know waits (up to 60 s, or the client's cancellation) while a
//! server that has listed nothing is starting: right after an autostart the first call would
//! otherwise fail as unknown. A server waiting out a crash backoff does not hold calls up.
//!
//! A parameter the config fixes (`tools.UPSTREAM.args`) is absent from the schema the caller
//! sees and added by [`SessionServer::forward`], the one way to the child; a caller that passes
//! one anyway is refused naming it, not silently overridden.
//!
//! Repaired calls record `_meta["evo/repaired"]`; filled parameters add `_meta["evo/notes"]` and a
//! text line.

use std::sync::Arc;
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequest, CancelledNotificationParam, ClientRequest};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ContentBlock, JsonObject};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::service::{PeerRequestOptions, RoleClient};
use serde_json::Value;

use super::SetActive;
use super::approval::{Answers, Approval};
use super::breaker::{REFUSE_AFTER, RetryBreaker};
use super::server::{Asker, SessionServer, text_result, unknown_tool_message};
use crate::catalog::snapshot::{Snapshot, ToolEntry};
use crate::child::direct::Direct;
use crate::child::link::ProgressRoute;
use crate::child::link::ServerLink;
use crate::child::link::ServerState;
use crate::config::DiscoveryMode;
use crate::error_text;
use crate::metrics::{CallOutcome, metrics};
use crate::policy::approvals::canonical_key;
use crate::repair::{self, Checked};
use crate::schema::example;
use crate::session::result_limit;
use crate::session::startup;
use crate::store::Shared;
use crate::store::breaker::Prior;
use crate::telemetry::ServerCallSpan;

/// How a forwarded call came back. An answer or a timeout is about the
/// arguments (the retry-loop breaker counts it); an unreachable server or a
/// client's cancellation is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reached {
    Answered,
    TimedOut,
    Unreachable,
    Cancelled,
}

impl Reached {
    fn about_arguments(self) -> bool {
        matches!(self, Reached::Answered | Reached::TimedOut)
    }

    /// What `/metrics` counts, given whether the answer was an error.
    fn outcome(self, is_error: bool) -> CallOutcome {
        match self {
            Reached::Answered if is_error => CallOutcome::ToolError,
            Reached::Answered => CallOutcome::Ok,
            Reached::TimedOut => CallOutcome::Timeout,
            Reached::Unreachable => CallOutcome::Unavailable,
            Reached::Cancelled => CallOutcome::Cancelled,
        }
    }
}

/// How long a call naming an unknown tool waits for servers that are still
/// starting and have listed nothing yet (see `snapshot_knowing`).
pub(super) const LISTING_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl SessionServer {
    /// Forwards a call to the tool's child, with the server's timeout and the
    /// client's cancellation. Every failure becomes an `isError` result that
    /// names the server; [`Reached`] says how it came back.
    pub(super) async fn forward(
        &self,
        entry: &ToolEntry,
        arguments: Option<JsonObject>,
        traceparent: Option<&str>,
        ctx: &RequestContext<RoleServer>,
    ) -> (CallToolResponse, Reached) {
        let server = &entry.server;
        let _busy = server.begin_call();
        let peer = match server.peer().await {
            Ok(p) => p,
            Err(e) => {
                let text = format!("{} not called: {e}", entry.name);
                match self
                    .after_login_offer(&entry.server, &entry.name, text, ctx)
                    .await
                {
                    Ok(p) => p,
                    Err(text) => return (text_result(text, true).into(), Reached::Unreachable),
                }
            }
        };
        let mut params = CallToolRequestParams::new(entry.upstream.clone());
        // Every path to the child below (direct, rmcp) sends these arguments
        // and this `_meta`.
        params.arguments = entry.with_fixed(arguments);
        if let Some(traceparent) = traceparent {
            params
                .meta
                .get_or_insert_default()
                .set_traceparent(traceparent);
        }
        let client_token = ctx.meta.get_progress_token();
        if client_token.is_none()
            && let Some(direct) = server.direct()
        {
            // The hot path: straight onto the child's stdin. Dropping the
            // pending call (client cancel, timeout) cancels it at the child.
            let arguments = params.arguments.take().unwrap_or_default();
            let failed = format!(
                "{} failed: server '{}' answered with an error",
                entry.name, server.id
            );
            let (max, id) = (server.max_result_bytes(), server.id.as_str());
            let call =
                async move {
                    let pending = direct
                        .call(&params.name, &arguments, params.meta.as_ref())
                        .await
                        .map_err(|_| rmcp::ServiceError::TransportClosed)?;
                    match pending
                        .answer::<rmcp::model::CallToolResult>("tool result")
                        .await
                    {
                        Direct::Result(r, size) => Ok(CallToolResponse::Complete(
                            result_limit::limit(r, max, Some(size), id),
                        )),
                        Direct::Error(e) => {
                            Ok(text_result(format!("{failed}: {}", e.message), true).into())
                        }
                        Direct::Gone => Err(rmcp::ServiceError::TransportClosed),
                    }
                };
            return self.await_call(entry, call, &peer, None, ctx).await;
        }
        match client_token {
            None => {
                // Dropping this future (client cancel, timeout) sends
                // notifications/cancelled to the child.
                let call = peer.call_tool_once(params);
                let call = async { call.await.map(|r| self.limited(entry, r)) };
                self.await_call(entry, call, &peer, None, ctx).await
            }
            Some(client_token) => {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
                let handle = match peer
                    .send_request_with_option(request, PeerRequestOptions::no_options())
                    .await
                {
                    Ok(h) => h,
                    Err(e) => return (self.call_failed(entry, e, &peer), Reached::Unreachable),
                };
                let _route = server.route_progress(
                    handle.progress_token.clone(),
                    ProgressRoute {
                        session: ctx.peer.clone(),
                        token: client_token,
                    },
                );
                let id = handle.id.clone();
                let call = async move { handle.await_response().await.map(call_response) };
                let call = async { call.await.map(|r| self.limited(entry, r)) };
                self.await_call(entry, call, &peer, Some(id), ctx).await
            }
        }
    }

    /// A result that came through rmcp (its size as sent is not known: it
    /// is measured) within the server's `max_result_bytes`.
    fn limited(&self, entry: &ToolEntry, response: CallToolResponse) -> CallToolResponse {
        match response {
            CallToolResponse::Complete(r) => CallToolResponse::Complete(result_limit::limit(
                r,
                entry.server.max_result_bytes(),
                None,
                &entry.server.id,
            )),
            other => other,
        }
    }

    /// Waits for a forwarded call, racing the client's cancellation and the
    /// server's timeout. `cancel` is the child request to cancel explicitly
    /// when the call future does not do it on drop.
    pub(super) async fn await_call(
        &self,
        entry: &ToolEntry,
        call: impl Future<Output = Result<CallToolResponse, rmcp::ServiceError>>,
        peer: &Arc<Peer<RoleClient>>,
        cancel: Option<rmcp::model::RequestId>,
        ctx: &RequestContext<RoleServer>,
    ) -> (CallToolResponse, Reached) {
        let server = &entry.server;
        let outcome = tokio::select! {
            biased;
            _ = ctx.ct.cancelled() => None,
            r = tokio::time::timeout(server.timeout(), call) => Some(r),
        };
        let tell_child = |reason: &'static str| async move {
            if let Some(id) = cancel {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some(reason.into()),
                    ))
                    .await;
            }
        };
        match outcome {
            None => {
                tell_child("cancelled by the client").await;
                let text = format!("{} cancelled by the client", entry.name);
                (text_result(text, true).into(), Reached::Cancelled)
            }
            Some(Ok(Ok(resp))) => (mark_complete(resp), Reached::Answered),
            Some(Ok(Err(e))) => (self.call_failed(entry, e, peer), Reached::Unreachable),
            Some(Err(_)) => {
                tell_child("timed out").await;
                let timed_out = text_result(
                    format!(
                        "{} timed out after {}s on server '{}'; the call was cancelled. Raise timeout_s for '{}' if it needs longer.",
                        entry.name,
                        server.timeout().as_secs(),
                        server.id,
                        server.id
                    ),
                    true,
                )
                .into();
                (timed_out, Reached::TimedOut)
            }
        }
    }

    /// A call that got no answer. A connection that failed in transport is
    /// reported to the server's actor: a remote server that went away is
    /// then reconnected instead of staying "ready" on a dead session.
    pub(super) fn call_failed(
        &self,
        entry: &ToolEntry,
        e: rmcp::ServiceError,
        peer: &Arc<Peer<RoleClient>>,
    ) -> CallToolResponse {
        let reason = error_text::readable_error(&e);
        if matches!(
            e,
            rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::TransportClosed
        ) {
            entry.server.connection_failed(peer, reason.clone());
        }
        let text = match entry.server.state() {
            ServerState::Stopped => format!(
                "{} was not completed: server '{}' was stopped before answering (evod is shutting down, or a reload removed it)",
                entry.name, entry.server.id
            ),
            ServerState::LoginRequired => format!(
                "{} failed: server '{}' needs a login: a person must run `evoctl login {}`",
                entry.name, entry.server.id, entry.server.id
            ),
            // The state is the moment's: a crashed child may already show
            // as restarting or ready again, so the connection is named.
            _ if matches!(e, rmcp::ServiceError::TransportClosed) => format!(
                "{} failed: server '{}' closed its connection before answering (it exited or crashed; evo restarts it, see `evoctl status`)",
                entry.name, entry.server.id
            ),
            state => format!(
                "{} failed: server '{}' ({}) did not answer: {reason}",
                entry.name,
                entry.server.id,
                state.as_str()
            ),
        };
        text_result(text, true).into()
    }

    /// A call to a name the catalog does not list: refused, or, when a
    /// server that needs a login and has listed nothing may have it, the
    /// login offered and the name looked up again.
    async fn call_unknown(
        &self,
        snapshot: &Snapshot,
        name: &str,
        arguments: Option<JsonObject>,
        answers: Answers,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = snapshot.refusal(name).unwrap_or_else(|| {
            self.config_trouble
                .appended(unknown_tool_message(snapshot, name, Asker::Agent))
        });
        if let Some(server) = snapshot.login_required_owner(name) {
            return match self.after_login_offer(server, name, text, ctx).await {
                Ok(_) => {
                    self.listed(name, ctx).await;
                    Box::pin(self.call_proxied(name, arguments, answers, ctx)).await
                }
                Err(text) => {
                    metrics().call(&server.id, CallOutcome::Unavailable, None);
                    Ok(text_result(text, true).into())
                }
            };
        }
        metrics().call("", CallOutcome::Refused, None);
        Ok(text_result(text, true).into())
    }

    /// Waits (a few seconds at most) for `name` to be in the catalog, as
    /// after a login its server's listing reaches the Catalog a moment
    /// after the server is ready.
    async fn listed(&self, name: &str, ctx: &RequestContext<RoleServer>) {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let published = self.snapshot.load_full();
            let known = published
                .clone()
                .for_role(self.role.as_deref())
                .get(name)
                .is_some();
            if known || Instant::now() >= deadline || ctx.ct.is_cancelled() {
                return;
            }
            startup::next_change(&published, &[], deadline, &ctx.ct).await;
        }
    }

    /// The snapshot to resolve a called name in. Right after evod starts
    /// (a shim autostarted it, or a child is still coming up) a name may be
    /// missing only because its server has not listed yet: while a server
    /// that has listed nothing is still starting, wait for the name to
    /// appear, up to [`LISTING_WAIT`] or the client's cancellation (woken by
    /// each new snapshot and by those servers moving past starting).
    pub(super) async fn snapshot_knowing(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Arc<Snapshot> {
        let deadline = Instant::now() + LISTING_WAIT;
        loop {
            let published = self.snapshot.load_full();
            let snapshot = published.clone().for_role(self.role.as_deref());
            let settled = snapshot.get(name).is_some()
                || snapshot.denied.contains_key(name)
                || snapshot.quarantined.contains_key(name)
                || !(snapshot.version == 0 || snapshot.still_listing());
            if settled || Instant::now() >= deadline || ctx.ct.is_cancelled() {
                return snapshot;
            }
            let starting: Vec<Arc<ServerLink>> = published
                .unlisted
                .iter()
                .filter(|l| l.state().is_starting())
                .cloned()
                .collect();
            startup::next_change(&published, &starting, deadline, &ctx.ct).await;
        }
    }

    /// A tool requiring `session_id` the call left out: the caller's own id
    /// under another spelling is renamed, else this session's id is filled in.
    fn fill_session_id(
        &self,
        entry: &ToolEntry,
        args: &mut JsonObject,
        fixes: &mut Vec<String>,
        notes: &mut Vec<String>,
    ) {
        if !entry.requires("session_id") || args.contains_key("session_id") {
            return;
        }
        let spelt = args
            .keys()
            .find(|k| repair::same_name(k, "session_id") && !entry.declares(k))
            .cloned();
        match spelt.and_then(|k| Some((args.remove(&k)?, k))) {
            Some((value, spelt)) => {
                args.insert("session_id".into(), value);
                fixes.push(format!("renamed '{spelt}' to 'session_id'"));
            }
            None => {
                args.insert("session_id".into(), Value::String(self.id.clone()));
                notes.push(format!(
                    "evo filled the missing required parameter session_id with this session's id '{}'.",
                    self.id
                ));
            }
        }
    }

    /// A proxied call by exposed name: route it whether or not it is active,
    /// and (before 2026-07-28) activate it. Arguments are checked against the tool's schema first:
    /// repaired when that makes them valid, refused with a teaching error
    /// when not; identical failures are counted and, past a point, refused.
    pub(super) async fn call_proxied(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        answers: Answers,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let snapshot = self.snapshot_knowing(name, ctx).await;
        let Some(entry) = snapshot.get(name) else {
            return self
                .call_unknown(&snapshot, name, arguments, answers, ctx)
                .await;
        };
        let refused = |text: String| -> Result<CallToolResponse, ErrorData> {
            metrics().call(&entry.server.id, CallOutcome::Refused, None);
            Ok(text_result(text, true).into())
        };
        self.view.touch();
        // On 2026-07-28 a call never changes the list: it routes, that is all.
        // Sent now (actix queues it at once), awaited before the answer goes
        // out: a list asked for after the answer shows the tool.
        let activation = (self.mode == DiscoveryMode::Dynamic
            && !self.view.is_modern()
            && !snapshot.position(&entry.name).is_some_and(|i| {
                super::listed_without_activation(&snapshot, self.profile.as_deref(), i)
            })
            && !self.view.activated.load().contains(&entry.name))
        .then(|| {
            self.session.send(SetActive {
                tools: vec![entry.name.clone()],
                active: true,
                touch: true,
            })
        });
        let mut args = arguments.unwrap_or_default();
        if let Some(param) = entry.fixed_given(&args) {
            return refused(fixed_text(entry, param));
        }
        let mut notes = Vec::new();
        let mut fixes = Vec::new();
        self.fill_session_id(entry, &mut args, &mut fixes, &mut notes);
        let key = canonical_key(&args);
        let prior = self.prior_failures(&entry.name, key).await;
        if prior.failures >= REFUSE_AFTER {
            return refused(refusal_text(entry, prior.failures));
        }
        if let Some(schema) = entry.compiled() {
            // The validator takes a Value: move the map in and back out.
            let value = Value::Object(std::mem::take(&mut args));
            let checked = repair::check(schema, &value, &entry.aliases);
            if let Value::Object(m) = value {
                args = m;
            }
            match checked {
                Checked::Valid => {}
                Checked::Repaired { arguments, repair } => {
                    args = arguments;
                    fixes.extend(repair.fixes);
                }
                Checked::Invalid(teaching) => {
                    let failures = self.record_failure(&entry.name, key).await;
                    // The caller's own values where they fit, made-up ones elsewhere.
                    let arguments = repair::corrected_arguments(
                        schema,
                        &teaching,
                        example::example_arguments(&entry.tool.input_schema),
                    );
                    let example = example::call_text(&entry.name, arguments);
                    let mut text = repair::teaching_text(
                        &entry.name,
                        &teaching,
                        &entry.tool.input_schema,
                        &example,
                    );
                    if failures >= 2 {
                        text = escalation_text(
                            entry,
                            failures,
                            teaching.problems.first().map(String::as_str),
                        ) + "\n\n"
                            + &text;
                    }
                    return refused(text);
                }
            }
        }
        if let Some(rule) = snapshot.approval_rule(&entry.name) {
            match self.approval(entry, rule, &args, key, answers, ctx).await {
                Approval::Granted => {}
                Approval::Refused(why) => return refused(why),
                Approval::Ask(input) => return Ok(CallToolResponse::InputRequired(input)),
            }
        }
        let started = Instant::now();
        let trace =
            ServerCallSpan::start(ctx, &entry.server.id, &entry.upstream, &entry.name, &args);
        // Without traces evo is not in the trace: the caller's context goes
        // on as it came.
        let traceparent = match &trace {
            Some(trace) => Some(trace.traceparent()),
            None => ctx.meta.get_traceparent(),
        };
        let (response, reached) = self.forward(entry, Some(args), traceparent, ctx).await;
        if let Some(activation) = activation {
            let _ = activation.await;
        }
        let is_error =
            matches!(&response, CallToolResponse::Complete(r) if r.is_error == Some(true));
        let outcome = reached.outcome(is_error);
        metrics().call(&entry.server.id, outcome, Some(started.elapsed()));
        if let Some(trace) = trace {
            trace.end(outcome.as_str(), &response);
        }
        let CallToolResponse::Complete(mut result) = response else {
            return Ok(response);
        };
        match (result.is_error == Some(true), reached.about_arguments()) {
            (false, _) => {
                self.evidence
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .called(&entry.name, Instant::now());
                self.record_success(&entry.name, prior).await
            }
            (true, true) => {
                let failures = self.record_failure(&entry.name, key).await;
                if failures >= 2 {
                    result
                        .content
                        .push(ContentBlock::text(escalation_text(entry, failures, None)));
                }
            }
            // The server was unreachable: not these arguments' fault, and
            // the same call must work once the server is back.
            (true, false) => {}
        }
        if !fixes.is_empty() || !notes.is_empty() {
            let meta = result.meta.get_or_insert_with(Default::default);
            if !fixes.is_empty() {
                meta.insert("evo/repaired".into(), Value::from(fixes));
            }
            if !notes.is_empty() {
                meta.insert("evo/notes".into(), Value::from(notes.clone()));
                for n in notes {
                    result
                        .content
                        .push(ContentBlock::text(format!("[evo] {n}")));
                }
            }
        }
        Ok(CallToolResponse::Complete(result))
    }

    pub(super) fn breaker_do<T>(&self, f: impl FnOnce(&mut RetryBreaker) -> T) -> T {
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut b)
    }

    /// Where this session's retry-loop counts live when not only here: the
    /// shared store, under the session's store name.
    fn shared_breaker(&self) -> Option<(&Shared, &str)> {
        let shared = self.shared.as_deref()?;
        let name = self.view.store_name.get()?;
        Some((shared, name.as_str()))
    }

    /// Identical failures so far of this call. With the shared store the
    /// count is the store's (every instance's failures of the session, as
    /// this instance's mirror of them has it: no command on a plain call);
    /// the local count, kept in step, answers while the store cannot.
    async fn prior_failures(&self, tool: &str, key: u64) -> Prior {
        let local = self.breaker_do(|b| b.prior_failures(tool, key));
        if let Some((shared, name)) = self.shared_breaker() {
            match shared.breaker_prior(name, tool, key).await {
                Ok(p) => return p,
                Err(e) => tracing::debug!(session = %self.id, "retry-loop count read locally: {e}"),
            }
        }
        Prior {
            failures: local,
            counted: local > 0,
        }
    }

    async fn record_failure(&self, tool: &str, key: u64) -> u32 {
        let local = self.breaker_do(|b| b.failed(tool, key));
        if let Some((shared, name)) = self.shared_breaker() {
            match shared.breaker_failed(name, tool, key).await {
                Ok(n) => return n,
                Err(e) => tracing::debug!(session = %self.id, "retry-loop count kept locally: {e}"),
            }
        }
        local
    }

    /// A success forgets the tool's count (in the store only when it had
    /// one: the plain call costs no second command).
    async fn record_success(&self, tool: &str, prior: Prior) {
        self.breaker_do(|b| b.succeeded(tool));
        if prior.counted
            && let Some((shared, name)) = self.shared_breaker()
            && let Err(e) = shared.breaker_succeeded(name, tool).await
        {
            tracing::debug!(session = %self.id, "retry-loop count not cleared in the store: {e}");
        }
    }
}

/// The text of a call refused by the retry-loop breaker.
pub(super) fn refusal_text(entry: &ToolEntry, failures: u32) -> String {
    format!(
        "Refused without calling {}: this exact call (same arguments) has already failed {failures} times in this session, and repeating it will not help. Change the arguments — run describe_tool {{\"name\": \"{}\"}} for the schema and a worked example — or choose another tool with discover_tools.",
        entry.name, entry.name
    )
}

/// The refusal of a call that passes a parameter the config fixes. The value
/// is not shown: it is the config's, not the agent's.
fn fixed_text(entry: &ToolEntry, param: &str) -> String {
    format!(
        "{} not called: its parameter '{param}' is fixed by evo's configuration (always sent with \
         the configured value) and cannot be passed. Call again without '{param}'; describe_tool \
         {{\"name\": \"{}\"}} shows the parameters you can pass.",
        entry.name, entry.name
    )
}

/// Guidance for the second identical failure: say it is a repeat, name the
/// one fix, point to describe_tool.
pub(super) fn escalation_text(entry: &ToolEntry, failures: u32, fix: Option<&str>) -> String {
    let fix = fix.map(|f| format!(" The fix: {f}.")).unwrap_or_default();
    format!(
        "[evo] This is failure {failures} of the same call to {} with the same arguments.{fix} Read describe_tool {{\"name\": \"{}\"}} before retrying; an identical call will now be refused.",
        entry.name, entry.name
    )
}

/// A child's answer to a call, as a call response.
pub(super) fn call_response(result: rmcp::model::ServerResult) -> CallToolResponse {
    use rmcp::model::ServerResult;
    match result {
        ServerResult::CallToolResult(r) => CallToolResponse::Complete(r),
        ServerResult::InputRequiredResult(r) => CallToolResponse::InputRequired(r),
        ServerResult::CreateTaskResult(r) => CallToolResponse::Task(r),
        _ => text_result(
            "the server answered tools/call with something other than a tool result",
            true,
        )
        .into(),
    }
}

/// A legacy child's result has no `resultType`; 2026-07-28 clients require
/// one. rmcp strips `"complete"` again for legacy sessions.
pub(super) fn mark_complete(resp: CallToolResponse) -> CallToolResponse {
    match resp {
        CallToolResponse::Complete(mut r) => {
            super::offers::complete(&mut r.result_type);
            CallToolResponse::Complete(r)
        }
        other => other,
    }
}
