//! The Session actor (one per client connection) and its rmcp face,
//! [`SessionServer`]. The actor owns the session's discovery mode, activation
//! set and last-active time; the rmcp handler serves MCP, reads the catalog
//! snapshot directly and sends proxied calls straight to the child.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use actix::prelude::*;
use arc_swap::ArcSwap;
use rmcp::model::{CallToolRequest, CancelledNotificationParam, ClientRequest, SubscriptionFilter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ResultType, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;

use crate::approvals::Gate;
use crate::breaker::{REFUSE_AFTER, RetryBreaker, canonical_key};
use crate::catalog::{CatalogChanged, ProgressRoute, Snapshot, ToolEntry};
use crate::childio::Direct;
use crate::config::DiscoveryMode;
use crate::disclosure;
use crate::example;
use crate::native;
use crate::repair::{self, Checked};
use crate::search;
use crate::supervisor::{CheckApproval, SaveNamed, SessionClosed, Supervisor};

/// The set of proxied tools a session has made visible (exposed names).
pub type ActivationSet = BTreeSet<String>;

/// What a session's rmcp handler reads without a round trip to its actor:
/// the activation set (written only by the Session actor) and the time of
/// the last request (written only by the handler), so a proxied call never
/// waits on, or even wakes, the actor thread.
#[derive(Clone, Default)]
pub struct SessionView {
    pub activated: Arc<ArcSwap<ActivationSet>>,
    last_active_ms: Arc<AtomicU64>,
    flags: Arc<SessionFlags>,
}

/// What a session's requests tell about its client.
#[derive(Default)]
struct SessionFlags {
    /// The client speaks 2026-07-28 (per-request envelope): list_changed
    /// then goes only to its `subscriptions/listen` streams.
    modern: std::sync::atomic::AtomicBool,
    /// The lowest level of child log messages the client asked for with
    /// `logging/setLevel`, as its rank + 1; 0 until it asks (none sent).
    log_level: std::sync::atomic::AtomicU8,
}

/// A log level's rank, lowest (debug) first.
#[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
fn level_rank(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

impl SessionView {
    fn new(activated: &ActivationSet) -> SessionView {
        let view = SessionView {
            activated: Arc::new(ArcSwap::from_pointee(activated.clone())),
            last_active_ms: Arc::new(AtomicU64::new(0)),
            flags: Default::default(),
        };
        view.touch();
        view
    }

    /// A request arrived: the session is active, and its envelope tells the
    /// protocol era.
    fn request(&self, ctx: &RequestContext<RoleServer>) {
        self.touch();
        if ctx.meta.protocol_version().is_some() {
            self.flags.modern.store(true, Ordering::Relaxed);
        }
    }

    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Seconds since the session's last request.
    pub fn idle_secs(&self) -> u64 {
        now_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Milliseconds since the session's last request, for ordering sessions.
    pub fn idle_ms(&self) -> u64 {
        now_ms().saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
    }
}

/// Milliseconds since the daemon started.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The Session actor. See the module docs.
pub struct Session {
    pub id: String,
    pub name: Option<String>,
    pub mode: DiscoveryMode,
    /// MCP runs on the client's own stdio, handed over by the shim.
    pub stdio: bool,
    activated: ActivationSet,
    view: SessionView,
    peer: Option<Peer<RoleServer>>,
    /// `subscriptions/listen` streams of a 2026-07-28 session.
    listeners: Vec<SubscriptionSink>,
    supervisor: Addr<Supervisor>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    /// Names visible at the last list_changed (or start), to tell whether a
    /// catalog change touched this session.
    visible: Vec<String>,
}

impl Session {
    pub fn new(
        id: String,
        name: Option<String>,
        mode: DiscoveryMode,
        activated: ActivationSet,
        supervisor: Addr<Supervisor>,
        snapshot: Arc<ArcSwap<Snapshot>>,
    ) -> Session {
        let mut s = Session {
            id,
            name,
            mode,
            stdio: false,
            view: SessionView::new(&activated),
            activated,
            peer: None,
            listeners: Vec::new(),
            supervisor,
            snapshot,
            visible: Vec::new(),
        };
        s.visible = s.visible_names(&s.snapshot.load());
        s
    }

    /// Exposed names of the proxied tools this session lists.
    fn visible_names(&self, snapshot: &Snapshot) -> Vec<String> {
        visible_entries(snapshot, self.mode, &self.activated)
            .map(|e| e.name.clone())
            .collect()
    }

    /// Sends list_changed if the visible set differs from the last one sent.
    fn refresh_visible(&mut self) {
        let now = self.visible_names(&self.snapshot.load());
        if now != self.visible {
            self.visible = now;
            self.notify_list_changed();
        }
    }

    /// `notifications/tools/list_changed`: on the listen streams of a
    /// 2026-07-28 session, else to the peer (older clients declare no
    /// capability for it, so it always goes).
    fn notify_list_changed(&self) {
        if self.listeners.is_empty() && self.view.flags.modern.load(Ordering::Relaxed) {
            return; // a 2026-07-28 client that did not opt in
        }
        if !self.listeners.is_empty() {
            let sinks = self.listeners.clone();
            tokio::spawn(async move {
                for sink in sinks {
                    let _ = sink.notify_tool_list_changed().await;
                }
            });
        } else if let Some(peer) = self.peer.clone() {
            tokio::spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }

    /// A named session's activations are saved on every change, so they
    /// survive a daemon restart as well as a reconnect.
    fn save_if_named(&self) {
        if let Some(name) = &self.name {
            self.supervisor.do_send(SaveNamed {
                name: name.clone(),
                activated: self.activated.clone(),
            });
        }
    }

    /// The handles the session's rmcp handler reads.
    pub fn view(&self) -> SessionView {
        self.view.clone()
    }

    pub fn info(&self) -> evo_proto::ctl::SessionInfo {
        evo_proto::ctl::SessionInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            mode: self.mode.as_str().to_string(),
            io: if self.stdio { "stdio" } else { "socket" }.into(),
            activated: self.activated.iter().cloned().collect(),
            last_active: self.view.idle_secs(),
        }
    }
}

/// The proxied tools a session lists: all in legacy mode; hot and activated
/// ones in dynamic mode. The one place that decides visibility.
pub fn visible_entries<'a>(
    snapshot: &'a Snapshot,
    mode: DiscoveryMode,
    activated: &'a ActivationSet,
) -> impl Iterator<Item = &'a Arc<ToolEntry>> + 'a {
    snapshot.tools.iter().filter(move |e| match mode {
        DiscoveryMode::Legacy => true,
        DiscoveryMode::Dynamic => e.hot || activated.contains(&e.name),
    })
}

impl Actor for Session {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.supervisor.do_send(SessionClosed {
            id: self.id.clone(),
            name: self.name.clone(),
            activated: self.activated.clone(),
        });
    }
}

/// The rmcp service is running: keep its peer for notifications.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Attach(pub Peer<RoleServer>);

impl Handler<Attach> for Session {
    type Result = ();
    fn handle(&mut self, msg: Attach, _: &mut Context<Self>) {
        self.peer = Some(msg.0);
    }
}

/// After a reload: activations follow renamed tools and drop removed ones.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Remap {
    pub renamed: std::collections::HashMap<String, String>,
    pub dropped: Vec<String>,
}

