//! The ChildServer actor: one per configured server. It runs the child (a stdio
//! process in its own process group, or a Streamable HTTP connection), keeps an
//! rmcp client to it, lists its tools into the Catalog, and restarts it with
//! backoff when it crashes. Calls do not pass through this actor: it publishes
//! the client peer on its [`ServerLink`] and sessions call the child directly.
//!
//! The actor is a state machine (`Phase`): each phase carries exactly the
//! data that is valid in it (the process, the client, the callers waiting for
//! a start), so no combination of fields has to be kept consistent by hand.
//!
//! Around it: each transport's connect function (`process.rs` for stdio,
//! `remote.rs` for Streamable HTTP, `sse.rs` for legacy HTTP+SSE) and the
//! handshake they share (`handshake.rs`); the child's notifications
//! (`events.rs`); how a run ends and restarts (`restarts.rs`); a remote
//! server's OAuth login (`login.rs`); and what sessions hold of the server
//! (`link.rs`, `direct.rs`).
//!
//! A run's life: `Idle` (listed from the cache, nothing running) or a start at once; `Queued` for a
//! slot of the start gate (stdio children); `Starting` holds the run (process, generation) and the
//! callers waiting; once the handshake and every page of `tools/list` are in the catalog it is
//! `Ready` and its peer is published. Events carry their run's generation, so a late event of an
//! earlier run is ignored.
//!
//! Progress from a child is forwarded by the child's transport as it reads it, in order, before the
//! call's result can reach rmcp (rmcp runs each notification on a task of its own, which lost the
//! last one to the result about 9 times in 10 with server-everything): the stdio transport does it
//! on its lines (`io.rs`), remote transports through `remote::ProgressFirst`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rmcp::ServiceError;
use rmcp::model::{ClientRequest, ProtocolVersion, Tool};
use rmcp::service::{ClientLifecycleMode, Peer, RoleClient};
use tokio::sync::oneshot;

use crate::catalog::resources::Offered;
use crate::catalog::{Catalog, OffersDiscovered, ToolsDiscovered};
use crate::config::{ServerSpec, TransportSpec};
use crate::console::events::{EventBus, Topic};
use crate::error_text::readable_error;
use crate::oauth::{AuthState, Bearer};
use direct::DirectCalls;
use events::{ChildEvents, Lists, Relist, listen_for_changes, resubscribe};
use handshake::{Client, Connecting, Handshake, StartError, list_offers, list_tools};
use link::{ConnectionLost, EnsureRunning, LoginUnderWay, ServerActor, ServerLink, ServerState};
use probe::ModernLate;
use process::{ChildProcess, StderrTail};
use remote::RemoteTarget;

pub mod direct;
pub mod direct_http;
mod events;
mod gate;
mod handshake;
pub mod io;
pub mod link;
pub mod login;
mod probe;
pub(crate) mod process;
pub(crate) mod remote;
mod restarts;
pub mod sandbox;
pub mod sse;
pub mod subscriptions;

pub use gate::StartGate;

/// How often a ready remote (HTTP) server is pinged, and how long it has to
/// answer.
const REMOTE_PING_EVERY: Duration = Duration::from_secs(10);
const REMOTE_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Grace period between closing a child's stdin, SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// One run of the child: a start and everything that belongs to it. Events
/// carry the run's generation, so those of an earlier run are told apart.
struct Run {
    generation: u64,
    /// The stdio child's process (none for a remote server).
    process: Option<ChildProcess>,
    /// Direct calls on the stdio child.
    direct: Option<Arc<DirectCalls>>,
    /// The start slot, held until the tools are listed (stdio children).
    permit: Option<gate::Permit>,
    /// When this run's start began: its `start_timeout_s` counts from here.
    began: Instant,
}

impl Run {
    /// Ends the run in the background: the client closes (a stdio child sees
    /// EOF), the process tree is terminated (SIGTERM, grace, SIGKILL, reap).
    fn end(self, client: Option<Client>, server: &str) {
        drop(client);
        if let Some(process) = self.process {
            let server = server.to_string();
            tokio::spawn(async move { process.terminate(STOP_GRACE, &server).await });
        }
    }
}

