//! `evoctl shim`: the stdio MCP entry. After the handshake MCP passes
//! through untouched, one of two ways:
//!
//! - On Unix, when stdin and stdout are pipes or sockets (as every MCP client
//!   launches it), the shim hands them to the daemon over the control socket
//!   ([`evo_proto::fdpass`]) and waits: the daemon reads the client's requests
//!   and writes its answers itself, two process hops fewer per message. The
//!   control socket stays open as the session's lifeline.
//! - Otherwise (a terminal, a file, Windows, or `EVO_SHIM_COPY=1`) it copies
//!   bytes both ways on two plain threads with blocking I/O: MCP never passes
//!   through a parser or a runtime here.
//!
//! A daemon the shim starts logs to `$XDG_STATE_HOME/evo/evod.log`.
//!
//! `EVO_DISCOVERY_MODE` counts in the shim's environment too (an MCP client sets it in the `env` of
//! its evo entry): the shim sends it in the handshake as `env_mode`; it ranks below both `--mode`
//! flags and above evod's own `EVO_DISCOVERY_MODE`, which it is the more specific form of.

use std::env;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use evo_proto::{Hello, Welcome, paths};
use interprocess::local_socket::Stream;

use crate::connection::no_daemon_message;
use crate::exit_codes::{EXIT_NO_DAEMON, EXIT_REFUSED, EXIT_USAGE};

/// How long to wait for an autostarted evod to listen.
const AUTOSTART_WAIT: Duration = Duration::from_secs(15);
/// Longest welcome line accepted.
const MAX_WELCOME: u64 = 64 * 1024;
const PUMP_BUFFER: usize = 64 * 1024;

/// What `evoctl shim` was asked for.
pub struct ShimOptions {
    pub mode: Option<String>,
    pub session: Option<String>,
    /// `--profile`; `EVO_PROFILE` when absent.
    pub profile: Option<String>,
    pub autostart: bool,
}

pub fn run(socket: &Path, explicit_socket: bool, opts: ShimOptions) -> ExitCode {
    let ShimOptions {
        mode,
        session,
        profile,
        autostart,
    } = opts;
    // The flag wins; an empty variable means none.
    let (profile, profile_from) = match profile {
        Some(p) => (Some(p), "--profile"),
        None => (
            env::var("EVO_PROFILE").ok().filter(|p| !p.is_empty()),
            "EVO_PROFILE",
        ),
    };
    let conn = match paths::connect_blocking(socket) {
        Ok(c) => c,
        Err(e) if !autostart => {
            eprintln!("evoctl shim: {}", no_daemon_message(socket, &e));
            return ExitCode::from(EXIT_NO_DAEMON);
        }
        Err(_) => match start_daemon(socket, explicit_socket) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("evoctl shim: {e}");
                return ExitCode::from(EXIT_NO_DAEMON);
            }
        },
    };
    let mut hello = Hello::mcp(mode, session);
    hello.profile = profile;
    hello.env_mode = env::var("EVO_DISCOVERY_MODE")
        .ok()
        .filter(|m| !m.is_empty());
    hello.stdio = handoff::possible();
    let mut hello = match serde_json::to_vec(&hello) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("evoctl shim: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    hello.push(b'\n');
    if let Err(e) = (&conn).write_all(&hello) {
        eprintln!("evoctl shim: handshake failed: {e}");
        return ExitCode::from(EXIT_NO_DAEMON);
    }
    // Read the welcome byte by byte so nothing after it is buffered here:
    // everything past the newline belongs to the client.
    let mut line = Vec::new();
    let read = BufReader::with_capacity(1, (&conn).take(MAX_WELCOME)).read_until(b'\n', &mut line);
    let welcome = match read {
        Ok(0) => Err("the daemon closed the connection during the handshake".to_string()),
        Ok(_) => serde_json::from_slice::<Welcome>(&line).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let handoff = match welcome {
        Ok(w) if w.ok => w.stdio,
        Ok(w) if w.usage => {
            eprintln!(
                "evoctl shim: {} (from {profile_from})",
                w.error.unwrap_or_default()
            );
            return ExitCode::from(EXIT_USAGE);
        }
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
    };
    #[cfg(unix)]
    if handoff {
        return match handoff::run(&conn) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => {
                eprintln!(
                    "evoctl shim: evod ended the session without closing it (it crashed or was killed); see its log, and `evoctl status`"
                );
                ExitCode::from(EXIT_NO_DAEMON)
            }
            Err(e) => {
                eprintln!("evoctl shim: could not hand the session's stdio to the daemon: {e}");
                ExitCode::from(EXIT_REFUSED)
            }
        };
    }
    let _ = handoff;
    pump(conn);
    ExitCode::SUCCESS
}

