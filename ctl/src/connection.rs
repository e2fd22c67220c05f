//! The control connection to evod: a handshake, one request, one reply.

use std::fmt;
use std::io;
use std::path::Path;
use std::time::Duration;

use evo_proto::ctl::StatusReport;
use evo_proto::{CtlReply, CtlRequest, Hello, Reply, Welcome, frame, paths};
use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::tokio::Stream as StreamTrait;
use tokio::io::BufReader;
use tokio::runtime;
use tokio::time;

/// What evoctl says when nothing listens at `socket`, and how to start evod.
pub fn no_daemon_message(socket: &Path, err: &io::Error) -> String {
    format!(
        "no daemon at {} ({err}): start it with `evod` or `systemctl --user start evod.socket`",
        socket.display()
    )
}

/// Why a request got no reply (exit 3 for a command that needs one).
#[derive(Debug)]
pub enum Unanswered {
    /// Nothing accepted the connection at the socket.
    NoDaemon(String),
    /// Something accepted it, but the exchange broke off.
    Broken(String),
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unanswered::NoDaemon(e) | Unanswered::Broken(e) => f.write_str(e),
        }
    }
}

/// One request on a fresh control connection: handshake, request, reply.
pub async fn exchange(socket: &Path, request: &CtlRequest) -> Result<CtlReply, Unanswered> {
    let conn = paths::connect(socket)
        .await
        .map_err(|e| Unanswered::NoDaemon(no_daemon_message(socket, &e)))?;
    exchange_on(conn, request).await.map_err(Unanswered::Broken)
}

async fn exchange_on(conn: Stream, request: &CtlRequest) -> Result<CtlReply, String> {
    #[allow(deprecated)] // owned halves are what we want here
    let (r, mut w) = StreamTrait::split(conn);
    let mut reader = BufReader::new(r);
    frame::write_json(&mut w, &Hello::ctl())
        .await
        .map_err(|e| e.to_string())?;
    let welcome = frame::read_line(&mut reader, frame::DEFAULT_MAX_LINE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the daemon closed the connection")?;
    let welcome: Welcome = serde_json::from_slice(&welcome).map_err(|e| e.to_string())?;
    if !welcome.ok {
        return Err(welcome.error.unwrap_or_else(|| "handshake refused".into()));
    }
    frame::write_json(&mut w, request)
        .await
        .map_err(|e| e.to_string())?;
    let line = frame::read_line(&mut reader, frame::DEFAULT_MAX_LINE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the daemon closed the connection without answering")?;
    let reply: CtlReply =
        serde_json::from_slice(&line).map_err(|e| format!("unreadable reply: {e}"))?;
    // `evoctl stop` returns once evod has exited (its end closes this
    // connection), so `evoctl stop && evod` finds the socket free.
    if matches!(request, CtlRequest::Stop) && reply.ok {
        let gone = async {
            while let Ok(Some(_)) = frame::read_line(&mut reader, frame::DEFAULT_MAX_LINE).await {}
        };
        if time::timeout(STOP_WAIT, gone).await.is_err() {
            eprintln!(
                "evoctl: evod is still shutting down after {} s",
                STOP_WAIT.as_secs()
            );
        }
    }
    Ok(reply)
}

/// How long `evoctl stop` waits for evod to exit.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Sends `request` to the daemon at `socket`, if one runs, and waits for its
/// reply; for commands that otherwise work on files alone (`import`,
/// `setup --move`). `Ok(None)`: no daemon listens there. `Err`: it refused
/// the request, or the exchange broke off, and why.
pub fn ask(socket: &Path, request: &CtlRequest) -> Result<Option<Reply>, String> {
    let runtime = match runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return Err(format!("cannot start evoctl's runtime: {e}")),
    };
    match runtime.block_on(exchange(socket, request)) {
        Err(Unanswered::NoDaemon(_)) => Ok(None),
        Err(Unanswered::Broken(e)) => Err(e),
        Ok(reply) if !reply.ok => Err(reply
            .error
            .unwrap_or_else(|| "the request was refused".into())),
        Ok(reply) => match Reply::decode(request, reply.data.unwrap_or_default()) {
            Ok(r) => Ok(Some(r)),
            Err(e) => Err(format!("unexpected reply from evod: {e}")),
        },
    }
}

/// The daemon's status, or `None` when it did not answer with one.
pub async fn status(socket: &Path) -> Option<StatusReport> {
    let request = CtlRequest::Status;
    match exchange(socket, &request).await {
        Ok(CtlReply {
            ok: true,
            data: Some(data),
            ..
        }) => match Reply::decode(&request, data) {
            Ok(Reply::Status(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}