/// Where a ChildServer is in its life. Each phase holds only what is valid
/// in it.
enum Phase {
    /// Not running; the next call starts it (lazy start, idle stop).
    Idle,
    /// Waiting in the start gate's line for a slot; `ticket` names its
    /// place, `wait` is the future that takes the slot.
    Queued {
        ticket: u64,
        wait: SpawnHandle,
        waiters: Vec<Waiter>,
    },
    /// Started, not yet listed: waiting for the handshake and `tools/list`
    /// (`client` is set once connected, while the tools go into the catalog).
    Starting {
        run: Run,
        client: Option<Client>,
        waiters: Vec<Waiter>,
    },
    /// Serving calls.
    Ready { run: Run, client: Client },
    /// Down; started again when the timer fires.
    Backoff { timer: SpawnHandle },
    /// Crashed repeatedly; waits for `evoctl refresh` or a reload.
    Failed,
    /// A remote server that asks for OAuth: waits for `evoctl login`.
    LoginRequired,
    /// Shut down for good.
    Stopped,
}

impl Phase {
    fn state(&self) -> ServerState {
        match self {
            Phase::Idle => ServerState::Idle,
            Phase::Queued { .. } => ServerState::Queued,
            Phase::Starting { .. } => ServerState::Starting,
            Phase::Ready { .. } => ServerState::Ready,
            Phase::Backoff { .. } => ServerState::Restarting,
            Phase::Failed => ServerState::Failed,
            Phase::LoginRequired => ServerState::LoginRequired,
            Phase::Stopped => ServerState::Stopped,
        }
    }

    /// The run in progress, if any.
    fn run(&self) -> Option<&Run> {
        match self {
            Phase::Starting { run, .. } | Phase::Ready { run, .. } => Some(run),
            _ => None,
        }
    }

    /// The connected client of run `generation`, if it is still current.
    fn client_of(&self, generation: u64) -> Option<&Client> {
        match self {
            Phase::Starting {
                run,
                client: Some(client),
                ..
            }
            | Phase::Ready { run, client }
                if run.generation == generation =>
            {
                Some(client)
            }
            _ => None,
        }
    }

    fn is_run(&self, generation: u64) -> bool {
        self.run().is_some_and(|r| r.generation == generation)
    }

    /// Takes apart a phase that is being left: a pending restart is
    /// cancelled, and what must still be ended or answered is returned.
    fn leave(self, ctx: &mut Context<ChildServer>) -> PhaseLeftovers {
        match self {
            Phase::Starting {
                run,
                client,
                waiters,
            } => PhaseLeftovers {
                run: Some(run),
                client,
                waiters,
            },
            Phase::Ready { run, client } => PhaseLeftovers {
                run: Some(run),
                client: Some(client),
                waiters: Vec::new(),
            },
            Phase::Queued { wait, waiters, .. } => {
                ctx.cancel_future(wait); // leaves the line
                PhaseLeftovers {
                    waiters,
                    ..PhaseLeftovers::default()
                }
            }
            Phase::Backoff { timer } => {
                ctx.cancel_future(timer);
                PhaseLeftovers::default()
            }
            Phase::Idle | Phase::Failed | Phase::LoginRequired | Phase::Stopped => {
                PhaseLeftovers::default()
            }
        }
    }
}

/// What a phase that was left still held: its run, its client, and the
/// callers waiting for it to start.
#[derive(Default)]
struct PhaseLeftovers {
    run: Option<Run>,
    client: Option<Client>,
    waiters: Vec<Waiter>,
}

/// What becomes of a server whose run ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterRunEnds {
    /// Start again with backoff (failed after repeated crashes).
    Retry,
    /// Failed until `evoctl refresh` or a reload.
    Failed,
}

/// A caller waiting for a start: answered with the peer once ready, or why not.
type Waiter = oneshot::Sender<Result<Arc<Peer<RoleClient>>, String>>;

