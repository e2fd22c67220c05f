//! Processes and the places they run in: temp directories, a finished
//! command's outcome, whether a process lives, its memory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use super::wait::holds_within;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        // Short: Unix socket paths are limited to ~108 bytes.
        let p = std::env::temp_dir().join(format!(
            "evo-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// (exit code, stdout, stderr) of a finished command.
pub fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Is a process alive (and not a zombie)?
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for `child` to exit: its status, or None if it has not.
pub(crate) fn exit_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let mut status = None;
    holds_within(limit, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    status
}

/// Waits up to `limit` for `pid` to be gone.
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    holds_within(limit, || !alive(pid))
}

/// Whether `tool` can be run (it answers `--version`).
pub fn on_path(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Processes the harness started and has not ended: what an interrupted
/// bench must end itself, since Drop does not run when a signal ends it.
static STARTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// A SIGINT, SIGTERM or SIGHUP arrived (set by the handler, read by the
/// watcher thread: a handler may do no more than this).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Records a process the harness started.
pub fn started(pid: u32) {
    STARTED.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

/// Forgets a process the harness ended.
pub fn ended(pid: u32) {
    STARTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&p| p != pid);
}

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// For a bench whose processes outlive a test's scope (instances, Redis,
/// a load balancer): on SIGINT, SIGTERM or SIGHUP every process the
/// harness started gets SIGTERM (evod then ends its children), SIGKILL
/// after 5 s, and the bench exits 130.
pub fn end_started_on_signal() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    std::thread::spawn(|| {
        while !INTERRUPTED.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let pids = STARTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
        eprintln!("interrupted: ending {} started processes", pids.len());
        let signal_all = |sig| {
            for &pid in &pids {
                // SAFETY: signals to processes this bench started.
                unsafe {
                    libc::kill(pid as i32, sig);
                }
            }
        };
        let all_ended = || {
            pids.iter().all(|&pid| {
                // SAFETY: reaps our own child if it has ended.
                let r = unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
                r != 0
            })
        };
        signal_all(libc::SIGTERM);
        if holds_within(Duration::from_secs(5), all_ended) {
            std::process::exit(130);
        }
        signal_all(libc::SIGKILL);
        std::process::exit(130);
    });
}