impl Handler<Remap> for Session {
    type Result = ();
    fn handle(&mut self, msg: Remap, _: &mut Context<Self>) {
        let before = self.activated.clone();
        self.activated = before
            .iter()
            .filter(|n| !msg.dropped.contains(n))
            .map(|n| msg.renamed.get(n).cloned().unwrap_or_else(|| n.clone()))
            .collect();
        if self.activated != before {
            self.view.activated.store(Arc::new(self.activated.clone()));
            self.save_if_named();
            self.refresh_visible();
        }
    }
}

/// A 2026-07-28 client opened (or closed) a `subscriptions/listen` stream.
#[derive(Message)]
#[rtype(result = "()")]
pub enum Listener {
    Add(SubscriptionSink),
    Remove(rmcp::model::RequestId),
}

impl Handler<Listener> for Session {
    type Result = ();
    fn handle(&mut self, msg: Listener, _: &mut Context<Self>) {
        match msg {
            Listener::Add(sink) => self.listeners.push(sink),
            Listener::Remove(id) => self.listeners.retain(|s| *s.id() != id),
        }
    }
}

/// The client went away.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Close;

impl Handler<Close> for Session {
    type Result = ();
    fn handle(&mut self, _: Close, ctx: &mut Context<Self>) {
        self.peer = None;
        ctx.stop();
    }
}

