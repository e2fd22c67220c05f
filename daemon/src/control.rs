//! The control socket: accepts connections, checks the peer, reads the
//! handshake, and hands an `mcp` connection to a new Session or serves `ctl`
//! requests. Runs on the actor thread (sessions are actors); each session's
//! MCP traffic then runs on the tokio worker threads.
//!
//! The daemon answers every `Hello` with one `Welcome` line (`ok`, `session_id`, `mode` or
//! `error`), so the shim can report refusals. A connection must send its handshake line within 10
//! s.
//!
//! A handed-over session's lifeline carries one line when evod ends the session itself (the client
//! left, or evod stops: `{"bye":"session ended"}`); the shim then exits 0. A lifeline that closes
//! without it means evod died: the shim says so on stderr and exits 3, so a client can tell a crash
//! from an end. Stopping evod ends every session and waits (up to 2 s) for these goodbyes.
//!
//! The shim's `Hello` says `stdio: true` when its fds 0 and 1 are pipes or sockets (not a terminal
//! or a file, which the daemon could not poll, and not with `EVO_SHIM_COPY=1`); evod's `Welcome`
//! says `stdio: true`; the shim sends both descriptors over the control socket (`SCM_RIGHTS`, one
//! marker byte; `evo_proto::fdpass`) and waits. evod serves the session on the client's own pipes
//! (set non-blocking; the shim restores their mode when it exits) and keeps the control socket as
//! the lifeline. Windows keeps the copying pump.

use actix::prelude::*;
use evo_proto::frame::{self, FrameError};
use evo_proto::{ConnKind, CtlReply, CtlRequest, Hello, Welcome};
use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::tokio::{Listener as _, Stream as _};
use rmcp::ServiceExt;
use tokio::io::{AsyncWriteExt, BufReader};

use crate::VERSION;
use crate::catalog::snapshot::Snapshot;
use crate::runtime::shutdown::StopSignal;
use crate::session::transport::SessionTransport;
use crate::session::{self, SessionServer};
use crate::supervisor::{Ctl, OpenSession, Supervisor};

/// Longest handshake line accepted.
const MAX_HANDSHAKE: usize = 64 * 1024;
/// How long a new connection may take to send its handshake line.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Read buffer of a connection. Most MCP messages are a few hundred bytes,
/// and an idle session keeps its buffer: 1,000 sessions hold 4 MiB, not 8.
const READ_BUFFER: usize = 4 * 1024;
/// Longest ctl request line accepted.
const MAX_CTL_LINE: usize = 1024 * 1024;

/// Accepts connections until the system stops.
pub async fn serve(
    listener: Listener,
    supervisor: Addr<Supervisor>,
    snapshot: std::sync::Arc<arc_swap::ArcSwap<Snapshot>>,
    stop: StopSignal,
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
        actix::spawn(handle(
            conn,
            supervisor.clone(),
            snapshot.clone(),
            stop.clone(),
        ));
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

/// A connection's halves: tokio's on Unix, where the read half also receives
/// a shim's stdio descriptors; interprocess's elsewhere.
#[cfg(unix)]
type Halves = (
    tokio::net::unix::OwnedReadHalf,
    tokio::net::unix::OwnedWriteHalf,
);
#[cfg(not(unix))]
#[allow(deprecated)] // owned halves are what we want here
type Halves = (
    interprocess::local_socket::tokio::RecvHalf,
    interprocess::local_socket::tokio::SendHalf,
);

#[cfg(unix)]
fn split(conn: Stream) -> Halves {
    #[allow(irrefutable_let_patterns)] // a Unix local socket is always a UdSocket
    let Stream::UdSocket(s) = conn;
    tokio::net::UnixStream::from(s).into_split()
}

#[cfg(not(unix))]
fn split(conn: Stream) -> Halves {
    #[allow(deprecated)]
    conn.split()
}

async fn handle(
    conn: Stream,
    supervisor: Addr<Supervisor>,
    snapshot: std::sync::Arc<arc_swap::ArcSwap<Snapshot>>,
    stop: StopSignal,
) {
    let (r, mut w) = split(conn);
    let mut reader = BufReader::with_capacity(READ_BUFFER, r);
    let line = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        frame::read_line(&mut reader, MAX_HANDSHAKE),
    );
    let hello = match line.await {
        Ok(Ok(Some(line))) => Hello::parse(&line),
        Ok(Ok(None)) => return,
        Ok(Err(FrameError::TooLong { limit })) => {
            Err(format!("handshake line exceeds {limit} bytes"))
        }
        Ok(Err(FrameError::Io(_))) => return,
        // A connection that never completes its handshake line is not held.
        Err(_) => Err(format!(
            "no handshake line within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        )),
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
            let stdio = hello.stdio && cfg!(unix);
            let opened = match supervisor
                .send(OpenSession {
                    mode: hello.mode,
                    env_mode: hello.env_mode,
                    name: hello.session,
                    profile: hello.profile,
                    stdio,
                    ..Default::default()
                })
                .await
            {
                Ok(Ok(o)) => o,
                Ok(Err(why)) => {
                    let welcome = if why.usage {
                        Welcome::usage(why.message)
                    } else {
                        Welcome::refused(why.message)
                    };
                    let _ = frame::write_json(&mut w, &welcome).await;
                    return;
                }
                Err(_) => return,
            };
            let welcome = Welcome {
                ok: true,
                session_id: Some(opened.id.clone()),
                mode: Some(opened.mode),
                error: None,
                usage: false,
                daemon: Some(VERSION.into()),
                stdio,
            };
            if frame::write_json(&mut w, &welcome).await.is_err() {
                opened.addr.do_send(session::Close);
                return;
            }
            let server = SessionServer::open(&opened, supervisor.clone(), snapshot);
            let addr = opened.addr;
            #[cfg(unix)]
            if stdio {
                let max = opened.max_message_bytes;
                let session_stop = stop.clone();
                stop.spawn_session(async move {
                    match stdio::receive(reader.get_ref()).await {
                        Ok((input, output)) => {
                            let transport = SessionTransport::new(
                                BufReader::with_capacity(READ_BUFFER, input),
                                output,
                                max,
                            );
                            let mut server = server;
                            server.raw = Some(transport.raw_answers());
                            let gone = stdio::lifeline(reader);
                            run_session(
                                server,
                                transport,
                                &addr,
                                gone.token.clone(),
                                &session_stop,
                            )
                            .await;
                            // Ended here (the client left, or evod stops):
                            // say so, then dropping both halves closes the
                            // socket and the shim exits 0.
                            let mut w = w;
                            if !gone.token.is_cancelled() {
                                let _ = w.write_all(evo_proto::handshake::SESSION_END).await;
                            }
                            drop((gone, w));
                        }
                        Err(e) => tracing::warn!(
                            session = %server.id,
                            error = %e,
                            "the shim offered its stdio but did not hand it over; session closed"
                        ),
                    }
                    addr.do_send(session::Close);
                });
                return;
            }
            let transport = SessionTransport::new(reader, w, opened.max_message_bytes);
            let mut server = server;
            server.raw = Some(transport.raw_answers());
            let session_stop = stop.clone();
            stop.spawn_session(async move {
                run_session(server, transport, &addr, Default::default(), &session_stop).await;
                addr.do_send(session::Close);
            });
        }
    }
}

/// Serves one MCP session until the client leaves or `gone` is cancelled
/// (the shim that handed over its stdio exited).
async fn run_session<R, W>(
    server: SessionServer,
    transport: SessionTransport<R, W>,
    addr: &Addr<session::Session>,
    gone: tokio_util::sync::CancellationToken,
    stop: &StopSignal,
) where
    R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Boxed: the handshake's future is large (≈19 KiB) and is done once the
    // session is up; inline, every idle session would keep its space.
    let starting = Box::pin(server.serve_with_ct(transport, gone.child_token()));
    let started = tokio::select! {
        r = starting => r,
        _ = gone.cancelled() => return,
    };
    match started {
        Ok(running) => {
            addr.do_send(session::Attach(running.peer().clone()));
            // evod stopping ends the session (so it can say goodbye).
            let ending = running.cancellation_token();
            tokio::select! {
                _ = running.waiting() => {}
                () = stop.fired() => ending.cancel(),
            }
        }
        Err(e) => tracing::debug!(error = %e, "session ended before initialising"),
    }
}

