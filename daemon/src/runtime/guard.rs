//! The guard: a small process that ends the children's process groups when
//! evod dies without ending them itself (SIGKILL, the OOM killer, an abort).
//!
//! A child's leader dies with evod by its parent-death signal, but the rest
//! of its group does not: a wrapper's background process (`sh -c "sleep 9 &
//! exec server"`), npx's grandchildren. So at startup evod runs its own
//! binary again as `evod --guard` ([`GUARD_ARG`]; on Linux through
//! `/proc/self/exe`, which is the very file this evod was started from even
//! after an upgrade replaced it, so both sides speak the same lines). The
//! guard sits in a process group of its own (a terminal's Ctrl-C goes to
//! evod's group, not to it), ignores the terminal's and a service manager's
//! stop signals, has no parent-death signal, and inherits no descriptor but
//! its stdio (like a child); its stdin is a pipe whose write end only evod
//! holds (close-on-exec, so no child keeps it open).
//!
//! evod writes one line per event: `+PGID` when it has spawned a child (the
//! leader of a new group), `-PGID` once that group has been sent SIGKILL
//! while its leader was still unreaped (a zombie still holds its pid, so the
//! id cannot have been reused by then, and after the SIGKILL nothing of the
//! group is left to end), and `bye` when it exits cleanly. When the pipe
//! ends, the guard ends every group still registered: SIGTERM, up to
//! [`GRACE`] for the groups to empty, then SIGKILL; then it exits. After
//! `bye` there is normally nothing registered and it exits at once; a group
//! evod did not manage to end is ended the same way. Only registered groups
//! are signalled, so an id the guard never heard of, or heard was ended, is
//! never touched.
//!
//! The gap this leaves: evod killed in the moment between a child's spawn
//! and its `+` line (the leader has just been exec'd; its parent-death
//! signal still ends it).
//!
//! A guard that dies (killed, crashed) or stops reading is replaced: evod notices within
//! [`WATCH_EVERY`] (or at its next line, whichever comes first), starts a new one and tells it every
//! group still registered, which evod keeps for that purpose. Replacing it is logged. A guard that
//! keeps dying ([`MAX_RESTARTS`] within [`RESTART_WINDOW`]) or cannot start is given up: evod still
//! runs; `evoctl status` (`daemon.guard_error`) and the log say what is lost (a SIGKILLed evod may
//! then leave children's processes behind).
//!
//! Running its own binary again means there is no second binary to install. The stop signals the
//! guard ignores are SIGINT, SIGTERM, SIGHUP, SIGQUIT and the job-control ones.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The hidden argument that makes `evod` the guard.
pub const GUARD_ARG: &str = "--guard";
/// How long the guard gives orphaned groups after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_millis(1500);
/// How long a clean evod waits for its guard to exit after `bye`.
const BYE_WAIT: Duration = Duration::from_secs(2);
/// How often evod checks that its guard is still there.
pub const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How many times a guard is replaced within [`RESTART_WINDOW`] before evod
/// gives up on it (something kills every guard at once, or it cannot run).
pub const MAX_RESTARTS: usize = 5;
/// See [`MAX_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// evod's end of the guard. One per evod process, like the parent-death
/// signal it backs up.
struct Guard {
    inner: Mutex<Inner>,
}

/// The guard process (or why there is none) and what a new one must be told.
struct Inner {
    state: State,
    /// Every group registered and not yet ended: what a replacement guard is
    /// told first, so it ends the same groups the lost one would have.
    groups: HashSet<u32>,
    /// When guards were replaced, within the last [`RESTART_WINDOW`].
    restarts: Vec<Instant>,
}

enum State {
    Running {
        child: Child,
        pipe: ChildStdin,
    },
    /// No guard: why, for the log and `evoctl status`.
    Lost(String),
    /// `bye` was said.
    Done,
}

static GUARD: OnceLock<Guard> = OnceLock::new();

/// What is lost without a guard, appended to every reason.
const LOST: &str = "if evod is killed (SIGKILL, out of memory), processes its children left \
                    running in their process groups (a wrapper's background job, npx's \
                    grandchildren) stay behind";