/// A child's log message goes to sessions that asked for logs at its level
/// (`logging/setLevel`), with the server id leading its logger name.
impl Handler<crate::catalog::ChildLog> for Session {
    type Result = ();
    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    fn handle(&mut self, msg: crate::catalog::ChildLog, _: &mut Context<Self>) {
        let wanted = self.view.flags.log_level.load(Ordering::Relaxed);
        let modern = self.view.flags.modern.load(Ordering::Relaxed);
        if wanted == 0 || modern || level_rank(msg.params.level) + 1 < wanted {
            return;
        }
        let Some(peer) = self.peer.clone() else {
            return;
        };
        let mut params = msg.params;
        params.logger = Some(match params.logger.take() {
            Some(logger) => format!("{}/{logger}", msg.server),
            None => msg.server,
        });
        tokio::spawn(async move {
            let _ = peer.notify_logging_message(params).await;
        });
    }
}

impl Handler<CatalogChanged> for Session {
    type Result = ();
    fn handle(&mut self, msg: CatalogChanged, _: &mut Context<Self>) {
        // Activations of tools missing from this snapshot are kept: after a
        // daemon restart a named session's tools come back as servers start.
        let _ = msg;
        self.refresh_visible();
    }
}

/// Activate or deactivate tools (exposed names, already checked to exist).
/// Answers with the names whose state changed and sends list_changed if the
/// visible set changed.
#[derive(Message)]
#[rtype(result = "ActivationChange")]
pub struct SetActive {
    pub tools: Vec<String>,
    pub active: bool,
    /// From a request of the session itself (not `evoctl`).
    pub touch: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ActivationChange {
    pub changed: Vec<String>,
    pub activated: Vec<String>,
}

impl Handler<SetActive> for Session {
    type Result = MessageResult<SetActive>;
    fn handle(&mut self, msg: SetActive, _: &mut Context<Self>) -> Self::Result {
        if msg.touch {
            self.view.touch();
        }
        let mut changed = Vec::new();
        for t in msg.tools {
            let did = if msg.active {
                self.activated.insert(t.clone())
            } else {
                self.activated.remove(&t)
            };
            if did {
                changed.push(t);
            }
        }
        if !changed.is_empty() {
            self.view.activated.store(Arc::new(self.activated.clone()));
            self.refresh_visible();
            self.save_if_named();
        }
        MessageResult(ActivationChange {
            changed,
            activated: self.activated.iter().cloned().collect(),
        })
    }
}

/// The session's own view: mode, activations, info.
#[derive(Message)]
#[rtype(result = "(evo_proto::ctl::SessionInfo, ActivationSet)")]
pub struct Describe;

impl Handler<Describe> for Session {
    type Result = MessageResult<Describe>;
    fn handle(&mut self, _: Describe, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.info(), self.activated.clone()))
    }
}

/// The rmcp server of one session. Cheap to clone; all shared state is the
/// catalog snapshot (read-only) and the Session actor's address.
#[derive(Clone)]
pub struct SessionServer {
    pub id: String,
    pub mode: DiscoveryMode,
    pub session: Addr<Session>,
    pub supervisor: Addr<Supervisor>,
    pub view: SessionView,
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub search_limit: usize,
    /// Byte budget of the one-line listing in `instructions`.
    pub instructions_budget: usize,
    /// Identical failing calls of this session (see [`crate::breaker`]).
    pub breaker: Arc<std::sync::Mutex<RetryBreaker>>,
    /// Approvals asked in band on 2026-07-28 sessions, awaiting the retry
    /// that carries the user's answer.
    pub asks: Arc<std::sync::Mutex<Vec<Ask>>>,
}

