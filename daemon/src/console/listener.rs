//! The console's own listener, for an evod without `serve.http`: started on
//! the first `evoctl ui` (or by `main` at once, for browsers a previous run
//! signed in), on a free loopback port, serving `/ui` alone.
//! Loopback only, and only `evoctl ui` links sign in (no tokens): nothing
//! here is reachable from another machine.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::access::ConsoleAccess;
use super::{Console, Door};
use crate::http::origin;

/// The console and its loopback listener, once started: what the
/// Supervisor is handed as [`ConsoleAccess`].
pub struct Loopback {
    console: Console,
    addr: Mutex<Option<SocketAddr>>,
}

impl Loopback {
    pub fn new(console: Console) -> Loopback {
        Loopback {
            console,
            addr: Mutex::new(None),
        }
    }

    /// At evod's start without an HTTP endpoint: listens again at once
    /// where browsers a previous run signed in knew the console.
    pub fn reopen(&self) {
        let console = &self.console;
        if !console.has_saved_sessions() {
            return;
        }
        let Some(port) = console.saved_port() else {
            return;
        };
        match start(console.clone(), port) {
            Ok(addr) => {
                *self.addr.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr);
                if addr.port() != port {
                    console.set_port(addr.port());
                }
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
}

impl ConsoleAccess for Loopback {
    fn mint_login(&self) -> Result<String, String> {
        self.console.mint_login()
    }

    fn loopback(&self) -> Result<SocketAddr, String> {
        let mut addr = self.addr.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = *addr {
            return Ok(a);
        }
        let console = &self.console;
        let a = start(console.clone(), console.saved_port().unwrap_or(0))?;
        *addr = Some(a);
        console.set_port(a.port());
        Ok(a)
    }
}

/// Binds 127.0.0.1 on a free port (or `port`, when a restarted evod keeps
/// the address open pages know) and serves the console there until evod
/// stops.
fn start(console: Console, port: u16) -> Result<SocketAddr, String> {
    let bind = |port| std::net::TcpListener::bind(("127.0.0.1", port));
    let std_listener = match bind(port) {
        Err(_) if port != 0 => bind(0),
        other => other,
    }
    .map_err(|e| format!("cannot listen on a loopback port for the console: {e}"))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| format!("console listener: {e}"))?;
    let addr = std_listener
        .local_addr()
        .map_err(|e| format!("console listener: {e}"))?;
    let listener =
        TcpListener::from_std(std_listener).map_err(|e| format!("console listener: {e}"))?;
    tokio::spawn(accept(listener, console, addr));
    tracing::info!("web console listening on http://{addr}/ui/ (loopback only)");
    Ok(addr)
}

async fn accept(listener: TcpListener, console: Console, addr: SocketAddr) {
    let stop = console.0.stop.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.fired() => return,
        };
        let (stream, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed on the console listener");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let console = console.clone();
        tokio::spawn(async move {
            let stop = console.0.stop.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let console = console.clone();
                async move { Ok::<_, Infallible>(serve(&console, req, addr).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.fired() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
                }
            }
        });
    }
}

async fn serve(
    console: &Console,
    req: Request<Incoming>,
    addr: SocketAddr,
) -> http::Response<super::Body> {
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok());
    let hosts = origin::HostPolicy {
        loopback_only: true,
        allowed: Vec::new(),
    };
    if let Err(why) = hosts.check(host) {
        return super::plain(StatusCode::FORBIDDEN, &format!("forbidden: {why}"));
    }
    let origin = req
        .headers()
        .get(http::header::ORIGIN)
        .map(|v| v.as_bytes());
    if let Err(why) = origin::check_origin(origin, &[]) {
        return super::plain(StatusCode::FORBIDDEN, &format!("forbidden: {why}"));
    }
    let path = req.uri().path();
    if path != "/ui" && !path.starts_with("/ui/") {
        if path == "/" {
            return super::plain(
                StatusCode::NOT_FOUND,
                &format!("not found: the console is at http://{addr}/ui/"),
            );
        }
        return super::plain(StatusCode::NOT_FOUND, "not found");
    }
    console
        .handle(
            req,
            Door {
                secure: false,
                auth: None,
            },
        )
        .await
}
