//! A stdio child's process: spawned in its own process group, set to die with
//! the daemon, registered with the [guard](crate::runtime::guard), reaped by a task
//! of its own (which ends the group as soon as its leader exits), and ended
//! the same way on every path ([`ChildProcess::terminate`]); and how a stdio
//! child is started and connected ([`connect`]).
//!
//! Every way a child stops (shutdown, `evoctl refresh`, a reload that restarts or removes it, idle
//! stop) goes through `ChildProcess::terminate`: SIGTERM to its process group, 1.5 s for the leader
//! to exit, SIGKILL to the group whatever the leader did (its tree ends too), then the leader is
//! reaped. Shutdown first closes the child's stdin and gives it the same grace. A crash or broken
//! connection kills the group at once. A refresh starts the new child while the old one is being
//! ended. The reaper task learns of the leader's exit from a pidfd, without reaping it, so the
//! group's id cannot have been handed to another process when it is signalled. Children start with
//! their stdio only: every other descriptor is marked close-on-exec before exec, including any evod
//! itself inherited from whoever started it.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use super::direct::DirectCalls;
use super::handshake::{Connecting, Handshake};
use super::io::ChildTransport;
use super::link::ServerLink;
use super::sandbox;
use crate::config::{ServerSpec, TransportSpec};
use crate::runtime::guard;

/// Child stderr lines logged per second at most; the rest are counted.
const STDERR_LINES_PER_SEC: u32 = 50;
/// Lines of a child's stderr kept for `evoctl status`, and the longest kept.
const TAIL_LINES: usize = 10;
const TAIL_LINE_CHARS: usize = 300;

/// The last lines a server's child wrote to stderr (the real cause of a
/// failure is often there: `missing API key`, a certificate error), kept
/// across its restarts so a crashed run's lines can still be shown. Shared
/// by the ChildServer and the task copying its child's stderr.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: &str) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line.chars().take(TAIL_LINE_CHARS).collect());
    }

    /// Forgets the lines of earlier runs (a new run starts).
    fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The kept lines, each value of `secrets` (the server's configured env
    /// values: API keys, tokens) replaced by `***`, since a child may echo
    /// its key in an error and status must never show one.
    pub fn lines(&self, secrets: &[&str]) -> Vec<String> {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .map(|line| {
                secrets
                    .iter()
                    .filter(|s| s.len() >= MIN_SECRET_LEN)
                    .fold(line.clone(), |line, s| line.replace(s, "***"))
            })
            .collect()
    }
}

/// Configured values shorter than this are not taken for secrets (`1`,
/// `true`, a port): masking them would garble every line.
const MIN_SECRET_LEN: usize = 6;
/// How long a SIGKILLed leader may take to be reaped before stop gives up
/// waiting (it is still reaped whenever it goes).
const REAP_WAIT: Duration = Duration::from_secs(5);

/// A running child process: the leader of its own process group. Dropping
/// it does not stop the process; [`terminate`](Self::terminate) and
/// [`kill`](Self::kill) do.
pub struct ChildProcess {
    pid: u32,
    group: Arc<Group>,
    /// Turns true once the leader has exited and been reaped.
    exited: watch::Receiver<bool>,
}

/// A child's process group, whose id is its leader's pid. It is signalled
/// only while the leader is unreaped: until then the id cannot have been
/// given to another process, after that it may have been. Once the leader
/// has exited the group is ended (SIGKILL, whatever is left of it) and
/// forgotten by the guard, still before the leader is reaped.
struct Group {
    pgid: u32,
    ended: Mutex<bool>,
}

impl Group {
    fn new(pgid: u32) -> Group {
        guard::register(pgid);
        Group {
            pgid,
            ended: Mutex::new(false),
        }
    }

    /// Sends `signal` to the group unless it has been ended.
    fn signal(&self, signal: i32) {
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        if !*ended {
            signal_group(self.pgid, signal);
        }
    }

    /// The leader has exited (and is not yet reaped): SIGKILL to what is
    /// left of its tree, and the guard is told the group is gone.
    fn end(&self) {
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        if !*ended {
            signal_group(self.pgid, libc::SIGKILL);
            guard::unregister(self.pgid);
            *ended = true;
        }
    }
}