/// The ChildServer actor. See the module docs.
pub struct ChildServer {
    spec: Arc<ServerSpec>,
    link: Arc<ServerLink>,
    catalog: Addr<Catalog>,
    gate: Arc<StartGate>,
    events: EventBus,
    /// Start timeouts forgiven in a row (see `restarts.rs`).
    excused: u32,
    /// The child answered the discover probe late once: it is probed with
    /// `server/discover` alone (no fallback to `initialize`) from then on.
    modern_only: bool,
    phase: Phase,
    /// Counts starts (see [`Run::generation`]).
    generation: u64,
    restarts: u32,
    /// Downs since the server was last ready: a remote server's reconnect
    /// backoff (it is never marked failed).
    downs_since_ready: usize,
    crashes: VecDeque<Instant>,
    last_error: Option<String>,
    lazy: bool,
    /// Largest message read from the child (`limits.max_message_bytes`).
    max_line: usize,
    /// The last lines its child wrote to stderr.
    stderr: StderrTail,
    /// A remote server's OAuth credential for the current run.
    bearer: Option<Arc<Bearer>>,
    /// A remote server's last 401 challenge (where `evoctl login` starts).
    challenge: Option<String>,
    /// The last login started (by `evoctl login` or offered to a client):
    /// its URL and outcome, once known.
    login: Option<LoginUnderWay>,
}

/// What every ChildServer of a daemon shares.
#[derive(Clone)]
pub struct SharedByChildren {
    pub catalog: Addr<Catalog>,
    /// `limits.max_concurrent_starts`.
    pub gate: Arc<StartGate>,
    /// Largest message read from a child (`limits.max_message_bytes`).
    pub max_line: usize,
    /// `limits.max_result_bytes`, for servers without their own.
    pub max_result: usize,
    pub events: EventBus,
}

impl ChildServer {
    /// Starts the actor; with `lazy` the child is not spawned until a call
    /// needs it. Returns the link sessions call through.
    pub fn launch(
        spec: Arc<ServerSpec>,
        around: &SharedByChildren,
        lazy: bool,
    ) -> (Addr<ChildServer>, Arc<ServerLink>) {
        let SharedByChildren {
            catalog,
            gate,
            max_line,
            max_result,
            events,
        } = around.clone();
        let mut link_out = None;
        let addr = ChildServer::create(|ctx| {
            let actor = ServerActor {
                ensure_running: ctx.address().recipient(),
                connection_lost: ctx.address().recipient(),
                offer_login: ctx.address().recipient(),
            };
            let link = Arc::new(ServerLink::new(spec.id.clone(), spec.timeout, Some(actor)));
            link.set_max_result_bytes(spec.max_result_bytes.unwrap_or(max_result));
            link_out = Some(link.clone());
            ChildServer {
                spec,
                link,
                catalog,
                gate,
                excused: 0,
                modern_only: false,
                phase: Phase::Idle,
                generation: 0,
                restarts: 0,
                downs_since_ready: 0,
                crashes: VecDeque::new(),
                last_error: None,
                lazy,
                max_line,
                stderr: StderrTail::default(),
                bearer: None,
                challenge: None,
                login: None,
                events,
            }
        });
        let link = link_out.expect("ChildServer::create runs its closure before returning");
        (addr, link)
    }

    /// Moves to `phase` and publishes its state (and, when ready, the peer)
    /// on the link. Returns the phase left.
    fn enter(&mut self, phase: Phase) -> Phase {
        let old = std::mem::replace(&mut self.phase, phase);
        let state = self.phase.state();
        let (peer, direct) = match &self.phase {
            Phase::Ready { run, client } => (Some(client.peer().clone()), run.direct.clone()),
            _ => (None, None),
        };
        self.link.publish(state, peer, direct);
        if old.state() != state {
            self.events.changed(Topic::Servers);
        }
        old
    }

    /// Starts a new run once the start gate lets it (a remote server needs
    /// no slot); `waiters` are answered once it is ready or down.
    fn start(&mut self, waiters: Vec<Waiter>, ctx: &mut Context<Self>) {
        if self.remote() {
            return self.begin(waiters, None, ctx);
        }
        let ticket = match self.gate.enter() {
            Ok(permit) => return self.begin(waiters, Some(permit), ctx),
            Err(ticket) => ticket,
        };
        let id = ticket.id();
        let (starting, queued) = self.gate.load();
        tracing::info!(server = %self.spec.id, starting, queued, "waiting for a start slot (limits.max_concurrent_starts)");
        let wait = ctx.spawn(ticket.turn().into_actor(self).map(move |permit, act, ctx| {
            if !matches!(act.phase, Phase::Queued { ticket, .. } if ticket == id) {
                return; // dropping the permit passes the slot on
            }
            if let Phase::Queued { waiters, .. } = std::mem::replace(&mut act.phase, Phase::Idle) {
                act.begin(waiters, Some(permit), ctx);
            }
        }));
        self.enter(Phase::Queued {
            ticket: id,
            wait,
            waiters,
        });
    }

