//! The ChildServer actor: one per configured server. It runs the child (a stdio
//! process in its own process group, or a Streamable HTTP connection), keeps an
//! rmcp client to it, lists its tools into the Catalog, and restarts it with
//! backoff when it crashes. Calls do not pass through this actor: it publishes
//! the client peer on its [`ServerLink`] and sessions call the child directly.
//!
//! The actor is a state machine (`Phase`): each phase carries exactly the
//! data that is valid in it (the process, the client, the callers waiting for
//! a start), so no combination of fields has to be kept consistent by hand.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, RoleClient, RunningService,
};
use tokio::sync::oneshot;

use crate::catalog::{Catalog, ToolsDiscovered};
use crate::config::{ServerSpec, TransportSpec};
use crate::error_text::readable_error;
use direct::DirectCalls;
use link::{
    ConnectionLost, EnsureRunning, LoginUnderWay, OfferLogin, ServerActor, ServerLink, ServerState,
};
use process::{ChildProcess, StderrTail};

pub mod direct;
mod gate;
pub mod io;
pub mod link;
mod probe;
pub(crate) mod process;
pub(crate) mod remote;
pub mod sse;
pub mod subscriptions;

use remote::StartError;

pub use gate::StartGate;

/// Start timeouts forgiven in a row while other children were starting too
/// (a saturated machine, not a broken server); the next one counts as a
/// crash.
const MAX_EXCUSED_TIMEOUTS: u32 = 2;
/// How often a ready remote (HTTP) server is pinged, and how long it has to
/// answer.
const REMOTE_PING_EVERY: Duration = Duration::from_secs(10);
const REMOTE_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Crashes within this window count towards marking the server failed.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// Crashes within [`CRASH_WINDOW`] after which the server is marked failed.
const MAX_CRASHES: usize = 5;
/// Grace period between closing a child's stdin, SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(1500);

type Client = RunningService<RoleClient, ChildEvents>;
type Connecting = std::pin::Pin<Box<dyn Future<Output = Result<Connected, StartError>>>>;

/// A child that answered its handshake, with every page of its lists.
type Connected = (Client, Vec<Tool>, crate::catalog::resources::Offered);
type Waiter = oneshot::Sender<Result<Arc<Peer<RoleClient>>, String>>;

/// Runs the MCP handshake on `transport` and lists every page of tools,
/// then of resources, templates and prompts as the child supports them.
async fn connect<T, E>(
    handler: ChildEvents,
    transport: T,
    lifecycle: ClientLifecycleMode,
    modern_late: probe::ModernLate,
) -> Result<Connected, StartError>
where
    T: rmcp::transport::Transport<RoleClient, Error = E> + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let server = handler.server.clone();
    let client = handler
        .serve_with_lifecycle(
            probe::LateProbeFilter::new(transport, modern_late),
            lifecycle,
        )
        .await
        .map_err(|e| match remote::challenge_of(&e) {
            Some(challenge) => StartError::Unauthorized { challenge },
            None => StartError::Other(format!("MCP handshake failed: {}", readable_error(&e))),
        })?;
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {}", readable_error(&e)))?;
    let offered = list_offers(client.peer(), &server).await;
    Ok((client, tools, offered))
}

