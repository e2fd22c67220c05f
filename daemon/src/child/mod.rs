//! The ChildServer actor: one per configured server. It runs the child (a stdio
//! process in its own process group, or a Streamable HTTP connection), keeps an
//! rmcp client to it, lists its tools into the Catalog, and restarts it with
//! backoff when it crashes. Calls do not pass through this actor: it publishes
//! the client peer on its [`ServerLink`] and sessions call the child directly.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, RoleClient, RunningService,
};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{oneshot, watch};

use crate::catalog::{Catalog, ToolsDiscovered};
use crate::config::{ServerSpec, TransportSpec};
use link::{ServerLink, ServerState};

pub mod io;
pub mod link;

/// How long a child may take to start, initialise and list its tools (a cold
/// `npx` or `uvx` start downloads packages first).
const START_TIMEOUT: Duration = Duration::from_secs(120);
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
/// Child stderr lines logged per second at most; the rest are counted.
const STDERR_LINES_PER_SEC: u32 = 50;

type Client = RunningService<RoleClient, ChildEvents>;
type Connecting = std::pin::Pin<Box<dyn Future<Output = Result<(Client, Vec<Tool>), String>>>>;

/// Runs the MCP handshake on `transport` and lists every page of tools.
async fn connect<T, E, A>(
    handler: ChildEvents,
    transport: T,
    lifecycle: ClientLifecycleMode,
) -> Result<(Client, Vec<Tool>), String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| format!("MCP handshake failed: {}", readable_error(&e)))?;
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {}", readable_error(&e)))?;
    Ok((client, tools))
}