/// A shim's stdio handed over the control socket ([`evo_proto::fdpass`]).
#[cfg(unix)]
mod stdio {
    use std::io;
    use std::os::fd::AsFd;
    use std::time::Duration;

    use evo_proto::fdpass;
    use tokio::io::{AsyncReadExt, BufReader};
    use tokio::net::unix::{OwnedReadHalf, pipe};
    use tokio_util::sync::CancellationToken;

    /// How long a shim has to send its descriptors after the welcome.
    const HANDOFF_WAIT: Duration = Duration::from_secs(5);

    /// Receives the client's stdin and stdout, set non-blocking for polling.
    pub async fn receive(sock: &OwnedReadHalf) -> io::Result<(pipe::Receiver, pipe::Sender)> {
        let stream: &tokio::net::UnixStream = sock.as_ref();
        let fds = tokio::time::timeout(
            HANDOFF_WAIT,
            stream.async_io(tokio::io::Interest::READABLE, || {
                fdpass::recv_fds(stream.as_fd(), fdpass::STDIO_FDS)
            }),
        )
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no descriptors within 5 s"))??;
        let mut fds = fds.into_iter();
        let (Some(input), Some(output)) = (fds.next(), fds.next()) else {
            return Err(io::ErrorKind::InvalidData.into());
        };
        for fd in [&input, &output] {
            if !fdpass::pollable(fd.as_fd()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a handed-over descriptor is neither a pipe nor a socket",
                ));
            }
            fdpass::set_nonblocking(fd.as_fd(), true)?;
        }
        Ok((
            pipe::Receiver::from_owned_fd_unchecked(input)?,
            pipe::Sender::from_owned_fd_unchecked(output)?,
        ))
    }

    /// Watches the control socket after a handoff: the shim sends nothing
    /// more, so EOF (or anything) means it is gone. Dropping this stops the
    /// watch and closes the read half.
    pub struct Lifeline {
        pub token: CancellationToken,
        watch: tokio::task::JoinHandle<()>,
    }

    impl Drop for Lifeline {
        fn drop(&mut self) {
            self.watch.abort();
        }
    }

    pub fn lifeline(reader: BufReader<OwnedReadHalf>) -> Lifeline {
        let token = CancellationToken::new();
        let cancel = token.clone();
        let watch = tokio::spawn(async move {
            let mut sock = reader.into_inner();
            let mut buf = [0u8; 64];
            let _ = sock.read(&mut buf).await;
            cancel.cancel();
        });
        Lifeline { token, watch }
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
            usage: false,
            daemon: Some(VERSION.into()),
            stdio: false,
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