/// Starts the guard, and the thread that replaces it if it dies. Call once,
/// at startup, before any child is spawned. Without a guard evod still
/// runs; the error is logged and shown by [`problem`].
pub fn start() {
    let state = match spawn_guard() {
        Ok((child, pipe)) => {
            tracing::debug!(pid = child.id(), "guard process started");
            State::Running { child, pipe }
        }
        Err(e) => {
            let why = format!("the guard process could not start ({e}): {LOST}");
            tracing::error!("{why}");
            State::Lost(why)
        }
    };
    let inner = Inner {
        state,
        groups: HashSet::new(),
        restarts: Vec::new(),
    };
    let started = GUARD
        .set(Guard {
            inner: Mutex::new(inner),
        })
        .is_ok();
    if started {
        let watcher = std::thread::Builder::new()
            .name("evod-guard-watch".into())
            .spawn(watch);
        if let Err(e) = watcher {
            tracing::warn!(error = %e, "could not start the thread that replaces a dead guard");
        }
    }
}

/// Replaces the guard when it has died, until evod says `bye` or gives up.
fn watch() {
    let Some(guard) = GUARD.get() else { return };
    loop {
        std::thread::sleep(WATCH_EVERY);
        let mut inner = guard.lock();
        if !matches!(inner.state, State::Running { .. }) {
            return;
        }
        inner.replace_if_exited();
    }
}

impl Guard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// Replaces a guard that has exited; nothing if it runs (or is gone for good).
    fn replace_if_exited(&mut self) {
        let State::Running { child, .. } = &mut self.state else {
            return;
        };
        if let Ok(Some(status)) = child.try_wait() {
            self.replace(&format!("the guard process exited ({status})"));
        }
    }

    /// Starts a new guard in place of one that is gone (`why`, already
    /// reaped or killed) and tells it every registered group; gives up after
    /// too many replacements.
    fn replace(&mut self, why: &str) {
        // A new guard that dies before it is told the groups (killed at
        // once, like the one before it) is one more death: start another,
        // within the same budget.
        let mut why = why.to_string();
        while let Some(died) = self.replace_once(&why) {
            why = died;
        }
    }

    /// One attempt of [`Inner::replace`]: what became of the new guard if it
    /// died before it was told the groups, else nothing.
    fn replace_once(&mut self, why: &str) -> Option<String> {
        let now = Instant::now();
        self.restarts
            .retain(|&at| now.duration_since(at) < RESTART_WINDOW);
        if self.restarts.len() >= MAX_RESTARTS {
            let why = format!(
                "{why}, after {MAX_RESTARTS} guards were replaced within {}s no new one is started: \
                 {LOST}; restart evod to get a new guard",
                RESTART_WINDOW.as_secs()
            );
            tracing::error!("{why}");
            self.state = State::Lost(why);
            return None;
        }
        self.restarts.push(now);
        let (mut child, mut pipe) = match spawn_guard() {
            Ok(spawned) => spawned,
            Err(e) => {
                let why = format!(
                    "{why} and a new one could not start ({e}): {LOST}; restart evod to get a new guard"
                );
                tracing::error!("{why}");
                self.state = State::Lost(why);
                return None;
            }
        };
        let lines: String = self
            .groups
            .iter()
            .map(|pgid| format!("+{pgid}\n"))
            .collect();
        if let Err(e) = pipe.write_all(lines.as_bytes()) {
            let _ = child.kill();
            let status = child.wait();
            tracing::warn!(error = %e, "a new guard process ended before it was told the children's groups");
            return Some(match status {
                Ok(status) => format!("the guard process exited ({status})"),
                Err(_) => {
                    format!("a new guard process could not be told the children's groups ({e})")
                }
            });
        }
        tracing::warn!(
            pid = child.id(),
            groups = self.groups.len(),
            "{why}; a new guard process was started and told the children's process groups"
        );
        self.state = State::Running { child, pipe };
        None
    }
}