/// An error as a person reads it: the type names some wrappers print
/// (`Transport [rmcp::transport::…<reqwest::…>]`) removed, and the innermost
/// cause (e.g. "Connection refused (os error 111)") added when the message
/// does not already say it.
pub fn readable_error(e: &(dyn std::error::Error + 'static)) -> String {
    let text = without_type_names(&e.to_string());
    let mut innermost = e;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    let cause = without_type_names(&innermost.to_string());
    if cause.is_empty() || text.contains(&cause) {
        text
    } else {
        format!("{text} ({cause})")
    }
}

/// `text` without any `[...]` that holds a Rust path, whitespace collapsed.
fn without_type_names(text: &str) -> String {
    let mut text = text.to_string();
    let mut from = 0;
    while let Some(open) = text[from..].find('[').map(|o| from + o) {
        let Some(close) = text[open..].find(']').map(|c| open + c) else {
            break;
        };
        if text[open..close].contains("::") {
            text.replace_range(open..=close, "");
            from = open;
        } else {
            from = close + 1;
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The ChildServer actor. See the module docs.
pub struct ChildServer {
    spec: Arc<ServerSpec>,
    link: Arc<ServerLink>,
    catalog: Addr<Catalog>,
    state: ServerState,
    client: Option<Client>,
    /// Direct calls on the running stdio child.
    direct: Option<Arc<crate::child::io::DirectCalls>>,
    pid: Option<u32>,
    /// Counts starts, so events from an earlier child are told apart.
    generation: u64,
    /// The generation whose failure has been handled already.
    down_generation: u64,
    exited: Option<watch::Receiver<bool>>,
    restarts: u32,
    /// Downs since the server was last ready: a remote server's reconnect
    /// backoff (it is never marked failed).
    downs_since_ready: usize,
    crashes: VecDeque<Instant>,
    last_error: Option<String>,
    waiters: Vec<oneshot::Sender<Result<Arc<Peer<RoleClient>>, String>>>,
    restart_timer: Option<SpawnHandle>,
    stopping: bool,
    lazy: bool,
    /// Largest message read from the child (`limits.max_message_bytes`).
    max_line: usize,
}

impl ChildServer {
    /// Starts the actor; with `lazy` the child is not spawned until a call
    /// needs it. `max_line` bounds one message from the child. Returns the
    /// link sessions call through.
    pub fn launch(
        spec: Arc<ServerSpec>,
        catalog: Addr<Catalog>,
        lazy: bool,
        max_line: usize,
    ) -> (Addr<ChildServer>, Arc<ServerLink>) {
        let mut link_out = None;
        let addr = ChildServer::create(|ctx| {
            let link = Arc::new(ServerLink::new(
                spec.id.clone(),
                spec.timeout,
                Some(ctx.address()),
            ));
            link_out = Some(link.clone());
            ChildServer {
                spec,
                link,
                catalog,
                state: ServerState::Starting,
                client: None,
                direct: None,
                pid: None,
                generation: 0,
                down_generation: 0,
                exited: None,
                restarts: 0,
                downs_since_ready: 0,
                crashes: VecDeque::new(),
                last_error: None,
                waiters: Vec::new(),
                restart_timer: None,
                stopping: false,
                lazy,
                max_line,
            }
        });
        let link = link_out.expect("ChildServer::create runs its closure before returning");
        (addr, link)
    }

    fn set_state(&mut self, state: ServerState) {
        self.state = state;
        let (peer, direct) = match state {
            ServerState::Ready => (
                self.client.as_ref().map(|c| c.peer().clone()),
                self.direct.clone(),
            ),
            _ => (None, None),
        };
        self.link.publish(state, peer, direct);
    }

    fn start(&mut self, ctx: &mut Context<Self>) {
        if let Some(h) = self.restart_timer.take() {
            ctx.cancel_future(h);
        }
        self.generation += 1;
        let generation = self.generation;
        self.set_state(ServerState::Starting);
        let handler = ChildEvents {
            server: self.spec.id.clone(),
            generation,
            actor: ctx.address(),
            link: self.link.clone(),
            catalog: self.catalog.clone(),
        };
        // Probe `server/discover` (2026-07-28), fall back to `initialize`.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        };
        let connect: Connecting = match &self.spec.transport {
            TransportSpec::Stdio { .. } => {
                let spawned = match spawn_process(&self.spec) {
                    Ok(s) => s,
                    Err(e) => {
                        self.down(generation, e, ctx);
                        return;
                    }
                };
                self.pid = spawned.child.id();
                tracing::info!(server = %self.spec.id, pid = ?self.pid, "child started");
                let (tx, rx) = watch::channel(false);
                self.exited = Some(rx);
                watch_exit(spawned.child, generation, ctx.address(), tx);
                if let Some(stderr) = spawned.stderr {
                    log_stderr(self.spec.id.clone(), stderr);
                }
                let (transport, direct) = crate::child::io::ChildTransport::new(
                    self.link.clone(),
                    spawned.stdout,
                    spawned.stdin,
                    self.max_line,
                );
                self.direct = Some(direct);
                Box::pin(connect(handler, transport, lifecycle))
            }
            TransportSpec::Http { url, headers } => match http_config(url, headers) {
                Ok(c) => {
                    self.pid = None;
                    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(c);
                    Box::pin(connect(handler, transport, lifecycle))
                }
                Err(e) => {
                    self.down(generation, e, ctx);
                    return;
                }
            },
        };
        let fut = async move {
            match tokio::time::timeout(START_TIMEOUT, connect).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "did not answer initialize and tools/list within {}s",
                    START_TIMEOUT.as_secs()
                )),
            }
        };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            if act.generation != generation || act.stopping {
                return;
            }
            match res {
                Ok((client, tools)) => {
                    tracing::info!(server = %act.spec.id, tools = tools.len(), "child ready");
                    if let (Some(direct), Some(info)) = (&act.direct, client.peer().peer_info()) {
                        direct.negotiated(info.protocol_version.as_str());
                    }
                    listen_for_changes(
                        client.peer().clone(),
                        act.spec.id.clone(),
                        generation,
                        ctx.address(),
                    );
                    act.client = Some(client);
                    act.last_error = None;
                    if tools.is_empty() {
                        act.relist_empty(generation, 1, ctx);
                    }
                    // Ready once the tools are in the catalog, so "ready" in
                    // `evoctl status` means listed.
                    let listed = act.catalog.send(ToolsDiscovered {
                        server: act.spec.id.clone(),
                        tools,
                    });
                    ctx.spawn(listed.into_actor(act).map(move |_, act, ctx| {
                        if act.generation != generation || act.stopping || act.client.is_none() {
                            return;
                        }
                        act.set_state(ServerState::Ready);
                        act.downs_since_ready = 0;
                        act.watch_remote(generation, ctx);
                        let peer = act.link_peer();
                        for w in act.waiters.drain(..) {
                            let _ = w.send(peer.clone());
                        }
                    }));
                }
                Err(e) if act.pid.is_some() => {
                    // The process probably died: give its exit status a
                    // moment to arrive, as it says more than "connection
                    // closed" does.
                    ctx.run_later(Duration::from_millis(250), move |act, ctx| {
                        act.down(generation, e, ctx)
                    });
                }
                Err(e) => act.down(generation, e, ctx),
            }
        }));
    }

    /// `idle_timeout_s`: a ready child with no call for that long is stopped
    /// and goes back to `idle`; the next call starts it again.
    fn stop_if_idle(&mut self, limit: Duration) {
        if self.state != ServerState::Ready || self.link.idle_for().is_none_or(|idle| idle < limit)
        {
            return;
        }
        tracing::info!(server = %self.spec.id, idle_s = limit.as_secs_f64(), "stopping idle child; it starts again on the next call");
        // Events of the stopped child are now stale.
        self.generation += 1;
        self.down_generation = self.generation;
        self.client.take();
        if let Some(pid) = self.pid.take() {
            signal_group(pid, libc::SIGTERM);
            tokio::spawn(async move {
                tokio::time::sleep(STOP_GRACE).await;
                signal_group(pid, libc::SIGKILL);
            });
        }
        self.set_state(ServerState::Idle);
    }

    /// A child that listed no tools is probably still warming up (a cold
    /// `npx` start): list again with backoff, a few times.
    fn relist_empty(&mut self, generation: u64, attempt: u32, ctx: &mut Context<Self>) {
        if attempt > 5 {
            return;
        }
        let delay = Duration::from_millis(500 * (1 << attempt));
        ctx.run_later(delay, move |act, ctx| {
            if act.generation != generation {
                return;
            }
            let Some(client) = &act.client else { return };
            let peer = client.peer().clone();
            let fut = async move { peer.list_all_tools().await };
            ctx.spawn(fut.into_actor(act).map(move |res, act, ctx| match res {
                Ok(tools) if !tools.is_empty() => {
                    act.catalog.do_send(ToolsDiscovered {
                        server: act.spec.id.clone(),
                        tools,
                    });
                }
                _ => act.relist_empty(generation, attempt + 1, ctx),
            }));
        });
    }

    fn link_peer(&self) -> Result<Arc<Peer<RoleClient>>, String> {
        match &self.client {
            Some(c) if self.state == ServerState::Ready => Ok(Arc::new(c.peer().clone())),
            _ => Err(self.unavailable()),
        }
    }

    /// The error a call gets while this server cannot serve it.
    fn unavailable(&self) -> String {
        let why = self
            .last_error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        match self.state {
            ServerState::Failed => format!(
                "server '{}' has failed{why}; fix it and run `evoctl refresh {}`",
                self.spec.id, self.spec.id
            ),
            ServerState::Stopped => format!("server '{}' is stopped", self.spec.id),
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
            if act.generation != generation || act.state != ServerState::Ready || act.stopping {
                return;
            }
            let Some(client) = &act.client else { return };
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

    /// The child of `generation` is gone (failed to start, exited, or its
    /// connection closed): fail waiters and schedule a restart with backoff, or
    /// mark the server failed after repeated crashes.
    fn down(&mut self, generation: u64, reason: String, ctx: &mut Context<Self>) {
        if generation != self.generation || self.down_generation == generation || self.stopping {
            return;
        }
        self.down_generation = generation;
        tracing::warn!(server = %self.spec.id, reason = %reason, "child is down");
        self.last_error = Some(reason);
        if let Some(client) = self.client.take() {
            drop(client);
        }
        if let Some(pid) = self.pid.take() {
            signal_group(pid, libc::SIGKILL);
        }
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
        if self.crashes.len() >= MAX_CRASHES && !remote {
            self.set_state(ServerState::Failed);
            tracing::error!(server = %self.spec.id, crashes = self.crashes.len(), "server marked failed after repeated crashes; fix it and run `evoctl refresh {}`", self.spec.id);
        } else {
            self.set_state(ServerState::Restarting);
            let delay = if remote {
                backoff(self.downs_since_ready)
            } else {
                backoff(self.crashes.len())
            };
            self.restarts += 1;
            self.restart_timer = Some(ctx.run_later(delay, |act, ctx| {
                act.restart_timer = None;
                act.start(ctx);
            }));
        }
        let err = self.unavailable();
        for w in self.waiters.drain(..) {
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
            self.set_state(ServerState::Idle);
        } else {
            self.start(ctx);
        }
        if let Some(limit) = self.spec.idle_timeout {
            let every = (limit / 2).clamp(Duration::from_millis(100), Duration::from_secs(30));
            ctx.run_interval(every, move |act, _| act.stop_if_idle(limit));
        }
    }
}

/// The process and pipes of a freshly spawned stdio child.
struct Spawned {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    stderr: Option<tokio::process::ChildStderr>,
}

/// Spawns a stdio child in its own process group, set to die with the daemon.
fn spawn_process(spec: &ServerSpec) -> Result<Spawned, String> {
    let TransportSpec::Stdio {
        command,
        args,
        env,
        cwd,
    } = &spec.transport
    else {
        return Err("not a stdio server".into());
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    {
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: getpid is async-signal-safe; the hook below only calls
            // prctl, getppid and _exit, which are too.
            let daemon_pid = unsafe { libc::getpid() };
            unsafe {
                cmd.pre_exec(move || {
                    // Die with the daemon, even when it is SIGKILLed.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The daemon may have died before prctl took effect.
                    if libc::getppid() != daemon_pid {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("command `{command}` not found: install it or fix `command` in the config")
        } else {
            format!("could not start `{command}`: {e}")
        }
    })?;
    let stdin = child.stdin.take().ok_or("child has no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("child has no stdout pipe")?;
    let stderr = child.stderr.take();
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
    })
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
    let announces = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if !modern || !announces {
        return;
    }
    tokio::spawn(async move {
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        let mut sub = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(server = %server, error = %e, "child refused subscriptions/listen");
                return;
            }
        };
        while let Ok(Some(_)) = sub.next().await {
            tracing::info!(server = %server, "child says its tool list changed; re-listing");
            actor.do_send(Relist { generation });
        }
    });
}

/// Reaps the child and reports its exit to the actor.
fn watch_exit(
    mut child: tokio::process::Child,
    generation: u64,
    actor: Addr<ChildServer>,
    exited: watch::Sender<bool>,
) {
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = exited.send(true);
        let reason = match status {
            Ok(s) => describe_exit(s),
            Err(e) => format!("could not wait for the child: {e}"),
        };
        actor.do_send(ChildDown { generation, reason });
    });
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("child killed by signal {sig}");
        }
    }
    match status.code() {
        Some(code) => format!("child exited with status {code}"),
        None => "child exited".into(),
    }
}