/// Every page of the child's resources, templates and prompts, each asked
/// only when the child says it has them. A list that fails is logged and
/// left empty: the child's tools still serve.
pub(crate) async fn list_offers(
    peer: &Peer<RoleClient>,
    server: &str,
) -> crate::catalog::resources::Offered {
    let caps = peer
        .peer_info()
        .map(|info| crate::catalog::resources::OfferCaps::of(&info.capabilities))
        .unwrap_or_default();
    let mut offered = crate::catalog::resources::Offered {
        caps,
        ..Default::default()
    };
    if caps.resources {
        match peer.list_all_resources().await {
            Ok(r) => offered.resources = r,
            Err(e) => {
                tracing::warn!(server = %server, error = %readable_error(&e), "resources/list failed; listing none")
            }
        }
        match peer.list_all_resource_templates().await {
            Ok(t) => offered.templates = t,
            Err(e) => {
                tracing::debug!(server = %server, error = %readable_error(&e), "resources/templates/list failed; listing none")
            }
        }
    }
    if caps.prompts {
        match peer.list_all_prompts().await {
            Ok(p) => offered.prompts = p,
            Err(e) => {
                tracing::warn!(server = %server, error = %readable_error(&e), "prompts/list failed; listing none")
            }
        }
    }
    offered
}

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
    fn leave(self, ctx: &mut Context<ChildServer>) -> Left {
        match self {
            Phase::Starting {
                run,
                client,
                waiters,
            } => Left {
                run: Some(run),
                client,
                waiters,
            },
            Phase::Ready { run, client } => Left {
                run: Some(run),
                client: Some(client),
                waiters: Vec::new(),
            },
            Phase::Queued { wait, waiters, .. } => {
                ctx.cancel_future(wait); // leaves the line
                Left {
                    waiters,
                    ..Left::default()
                }
            }
            Phase::Backoff { timer } => {
                ctx.cancel_future(timer);
                Left::default()
            }
            Phase::Idle | Phase::Failed | Phase::LoginRequired | Phase::Stopped => Left::default(),
        }
    }
}

/// What a phase that was left still held: its run, its client, and the
/// callers waiting for it to start.
#[derive(Default)]
struct Left {
    run: Option<Run>,
    client: Option<Client>,
    waiters: Vec<Waiter>,
}

/// What becomes of a server whose run ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Start again with backoff (failed after repeated crashes).
    Retry,
    /// Failed until `evoctl refresh` or a reload.
    Failed,
}

/// The ChildServer actor. See the module docs.
pub struct ChildServer {
    spec: Arc<ServerSpec>,
    link: Arc<ServerLink>,
    catalog: Addr<Catalog>,
    gate: Arc<StartGate>,
    /// Start timeouts forgiven in a row (see [`MAX_EXCUSED_TIMEOUTS`]).
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
    bearer: Option<Arc<crate::oauth::Bearer>>,
    /// A remote server's last 401 challenge (where `evoctl login` starts).
    challenge: Option<String>,
    /// The last login started (by `evoctl login` or offered to a client):
    /// its URL and outcome, once known.
    login: Option<LoginUnderWay>,
}

/// What every ChildServer of a daemon shares.
#[derive(Clone)]
pub struct Surroundings {
    pub catalog: Addr<Catalog>,
    /// `limits.max_concurrent_starts`.
    pub gate: Arc<StartGate>,
    /// Largest message read from a child (`limits.max_message_bytes`).
    pub max_line: usize,
    /// `limits.max_result_bytes`, for servers without their own.
    pub max_result: usize,
}