/// Handing stdin and stdout to the daemon (see the module docs).
mod handoff {
    #[cfg(unix)]
    use std::io;

    #[cfg(unix)]
    use interprocess::local_socket::Stream;

    /// Set to `1` to make the shim copy bytes even where it could hand its
    /// stdio over (diagnostics and benchmarks).
    pub const COPY_ENV: &str = "EVO_SHIM_COPY";

    #[cfg(unix)]
    pub fn possible() -> bool {
        use std::env;
        use std::io;
        use std::os::fd::AsFd;

        use evo_proto::fdpass;

        env::var_os(COPY_ENV).is_none_or(|v| v != "1")
            && fdpass::pollable(io::stdin().as_fd())
            && fdpass::pollable(io::stdout().as_fd())
    }

    #[cfg(not(unix))]
    pub fn possible() -> bool {
        false
    }

    /// Sends stdin and stdout, then waits until the daemon ends the session
    /// (closes the control socket). The daemon sets both descriptors
    /// non-blocking; their earlier mode is put back before returning, as
    /// other processes may share them.
    /// Whether the daemon closed the session itself ([`SESSION_END`]) rather
    /// than vanishing.
    ///
    /// [`SESSION_END`]: evo_proto::handshake::SESSION_END
    #[cfg(unix)]
    pub fn run(conn: &Stream) -> io::Result<bool> {
        use std::io::Read;
        use std::os::fd::AsFd;

        use evo_proto::fdpass;
        use evo_proto::handshake::SESSION_END;

        #[allow(irrefutable_let_patterns)] // a Unix local socket is always a UdSocket
        let Stream::UdSocket(sock) = conn;
        let stdin = io::stdin();
        let stdout = io::stdout();
        let before = [
            fdpass::is_nonblocking(stdin.as_fd())?,
            fdpass::is_nonblocking(stdout.as_fd())?,
        ];
        fdpass::send_fds(sock.as_fd(), &[stdin.as_fd(), stdout.as_fd()])?;
        // The daemon sends nothing more but its goodbye: this returns when
        // it closes the session (or exits).
        let mut said = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = (&*sock).read(&mut buf) {
            if said.len() < 1024 {
                said.extend_from_slice(&buf[..n]);
            }
        }
        let _ = fdpass::set_nonblocking(stdin.as_fd(), before[0]);
        let _ = fdpass::set_nonblocking(stdout.as_fd(), before[1]);
        Ok(said.starts_with(SESSION_END))
    }
}

/// Copies stdin to the socket and the socket to stdout until the daemon
/// closes the session. When the client closes stdin, the daemon is told
/// (write side shut down) and its last answers still reach stdout.
fn pump(conn: Stream) {
    let conn = Arc::new(conn);
    let up = conn.clone();
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0u8; PUMP_BUFFER];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if (&*up).write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        shutdown_write(&up);
    });
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0u8; PUMP_BUFFER];
    loop {
        match (&*conn).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|_| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
    }
}

#[cfg(unix)]
fn shutdown_write(conn: &Stream) {
    #[allow(irrefutable_let_patterns)] // a Unix local socket is always a UdSocket
    if let Stream::UdSocket(s) = conn {
        let _ = s.inner().shutdown(Shutdown::Write);
    }
}

#[cfg(not(unix))]
fn shutdown_write(_conn: &Stream) {}

/// The evod next to this evoctl, else the one on PATH.
fn evod_path() -> PathBuf {
    if let Ok(me) = env::current_exe()
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
fn start_daemon(socket: &Path, explicit_socket: bool) -> Result<Stream, String> {
    let evod = evod_path();
    let mut cmd = Command::new(&evod);
    if explicit_socket {
        cmd.arg("--socket").arg(socket);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: the daemon outlives this shim and its terminal.
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
        match paths::connect_blocking(socket) {
            Ok(c) => return Ok(c),
            Err(e) => {
                if let Ok(Some(status)) = child.try_wait() {
                    // It may have lost a race with another evod that is now up.
                    if let Ok(c) = paths::connect_blocking(socket) {
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
        thread::sleep(Duration::from_millis(25));
    }
}

/// Where an autostarted daemon logs: `$XDG_STATE_HOME/evo/evod.log`.
fn log_file() -> Stdio {
    let dir = env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))
        .map(|d| d.join("evo"));
    if let Some(dir) = dir
        && fs::create_dir_all(&dir).is_ok()
        && let Ok(f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("evod.log"))
    {
        return Stdio::from(f);
    }
    Stdio::null()
}