/// Copies the child's stderr into the daemon log, tagged with the server id
/// and rate-limited so a noisy child cannot flood the log.
fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).split(b'\n');
        let mut window = tokio::time::Instant::now();
        let mut in_window = 0u32;
        let mut dropped = 0u64;
        let report = |dropped: u64| {
            if dropped > 0 {
                tracing::warn!(server = %server, dropped, "child stderr rate-limited to {STDERR_LINES_PER_SEC} lines/s; lines dropped");
            }
        };
        loop {
            // With lines dropped, the window's end reports them even if the
            // child then goes quiet (next_segment is cancellation-safe).
            let next = if dropped > 0 {
                tokio::time::timeout_at(window + Duration::from_secs(1), lines.next_segment()).await
            } else {
                Ok(lines.next_segment().await)
            };
            let line = match next {
                Ok(Ok(Some(line))) => Some(line),
                Ok(_) => break,
                Err(_) => None, // the window ended
            };
            if window.elapsed() >= Duration::from_secs(1) {
                report(dropped);
                window = tokio::time::Instant::now();
                in_window = 0;
                dropped = 0;
            }
            let Some(line) = line else { continue };
            in_window += 1;
            if in_window > STDERR_LINES_PER_SEC {
                dropped += 1;
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if !text.is_empty() {
                tracing::info!(server = %server, "stderr: {text}");
            }
        }
        report(dropped);
    });
}