    /// Spawns (or connects) a new run holding start slot `permit`.
    fn begin(
        &mut self,
        waiters: Vec<Waiter>,
        permit: Option<gate::Permit>,
        ctx: &mut Context<Self>,
    ) {
        self.generation += 1;
        let generation = self.generation;
        let modern_late = ModernLate::default();
        let learned = modern_late.clone();
        let handshake = Handshake {
            handler: ChildEvents {
                server: self.spec.id.clone(),
                generation,
                relist: ctx.address().recipient(),
                link: self.link.clone(),
                catalog: self.catalog.clone(),
            },
            lifecycle: self.lifecycle(),
            modern_late,
            direct: None,
        };
        let mut run = Run {
            generation,
            process: None,
            direct: None,
            permit,
            began: Instant::now(),
        };
        let actor = ctx.address();
        let on_down = move |reason| actor.do_send(ChildDown { generation, reason });
        let connect = match &self.spec.transport {
            TransportSpec::Stdio { .. } => process::connect(
                &self.spec,
                &self.stderr,
                self.link.clone(),
                self.max_line,
                handshake,
                on_down,
            )
            .map(|start| {
                run.process = Some(start.process);
                run.direct = Some(start.direct);
                start.connecting
            }),
            TransportSpec::Http { url, headers, sse } => {
                let bearer = self.load_bearer(url, generation, ctx);
                self.bearer = bearer.clone();
                let target = RemoteTarget {
                    server: &self.spec.id,
                    url,
                    headers,
                    bearer,
                    link: self.link.clone(),
                };
                if *sse {
                    sse::connect(target, self.max_line, handshake, on_down)
                } else {
                    remote::connect(target, self.max_line, handshake).map(|(connecting, direct)| {
                        run.direct = Some(direct);
                        connecting
                    })
                }
            }
        };
        self.enter(Phase::Starting {
            run,
            client: None,
            waiters,
        });
        match connect {
            Ok(connecting) => self.await_start(generation, connecting, learned, ctx),
            // The command is missing or the config cannot be used: trying
            // again cannot help, so it fails at once, not after five crashes.
            Err(e) => self.end_run(generation, e, AfterRunEnds::Failed, ctx),
        }
    }

