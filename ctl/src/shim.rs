//! `evoctl shim`: the stdio MCP entry. After the handshake it only copies
//! bytes both ways; MCP never passes through a parser here.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use evo_proto::{Hello, Welcome, frame};
use interprocess::local_socket::tokio::Stream;
use tokio::io::{AsyncWriteExt, BufReader};

use crate::{EXIT_NO_DAEMON, EXIT_REFUSED, no_daemon_message};

/// How long to wait for an autostarted evod to listen.
const AUTOSTART_WAIT: Duration = Duration::from_secs(15);

pub async fn run(
    socket: &Path,
    explicit_socket: bool,
    mode: Option<String>,
    session: Option<String>,
    autostart: bool,
) -> ExitCode {
    let conn = match evo_proto::paths::connect(socket).await {
        Ok(c) => c,
        Err(e) if !autostart => {
            eprintln!("evoctl shim: {}", no_daemon_message(socket, &e));
            return ExitCode::from(EXIT_NO_DAEMON);
        }
        Err(_) => match start_daemon(socket, explicit_socket).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("evoctl shim: {e}");
                return ExitCode::from(EXIT_NO_DAEMON);
            }
        },
    };
    #[allow(deprecated)] // owned halves are what we want here
    let (r, mut w) = interprocess::local_socket::traits::tokio::Stream::split(conn);
    let mut reader = BufReader::new(r);
    if let Err(e) = frame::write_json(&mut w, &Hello::mcp(mode, session)).await {
        eprintln!("evoctl shim: handshake failed: {e}");
        return ExitCode::from(EXIT_NO_DAEMON);
    }
    let welcome = match frame::read_line(&mut reader, 64 * 1024).await {
        Ok(Some(line)) => serde_json::from_slice::<Welcome>(&line).map_err(|e| e.to_string()),
        Ok(None) => Err("the daemon closed the connection during the handshake".into()),
        Err(e) => Err(e.to_string()),
    };
    match welcome {
        Ok(w) if w.ok => {}
        Ok(w) => {
            eprintln!(
                "evoctl shim: the daemon refused the session: {}",
                w.error.unwrap_or_default()
            );
            return ExitCode::from(EXIT_REFUSED);
        }
        Err(e) => {
            eprintln!("evoctl shim: bad handshake reply: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    }
    // The byte pump. The reader may hold bytes that arrived after the
    // welcome line; copying from it forwards them too.
    let upstream = async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut w).await;
        // The client closed stdin: tell the daemon we are done sending.
        let _ = w.shutdown().await;
    };
    let downstream = async move {
        let mut stdout = tokio::io::stdout();
        let _ = tokio::io::copy_buf(&mut reader, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    tokio::pin!(upstream);
    tokio::pin!(downstream);
    tokio::select! {
        _ = &mut downstream => {}
        _ = &mut upstream => {
            // Let the daemon's last answers through, then stop.
            let _ = tokio::time::timeout(Duration::from_secs(5), downstream).await;
        }
    }
    ExitCode::SUCCESS
}

/// The evod next to this evoctl, else the one on PATH.
fn evod_path() -> std::path::PathBuf {
    if let Ok(me) = std::env::current_exe()
        && let Some(dir) = me.parent()
    {
        let sibling = dir.join(if cfg!(windows) { "evod.exe" } else { "evod" });
        if sibling.exists() {
            return sibling;
        }
    }
    "evod".into()
}

/// Starts evod in the background (same config resolution: it inherits our
/// environment) and waits for its socket.
async fn start_daemon(socket: &Path, explicit_socket: bool) -> Result<Stream, String> {
    let evod = evod_path();
    let mut cmd = std::process::Command::new(&evod);
    if explicit_socket {
        cmd.arg("--socket").arg(socket);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own session: the daemon outlives this shim and its terminal.
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|e| {
        format!(
            "no daemon at {} and could not start `{}`: {e}",
            socket.display(),
            evod.display()
        )
    })?;
    let deadline = Instant::now() + AUTOSTART_WAIT;
    loop {
        match evo_proto::paths::connect(socket).await {
            Ok(c) => return Ok(c),
            Err(e) => {
                if let Ok(Some(status)) = child.try_wait() {
                    // It may have lost a race with another evod that is now up.
                    if let Ok(c) = evo_proto::paths::connect(socket).await {
                        return Ok(c);
                    }
                    return Err(format!(
                        "started `{}` but it exited ({status}); run it by hand to see why",
                        evod.display()
                    ));
                }
                if Instant::now() > deadline {
                    return Err(no_daemon_message(socket, &e));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Where an autostarted daemon logs: `$XDG_STATE_HOME/evo/evod.log`.
fn log_file() -> Stdio {
    let dir = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))
        .map(|d| d.join("evo"));
    if let Some(dir) = dir
        && std::fs::create_dir_all(&dir).is_ok()
        && let Ok(f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("evod.log"))
    {
        return Stdio::from(f);
    }
    Stdio::null()
}