#[cfg(unix)]
fn signal_group(pid: u32, signal: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: killpg has no memory-safety preconditions. The group id is
        // the child's pid (it was started with process_group(0)).
        unsafe {
            libc::killpg(pid, signal);
        }
    }
}

#[cfg(not(unix))]
fn signal_group(_pid: u32, _signal: i32) {}

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
        });
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

/// A call found the live connection broken. For a remote (HTTP) server this
/// is the only sign it went away: it is treated as down (restart with
/// backoff, state shown as such). A stdio child's exit is reported by its
/// process, with the exit status, so this is ignored for it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConnectionLost {
    pub reason: String,
}

impl Handler<ConnectionLost> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: ConnectionLost, ctx: &mut Context<Self>) {
        if self.remote() && self.state == ServerState::Ready {
            let reason = format!("the connection failed: {}", msg.reason);
            self.down(self.generation, reason, ctx);
        }
    }
}

/// Re-list the child's tools (it sent `notifications/tools/list_changed`).
#[derive(Message)]
#[rtype(result = "()")]
struct Relist {
    generation: u64,
}

impl Handler<Relist> for ChildServer {
    type Result = ();
    fn handle(&mut self, msg: Relist, ctx: &mut Context<Self>) {
        if msg.generation != self.generation {
            return;
        }
        let Some(client) = &self.client else { return };
        let peer = client.peer().clone();
        let server = self.spec.id.clone();
        let catalog = self.catalog.clone();
        ctx.spawn(
            async move {
                match peer.list_all_tools().await {
                    Ok(tools) => catalog.do_send(ToolsDiscovered { server, tools }),
                    Err(e) => tracing::warn!(server = %server, error = %e, "re-listing tools failed; keeping the last good list"),
                }
            }
            .into_actor(self),
        );
    }
}