    /// Probe `server/discover` (2026-07-28), fall back to `initialize`; a
    /// child known to answer the probe late is probed alone.
    fn lifecycle(&self) -> ClientLifecycleMode {
        if self.modern_only {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }
        } else {
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            }
        }
    }

    /// Waits (up to `start_timeout_s`) for run `generation` to connect, then
    /// takes it as ready or down; `learned` is set if the child answered the
    /// discover probe late.
    fn await_start(
        &mut self,
        generation: u64,
        connect: Connecting,
        learned: ModernLate,
        ctx: &mut Context<Self>,
    ) {
        // rmcp's service loop logs inside the span current when it starts:
        // every line about this server, rmcp's own included, names it.
        let connect = tracing::Instrument::instrument(
            connect,
            tracing::info_span!("child", server = %self.spec.id),
        );
        let fut = tokio::time::timeout(self.spec.start_timeout, connect);
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            if !act.phase.is_run(generation) {
                // A stale start (dropping its client closes it). Its child
                // may have exited first, with only an exit status on record:
                // the handshake's own error says more.
                if let Ok(Err(e)) = &res {
                    tracing::info!(server = %act.spec.id, generation, "an ended start had failed: {e}");
                }
                return;
            }
            if learned.is_set() && !act.modern_only {
                return act.probe_alone(ctx);
            }
            let Ok(res) = res else {
                return act.start_timed_out(generation, ctx);
            };
            match res {
                Ok((client, tools, offered)) => {
                    act.connected(generation, client, tools, offered, ctx)
                }
                Err(StartError::Unauthorized { challenge }) => {
                    act.unauthorized(generation, challenge, ctx)
                }
                Err(StartError::Other(e)) if act.phase.run().is_some_and(|r| r.process.is_some()) => {
                    // The process probably died: give its exit status a
                    // moment to arrive, as it says more than "connection
                    // closed" does.
                    ctx.run_later(Duration::from_millis(250), move |act, ctx| {
                        act.down(generation, e, ctx)
                    });
                }
                Err(StartError::Other(e)) => act.down(generation, e, ctx),
            }
        }));
    }

    /// Run `generation` answered its handshake and listed `tools`: put them
    /// in the catalog, then become ready (so "ready" in `evoctl status`
    /// means listed).
    fn connected(
        &mut self,
        generation: u64,
        connected: Client,
        tools: Vec<Tool>,
        offered: Offered,
        ctx: &mut Context<Self>,
    ) {
        let Phase::Starting { run, client, .. } = &mut self.phase else {
            return;
        };
        tracing::info!(server = %self.spec.id, tools = tools.len(), "child ready");
        if let (Some(direct), Some(info)) = (&run.direct, connected.peer().peer_info()) {
            direct.negotiated(info.protocol_version.as_str());
            direct.through(connected.peer());
        }
        listen_for_changes(
            connected.peer().clone(),
            self.spec.id.clone(),
            generation,
            ctx.address().recipient(),
        );
        resubscribe(connected.peer().clone(), self.link.clone());
        *client = Some(connected);
        self.last_error = None;
        if tools.is_empty() {
            self.relist_empty(generation, 1, ctx);
        }
        let listed = self.catalog.send(ToolsDiscovered {
            server: self.spec.id.clone(),
            tools,
            offered: Some(offered),
        });
        ctx.spawn(listed.into_actor(self).map(move |_, act, ctx| {
            if act.phase.client_of(generation).is_none() {
                return;
            }
            let Phase::Starting {
                run,
                client: Some(client),
                waiters,
            } = std::mem::replace(&mut act.phase, Phase::Idle)
            else {
                return;
            };
            let peer = Arc::new(client.peer().clone());
            let mut run = run;
            run.permit = None; // listed: the next in line may start
            act.enter(Phase::Ready { run, client });
            act.downs_since_ready = 0;
            act.excused = 0;
            act.watch_remote(generation, ctx);
            for w in waiters {
                let _ = w.send(Ok(peer.clone()));
            }
        }));
    }

    /// `idle_timeout_s`: a ready child with no call for that long is stopped
    /// and goes back to `idle`; the next call starts it again.
    fn stop_if_idle(&mut self, limit: Duration, ctx: &mut Context<Self>) {
        if !matches!(self.phase, Phase::Ready { .. })
            || self.link.idle_for().is_none_or(|idle| idle < limit)
        {
            return;
        }
        tracing::info!(server = %self.spec.id, idle_s = limit.as_secs_f64(), "stopping idle child; it starts again on the next call");
        let left = self.enter(Phase::Idle).leave(ctx);
        if let Some(run) = left.run {
            run.end(left.client, &self.spec.id);
        }
    }

    /// A child that listed no tools is probably still warming up (a cold
    /// `npx` start): list again with backoff, a few times.
    fn relist_empty(&mut self, generation: u64, attempt: u32, ctx: &mut Context<Self>) {
        if attempt > 5 {
            return;
        }
        let delay = Duration::from_millis(500 * (1 << attempt));
        ctx.run_later(delay, move |act, ctx| {
            let Some(client) = act.phase.client_of(generation) else {
                return;
            };
            let peer = client.peer().clone();
            let (direct, server) = (act.link.direct(), act.spec.id.clone());
            let fut = async move { list_tools(&peer, direct.as_ref(), &server).await };
            ctx.spawn(fut.into_actor(act).map(move |res, act, ctx| match res {
                Ok(tools) if !tools.is_empty() => {
                    act.catalog.do_send(ToolsDiscovered {
                        server: act.spec.id.clone(),
                        tools,
                        offered: None,
                    });
                }
                _ => act.relist_empty(generation, attempt + 1, ctx),
            }));
        });
    }

    /// The error a call gets while this server cannot serve it.
    fn unavailable(&self) -> String {
        let why = self
            .last_error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        match self.phase.state() {
            ServerState::Failed => format!(
                "server '{}' has failed{why}; fix it and run `evoctl refresh {}`",
                self.spec.id, self.spec.id
            ),
            ServerState::Stopped => format!("server '{}' is stopped", self.spec.id),
            ServerState::LoginRequired => self.last_error.clone().unwrap_or_else(|| {
                format!(
                    "server '{}' needs a login: run `evoctl login {}`",
                    self.spec.id, self.spec.id
                )
            }),
            state => format!(
                "server '{}' is {}{why}; retry shortly or see `evoctl status`",
                self.spec.id,
                state.as_str()
            ),
        }
    }

    /// A remote (Streamable HTTP) server: no process of ours to watch.
    fn remote(&self) -> bool {
        matches!(self.spec.transport, TransportSpec::Http { .. })
    }

    /// A remote server has no process whose exit says it went away: while it
    /// is ready it is pinged every [`REMOTE_PING_EVERY`], and a ping lost in
    /// transport or unanswered within [`REMOTE_PING_TIMEOUT`] takes it down
    /// (then it is reconnected with backoff).
    fn watch_remote(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if !self.remote() {
            return;
        }
        ctx.run_later(REMOTE_PING_EVERY, move |act, ctx| {
            let Phase::Ready { run, client } = &act.phase else {
                return;
            };
            if run.generation != generation {
                return;
            }
            let peer = client.peer().clone();
            let ping = async move {
                let request = ClientRequest::PingRequest(Default::default());
                tokio::time::timeout(REMOTE_PING_TIMEOUT, peer.send_request(request)).await
            };
            ctx.spawn(ping.into_actor(act).map(move |answer, act, ctx| {
                let lost = match answer {
                    // An error answer is still an answer: the server is there.
                    Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => None,
                    Ok(Err(e)) => Some(format!("a ping failed: {}", readable_error(&e))),
                    Err(_) => Some(format!(
                        "no answer to a ping within {} s",
                        REMOTE_PING_TIMEOUT.as_secs()
                    )),
                };
                match lost {
                    None => act.watch_remote(generation, ctx),
                    Some(reason) => act.down(generation, reason, ctx),
                }
            }));
        });
    }
}