/// The process and pipes of a freshly spawned stdio child.
pub struct Spawned {
    pub process: ChildProcess,
    pub stdin: tokio::process::ChildStdin,
    pub stdout: tokio::process::ChildStdout,
}

impl ChildProcess {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the leader exits within `limit` (it may already have).
    pub async fn exits_within(&self, limit: Duration) -> bool {
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(limit, exited.wait_for(|gone| *gone)).await;
        *exited.borrow()
    }

    /// Ends the whole process tree: SIGTERM to the group, up to `grace` for
    /// the leader to exit, then SIGKILL to the group (whatever the leader
    /// did, the rest of its tree ends too), and waits until the leader has
    /// been reaped. Every stop path ends a child through this.
    pub async fn terminate(self, grace: Duration, server: &str) {
        if !*self.exited.borrow() {
            self.group.signal(libc::SIGTERM);
            if !self.exits_within(grace).await {
                tracing::warn!(server = %server, pid = self.pid, "child ignored SIGTERM for {} ms; killing its process group", grace.as_millis());
            }
        }
        // A leader that exited had its group killed before it was reaped.
        self.group.signal(libc::SIGKILL);
        if !self.exits_within(REAP_WAIT).await {
            tracing::warn!(server = %server, pid = self.pid, "child was sent SIGKILL but has not exited yet");
        }
    }

    /// Ends the tree at once (the child crashed or broke its connection:
    /// nothing to be graceful with).
    pub fn kill(self) {
        self.group.signal(libc::SIGKILL);
    }
}

/// A stdio child started: its handshake under way, its process, and the
/// direct calls on it.
pub struct StdioStart {
    pub connecting: Connecting,
    pub process: ChildProcess,
    pub direct: Arc<DirectCalls>,
}

/// Spawns the stdio child of `spec` (see [`spawn`]) and starts `handshake`
/// over its stdin and stdout, messages up to `max_line` bytes.
pub fn connect(
    spec: &ServerSpec,
    tail: &StderrTail,
    link: Arc<ServerLink>,
    max_line: usize,
    handshake: Handshake,
    on_exit: impl FnOnce(String) + Send + 'static,
) -> Result<StdioStart, String> {
    let spawned = spawn(spec, tail, on_exit)?;
    tracing::info!(server = %spec.id, pid = spawned.process.pid(), "child started");
    let (transport, direct) = ChildTransport::new(link, spawned.stdout, spawned.stdin, max_line);
    Ok(StdioStart {
        connecting: Box::pin(handshake.over(transport)),
        process: spawned.process,
        direct,
    })
}

/// Spawns a stdio child in its own process group, set to die with the
/// daemon. Its stderr goes to the log under `spec.id` and into `tail`;
/// `on_exit` is called with a description of how the process ended once it
/// is reaped.
pub fn spawn(
    spec: &ServerSpec,
    tail: &StderrTail,
    on_exit: impl FnOnce(String) + Send + 'static,
) -> Result<Spawned, String> {
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
    let confined = match &spec.sandbox {
        Some(sandbox) => Some(sandbox::prepare(
            &spec.id,
            sandbox,
            command,
            env,
            cwd.as_deref(),
        )?),
        None => None,
    };
    if let Some(confined) = &confined {
        cmd.envs(confined.env.iter().map(|(k, v)| (k, v)));
    }
    #[cfg(target_os = "linux")]
    let (confinement, report) = match confined {
        Some(c) => {
            let report = c.confinement.report();
            (Some(c.confinement), Some(report))
        }
        None => (None, None),
    };
    #[cfg(unix)]
    {
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: getpid is async-signal-safe; the hook below only calls
            // close_range or fcntl, prctl, getppid and _exit, and the sandbox's
            // syscalls (`Confinement::apply`), which are too.
            let daemon_pid = unsafe { libc::getpid() };
            unsafe {
                cmd.pre_exec(move || {
                    guard::stdio_only_after_exec();
                    // Die with the daemon, even when it is SIGKILLed.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The daemon may have died before prctl took effect.
                    if libc::getppid() != daemon_pid {
                        libc::_exit(1);
                    }
                    // Last, so the steps above are not refused by it.
                    if let Some(confinement) = &confinement {
                        confinement.apply()?;
                    }
                    Ok(())
                });
            }
        }
    }
    let spawned = cmd.spawn();
    // The ruleset's descriptor in evod goes with the hook that held it.
    drop(cmd);
    let mut child = spawned.map_err(|e| {
        #[cfg(target_os = "linux")]
        if let Some(why) = report.as_ref().and_then(|r| r.failure(&e)) {
            return why;
        }
        if spec.sandbox.is_some() && e.kind() == std::io::ErrorKind::PermissionDenied {
            format!(
                "could not start `{command}`: {e}; its sandbox does not let it run that \
                 program: add the program's folder to the server's sandbox.read"
            )
        } else if e.kind() == std::io::ErrorKind::NotFound {
            format!("command `{command}` not found: install it or fix `command` in the config")
        } else {
            format!("could not start `{command}`: {e}")
        }
    })?;
    let pid = child
        .id()
        .ok_or("the child exited before it could be watched")?;
    let stdin = child.stdin.take().ok_or("child has no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("child has no stdout pipe")?;
    if let Some(stderr) = child.stderr.take() {
        tail.clear();
        log_stderr(spec.id.clone(), stderr, tail.clone());
    }
    let group = Arc::new(Group::new(pid));
    let (tx, exited) = watch::channel(false);
    reap(child, group.clone(), tx, on_exit);
    Ok(Spawned {
        process: ChildProcess { pid, group, exited },
        stdin,
        stdout,
    })
}