/// Start the child if it is idle and answer with its peer once it is ready;
/// an error names the server and its state.
#[derive(Message)]
#[rtype(result = "Result<Arc<Peer<RoleClient>>, String>")]
pub struct EnsureRunning;

impl Handler<EnsureRunning> for ChildServer {
    type Result = ResponseFuture<Result<Arc<Peer<RoleClient>>, String>>;
    fn handle(&mut self, _: EnsureRunning, ctx: &mut Context<Self>) -> Self::Result {
        match self.state {
            ServerState::Ready => {
                let r = self.link_peer();
                Box::pin(async move { r })
            }
            ServerState::Idle | ServerState::Starting => {
                if self.state == ServerState::Idle {
                    self.start(ctx);
                }
                let (tx, rx) = oneshot::channel();
                self.waiters.push(tx);
                let id = self.spec.id.clone();
                Box::pin(async move {
                    rx.await
                        .unwrap_or_else(|_| Err(format!("server '{id}' stopped while starting")))
                })
            }
            _ => {
                let e = self.unavailable();
                Box::pin(async move { Err(e) })
            }
        }
    }
}

/// Discover the tools now: start an idle child, or re-list a running one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Discover;

impl Handler<Discover> for ChildServer {
    type Result = ();
    fn handle(&mut self, _: Discover, ctx: &mut Context<Self>) {
        match self.state {
            ServerState::Idle => self.start(ctx),
            ServerState::Ready => {
                let generation = self.generation;
                ctx.notify(Relist { generation });
            }
            _ => {}
        }
    }
}