#[cfg(unix)]
fn spawn_guard() -> std::io::Result<(Child, ChildStdin)> {
    use std::os::unix::process::CommandExt;
    #[cfg(target_os = "linux")]
    let exe = std::path::PathBuf::from("/proc/self/exe");
    #[cfg(not(target_os = "linux"))]
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    // `ps` shows it as what it is: `evod --guard`.
    if let Some(argv0) = std::env::args_os().next() {
        cmd.arg0(argv0);
    }
    cmd.arg(GUARD_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0);
    // SAFETY: the hook only calls close_range or fcntl, and signal(2), which
    // are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // It holds nothing of evod's: no socket, no child's pipe.
            stdio_only_after_exec();
            // Ignored dispositions survive exec, so the guard is deaf to
            // these from its first instruction: a terminal's Ctrl-C, Ctrl-\,
            // Ctrl-Z, hangup, and a service manager's SIGTERM (it exits by
            // itself once evod is gone).
            for sig in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
                libc::SIGPIPE,
            ] {
                libc::signal(sig, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    match child.stdin.take() {
        Some(pipe) => {
            use std::os::fd::AsRawFd;
            // A write never blocks evod: a full pipe (a guard that stopped
            // reading) fails the write instead, and the guard is given up.
            // SAFETY: fcntl on a descriptor we own; it only sets status flags.
            unsafe {
                let fd = pipe.as_raw_fd();
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
            }
            Ok((child, pipe))
        }
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(std::io::Error::other("it has no stdin pipe"))
        }
    }
}

#[cfg(not(unix))]
fn spawn_guard() -> std::io::Result<(Child, ChildStdin)> {
    Err(std::io::Error::other("not supported on this platform"))
}

/// Tells the guard that `pgid` is a child's new process group.
pub fn register(pgid: u32) {
    update(pgid, true);
}

/// Tells the guard that group `pgid` has been ended (SIGKILL sent while its
/// leader was unreaped): it must never be signalled again.
pub fn unregister(pgid: u32) {
    update(pgid, false);
}

fn update(pgid: u32, registered: bool) {
    let Some(guard) = GUARD.get() else {
        return; // no guard was started (unit tests)
    };
    let mut inner = guard.lock();
    let line = if registered {
        inner.groups.insert(pgid);
        format!("+{pgid}\n")
    } else {
        inner.groups.remove(&pgid);
        format!("-{pgid}\n")
    };
    let State::Running { child, pipe } = &mut inner.state else {
        return;
    };
    // A line is far below PIPE_BUF, so it is written whole or not at all;
    // the guard reads as fast as evod spawns, so a full pipe means it is
    // stuck.
    if let Err(e) = pipe.write_all(line.as_bytes()) {
        let why = match child.try_wait() {
            Ok(Some(status)) => format!("the guard process exited ({status})"),
            _ => {
                // Not reading: end it, or its cleanup on EOF would kill
                // groups it no longer hears about.
                let _ = child.kill();
                let _ = child.wait();
                format!("the guard process stopped reading ({e}) and was killed")
            }
        };
        // The new guard is told every group, this one included.
        inner.replace(&why);
    }
}

/// Why there is no guard, if there is none (for `evoctl status`). A guard
/// found dead is replaced first.
pub fn problem() -> Option<String> {
    let guard = GUARD.get()?;
    let mut inner = guard.lock();
    inner.replace_if_exited();
    match &inner.state {
        State::Lost(why) => Some(why.clone()),
        State::Running { .. } | State::Done => None,
    }
}