/// Waits for the leader's exit, ends its group (whichever way the leader
/// went: a crash, a signal, EOF, nothing of its tree outlives it), reaps it,
/// then says so.
fn reap(
    mut child: tokio::process::Child,
    group: Arc<Group>,
    exited: watch::Sender<bool>,
    on_exit: impl FnOnce(String) + Send + 'static,
) {
    tokio::spawn(async move {
        let unreaped = leader_exited(group.pgid).await;
        if unreaped {
            group.end();
        }
        let status = child.wait().await;
        if !unreaped {
            // No pidfd: the id was free for a moment before this SIGKILL.
            group.end();
        }
        let _ = exited.send(true);
        on_exit(match status {
            Ok(s) => describe_exit(s),
            Err(e) => format!("could not wait for the child: {e}"),
        });
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
fn log_stderr(server: String, stderr: tokio::process::ChildStderr, tail: StderrTail) {
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
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if !text.is_empty() {
                tail.push(text);
            }
            in_window += 1;
            if in_window > STDERR_LINES_PER_SEC {
                dropped += 1;
                continue;
            }
            if !text.is_empty() {
                tracing::info!(server = %server, "stderr: {text}");
            }
        }
        report(dropped);
    });
}

/// Waits until the leader `pid` has exited without reaping it (a pidfd turns
/// readable then). False when that cannot be watched (no pidfd: an old
/// kernel, not Linux); the caller then learns of the exit by reaping.
#[cfg(target_os = "linux")]
async fn leader_exited(pid: u32) -> bool {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // (or -1); it touches no memory of ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            libc::c_long::from(pid),
            0 as libc::c_long,
        )
    };
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: pidfd_open just returned this descriptor; nothing else owns it.
    // Like every descriptor evod opens it is close-on-exec (pidfds are).
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the OwnedFd is moved into the AsyncFd, which alone owns it
    // until it is dropped: the descriptor stays open and the same.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    let Ok(fd) = registered else {
        return false;
    };
    fd.readable().await.is_ok()
}

#[cfg(not(target_os = "linux"))]
async fn leader_exited(_pid: u32) -> bool {
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_and_masks_configured_values() {
        let tail = StderrTail::default();
        for i in 0..15 {
            tail.push(&format!("line {i}"));
        }
        tail.push("error: key sk-live-123456 rejected; debug=1");
        let lines = tail.lines(&["sk-live-123456", "1"]);
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines[0], "line 6");
        assert_eq!(lines[TAIL_LINES - 1], "error: key *** rejected; debug=1");
        tail.push(&"x".repeat(1000));
        assert_eq!(
            tail.lines(&[]).last().map(String::len),
            Some(TAIL_LINE_CHARS)
        );
        tail.clear();
        assert!(tail.lines(&[]).is_empty());
    }
}