/// Restart now (clears a failed state): `evoctl refresh SERVER`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Restart;

impl Handler<Restart> for ChildServer {
    type Result = ();
    fn handle(&mut self, _: Restart, ctx: &mut Context<Self>) {
        self.crashes.clear();
        if let Some(client) = self.client.take() {
            drop(client);
        }
        if let Some(pid) = self.pid.take() {
            signal_group(pid, libc::SIGTERM);
        }
        self.start(ctx);
    }
}

/// What `evoctl status` shows of a child.
#[derive(Debug, Clone)]
pub struct ChildStatus {
    pub state: ServerState,
    pub pid: Option<u32>,
    pub restarts: u32,
    pub error: Option<String>,
}

#[derive(Message)]
#[rtype(result = "ChildStatus")]
pub struct GetStatus;

impl Handler<GetStatus> for ChildServer {
    type Result = MessageResult<GetStatus>;
    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(ChildStatus {
            state: self.state,
            pid: self.pid,
            restarts: self.restarts,
            error: self.last_error.clone(),
        })
    }
}

/// Stop the child gracefully: close its stdin, then SIGTERM and SIGKILL its
/// whole process group if it lingers. Answers once the child is gone; the
/// actor stops.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<Shutdown> for ChildServer {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        self.stopping = true;
        if let Some(h) = self.restart_timer.take() {
            ctx.cancel_future(h);
        }
        self.set_state(ServerState::Stopped);
        let err = self.unavailable();
        for w in self.waiters.drain(..) {
            let _ = w.send(Err(err.clone()));
        }
        let client = self.client.take();
        let pid = self.pid.take();
        let exited = self.exited.take();
        let id = self.spec.id.clone();
        Box::pin(
            async move {
                if let Some(client) = client {
                    // Closes the transport: the child sees EOF on stdin.
                    let _ = tokio::time::timeout(STOP_GRACE, client.cancel()).await;
                }
                if let (Some(pid), Some(mut exited)) = (pid, exited) {
                    let gone = |rx: &mut watch::Receiver<bool>| {
                        let mut rx = rx.clone();
                        async move {
                            let _ = tokio::time::timeout(STOP_GRACE, rx.wait_for(|v| *v)).await;
                            *rx.borrow()
                        }
                    };
                    if !gone(&mut exited).await {
                        signal_group(pid, libc::SIGTERM);
                        if !gone(&mut exited).await {
                            tracing::warn!(server = %id, pid, "child ignored SIGTERM; killing its process group");
                        }
                    }
                    // Whatever the leader did, end the rest of its tree.
                    signal_group(pid, libc::SIGKILL);
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(&'static str, Option<Box<Wrapped>>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|w| w as _)
        }
    }

    #[test]
    fn errors_read_without_type_names_and_with_their_cause() {
        let e = Wrapped(
            "Transport [rmcp::transport::Worker<reqwest::Client>] error: sending to http://x/mcp [id 3]",
            Some(Box::new(Wrapped(
                "io",
                Some(Box::new(Wrapped("Connection refused (os error 111)", None))),
            ))),
        );
        assert_eq!(
            readable_error(&e),
            "Transport error: sending to http://x/mcp [id 3] (Connection refused (os error 111))"
        );
        let plain = Wrapped("child exited with status 1", None);
        assert_eq!(readable_error(&plain), "child exited with status 1");
    }
}
