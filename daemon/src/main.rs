//! `evod`: the evo daemon. Parses the command line, sets up logging, binds the
//! control socket and starts the actors.
//!
//! The control socket is bound by `evo_proto::paths::listen`: a missing directory is created 0700,
//! an existing one keeps its mode (`--socket /tmp/x.sock` must not lock others out of `/tmp`); the
//! socket itself is 0600 and `control.rs` checks peers by uid. A path that exists and is not a
//! socket is never replaced.
//!
//! `serve.http` is read and bound at start, before any actor starts, so a refusal or a port in use
//! stops evod before a child runs; a reload that changes it says a restart is needed.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use arc_swap::ArcSwap;
use clap::Parser;
use evo_daemon::VERSION;
use evo_daemon::catalog::Catalog;
use evo_daemon::catalog::refresher::Refresher;
use evo_daemon::catalog::snapshot::Snapshot;
use evo_daemon::config::DiscoveryMode;
use evo_daemon::console::Console;
use evo_daemon::console::events::EventBus;
use evo_daemon::console::listener::Loopback;
use evo_daemon::console::logring::LogRing;
use evo_daemon::control;
use evo_daemon::http;
use evo_daemon::http::HttpOptions;
use evo_daemon::policy::integrity::PinBook;
use evo_daemon::runtime::guard;
use evo_daemon::runtime::guard::GUARD_ARG;
use evo_daemon::runtime::idle_trim;
use evo_daemon::runtime::shutdown::StopSignal;
use evo_daemon::runtime::socket_activation::Inherited;
use evo_daemon::search::embedder::Embedder;
use evo_daemon::search::embedder::SemanticView;
use evo_daemon::search::learned::learned;
use evo_daemon::search::model;
use evo_daemon::store::Store;
use evo_daemon::supervisor::AttachConsole;
use evo_daemon::supervisor::AttachEndpoint;
use evo_daemon::supervisor::SearchStage;
use evo_daemon::supervisor::{DaemonOptions, Shutdown, Supervisor};
use evo_daemon::telemetry;