/// An approval question sent in an `input_required` result: the retry's
/// `requestState` must name it, for the same tool and arguments.
pub struct Ask {
    state: String,
    tool: String,
    key: u64,
    at: Instant,
}

/// How long an in-band approval question stays answerable.
const ASK_TTL: std::time::Duration = std::time::Duration::from_secs(300);
/// The key of the approval question in `inputRequests`.
const ASK_KEY: &str = "evo/approve";

/// A retried `tools/call`'s answers to the questions of its last
/// `input_required` result (2026-07-28).
#[derive(Default)]
pub struct Answers {
    responses: Option<rmcp::model::InputResponses>,
    state: Option<String>,
}

/// Whether a call that needs approval may go on.
enum Approval {
    Granted,
    Refused(String),
    /// Ask the user in band and have the client retry with the answer.
    Ask(rmcp::model::InputRequiredResult),
}

/// The error for an MCP method evo does not serve: it aggregates tools only.
fn not_served(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method '{method}' is not served by evo (it serves tools: tools/list, tools/call and its native tools)"
        ),
        None,
    )
}

/// How long a call naming an unknown tool waits for servers that are still
/// starting and have listed nothing yet (see `snapshot_knowing`).
const LISTING_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

fn text_result(text: impl Into<String>, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text.into())];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl SessionServer {
    async fn list(&self) -> Vec<Tool> {
        let snapshot = self.snapshot.load_full();
        let mut tools = native::tools();
        match self.mode {
            DiscoveryMode::Legacy => {
                tools.extend(snapshot.tools.iter().map(|e| e.tool.clone()));
            }
            DiscoveryMode::Dynamic => {
                let activated = self.view.activated.load();
                tools.extend(
                    visible_entries(&snapshot, self.mode, &activated).map(|e| e.tool.clone()),
                );
            }
        }
        tools
    }

    /// Forwards a call to the tool's child, with the server's timeout and the
    /// client's cancellation. Every failure becomes an `isError` result that
    /// names the server. The flag says whether the outcome is about these
    /// arguments (the child answered, or took too long on them), as opposed
    /// to the server being unreachable or the client cancelling: only the
    /// former counts toward the retry-loop breaker.
    async fn forward(
        &self,
        entry: &ToolEntry,
        arguments: Option<JsonObject>,
        ctx: &RequestContext<RoleServer>,
    ) -> (CallToolResponse, bool) {
        let server = &entry.server;
        let _busy = server.begin_call();
        let peer = match server.peer().await {
            Ok(p) => p,
            Err(e) => {
                let text = format!("{} not called: {e}", entry.name);
                return (text_result(text, true).into(), false);
            }
        };
        let mut params = CallToolRequestParams::new(entry.upstream.clone());
        params.arguments = arguments;
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
            let call = async move {
                let pending = direct
                    .call(&params.name, &arguments)
                    .await
                    .map_err(|_| rmcp::ServiceError::TransportClosed)?;
                match pending.answer().await {
                    Direct::Result(r) => Ok(CallToolResponse::Complete(r)),
                    Direct::Error(message) => {
                        Ok(text_result(format!("{failed}: {message}"), true).into())
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
                self.await_call(entry, call, &peer, None, ctx).await
            }
            Some(client_token) => {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
                let handle = match peer
                    .send_request_with_option(request, PeerRequestOptions::no_options())
                    .await
                {
                    Ok(h) => h,
                    Err(e) => return (self.call_failed(entry, e, &peer), false),
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
                self.await_call(entry, call, &peer, Some(id), ctx).await
            }
        }
    }

    /// Waits for a forwarded call, racing the client's cancellation and the
    /// server's timeout. `cancel` is the child request to cancel explicitly
    /// when the call future does not do it on drop.
    async fn await_call(
        &self,
        entry: &ToolEntry,
        call: impl Future<Output = Result<CallToolResponse, rmcp::ServiceError>>,
        peer: &Arc<Peer<RoleClient>>,
        cancel: Option<rmcp::model::RequestId>,
        ctx: &RequestContext<RoleServer>,
    ) -> (CallToolResponse, bool) {
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
                (text_result(text, true).into(), false)
            }
            Some(Ok(Ok(resp))) => (mark_complete(resp), true),
            Some(Ok(Err(e))) => (self.call_failed(entry, e, peer), false),
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
                (timed_out, true)
            }
        }
    }

    /// A call that got no answer. A connection that failed in transport is
    /// reported to the server's actor: a remote server that went away is
    /// then reconnected instead of staying "ready" on a dead session.
    fn call_failed(
        &self,
        entry: &ToolEntry,
        e: rmcp::ServiceError,
        peer: &Arc<Peer<RoleClient>>,
    ) -> CallToolResponse {
        let reason = crate::child::readable_error(&e);
        if matches!(
            e,
            rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::TransportClosed
        ) {
            entry.server.connection_failed(peer, reason.clone());
        }
        let text = match entry.server.state() {
            crate::catalog::ServerState::Stopped => format!(
                "{} was not completed: server '{}' was stopped before answering (evod is shutting down, or a reload removed it)",
                entry.name, entry.server.id
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

    /// The snapshot to resolve a called name in. Right after evod starts
    /// (a shim autostarted it, or a child is still coming up) a name may be
    /// missing only because its server has not listed yet: while a server
    /// that has listed nothing is still starting, wait for the name to
    /// appear, up to [`LISTING_WAIT`] or the client's cancellation.
    async fn snapshot_knowing(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Arc<Snapshot> {
        let deadline = Instant::now() + LISTING_WAIT;
        loop {
            let snapshot = self.snapshot.load_full();
            let settled = snapshot.get(name).is_some()
                || snapshot.denied.contains_key(name)
                || !(snapshot.version == 0 || snapshot.still_listing());
            if settled || Instant::now() >= deadline || ctx.ct.is_cancelled() {
                return snapshot;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// A proxied call by exposed name: route it whether or not it is active,
    /// and activate it. Arguments are checked against the tool's schema first:
    /// repaired when that makes them valid, refused with a teaching error
    /// when not; identical failures are counted and, past a point, refused.
    async fn call_proxied(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        answers: Answers,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let snapshot = self.snapshot_knowing(name, ctx).await;
        let Some(entry) = snapshot.get(name) else {
            let text = snapshot
                .refusal(name)
                .unwrap_or_else(|| unknown_tool_message(&snapshot, name));
            return Ok(text_result(text, true).into());
        };
        self.view.touch();
        if self.mode == DiscoveryMode::Dynamic
            && !entry.hot
            && !self.view.activated.load().contains(&entry.name)
        {
            self.session.do_send(SetActive {
                tools: vec![entry.name.clone()],
                active: true,
                touch: true,
            });
        }
        let mut args = arguments.unwrap_or_default();
        let mut notes = Vec::new();
        let mut fixes = Vec::new();
        if entry.requires("session_id") && !args.contains_key("session_id") {
            // The caller's own id under another spelling is theirs to keep.
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
        let key = canonical_key(&args);
        let prior = self.breaker_do(|b| b.prior_failures(&entry.name, key));
        if prior >= REFUSE_AFTER {
            return Ok(text_result(refusal_text(entry, prior), true).into());
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
                    let failures = self.breaker_do(|b| b.failed(&entry.name, key));
                    let example = example::example_call(&entry.name, &entry.tool.input_schema);
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
                    return Ok(text_result(text, true).into());
                }
            }
        }
        if let Some(rule) = snapshot.needs_approval.get(&entry.name) {
            match self.approval(entry, rule, &args, key, answers, ctx).await {
                Approval::Granted => {}
                Approval::Refused(why) => return Ok(text_result(why, true).into()),
                Approval::Ask(input) => return Ok(CallToolResponse::InputRequired(input)),
            }
        }
        let (response, about_arguments) = self.forward(entry, Some(args), ctx).await;
        let CallToolResponse::Complete(mut result) = response else {
            return Ok(response);
        };
        match (result.is_error == Some(true), about_arguments) {
            (false, _) => self.breaker_do(|b| b.succeeded(&entry.name)),
            (true, true) => {
                let failures = self.breaker_do(|b| b.failed(&entry.name, key));
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

    /// A person approves each call of a `require_approval` tool: through the
    /// client when it can ask its user (elicitation: a request to the client
    /// on sessions with the initialize handshake, an `input_required` result
    /// on 2026-07-28 ones), else by `evoctl approve ID`.
    async fn approval(
        &self,
        entry: &ToolEntry,
        rule: &str,
        args: &JsonObject,
        key: u64,
        answers: Answers,
        ctx: &RequestContext<RoleServer>,
    ) -> Approval {
        let preview = Value::Object(args.clone()).to_string();
        let question = rmcp::model::ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "Allow the call {} with arguments {}? (evo permissions: {rule})",
                entry.name,
                preview.chars().take(500).collect::<String>()
            ),
            requested_schema: rmcp::model::ElicitationSchema::new(Default::default()),
        };
        let declined = || {
            Approval::Refused(format!(
                "The user declined the call to {}; it was not made.",
                entry.name
            ))
        };
        if ctx.meta.protocol_version().is_some() {
            // 2026-07-28: capabilities come with each request, and the
            // question goes back in the result.
            if ctx
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some())
            {
                return match self.answer(&entry.name, key, answers) {
                    Some(true) => Approval::Granted,
                    Some(false) => declined(),
                    None => Approval::Ask(self.ask(&entry.name, key, question)),
                };
            }
        } else if !ctx.peer.supported_elicitation_modes().is_empty() {
            match ctx
                .peer
                .create_elicitation_with_timeout(question, Some(ASK_TTL))
                .await
            {
                Ok(r) if r.action == rmcp::model::ElicitationAction::Accept => {
                    return Approval::Granted;
                }
                Ok(_) => return declined(),
                // The client could not ask: hold the call for an approval by
                // evoctl instead.
                Err(e) => {
                    tracing::debug!(error = %e, "elicitation failed; holding the call for evoctl approve")
                }
            }
        }
        let gate = self
            .supervisor
            .send(CheckApproval {
                tool: entry.name.clone(),
                key,
                preview,
            })
            .await;
        match gate {
            Err(_) => Approval::Refused("evod is shutting down".to_string()),
            Ok(Gate::Pass) => Approval::Granted,
            Ok(Gate::Pending(id)) => Approval::Refused(format!(
                "This call to {} needs a person's approval ({rule}); it was not made. Ask the user to run `evoctl approve {id}` (or `evoctl deny {id}`), then repeat exactly the same call within 5 minutes.",
                entry.name
            )),
            Ok(Gate::Denied(id)) => Approval::Refused(format!(
                "A person denied this call to {} ({id}); it was not made. Do not retry it.",
                entry.name
            )),
        }
    }

    /// Records an in-band approval question for `tool` with these arguments
    /// and builds the `input_required` result that asks it.
    fn ask(
        &self,
        tool: &str,
        key: u64,
        question: rmcp::model::ElicitRequestParams,
    ) -> rmcp::model::InputRequiredResult {
        use std::hash::{BuildHasher, Hasher};
        let mut nonce = std::collections::hash_map::RandomState::new().build_hasher();
        nonce.write_u64(key);
        let state = format!("{}-{:016x}", self.id, nonce.finish());
        let mut asks = self.asks.lock().unwrap_or_else(|e| e.into_inner());
        asks.retain(|a| a.at.elapsed() < ASK_TTL);
        asks.push(Ask {
            state: state.clone(),
            tool: tool.to_string(),
            key,
            at: Instant::now(),
        });
        let request =
            rmcp::model::InputRequest::Elicitation(rmcp::model::ElicitRequest::new(question));
        rmcp::model::InputRequiredResult::new(
            Some([(ASK_KEY.to_string(), request)].into()),
            Some(state),
        )
    }

    /// The user's answer in a retried call: `Some(accepted)` when its
    /// `requestState` names a question asked for this tool and these
    /// arguments (each question is answered once), else `None`.
    fn answer(&self, tool: &str, key: u64, answers: Answers) -> Option<bool> {
        let state = answers.state?;
        let mut asks = self.asks.lock().unwrap_or_else(|e| e.into_inner());
        let i = asks
            .iter()
            .position(|a| a.state == state && a.tool == tool && a.key == key)?;
        let ask = asks.swap_remove(i);
        if ask.at.elapsed() >= ASK_TTL {
            return None;
        }
        let answer = answers.responses?.remove(ASK_KEY)?;
        Some(answer.get("action").and_then(Value::as_str) == Some("accept"))
    }

    fn breaker_do<T>(&self, f: impl FnOnce(&mut RetryBreaker) -> T) -> T {
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut b)
    }

    fn describe_tool(&self, args: Option<&JsonObject>) -> CallToolResult {
        let name = match native::string_arg(args, "name", native::DESCRIBE_TOOL) {
            Ok(n) => n,
            Err(e) => return text_result(e, true),
        };
        self.view.touch();
        if let Some(text) = native::describe(name) {
            return text_result(text, false);
        }
        let snapshot = self.snapshot.load_full();
        match snapshot.get(name) {
            Some(entry) => text_result(disclosure::describe_tool(entry), false),
            None => text_result(unknown_tool_message(&snapshot, name), true),
        }
    }

    fn describe_capability(&self, args: Option<&JsonObject>) -> CallToolResult {
        self.view.touch();
        let domain = args
            .and_then(|a| a.get("domain"))
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty());
        let snapshot = self.snapshot.load_full();
        match disclosure::describe_capability(
            &snapshot,
            domain.map(str::trim),
            &snapshot.capabilities,
        ) {
            Ok(text) => text_result(text, false),
            Err(e) => text_result(e, true),
        }
    }

    async fn discover(&self, args: Option<&JsonObject>) -> CallToolResult {
        let params = match search::DiscoverParams::parse(args, self.search_limit) {
            Ok(p) => p,
            Err(e) => return text_result(e, true),
        };
        let snapshot = self.snapshot.load_full();
        let outcome = search::search(
            &snapshot,
            &params.query,
            params.limit,
            params.domain.as_deref(),
        );
        let mut text = search::render(&outcome);
        if params.activate && !outcome.hits.is_empty() {
            let names: Vec<String> = outcome.hits.iter().map(|h| h.entry.name.clone()).collect();
            let _ = self
                .session
                .send(SetActive {
                    tools: names,
                    active: true,
                    touch: true,
                })
                .await;
            text.push_str("\nThese tools are now active in this session: call them by name, or through call_tool if your client does not refresh its tool list.");
        } else {
            self.view.touch();
        }
        text_result(text, false)
    }
}

/// The text of a call refused by the retry-loop breaker.
fn refusal_text(entry: &ToolEntry, failures: u32) -> String {
    format!(
        "Refused without calling {}: this exact call (same arguments) has already failed {failures} times in this session, and repeating it will not help. Change the arguments — run describe_tool {{\"name\": \"{}\"}} for the schema and a worked example — or choose another tool with discover_tools.",
        entry.name, entry.name
    )
}

/// Guidance for the second identical failure: say it is a repeat, name the
/// one fix, point to describe_tool.
fn escalation_text(entry: &ToolEntry, failures: u32, fix: Option<&str>) -> String {
    let fix = fix.map(|f| format!(" The fix: {f}.")).unwrap_or_default();
    format!(
        "[evo] This is failure {failures} of the same call to {} with the same arguments.{fix} Read describe_tool {{\"name\": \"{}\"}} before retrying; an identical call will now be refused.",
        entry.name, entry.name
    )
}

/// A child's answer to a call, as a call response.
fn call_response(result: rmcp::model::ServerResult) -> CallToolResponse {
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
fn mark_complete(resp: CallToolResponse) -> CallToolResponse {
    match resp {
        CallToolResponse::Complete(mut r) => {
            if r.result_type.is_none() {
                r.result_type = Some(ResultType::COMPLETE);
            }
            CallToolResponse::Complete(r)
        }
        other => other,
    }
}

/// "No tool named X" with the closest names, so the caller can correct itself.
pub fn unknown_tool_message(snapshot: &Snapshot, name: &str) -> String {
    let close = search::closest_names(snapshot, name, 5);
    if close.is_empty() {
        format!("No tool named '{name}'. Use discover_tools to search for one.")
    } else {
        format!(
            "No tool named '{name}'. Closest: {}. Use discover_tools to search.",
            close.join(", ")
        )
    }
}

impl ServerHandler for SessionServer {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("evo", crate::VERSION));
        let snapshot = self.snapshot.load();
        let activated = self.view.activated.load();
        let mode = self.mode;
        let listed = |e: &ToolEntry| match mode {
            DiscoveryMode::Legacy => true,
            DiscoveryMode::Dynamic => e.hot || activated.contains(&e.name),
        };
        info.instructions = Some(disclosure::instructions(
            &snapshot,
            &listed,
            self.instructions_budget,
        ));
        info
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let id = sink.id().clone();
        let _ = self.session.send(Listener::Add(sink)).await;
        context.cancelled().await;
        self.session.do_send(Listener::Remove(id));
        Ok(())
    }

    /// Requests rmcp could not read as one it knows: a known method with
    /// params of the wrong shape is invalid params, saying what is wrong;
    /// anything else is a method evo does not serve.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let params = request.params.as_ref();
        let invalid = match request.method.as_str() {
            "tools/call" => {
                let problem = match params {
                    None | Some(Value::Null) => "params are missing".to_string(),
                    Some(Value::Object(p)) => match (p.get("name"), p.get("arguments")) {
                        (None, _) => "'name' is missing".to_string(),
                        (Some(n), _) if !n.is_string() => {
                            format!("'name' must be a string, got {n}")
                        }
                        (_, Some(a)) if !a.is_object() && !a.is_null() => {
                            format!("'arguments' must be an object, got {a}")
                        }
                        _ => "they do not match the MCP schema".to_string(),
                    },
                    Some(other) => format!("params must be an object, got {other}"),
                };
                Some(format!(
                    "tools/call: {problem}; expected {{\"name\": string, \"arguments\": object}}"
                ))
            }
            "tools/list" => {
                Some("tools/list: params must be an object (with an optional 'cursor')".into())
            }
            _ => None,
        };
        Err(match invalid {
            Some(message) => ErrorData::invalid_params(message, None),
            None => not_served(&request.method),
        })
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Err(not_served("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        Err(not_served("resources/templates/list"))
    }

    async fn read_resource(
        &self,
        _request: rmcp::model::ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        Err(not_served("resources/read"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Err(not_served("prompts/list"))
    }

    async fn get_prompt(
        &self,
        _request: rmcp::model::GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        Err(not_served("prompts/get"))
    }

    async fn complete(
        &self,
        _request: rmcp::model::CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        Err(not_served("completion/complete"))
    }

    /// Children's log messages at `level` and above are forwarded to this
    /// session from now on (none before it asks).
    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        self.view
            .flags
            .log_level
            .store(level_rank(request.level) + 1, Ordering::Relaxed);
        Ok(())
    }

    async fn ping(&self, ctx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.view.request(&ctx);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.view.request(&ctx);
        Ok(ListToolsResult::with_all_items(self.list().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.view.request(&ctx);
        let answers = Answers {
            responses: request.input_responses,
            state: request.request_state,
        };
        match request.name.as_ref() {
            native::CALL_TOOL => match native::parse_call_tool(request.arguments.as_ref()) {
                Ok((name, arguments)) => self.call_proxied(&name, arguments, answers, &ctx).await,
                Err(e) => Ok(text_result(e, true).into()),
            },
            native::DISCOVER_TOOLS => Ok(self.discover(request.arguments.as_ref()).await.into()),
            native::DESCRIBE_TOOL => Ok(self.describe_tool(request.arguments.as_ref()).into()),
            native::DESCRIBE_CAPABILITY => {
                Ok(self.describe_capability(request.arguments.as_ref()).into())
            }
            name => {
                self.call_proxied(name, request.arguments, answers, &ctx)
                    .await
            }
        }
    }
}