/// evod is exiting cleanly, its children ended: says `bye` and waits (a
/// moment) for the guard to exit, so it is not left behind.
pub fn bye() {
    let Some(guard) = GUARD.get() else { return };
    let mut inner = guard.lock();
    let State::Running {
        mut child,
        mut pipe,
    } = std::mem::replace(&mut inner.state, State::Done)
    else {
        return;
    };
    let _ = pipe.write_all(b"bye\n");
    drop(pipe);
    let deadline = Instant::now() + BYE_WAIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() >= deadline => {
                tracing::warn!(
                    pid = child.id(),
                    "the guard process did not exit after evod said bye; killing it"
                );
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// A line evod sends the guard.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Register(i32),
    Unregister(i32),
    Bye,
}

impl Line {
    fn parse(line: &str) -> Option<Line> {
        let line = line.trim_end();
        if line == "bye" {
            return Some(Line::Bye);
        }
        let (op, pgid) = line.split_at_checked(1)?;
        // Only real group ids: 0 and negatives mean other things to kill(2).
        let pgid = pgid.parse::<i32>().ok().filter(|&p| p > 1)?;
        match op {
            "+" => Some(Line::Register(pgid)),
            "-" => Some(Line::Unregister(pgid)),
            _ => None,
        }
    }
}

/// The registered groups after reading `lines` to their end, and whether
/// evod said `bye` (a clean exit) rather than just going away.
fn follow(lines: impl BufRead) -> (HashSet<i32>, bool) {
    let mut groups = HashSet::new();
    for line in lines.split(b'\n') {
        let Ok(line) = line else { break };
        match Line::parse(&String::from_utf8_lossy(&line)) {
            Some(Line::Register(pgid)) => {
                groups.insert(pgid);
            }
            Some(Line::Unregister(pgid)) => {
                groups.remove(&pgid);
            }
            Some(Line::Bye) => return (groups, true),
            None => eprintln!(
                "evod guard: ignoring a line evod should not send: {:?}",
                String::from_utf8_lossy(&line)
            ),
        }
    }
    (groups, false)
}

/// The guard's whole life (`evod --guard`): follows evod's lines until the
/// pipe ends, ends the groups still registered, exits.
#[cfg(unix)]
pub fn run() -> std::process::ExitCode {
    // Pin no directory (a mount evod was started in stays unmountable).
    let _ = std::env::set_current_dir("/");
    let (groups, clean) = follow(std::io::stdin().lock());
    if !groups.is_empty() {
        if clean {
            eprintln!(
                "evod guard: evod exited leaving {} child process group(s); ending them",
                groups.len()
            );
        } else {
            eprintln!(
                "evod guard: evod died; ending the process groups of its {} child(ren)",
                groups.len()
            );
        }
        end_groups(groups);
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(not(unix))]
pub fn run() -> std::process::ExitCode {
    std::process::ExitCode::FAILURE
}

/// SIGTERM to every group, up to [`GRACE`] for them to empty, SIGKILL to
/// those that have not.
#[cfg(unix)]
fn end_groups(mut groups: HashSet<i32>) {
    for &pgid in &groups {
        signal_group(pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + GRACE;
    loop {
        groups.retain(|&pgid| signal_group(pgid, 0));
        if groups.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    for &pgid in &groups {
        signal_group(pgid, libc::SIGKILL);
    }
}

/// Sends `signal` to group `pgid` (0: only checks it); false once no process
/// is left in it.
#[cfg(unix)]
fn signal_group(pgid: i32, signal: i32) -> bool {
    // SAFETY: kill has no memory-safety preconditions; `pgid` > 1, so this
    // names exactly one process group.
    let sent = unsafe { libc::kill(-pgid, signal) } == 0;
    sent || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Highest descriptor marked close-on-exec one by one where close_range
/// cannot do it (kernels before 5.11, other Unixes).
const FD_SWEEP_LIMIT: i32 = 4096;

/// For a `pre_exec` hook: marks every descriptor above stderr close-on-exec,
/// so the new program starts with its stdio and nothing else. evod opens its
/// own descriptors close-on-exec, but it may have inherited some that are
/// not from whoever started it (a terminal's, a test runner's pipes), and
/// those would reach every child and the guard. Only async-signal-safe
/// calls.
#[cfg(unix)]
pub(crate) fn stdio_only_after_exec() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on
        // descriptors; it touches no memory of ours.
        let marked = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_long,
                libc::c_long::from(u32::MAX),
                libc::c_long::from(libc::CLOSE_RANGE_CLOEXEC),
            )
        };
        if marked == 0 {
            return;
        }
    }
    for fd in 3..FD_SWEEP_LIMIT {
        // SAFETY: fcntl F_SETFD only sets the descriptor's flags; on a
        // descriptor that is not open it fails with EBADF.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_to_events_and_nothing_else() {
        let cases = [
            ("+1234", Some(Line::Register(1234))),
            ("-1234\n", Some(Line::Unregister(1234))),
            ("bye", Some(Line::Bye)),
            ("+0", None),
            ("+1", None),
            ("+-5", None),
            ("-", None),
            ("*12", None),
            ("+12x", None),
            ("", None),
            ("+99999999999", None),
        ];
        for (line, want) in cases {
            assert_eq!(Line::parse(line), want, "{line:?}");
        }
    }

    #[test]
    fn only_groups_not_yet_ended_stay_registered() {
        let (groups, clean) = follow(&b"+10\n+11\n-10\n+12\ngarbage\n-13\n"[..]);
        assert_eq!(groups, HashSet::from([11, 12]));
        assert!(!clean, "no bye: evod died");
        let (groups, clean) = follow(&b"+10\n-10\nbye\n+11\n"[..]);
        assert!(groups.is_empty());
        assert!(clean);
    }
}