impl ChildServer {
    /// Starts the actor; with `lazy` the child is not spawned until a call
    /// needs it. Returns the link sessions call through.
    pub fn launch(
        spec: Arc<ServerSpec>,
        around: &Surroundings,
        lazy: bool,
    ) -> (Addr<ChildServer>, Arc<ServerLink>) {
        let Surroundings {
            catalog,
            gate,
            max_line,
            max_result,
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
            crate::console::events::changed(crate::console::events::Topic::Servers);
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
        let handler = ChildEvents {
            server: self.spec.id.clone(),
            generation,
            actor: ctx.address(),
            link: self.link.clone(),
            catalog: self.catalog.clone(),
        };
        // Probe `server/discover` (2026-07-28), fall back to `initialize`.
        // Probe `server/discover` (2026-07-28), fall back to `initialize`;
        // a child known to answer the probe late is probed alone.
        let lifecycle = if self.modern_only {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }
        } else {
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            }
        };
        let modern_late = probe::ModernLate::default();
        let learned = modern_late.clone();
        let mut run = Run {
            generation,
            process: None,
            direct: None,
            permit,
            began: Instant::now(),
        };
        let connect: Result<Connecting, String> = match &self.spec.transport {
            TransportSpec::Stdio { .. } => {
                let actor = ctx.address();
                let on_exit = move |reason| actor.do_send(ChildDown { generation, reason });
                process::spawn(&self.spec, &self.stderr, on_exit).map(|spawned| {
                    tracing::info!(server = %self.spec.id, pid = spawned.process.pid(), "child started");
                    let (transport, direct) = io::ChildTransport::new(
                        self.link.clone(),
                        spawned.stdout,
                        spawned.stdin,
                        self.max_line,
                    );
                    run.process = Some(spawned.process);
                    run.direct = Some(direct);
                    Box::pin(connect(handler, transport, lifecycle, modern_late)) as Connecting
                })
            }
            TransportSpec::Http { url, headers, sse } => {
                let bearer = self.load_bearer(url, generation, ctx);
                self.bearer = bearer.clone();
                let link = self.link.clone();
                if *sse {
                    sse::header_map(headers).map(|headers| {
                        let target = sse::SseTarget {
                            server: self.spec.id.as_str().into(),
                            url: url.clone(),
                            headers,
                            bearer,
                            link: link.clone(),
                            max_message: self.max_line,
                        };
                        let actor = ctx.address();
                        let on_closed =
                            move |reason| actor.do_send(ChildDown { generation, reason });
                        Box::pin(async move {
                            let transport =
                                sse::SseTransport::connect(target, remote_client(), on_closed)
                                    .await?;
                            // HTTP+SSE is the 2024-11-05 transport: no probe.
                            connect(
                                handler,
                                remote::ProgressFirst::new(transport, link),
                                ClientLifecycleMode::Initialize,
                                modern_late,
                            )
                            .await
                        }) as Connecting
                    })
                } else {
                    http_config(url, headers).map(|c| {
                        let challenge = Arc::new(std::sync::OnceLock::new());
                        let client = remote::Authed {
                            tag: Arc::new(crate::runtime::log_tag::TaskTag::new(
                                self.spec.id.as_str().into(),
                            )),
                            inner: remote_client(),
                            bearer,
                            challenge: challenge.clone(),
                        };
                        let transport =
                            rmcp::transport::StreamableHttpClientTransport::with_client(client, c);
                        let transport = remote::ProgressFirst::new(transport, link);
                        Box::pin(async move {
                            let connected =
                                connect(handler, transport, lifecycle, modern_late).await;
                            match (connected, challenge.get()) {
                                (Err(StartError::Other(_)), Some(challenge)) => {
                                    Err(StartError::Unauthorized {
                                        challenge: challenge.clone(),
                                    })
                                }
                                (other, _) => other,
                            }
                        }) as Connecting
                    })
                }
            }
        };
        self.enter(Phase::Starting {
            run,
            client: None,
            waiters,
        });
        let connect = match connect {
            Ok(c) => c,
            // The command is missing or the config cannot be used: trying
            // again cannot help, so it fails at once, not after five crashes.
            Err(e) => return self.end_run(generation, e, Fate::Failed, ctx),
        };
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

    /// The server's stored OAuth credential for run `generation`, if it has
    /// one (or gets one headlessly): a refused refresh takes the server to
    /// `login required`.
    fn load_bearer(
        &self,
        url: &str,
        generation: u64,
        ctx: &mut Context<Self>,
    ) -> Option<Arc<crate::oauth::Bearer>> {
        let actor = ctx.address();
        crate::oauth::Bearer::load(
            &self.spec.id,
            url,
            self.spec.oauth.as_ref(),
            move |reason| actor.do_send(LoginLost { generation, reason }),
        )
    }