impl Actor for ChildServer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.lazy {
            self.enter(Phase::Idle);
        } else {
            self.start(Vec::new(), ctx);
        }
        if let Some(limit) = self.spec.idle_timeout {
            let every = (limit / 2).clamp(Duration::from_millis(100), Duration::from_secs(30));
            ctx.run_interval(every, move |act, ctx| act.stop_if_idle(limit, ctx));
        }
    }
}

/// The child's process ended or its connection closed.
#[derive(Message)]
#[rtype(result = "()")]
struct ChildDown {
    generation: u64,
    reason: String,
}

impl Handler<ChildDown> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: ChildDown, ctx: &mut Context<Self>) {
        self.down(msg.generation, msg.reason, ctx);
    }
}

impl Handler<ConnectionLost> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: ConnectionLost, ctx: &mut Context<Self>) {
        if let Phase::Ready { run, .. } = &self.phase
            && self.remote()
        {
            let generation = run.generation;
            let reason = format!("the connection failed: {}", msg.reason);
            self.down(generation, reason, ctx);
        }
    }
}

impl Handler<Relist> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: Relist, ctx: &mut Context<Self>) {
        let Some(client) = self.phase.client_of(msg.generation) else {
            return;
        };
        let peer = client.peer().clone();
        let server = self.spec.id.clone();
        let catalog = self.catalog.clone();
        let direct = self.link.direct();
        ctx.spawn(
            async move {
                match msg.lists {
                    Lists::Tools => match list_tools(&peer, direct.as_ref(), &server).await {
                        Ok(tools) => catalog.do_send(ToolsDiscovered {
                            server,
                            tools,
                            offered: None,
                        }),
                        Err(e) => tracing::warn!(server = %server, error = %e, "re-listing tools failed; keeping the last good list"),
                    },
                    Lists::Offers => {
                        let offered = list_offers(&peer, &server).await;
                        catalog.do_send(OffersDiscovered { server, offered });
                    }
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<EnsureRunning> for ChildServer {
    type Result = ResponseFuture<Result<Arc<Peer<RoleClient>>, String>>;
    fn handle(&mut self, _: EnsureRunning, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        match &mut self.phase {
            Phase::Ready { client, .. } => {
                let peer = Arc::new(client.peer().clone());
                return Box::pin(async move { Ok(peer) });
            }
            Phase::Starting { waiters, .. } | Phase::Queued { waiters, .. } => waiters.push(tx),
            Phase::Idle => self.start(vec![tx], ctx),
            _ => {
                let e = self.unavailable();
                return Box::pin(async move { Err(e) });
            }
        }
        let id = self.spec.id.clone();
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(format!("server '{id}' stopped while starting")))
        })
    }
}

/// Discover the tools now: start an idle child, or re-list a running one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Discover;

impl Handler<Discover> for ChildServer {
    type Result = ();
    fn handle(&mut self, _: Discover, ctx: &mut Context<Self>) {
        match &self.phase {
            Phase::Idle => self.start(Vec::new(), ctx),
            Phase::Ready { run, .. } => {
                let generation = run.generation;
                ctx.notify(Relist {
                    generation,
                    lists: Lists::Tools,
                });
            }
            _ => {}
        }
    }
}

/// Restart now (clears a failed state): `evoctl refresh SERVER`. The old
/// run's process tree is terminated (SIGTERM, grace, SIGKILL, reap) while
/// the new one starts; callers waiting for a start keep waiting for it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Restart;

impl Handler<Restart> for ChildServer {
    type Result = ();
    fn handle(&mut self, _: Restart, ctx: &mut Context<Self>) {
        if matches!(self.phase, Phase::Stopped) {
            return;
        }
        self.crashes.clear();
        let left = std::mem::replace(&mut self.phase, Phase::Idle).leave(ctx);
        if let Some(run) = left.run {
            run.end(left.client, &self.spec.id);
        }
        self.start(left.waiters, ctx);
    }
}

/// The config entry changed in what does not need a restart (same launch
/// hash): take it, e.g. a new `start_timeout_s`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Retune(pub Arc<ServerSpec>);

impl Handler<Retune> for ChildServer {
    type Result = ();
    fn handle(&mut self, Retune(spec): Retune, _: &mut Context<Self>) {
        if spec.hash == self.spec.hash {
            self.spec = spec;
        }
    }
}

/// What `evoctl status` shows of a child.
#[derive(Debug, Clone)]
pub struct ChildStatus {
    pub state: ServerState,
    pub pid: Option<u32>,
    pub restarts: u32,
    pub error: Option<String>,
    /// The last lines its child wrote to stderr.
    pub stderr_tail: Vec<String>,
    /// While starting: how long this start has run.
    pub starting_for: Option<Duration>,
    /// While queued: its place in the line (1 is next).
    pub queue_position: Option<usize>,
    /// A remote server's OAuth state.
    pub auth: AuthState,
}

#[derive(Message)]
#[rtype(result = "ChildStatus")]
pub struct GetStatus;

impl Handler<GetStatus> for ChildServer {
    type Result = MessageResult<GetStatus>;
    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(ChildStatus {
            state: self.phase.state(),
            pid: self
                .phase
                .run()
                .and_then(|r| r.process.as_ref())
                .map(ChildProcess::pid),
            restarts: self.restarts,
            error: self.last_error.clone(),
            stderr_tail: self.stderr.lines(&self.spec.secret_values()),
            starting_for: match &self.phase {
                Phase::Starting { run, .. } => Some(run.began.elapsed()),
                _ => None,
            },
            queue_position: match &self.phase {
                Phase::Queued { ticket, .. } => self.gate.position(*ticket),
                _ => None,
            },
            auth: match (&self.phase, &self.bearer) {
                (Phase::LoginRequired, _) => AuthState::LoginRequired {
                    reason: self.last_error.clone(),
                },
                (_, Some(bearer)) => bearer.state(),
                _ => AuthState::None,
            },
        })
    }
}

/// Stop the child gracefully: close its stdin, give it a grace period to
/// exit, then terminate its process tree. Answers once the child is gone;
/// the actor stops.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<Shutdown> for ChildServer {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        let PhaseLeftovers {
            run,
            client,
            waiters,
        } = self.enter(Phase::Stopped).leave(ctx);
        self.fail_waiters(waiters);
        let id = self.spec.id.clone();
        Box::pin(
            async move {
                if let Some(client) = client {
                    // Closes the transport: the child sees EOF on stdin.
                    let _ = tokio::time::timeout(STOP_GRACE, client.cancel()).await;
                }
                if let Some(process) = run.and_then(|r| r.process) {
                    // A child that exits on EOF needs no signal; its tree
                    // is ended all the same.
                    process.exits_within(STOP_GRACE).await;
                    process.terminate(STOP_GRACE, &id).await;
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        )
    }
}
