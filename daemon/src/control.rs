//! The control socket: accepts connections, checks the peer, reads the
//! handshake, and hands an `mcp` connection to a new Session or serves `ctl`
//! requests. Runs on the actor thread (sessions are actors); each session's
//! MCP traffic then runs on the tokio worker threads.

use actix::prelude::*;
use evo_proto::frame::{self, FrameError};
use evo_proto::{ConnKind, CtlReply, CtlRequest, Hello, Welcome};
use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::tokio::{Listener as _, Stream as _};
use rmcp::ServiceExt;
use tokio::io::{AsyncWriteExt, BufReader};

use crate::session::{self, SessionServer};
use crate::supervisor::{Ctl, OpenSession, Supervisor};
use crate::transport::SessionTransport;

/// Longest handshake line accepted.
const MAX_HANDSHAKE: usize = 64 * 1024;
/// Longest ctl request line accepted.
const MAX_CTL_LINE: usize = 1024 * 1024;

/// Accepts connections until the system stops.
pub async fn serve(
    listener: Listener,
    supervisor: Addr<Supervisor>,
    snapshot: std::sync::Arc<arc_swap::ArcSwap<crate::catalog::Snapshot>>,
) {
    loop {
        let conn = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed on the control socket");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(why) = check_peer(&conn) {
            tracing::warn!("refused a connection: {why}");
            #[allow(deprecated)] // owned halves are what we want here
            let (_, mut w) = conn.split();
            let _ = frame::write_json(&mut w, &Welcome::refused(why)).await;
            continue;
        }
        actix::spawn(handle(conn, supervisor.clone(), snapshot.clone()));
    }
}

/// Only the daemon's own user may connect.
#[cfg(unix)]
fn check_peer(conn: &Stream) -> Result<(), String> {
    use interprocess::local_socket::traits::StreamCommon as _;
    let _ = conn;
    // interprocess exposes peer credentials on Unix.
    match conn.peer_creds() {
        Ok(creds) => {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            match creds.euid() {
                Some(uid) if uid == me => Ok(()),
                Some(uid) => Err(format!("peer uid {uid} is not the daemon's uid {me}")),
                None => Err("peer credentials carry no uid".into()),
            }
        }
        Err(e) => Err(format!("could not read peer credentials: {e}")),
    }
}

#[cfg(not(unix))]
fn check_peer(_conn: &Stream) -> Result<(), String> {
    Ok(())
}

async fn handle(
    conn: Stream,
    supervisor: Addr<Supervisor>,
    snapshot: std::sync::Arc<arc_swap::ArcSwap<crate::catalog::Snapshot>>,
) {
    #[allow(deprecated)] // owned halves are what we want here
    let (r, mut w) = conn.split();
    let mut reader = BufReader::new(r);
    let hello = match frame::read_line(&mut reader, MAX_HANDSHAKE).await {
        Ok(Some(line)) => Hello::parse(&line),
        Ok(None) => return,
        Err(FrameError::TooLong { limit }) => Err(format!("handshake line exceeds {limit} bytes")),
        Err(FrameError::Io(_)) => return,
    };
    let hello = match hello {
        Ok(h) => h,
        Err(why) => {
            // One error line, then close: this is not an evo client.
            let _ = frame::write_json(&mut w, &Welcome::refused(why)).await;
            let _ = w.shutdown().await;
            return;
        }
    };
    match hello.kind {
        ConnKind::Ctl => serve_ctl(reader, w, supervisor).await,
        ConnKind::Mcp => {
            let opened = match supervisor
                .send(OpenSession {
                    mode: hello.mode,
                    name: hello.session,
                })
                .await
            {
                Ok(Ok(o)) => o,
                Ok(Err(why)) => {
                    let _ = frame::write_json(&mut w, &Welcome::refused(why)).await;
                    return;
                }
                Err(_) => return,
            };
            let welcome = Welcome {
                ok: true,
                session_id: Some(opened.id.clone()),
                mode: Some(opened.mode.as_str().into()),
                error: None,
                daemon: Some(crate::VERSION.into()),
            };
            if frame::write_json(&mut w, &welcome).await.is_err() {
                opened.addr.do_send(session::Close);
                return;
            }
            let server = SessionServer {
                id: opened.id.clone(),
                mode: opened.mode,
                session: opened.addr.clone(),
                supervisor: supervisor.clone(),
                view: opened.view.clone(),
                snapshot,
                search_limit: opened.search_limit,
                instructions_budget: opened.instructions_budget,
                breaker: Default::default(),
            };
            let transport = SessionTransport::new(reader, w, opened.max_message_bytes);
            let addr = opened.addr;
            tokio::spawn(async move {
                match server.serve(transport).await {
                    Ok(running) => {
                        addr.do_send(session::Attach(running.peer().clone()));
                        let _ = running.waiting().await;
                    }
                    Err(e) => tracing::debug!(error = %e, "session ended before initialising"),
                }
                addr.do_send(session::Close);
            });
        }
    }
}

async fn serve_ctl<R, W>(mut reader: R, mut w: W, supervisor: Addr<Supervisor>)
where
    R: tokio::io::AsyncBufRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    if frame::write_json(
        &mut w,
        &Welcome {
            ok: true,
            session_id: None,
            mode: None,
            error: None,
            daemon: Some(crate::VERSION.into()),
        },
    )
    .await
    .is_err()
    {
        return;
    }
    loop {
        let line = match frame::read_line(&mut reader, MAX_CTL_LINE).await {
            Ok(Some(line)) => line,
            Ok(None) | Err(FrameError::Io(_)) => return,
            Err(FrameError::TooLong { limit }) => {
                let _ = frame::write_json(
                    &mut w,
                    &CtlReply::error(
                        evo_proto::ctl::ErrorKind::InvalidRequest,
                        format!("control request exceeds {limit} bytes"),
                    ),
                )
                .await;
                return;
            }
        };
        let reply = match CtlRequest::parse(&line) {
            Ok(req) => supervisor.send(Ctl(req)).await.unwrap_or_else(|_| {
                CtlReply::error(evo_proto::ctl::ErrorKind::Internal, "evod is shutting down")
            }),
            Err(e) => CtlReply::error(evo_proto::ctl::ErrorKind::InvalidRequest, e),
        };
        if frame::write_json(&mut w, &reply).await.is_err() {
            return;
        }
    }
}