    /// Run `generation` was answered 401. With OAuth metadata (RFC 9728,
    /// then the authorization server's), the server needs `evoctl login`;
    /// a 401 without them means its headers are wrong.
    fn unauthorized(&mut self, generation: u64, challenge: String, ctx: &mut Context<Self>) {
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            return;
        };
        let url = url.clone();
        self.challenge = Some(challenge.clone());
        let hinted = challenge.to_ascii_lowercase().contains("resource_metadata")
            || self.spec.oauth.is_some();
        let probe = tracing::Instrument::instrument(
            async move {
                crate::oauth::discover(&url, Some(&challenge))
                    .await
                    .map(|_| ())
            },
            tracing::info_span!("child", server = %self.spec.id),
        );
        ctx.spawn(probe.into_actor(self).map(move |found, act, ctx| {
            if !act.phase.is_run(generation) {
                return;
            }
            let id = act.spec.id.clone();
            match found {
                Ok(()) => act.login_required(
                    format!("server '{id}' needs a login: run `evoctl login {id}`"),
                    ctx,
                ),
                Err(e) if hinted => act.login_required(
                    format!("server '{id}' needs a login, but {e}; {}", e.advice(&id)),
                    ctx,
                ),
                Err(_) => act.down(
                    generation,
                    "answered 401 Unauthorized without OAuth metadata; check its `headers`".into(),
                    ctx,
                ),
            }
        }));
    }

    /// Leaves the current run for `login required`, saying why.
    fn login_required(&mut self, reason: String, ctx: &mut Context<Self>) {
        tracing::warn!(server = %self.spec.id, reason = %reason, "login required");
        self.last_error = Some(reason);
        self.abandon(Phase::LoginRequired, ctx);
    }

    /// Run `generation` did not answer its handshake and list its tools
    /// within `start_timeout_s`. While other children were starting too the
    /// machine is saturated, not this server broken: it starts again at the
    /// back of the line, not counted as a crash (a few times in a row at
    /// most). Otherwise it is down like a crash.
    fn start_timed_out(&mut self, generation: u64, ctx: &mut Context<Self>) {
        let limit = self.spec.start_timeout.as_secs_f64();
        let reason =
            format!("did not answer initialize and tools/list within {limit}s (start_timeout_s)");
        let others = self.gate.load().0.saturating_sub(1);
        if self.remote() || others == 0 || self.excused >= MAX_EXCUSED_TIMEOUTS {
            return self.down(generation, reason, ctx);
        }
        self.excused += 1;
        let busy = match others {
            1 => "another child was starting".to_string(),
            n => format!("{n} other children were starting"),
        };
        tracing::warn!(server = %self.spec.id, others, "{reason} while {busy}; not counted as a crash, it starts again at the back of the line (raise start_timeout_s or lower limits.max_concurrent_starts if this repeats)");
        self.last_error = Some(format!("{reason} while {busy}; starting it again"));
        self.start_over(ctx);
    }

    /// Ends the current start (its slot freed) and starts again at the back
    /// of the line, its callers still waiting; counted as a restart, not as
    /// a crash.
    fn start_over(&mut self, ctx: &mut Context<Self>) {
        self.restarts += 1;
        let left = std::mem::replace(&mut self.phase, Phase::Idle).leave(ctx);
        if let Some(run) = left.run {
            run.end(left.client, &self.spec.id);
        }
        self.start(left.waiters, ctx);
    }

    /// The child answered the discover probe after rmcp had fallen back to
    /// `initialize` (see `probe.rs`): it speaks 2026-07-28 and may never
    /// answer `initialize`. Started again at once, probed alone from now on;
    /// not a crash.
    fn probe_alone(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(server = %self.spec.id, "slow to answer server/discover but speaks 2026-07-28: starting it again, probing with server/discover alone");
        self.modern_only = true;
        self.start_over(ctx);
    }

    /// Run `generation` answered its handshake and listed `tools`: put them
    /// in the catalog, then become ready (so "ready" in `evoctl status`
    /// means listed).
    fn connected(
        &mut self,
        generation: u64,
        connected: Client,
        tools: Vec<Tool>,
        offered: crate::catalog::resources::Offered,
        ctx: &mut Context<Self>,
    ) {
        let Phase::Starting { run, client, .. } = &mut self.phase else {
            return;
        };
        tracing::info!(server = %self.spec.id, tools = tools.len(), "child ready");
        if let (Some(direct), Some(info)) = (&run.direct, connected.peer().peer_info()) {
            direct.negotiated(info.protocol_version.as_str());
        }
        listen_for_changes(
            connected.peer().clone(),
            self.spec.id.clone(),
            generation,
            ctx.address(),
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
            let fut = async move { peer.list_all_tools().await };
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
                let request = rmcp::model::ClientRequest::PingRequest(Default::default());
                tokio::time::timeout(REMOTE_PING_TIMEOUT, peer.send_request(request)).await
            };
            ctx.spawn(ping.into_actor(act).map(move |answer, act, ctx| {
                let lost = match answer {
                    // An error answer is still an answer: the server is there.
                    Ok(Ok(_)) | Ok(Err(rmcp::ServiceError::McpError(_))) => None,
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

    /// Run `generation` is gone (failed to start, exited, or its connection
    /// closed): fail its waiters and schedule a restart with backoff, or mark
    /// the server failed after repeated crashes. Events about a run that is
    /// no longer current are ignored.
    fn down(&mut self, generation: u64, reason: String, ctx: &mut Context<Self>) {
        self.end_run(generation, reason, Fate::Retry, ctx);
    }

    /// Ends run `generation` for `reason`: retried with backoff (or failed
    /// after repeated crashes), or failed at once.
    fn end_run(&mut self, generation: u64, reason: String, fate: Fate, ctx: &mut Context<Self>) {
        if !self.phase.is_run(generation) {
            return;
        }
        // A variable the config refers to and evod lacks is often the cause
        // (an autostarted evod has its first client's environment).
        let reason = match self.spec.missing_vars_note() {
            Some(note) => format!("{reason}; {note}"),
            None => reason,
        };
        if fate == Fate::Failed {
            tracing::error!(server = %self.spec.id, reason = %reason, "server cannot start; fix its config and run `evoctl refresh {}`", self.spec.id);
            self.last_error = Some(reason);
            self.abandon(Phase::Failed, ctx);
            return;
        }
        tracing::warn!(server = %self.spec.id, reason = %reason, "child is down");
        self.last_error = Some(reason);
        let now = Instant::now();
        self.crashes.push_back(now);
        while self
            .crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
        {
            self.crashes.pop_front();
        }
        // A remote server that went away is not a crash loop of ours: keep
        // reconnecting, backing off up to 30 s, never marked failed.
        let remote = self.remote();
        self.downs_since_ready += 1;
        let next = if self.crashes.len() >= MAX_CRASHES && !remote {
            tracing::error!(server = %self.spec.id, crashes = self.crashes.len(), "server marked failed after repeated crashes; fix it and run `evoctl refresh {}`", self.spec.id);
            Phase::Failed
        } else {
            let delay = if remote {
                backoff(self.downs_since_ready)
            } else {
                backoff(self.crashes.len())
            };
            self.restarts += 1;
            let timer = ctx.run_later(delay, |act, ctx| {
                if matches!(act.phase, Phase::Backoff { .. }) {
                    act.start(Vec::new(), ctx);
                }
            });
            Phase::Backoff { timer }
        };
        self.abandon(next, ctx);
    }

    /// Leaves the current run for `next`: its client closes, its process
    /// tree is killed, its waiters get the reason.
    fn abandon(&mut self, next: Phase, ctx: &mut Context<Self>) {
        let left = self.enter(next).leave(ctx);
        drop(left.client);
        if let Some(process) = left.run.and_then(|r| r.process) {
            process.kill();
        }
        self.fail_waiters(left.waiters);
    }

    /// Answers callers waiting for a start that will not come with why.
    fn fail_waiters(&self, waiters: Vec<Waiter>) {
        let err = self.unavailable();
        for w in waiters {
            let _ = w.send(Err(err.clone()));
        }
    }
}

/// Delay before the n-th restart within the crash window: at once for the
/// first, then 250 ms doubling up to 30 s, with ±20% jitter.
fn backoff(crashes_in_window: usize) -> Duration {
    if crashes_in_window <= 1 {
        return Duration::ZERO;
    }
    let base_ms = 250u64
        .saturating_mul(1 << (crashes_in_window - 2).min(7))
        .min(30_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = (nanos % 400) as i64 - 200; // per mille, -20%..+20%
    let ms = base_ms as i64 + base_ms as i64 * jitter / 1000;
    Duration::from_millis(ms.max(0) as u64)
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

/// The HTTP client of remote (Streamable HTTP) children, one for the
/// process. Unlike rmcp's default it keeps connections alive between calls
/// (rmcp's opens a new TCP connection per message: measured at ~400 µs a
/// call on loopback); Nagle is off (reqwest's default), so a reused
/// connection does not wait on a delayed ACK. Redirects: rmcp's rule,
/// same-origin 307/308 only (a POST keeps its body, credentials stay home).
fn remote_client() -> reqwest::Client {
    static CLIENT: std::sync::LazyLock<reqwest::Client> = std::sync::LazyLock::new(|| {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("exceeded 10 redirects")
            } else {
                attempt.follow()
            }
        });
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .redirect(policy)
            .build()
            .unwrap_or_default()
    });
    CLIENT.clone()
}

fn http_config(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    let mut custom = std::collections::HashMap::new();
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("authorization")
            && let Some(token) = v.strip_prefix("Bearer ")
        {
            config = config.auth_header(token.to_string());
            continue;
        }
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name '{k}' is not valid"))?;
        // The value is a secret: never echo it.
        let value = http::HeaderValue::from_str(v)
            .map_err(|_| format!("value of header '{k}' is not a valid header value"))?;
        custom.insert(name, value);
    }
    Ok(config.custom_headers(custom))
}

/// A 2026-07-28 child announces tool changes only on a `subscriptions/listen`
/// stream (older ones send a plain notification to [`ChildEvents`]): open one
/// and turn its events into re-listing.
fn listen_for_changes(
    peer: Peer<RoleClient>,
    server: String,
    generation: u64,
    actor: Addr<ChildServer>,
) {
    let Some(info) = peer.peer_info() else { return };
    let modern = info.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
    let tools = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    let offers = crate::catalog::resources::OfferCaps::of(&info.capabilities);
    if !modern || !(tools || offers.resources_changed || offers.prompts_changed) {
        return;
    }
    tokio::spawn(async move {
        let mut filter = rmcp::model::SubscriptionFilter::builder();
        if tools {
            filter = filter.tools_list_changed();
        }
        if offers.resources_changed {
            filter = filter.resources_list_changed();
        }
        if offers.prompts_changed {
            filter = filter.prompts_list_changed();
        }
        let filter = filter.build();
        let mut sub = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(server = %server, error = %e, "child refused subscriptions/listen");
                return;
            }
        };
        while let Ok(Some(n)) = sub.next().await {
            use rmcp::model::ServerNotification as N;
            match n {
                N::ToolListChangedNotification(_) => {
                    tracing::info!(server = %server, "child says its tool list changed; re-listing");
                    actor.do_send(Relist {
                        generation,
                        lists: Lists::Tools,
                    });
                }
                N::ResourceListChangedNotification(_) | N::PromptListChangedNotification(_) => {
                    tracing::info!(server = %server, "child says its resources or prompts changed; re-listing");
                    actor.do_send(Relist {
                        generation,
                        lists: Lists::Offers,
                    });
                }
                _ => {}
            }
        }
    });
}

