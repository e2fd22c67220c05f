//! The console's own listener, for an evod without `serve.http`: started on
//! the first `evoctl ui` (or by `main` at once, for browsers a previous run
//! signed in), on a free loopback port, serving `/ui` alone.
//! Loopback only, and only `evoctl ui` links sign in (no tokens): nothing
//! here is reachable from another machine.

use std::net::SocketAddr;
use std::sync::Mutex;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use super::access::ConsoleAccess;
use super::{Console, ReachedThrough};
use crate::auth::origin;
use crate::runtime::http_serving::{self as serving, Body};

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
    let stop = console.0.stop.clone();
    tokio::spawn(serving::accept(
        listener,
        stop.clone(),
        None,
        "console listener",
        move |stream, _| {
            let (console, stop) = (console.clone(), stop.clone());
            async move {
                let _ = serving::serve_connection(stream, &stop, move |req| {
                    let console = console.clone();
                    async move { serve(&console, req, addr).await }
                })
                .await;
            }
        },
    ));
    tracing::info!("web console listening on http://{addr}/ui/ (loopback only)");
    Ok(addr)
}

async fn serve(
    console: &Console,
    req: Request<Incoming>,
    addr: SocketAddr,
) -> http::Response<Body> {
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok());
    let hosts = origin::HostPolicy {
        loopback_only: true,
        allowed: Vec::new(),
    };
    if let Err(why) = hosts.check(host) {
        return serving::text(StatusCode::FORBIDDEN, format!("forbidden: {why}"));
    }
    let origin = req
        .headers()
        .get(http::header::ORIGIN)
        .map(|v| v.as_bytes());
    if let Err(why) = origin::check_origin(origin, &[]) {
        return serving::text(StatusCode::FORBIDDEN, format!("forbidden: {why}"));
    }
    let path = req.uri().path();
    if path != "/ui" && !path.starts_with("/ui/") {
        if path == "/" {
            return serving::text(
                StatusCode::NOT_FOUND,
                format!("not found: the console is at http://{addr}/ui/"),
            );
        }
        return serving::text(StatusCode::NOT_FOUND, "not found");
    }
    console
        .handle(
            req,
            ReachedThrough {
                secure: false,
                auth: None,
            },
        )
        .await
}