/// evod: one MCP endpoint for many MCP servers.
///
/// Starts the servers in the config, merges their tools and serves MCP
/// sessions to `evoctl shim` on the control socket, and over Streamable
/// HTTP with `serve.http` in the config or `--http`.
#[derive(Parser, Debug)]
#[command(name = "evod", version)]
struct Args {
    /// Server config [default: $EVO_CONFIG, else $XDG_CONFIG_HOME/evo/mcp.config.json]
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Permissions file [default: $EVO_PERMISSIONS, else permissions.yml beside the config]
    #[arg(long, value_name = "PATH")]
    permissions: Option<PathBuf>,
    /// Cache directory [default: $EVO_CACHE_DIR, else $XDG_CACHE_HOME/evo]
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Control socket [default: $EVO_SOCKET, else $XDG_RUNTIME_DIR/evo/evod.sock, else /tmp/evo-$UID/evod.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Discovery mode for sessions that do not ask for one [default: $EVO_DISCOVERY_MODE, else config, else dynamic]
    #[arg(long, value_parser = ["legacy", "dynamic"])]
    mode: Option<String>,
    /// Log format on stderr
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Serve MCP over Streamable HTTP on ADDR (host:port), overriding serve.http.listen
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Serve HTTP beyond loopback without serve.http.auth: anyone who reaches it can call every tool
    #[arg(long)]
    insecure_no_auth: bool,
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn home() -> PathBuf {
    env_path("HOME").unwrap_or_else(|| PathBuf::from("."))
}

fn resolve(args: &Args, events: EventBus) -> Result<DaemonOptions, String> {
    let config_path = args
        .config
        .clone()
        .or_else(|| env_path("EVO_CONFIG"))
        .unwrap_or_else(|| {
            env_path("XDG_CONFIG_HOME")
                .unwrap_or_else(|| home().join(".config"))
                .join("evo")
                .join("mcp.config.json")
        });
    let permissions_path = args
        .permissions
        .clone()
        .or_else(|| env_path("EVO_PERMISSIONS"))
        .unwrap_or_else(|| {
            config_path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("permissions.yml")
        });
    let cache_dir = evo_proto::paths::cache_dir(args.cache_dir.as_deref());
    let socket_path = evo_proto::paths::socket_path(args.socket.as_deref());
    let mode = args
        .mode
        .as_deref()
        .map(|m| DiscoveryMode::parse_from(m, "--mode"))
        .transpose()?;
    let env_mode = std::env::var("EVO_DISCOVERY_MODE")
        .ok()
        .filter(|m| !m.is_empty())
        .map(|m| DiscoveryMode::parse_from(&m, "EVO_DISCOVERY_MODE"))
        .transpose()?;
    Ok(DaemonOptions {
        config_path,
        permissions_path,
        cache_dir,
        socket_path,
        mode,
        env_mode,
        socket_activated: false,
        store: Default::default(),
        events,
    })
}

/// The HTTP endpoint's settings: the config's `serve.http`, with `--http`
/// for its address (turning it on when the config has none), or what
/// systemd passed. `None`: no HTTP endpoint.
fn http_options(
    args: &Args,
    opts: &DaemonOptions,
    inherited: &mut Inherited,
) -> Option<HttpOptions> {
    let config = evo_daemon::config::load(&opts.config_path);
    if let Err(e) = &config
        && (args.http.is_some() || !inherited.http.is_empty())
    {
        tracing::warn!("{e}; serving HTTP with default settings");
    }
    let config = config.unwrap_or_default();
    let mut settings = config.serve.http.clone();
    if let Some(listen) = &args.http {
        settings.get_or_insert_with(Default::default).listen = listen.clone();
    }
    if settings.is_none() && !inherited.http.is_empty() {
        settings = Some(Default::default());
    }
    Some(HttpOptions {
        settings: settings?,
        insecure_no_auth: args.insecure_no_auth,
        max_message_bytes: config.limits.max_message_bytes,
        inherited: std::mem::take(&mut inherited.http),
    })
}

fn init_logging(format: &str, events: EventBus) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EVO_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"))
        // rmcp's OAuth code logs authorization codes and token responses at
        // debug: never below info there, whatever EVO_LOG asks.
        .add_directive(
            "rmcp::transport::auth=info"
                .parse()
                .expect("a constant directive parses"),
        );
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // The console's Log page reads the same events (evo_daemon::console::logring).
    let ring = LogRing { events };
    // rmcp's own tasks' lines name the server they are about (evo_daemon::runtime::log_tag).
    use evo_daemon::runtime::log_tag::TaskTagged;
    match (
        format,
        evo_daemon::runtime::socket_activation::under_systemd(),
    ) {
        ("json", _) => builder
            .json()
            .event_format(TaskTagged(tracing_subscriber::fmt::format().json()))
            .finish()
            .with(ring)
            .init(),
        // The journal stamps each line itself.
        (_, true) => builder
            .event_format(TaskTagged(tracing_subscriber::fmt::format().without_time()))
            .finish()
            .with(ring)
            .init(),
        _ => builder
            .event_format(TaskTagged(tracing_subscriber::fmt::format()))
            .finish()
            .with(ring)
            .init(),
    }
}

fn main() -> std::process::ExitCode {
    // The guard is this binary run again (see evo_daemon::runtime::guard).
    if std::env::args_os().nth(1).is_some_and(|a| a == GUARD_ARG) {
        return guard::run();
    }
    let args = Args::parse();
    // Before any thread starts: it edits the environment.
    let mut inherited = evo_daemon::runtime::socket_activation::take_inherited();
    model::bound_candle_threads();
    // What open consoles hear of evod, passed down from here.
    let events = EventBus::new();
    init_logging(&args.log_format, events.clone());
    let opts = match resolve(&args, events) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("evod: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let http = http_options(&args, &opts, &mut inherited);
    // Before the first child is spawned, and before threads and sockets.
    guard::start();
    // Actors run on the system thread; MCP I/O on one tokio worker. Measured
    // against 2 workers and a single thread for everything (evo-bench, see
    // docs/performance.md, "Threads and busy-poll"): one worker has the
    // fewest cross-thread wakeups on the hot path while keeping actor work
    // (snapshot builds, cache loads) off the sessions' I/O thread.
    let system = System::with_tokio_rt(|| {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(1).enable_all();
        #[cfg(target_os = "linux")]
        let runtime = {
            // Watch for the next event a moment before sleeping (busypoll).
            use evo_daemon::runtime::busy_poll;
            builder.on_thread_park(busy_poll::before_park);
            let spin = busy_poll::spin_from_env();
            let (runtime, armed) = busy_poll::arm(spin, || builder.build());
            tracing::debug!(
                spin_us = spin.as_micros() as u64,
                armed,
                "I/O worker busy-poll"
            );
            runtime
        };
        #[cfg(not(target_os = "linux"))]
        let runtime = builder.build();
        runtime.expect("the tokio runtime must start")
    });
    let result = system.block_on(async move { run(opts, inherited, http).await });
    if let Err(e) = result {
        eprintln!("evod: {e}");
        return std::process::ExitCode::from(1);
    }
    let ran = system.run();
    // What search learned in its last moment, not yet written.
    learned().flush();
    // The children are ended (or evod failed to run): the guard may go.
    guard::bye();
    telemetry::stop(std::time::Duration::from_secs(2));
    if let Err(e) = ran {
        eprintln!("evod: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}

async fn run(
    mut opts: DaemonOptions,
    inherited: Inherited,
    http: Option<HttpOptions>,
) -> Result<(), String> {
    // Refused (beyond loopback without auth) or unable to listen: evod
    // stops here, before any child starts.
    let http = match http {
        Some(options) => Some(http::bind(options).await?),
        None => None,
    };
    #[cfg(unix)]
    let control = inherited.control;
    #[cfg(not(unix))]
    let control: Option<std::convert::Infallible> = {
        let _ = inherited;
        None
    };
    let listener = match control {
        #[cfg(unix)]
        Some(fd) => {
            opts.socket_activated = true;
            tracing::info!("serving the socket systemd passed (socket activation)");
            evo_daemon::runtime::socket_activation::listener(fd)
                .map_err(|e| format!("cannot use the socket systemd passed: {e}"))?
        }
        _ => evo_proto::paths::listen(&opts.socket_path)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", opts.socket_path.display()))?,
    };
    let at_start = evo_daemon::config::load(&opts.config_path).unwrap_or_default();
    // Traces: read once, before any session.
    telemetry::start(&at_start.telemetry);
    // The shared store: Redis unreachable is not an error (evod serves and
    // keeps connecting), a URL that can never work is.
    opts.store = Store::open(&at_start.store)?;
    tracing::info!(
        socket = %opts.socket_path.display(),
        config = %opts.config_path.display(),
        version = VERSION,
        "evod listening"
    );
    let cache_dir = opts.cache_dir.clone();
    let events = opts.events.clone();
    let snapshot = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let refresher = Refresher::new(&opts.cache_dir)
        .with_store(&opts.store)
        .start();
    let catalog = Catalog::new(snapshot.clone())
        .with_persistence(refresher.clone().recipient())
        .with_pins(
            PinBook::load(&opts.cache_dir),
            refresher.clone().recipient(),
        )
        .with_shared_pins(&opts.store)
        .start();
    idle_trim::start();
    learned().load(&cache_dir);
    if let Some(shared) = opts.store.shared() {
        learned().share(shared.clone());
    }
    let semantic = Arc::new(ArcSwap::from_pointee(SemanticView::off()));
    let search = SearchStage {
        embedder: Embedder::new(&opts.cache_dir, semantic.clone()).start(),
        view: semantic,
    };
    let stop = StopSignal::new();
    let store = opts.store.clone();
    let supervisor = Supervisor::new(
        opts,
        catalog,
        refresher,
        snapshot.clone(),
        search,
        stop.clone(),
    )
    .start();
    let console = Console::new(supervisor.clone(), stop.clone(), events, &cache_dir);
    let console_access = Loopback::new(console.clone());
    if let Some(bound) = http {
        let front = http::serve(
            bound,
            supervisor.clone(),
            snapshot.clone(),
            stop.clone(),
            console.clone(),
            store,
        );
        supervisor.do_send(AttachEndpoint(front.control()));
    } else {
        // Without an HTTP endpoint the console's own listener opens again
        // at once for browsers a previous run signed in.
        console_access.reopen();
    }
    supervisor.do_send(AttachConsole(Arc::new(console_access)));
    actix::spawn(control::serve(listener, supervisor.clone(), snapshot, stop));
    let on_signal = supervisor.clone();
    actix::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received");
        on_signal.do_send(Shutdown);
    });
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