/// A new connection to the child: evo subscribes again to every resource a
/// session is subscribed to (the old connection's subscriptions are gone).
fn resubscribe(peer: Peer<RoleClient>, link: Arc<ServerLink>) {
    let uris = link.subscriptions.uris();
    if uris.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for uri in uris {
            if let Err(e) = link
                .subscriptions
                .resubscribe(&peer, &uri, link.updates())
                .await
            {
                tracing::warn!(server = %link.id, uri = %uri, error = %readable_error(&e), "could not subscribe again after a restart; sessions hear no updates of it");
            }
        }
    });
}

/// The rmcp client handler of one child: turns the child's notifications into
/// messages to its ChildServer.
pub struct ChildEvents {
    server: String,
    generation: u64,
    actor: Addr<ChildServer>,
    link: Arc<ServerLink>,
    catalog: Addr<Catalog>,
}

impl ClientHandler for ChildEvents {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("evo", crate::VERSION),
        )
    }

    /// Progress of a call goes to the session that made it, under the
    /// client's own progress token, and nowhere else.
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        if let Some(route) = self.link.progress_route(&params.progress_token) {
            let mut params = params;
            params.progress_token = route.token;
            let _ = route.session.notify_progress(params).await;
        }
    }

    #[allow(deprecated)] // MCP logging is deprecated (SEP-2577) but still spoken
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.catalog.do_send(crate::catalog::ChildLog {
            server: self.server.clone(),
            params,
        });
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its tool list changed; re-listing");
        self.actor.do_send(Relist {
            generation: self.generation,
            lists: Lists::Tools,
        });
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its resource list changed; re-listing");
        self.actor.do_send(Relist {
            generation: self.generation,
            lists: Lists::Offers,
        });
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "child says its prompt list changed; re-listing");
        self.actor.do_send(Relist {
            generation: self.generation,
            lists: Lists::Offers,
        });
    }

    /// A subscribed resource changed: every session that subscribed to it
    /// through evo hears it, and no other.
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.link.resource_updated(params).await;
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

/// What a child said changed, and so what is listed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lists {
    /// Its tools (`notifications/tools/list_changed`).
    Tools,
    /// Its resources, templates and prompts (`resources/list_changed`,
    /// `prompts/list_changed`).
    Offers,
}

/// Re-list what the child says changed.
#[derive(Message)]
#[rtype(result = "()")]
struct Relist {
    generation: u64,
    lists: Lists,
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
        ctx.spawn(
            async move {
                match msg.lists {
                    Lists::Tools => match peer.list_all_tools().await {
                        Ok(tools) => catalog.do_send(ToolsDiscovered {
                            server,
                            tools,
                            offered: None,
                        }),
                        Err(e) => tracing::warn!(server = %server, error = %e, "re-listing tools failed; keeping the last good list"),
                    },
                    Lists::Offers => {
                        let offered = list_offers(&peer, &server).await;
                        catalog.do_send(crate::catalog::OffersDiscovered { server, offered });
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

/// The refresh token of run `generation` was refused: the server needs a
/// login again.
#[derive(Message)]
#[rtype(result = "()")]
struct LoginLost {
    generation: u64,
    reason: String,
}

impl Handler<LoginLost> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: LoginLost, ctx: &mut Context<Self>) {
        if self.phase.is_run(msg.generation) {
            let id = self.spec.id.clone();
            self.login_required(
                format!(
                    "server '{id}' needs a login: {}; run `evoctl login {id}`",
                    msg.reason
                ),
                ctx,
            );
        }
    }
}

/// `evoctl login SERVER`: starts the login; answers with the URL to open.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct BeginLogin;

impl Handler<BeginLogin> for ChildServer {
    type Result = ResponseActFuture<Self, Result<String, String>>;
    fn handle(&mut self, _: BeginLogin, ctx: &mut Context<Self>) -> Self::Result {
        Box::pin(
            self.begin_login(ctx)
                .map(|started, _, _| started.map(|l| l.url)),
        )
    }
}

impl Handler<OfferLogin> for ChildServer {
    type Result = ResponseActFuture<Self, Result<LoginUnderWay, String>>;
    fn handle(&mut self, _: OfferLogin, ctx: &mut Context<Self>) -> Self::Result {
        if !matches!(self.phase, Phase::LoginRequired) {
            let e = self.unavailable();
            return Box::pin(fut::ready(Err(e)));
        }
        if let Some(login) = self.login.clone().filter(LoginUnderWay::pending) {
            return Box::pin(fut::ready(Ok(login)));
        }
        self.begin_login(ctx)
    }
}

impl ChildServer {
    /// Starts the authorization code flow (see `oauth::login`); a success
    /// restarts the child with its new tokens.
    fn begin_login(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<LoginUnderWay, String>> {
        let id = self.spec.id.clone();
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            let e = format!(
                "server '{id}' is a stdio server: only remote (http or sse) servers log in"
            );
            return Box::pin(fut::ready(Err(e)));
        };
        if self
            .spec
            .oauth
            .as_ref()
            .is_some_and(|o| o.grant == crate::config::Grant::ClientCredentials)
        {
            let e = format!(
                "server '{id}' uses oauth.grant client_credentials: evo gets its tokens itself, no login needed"
            );
            return Box::pin(fut::ready(Err(e)));
        }
        let target = crate::oauth::login::Target {
            id,
            url: url.clone(),
            spec: self.spec.oauth.clone(),
            challenge: self.challenge.clone(),
        };
        let actor = ctx.address();
        let done = move || actor.do_send(Restart);
        let span = tracing::info_span!("child", server = %self.spec.id);
        let begin = tracing::Instrument::instrument(crate::oauth::login::begin(target, done), span);
        Box::pin(begin.into_actor(self).map(|started, act, _| {
            let started = started?;
            let login = LoginUnderWay {
                url: started.url,
                outcome: started.outcome,
            };
            act.login = Some(login.clone());
            Ok(login)
        }))
    }
}

/// Waits for the login under way to end: what to tell the person.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct AwaitLogin;

impl Handler<AwaitLogin> for ChildServer {
    type Result = ResponseFuture<Result<String, String>>;
    fn handle(&mut self, _: AwaitLogin, _: &mut Context<Self>) -> Self::Result {
        let id = self.spec.id.clone();
        let Some(login) = self.login.clone() else {
            return Box::pin(async move {
                Err(format!(
                    "no login of server '{id}' is under way; run `evoctl login {id}`"
                ))
            });
        };
        Box::pin(async move { login.outcome(&id).await })
    }
}

/// `evoctl logout SERVER`: revoke where supported, forget, reconnect
/// (without tokens: `login required` if the server asks for them).
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct Logout;

impl Handler<Logout> for ChildServer {
    type Result = ResponseActFuture<Self, Result<String, String>>;
    fn handle(&mut self, _: Logout, _: &mut Context<Self>) -> Self::Result {
        let id = self.spec.id.clone();
        let TransportSpec::Http { url, .. } = &self.spec.transport else {
            let e = format!("server '{id}' is a stdio server: it has no OAuth tokens");
            return Box::pin(fut::ready(Err(e)));
        };
        let url = url.clone();
        let spec = self.spec.oauth.clone();
        let span = tracing::info_span!("child", server = %id);
        let out = tracing::Instrument::instrument(
            async move { crate::oauth::login::logout(&id, &url, spec.as_ref()).await },
            span,
        );
        Box::pin(out.into_actor(self).map(|result, act, ctx| {
            act.bearer = None;
            if !matches!(act.phase, Phase::Idle | Phase::Stopped) {
                ctx.notify(Restart);
            }
            result
        }))
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
    pub auth: crate::oauth::AuthState,
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
                (Phase::LoginRequired, _) => crate::oauth::AuthState::LoginRequired {
                    reason: self.last_error.clone(),
                },
                (_, Some(bearer)) => bearer.state(),
                _ => crate::oauth::AuthState::None,
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
        let Left {
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
